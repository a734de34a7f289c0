"""Merging a vector or hybrid search over the shards into one engine's answer (contract §10, §11).

Owns: the driver's side of :mod:`roarsearch.cluster.shard_vectors`. Pure functions over plain
data: no Ray, no engine state. ``ShardedEngine._vector_search`` runs the steps:

1. every shard's nearest lists → :func:`merge_nearest`: the global ``k`` nearest (nearest first,
   ties by record id), for the request and for each facet counted with its own facet filter left
   out. A record's place in the first list is its vector position ``b``.
2. every shard is given the global matches of 1. that it holds; it answers counts over its matches
   (summed as for any search: the shards' match sets are disjoint) and its *candidates* for the
   page (every vector match it holds, its first keyword-only matches in the request's order).
3. hybrid only: each candidate's keyword position ``a`` = its position in its own shard's keyword
   order + the keyword matches of every other shard that precede its keyword key.
4. :func:`order_candidates`: each candidate's fused score (:func:`~roarsearch.ranking.fusion.fused_score`
   of ``a`` and ``b``, the engine's own arithmetic), the fused order (score, then ``a``, then
   ``b``, then id), then the request's order (its sort parts, the fused order breaking ties and
   standing for ``_rank``); :func:`page_of` or :func:`groups_of` picks the page, which the shards
   render.

Why this is exact: every record the page can hold is a candidate (shard_vectors), ``a`` and ``b``
are the global positions, so each candidate's score and order key are the engine's, and the
order among a subset of the matches is the order among all of them restricted to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from roarsearch.cluster.merge import oriented, typed
from roarsearch.cluster.shard_vectors import Candidate, Scored
from roarsearch.index.docstore import id_sort_key
from roarsearch.query.request import SearchRequest
from roarsearch.ranking.fusion import fused_score
from roarsearch.ranking.sort import RANK_KEY

#: The position of a record absent from the keyword or the vector order (after every real one).
ABSENT = float("inf")


def merge_nearest(lists: list[list[Scored]], k: int, metric: str) -> list[Scored]:
    """The ``k`` nearest of the shards' lists: highest score first (``l2``: smallest), ties by id."""
    merged = [entry for entries in lists for entry in entries]
    merged.sort(key=lambda entry: (entry[1] if metric == "l2" else -entry[1], id_sort_key(entry[0])))
    return merged[:k]


@dataclass(slots=True)
class Placed:
    """A candidate for the page, from the shard that holds it."""

    record_id: Any
    shard: int
    #: Sort parts as :func:`~roarsearch.cluster.partial.field_sort_part` gives them (None for ``_rank``).
    parts: list[Any]
    #: The keyword key (relevance cost, customRanking parts, id) of a keyword match, else None.
    keyword_key: tuple[Any, ...] | None
    #: Position in the keyword order: the shard's own, then (the positions step) the global one.
    keyword_at: int | None
    #: Position in the global vector order and the vector score (None: not a vector match).
    vector_at: int | None
    vector_score: float | None
    #: The group value (grouped requests).
    group: Any
    #: ``_rank``: the fused score.
    rank: float = 0.0


def placed_candidates(shards: dict[int, list[Candidate]], vector: list[Scored]) -> list[Placed]:
    """The shards' candidates with their vector positions and scores."""
    positions = {id_sort_key(record_id): (position, score) for position, (record_id, score) in enumerate(vector, 1)}
    placed = []
    for shard, candidates in shards.items():
        for record_id, parts, keyword_key, keyword_at, group in candidates:
            vector_at, score = positions.get(id_sort_key(record_id), (None, None))
            placed.append(Placed(record_id, shard, parts, keyword_key, keyword_at, vector_at, score, group))
    return placed


def order_candidates(request: SearchRequest, placed: list[Placed], hybrid: bool) -> list[Placed]:
    """Set each candidate's fused score; the candidates in the request's order. Without query
    words the fused score is the vector-only ``_rank``, ``1 / (60 + b)``."""
    ratio = request.semantic_ratio if hybrid else 1.0
    for entry in placed:
        entry.rank = fused_score(entry.keyword_at, entry.vector_at, ratio)
    fused = sorted(placed, key=lambda entry: (-entry.rank, ABSENT if entry.keyword_at is None else entry.keyword_at,
                                              ABSENT if entry.vector_at is None else entry.vector_at,
                                              id_sort_key(entry.record_id)))
    if not request.sort:
        return fused
    keys = {id(entry): _request_key(request, entry, position) for position, entry in enumerate(fused)}
    return sorted(fused, key=lambda entry: keys[id(entry)])


def _request_key(request: SearchRequest, entry: Placed, fused_at: int) -> tuple[Any, ...]:
    """The explicit sort, then the fused order; ``-_rank`` is the fused order, ``_rank`` its reverse
    (as :class:`~roarsearch.ranking.fusion.FusedRanker` sorts)."""
    key: list[Any] = []
    for sort_key, part in zip(request.sort, entry.parts):
        if sort_key.field == RANK_KEY:
            key.append(fused_at if sort_key.descending else -fused_at)
        else:
            key.append(oriented(part, sort_key.descending))
    key.append(fused_at)
    return tuple(key)


def page_of(request: SearchRequest, ordered: list[Placed]) -> list[Placed]:
    return ordered[request.skip:request.skip + request.count]


def groups_of(request: SearchRequest, ordered: list[Placed],
              totals: list[list[list[Any]]]) -> list[tuple[Any, int, list[Placed]]]:
    """``(value, totalHits, records shown)`` of the page's groups: groups in the order of their best
    record, each with its ``groupLimit`` first records; totals summed over the shards."""
    summed: dict[tuple[str, Any], list[Any]] = {}
    for groups in totals:
        for value, total in groups:
            summed.setdefault(typed(value), [value, 0])[1] += total
    members: dict[tuple[str, Any], list[Placed]] = {}  # in order of first member: the best record
    for entry in ordered:
        members.setdefault(typed(entry.group), []).append(entry)
    group_count = request.count if request.group_count == -1 else request.group_count
    shown = list(members.items())[request.skip:request.skip + max(group_count, 0)]
    return [(summed[value][0], summed[value][1], entries[:request.group_limit]) for value, entries in shown]


__all__ = ["Placed", "groups_of", "merge_nearest", "order_candidates", "page_of", "placed_candidates"]
