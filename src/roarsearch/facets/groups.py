"""Grouping: results grouped by a field's value, groups in the order of their best record.

Owns: ``groupBy`` / ``groupCount`` / ``groupLimit``. A record joins the group of each distinct
value of the field (an array field can put it in several groups); records lacking the field form
no group. Groups come in the order of their best-ranked record; inside a group records keep the
overall order; ``skip`` counts groups; each group reports its exact ``totalHits`` — grouping never
loses records.

Finding the first groups does not rank every candidate: ranked pages of growing size are walked
and distinct values collected in order of first appearance, stopping once enough groups are known
(the number of distinct values among the candidates is known up front, so a walk also stops when
every group has been seen). Groups whose best record lies beyond the walk are ordered by ranking
their best records against each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.facets.text import PER_VALUE_LIMIT_MANY_CANDIDATES, plain_number, select_pairs, string_counts, value_bitmaps
from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array
from roarsearch.index.columns import FieldColumns

#: Ranked docs looked at in the first round of the walk, per group still wanted.
WALK_DOCS_PER_GROUP = 4
#: Rounds of the walk (each doubles the ranked page) before the remaining groups are placed directly.
WALK_ROUNDS = 4

RankDocs = Callable[[AbstractBitMap, int, int], list[int]]
GroupKey = tuple[str, Any]  # ("v", value id) for strings/booleans, ("n", number) for numbers


def _keys_of_docs(columns: FieldColumns, docs: np.ndarray) -> list[list[GroupKey]]:
    """Distinct group keys of each doc of ``docs`` (in the given order)."""
    keys: list[list[GroupKey]] = [[] for _ in range(docs.size)]
    position_of = {doc: position for position, doc in enumerate(docs.tolist())}
    wanted = bitmap_from_array(docs)
    if columns.values is not None:
        pair_docs, value_ids = columns.values.pairs()
        for doc, value_id in zip(*(part.tolist() for part in select_pairs(pair_docs, value_ids, wanted))):
            keys[position_of[doc]].append(("v", value_id))
    if columns.numeric is not None:
        pair_docs, numbers = columns.numeric.pairs()
        for doc, number in zip(*(part.tolist() for part in select_pairs(pair_docs, numbers, wanted))):
            key = ("n", number)
            if key not in keys[position_of[doc]]:
                keys[position_of[doc]].append(key)
    for doc_keys in keys:
        doc_keys.sort(key=_key_order)
    return keys


def _key_order(key: GroupKey) -> tuple[int, Any]:
    """Groups opened by the same record: strings and booleans (by first appearance), then numbers."""
    return (0, key[1]) if key[0] == "v" else (1, key[1])


def _all_keys(columns: FieldColumns, candidates: AbstractBitMap) -> set[GroupKey]:
    """Every group the candidates form (counted as a text facet is: see ``facets.text``)."""
    found: set[GroupKey] = set()
    if columns.values is not None:
        found.update(("v", value_id) for value_id in np.flatnonzero(string_counts(columns, candidates)).tolist())
    if columns.numeric is not None:
        docs, numbers = columns.numeric.pairs()
        _, selected = select_pairs(docs, numbers, candidates)
        found.update(("n", number) for number in np.unique(selected).tolist())
    return found


def _members(columns: FieldColumns, key: GroupKey, candidates: AbstractBitMap) -> AbstractBitMap:
    kind, value = key
    if kind == "v":
        assert columns.values is not None
        if len(columns.values.values) <= PER_VALUE_LIMIT_MANY_CANDIDATES:
            return value_bitmaps(columns)[value] & candidates  # cached until the column changes
        return columns.values.value_docs(value) & candidates
    assert columns.numeric is not None
    return columns.numeric.range(value, True, value, True) & candidates


def _value(columns: FieldColumns, key: GroupKey) -> Any:
    kind, value = key
    if kind == "v":
        assert columns.values is not None
        return columns.values.values[value]
    return plain_number(value)


def group_results(
    columns: FieldColumns | None,
    candidates: AbstractBitMap,
    rank_docs: RankDocs,
    skip: int,
    group_count: int,
    group_limit: int,
) -> list[tuple[Any, int, list[int]]]:
    """``[(value, totalHits, docs of the group's page), ...]`` for groups ``skip:skip+group_count``."""
    if columns is None or not candidates or group_count <= 0:
        return []
    all_keys = _all_keys(columns, candidates)
    wanted = min(skip + group_count, len(all_keys))
    if wanted <= skip:
        return []
    ordered: list[GroupKey] = []
    seen: set[GroupKey] = set()
    page = max(64, wanted * WALK_DOCS_PER_GROUP)
    walked = 0
    for _ in range(WALK_ROUNDS):
        docs = np.asarray(rank_docs(candidates, walked, page - walked), dtype=np.int64)
        for doc_keys in _keys_of_docs(columns, docs):
            for key in doc_keys:
                if key not in seen:
                    seen.add(key)
                    ordered.append(key)
        walked = page
        if len(ordered) >= wanted or walked >= len(candidates):
            break
        page *= 2
    if len(ordered) < wanted:
        # The remaining groups' best records all rank after the walked ones: order them by ranking
        # each group's best record against the others.
        remaining = [key for key in all_keys if key not in seen]
        best: dict[int, list[GroupKey]] = {}
        for key in remaining:
            top = rank_docs(_members(columns, key, candidates), 0, 1)
            if top:
                best[top[0]] = best.get(top[0], []) + [key]
        for doc in rank_docs(BitMap(best), 0, len(best)):
            ordered.extend(sorted(best[doc], key=_key_order))
    groups = []
    for key in ordered[skip:wanted]:
        members = _members(columns, key, candidates)
        groups.append((_value(columns, key), len(members), rank_docs(members, 0, group_limit)))
    return groups


__all__ = ["array_from_bitmap", "group_results"]
