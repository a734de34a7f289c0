"""Grouping: results grouped by a field's value, groups in the order of their best record.

Owns: ``groupBy`` / ``groupCount`` / ``groupLimit`` (contract §3–§4). Every matching record is in
exactly one group: the group of its field's value, of its array's first element for an array,
and the group whose value is ``null`` when it lacks the field. Groups come in the order of their
best-ranked record; inside a group records keep the overall order; ``skip`` counts groups; each
group reports its exact ``totalHits``.

Keys come from dense per-doc columns (the first string or boolean value id, else the first
number), so keying every candidate is one numpy gather. Finding the first groups does not rank
every candidate: ranked pages of growing size are walked and keys collected in order of first
appearance, stopping once enough groups are known. Groups whose best record lies beyond the walk
are ordered by ranking their best records against each other. A record whose array mixes strings
and numbers is grouped by its first string (or boolean).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.facets.text import plain_number
from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array
from roarsearch.index.columns import FieldColumns

#: Ranked docs looked at in the first round of the walk, per group still wanted.
WALK_DOCS_PER_GROUP = 4
#: Rounds of the walk (each doubles the ranked page) before the remaining groups are placed directly.
WALK_ROUNDS = 4

RankDocs = Callable[[AbstractBitMap, int, int], list[int]]
#: Code of the group of records lacking the field.
NULL_GROUP = -1


class _GroupKeys:
    """Per candidate doc, an integer group code; codes map back to group values."""

    def __init__(self, columns: FieldColumns | None, candidates: AbstractBitMap) -> None:
        self.docs = array_from_bitmap(candidates)
        codes = np.full(self.docs.size, NULL_GROUP, dtype=np.int64)
        self.values: list[Any] = []
        if columns is not None and columns.numeric is not None:
            dense = columns.numeric.first.data
            numbers = np.full(self.docs.size, np.nan)
            inside = self.docs < dense.size
            numbers[inside] = dense[self.docs[inside]]
            has_number = ~np.isnan(numbers)
            if has_number.any():
                distinct, inverse = np.unique(numbers[has_number], return_inverse=True)
                codes[has_number] = inverse
                self.values = [plain_number(number) for number in distinct.tolist()]
        if columns is not None and columns.values is not None:
            dense_ids = columns.values.first.data
            value_ids = np.full(self.docs.size, -1, dtype=np.int64)
            inside = self.docs < dense_ids.size
            value_ids[inside] = dense_ids[self.docs[inside]]
            has_value = value_ids >= 0
            if has_value.any():
                distinct_ids, inverse = np.unique(value_ids[has_value], return_inverse=True)
                codes[has_value] = inverse + len(self.values)
                self.values.extend(columns.values.values[value_id] for value_id in distinct_ids.tolist())
        self.codes = codes

    def of(self, docs: list[int]) -> list[int]:
        positions = np.searchsorted(self.docs, np.asarray(docs, dtype=np.uint32))
        found: list[int] = self.codes[positions].tolist()
        return found

    def members(self, code: int) -> AbstractBitMap:
        return bitmap_from_array(self.docs[self.codes == code])

    def value(self, code: int) -> Any:
        return None if code == NULL_GROUP else self.values[code]


def group_results(
    columns: FieldColumns | None,
    candidates: AbstractBitMap,
    rank_docs: RankDocs,
    skip: int,
    group_count: int,
    group_limit: int,
) -> list[tuple[Any, int, list[int]]]:
    """``[(value, totalHits, docs of the group's page), ...]`` for groups ``skip:skip+group_count``."""
    if not candidates or group_count <= 0:
        return []
    keys = _GroupKeys(columns, candidates)
    present, totals = np.unique(keys.codes, return_counts=True)
    total_of = dict(zip(present.tolist(), totals.tolist()))
    wanted = min(skip + group_count, len(total_of))
    if wanted <= skip:
        return []
    ordered: list[int] = []
    seen: set[int] = set()
    page = max(64, wanted * WALK_DOCS_PER_GROUP)
    walked = 0
    for _ in range(WALK_ROUNDS):
        for code in keys.of(rank_docs(candidates, walked, page - walked)):
            if code not in seen:
                seen.add(code)
                ordered.append(code)
        walked = page
        if len(ordered) >= wanted or walked >= len(candidates):
            break
        page *= 2
    if len(ordered) < wanted:
        # The remaining groups' best records all rank after the walked ones: order them by ranking
        # each group's best record against the others.
        best: dict[int, int] = {}
        for code in total_of:
            if code not in seen:
                top = rank_docs(keys.members(code), 0, 1)
                if top:
                    best[top[0]] = code
        ordered.extend(best[doc] for doc in rank_docs(BitMap(best), 0, len(best)))
    return [(keys.value(code), total_of[code], rank_docs(keys.members(code), 0, group_limit))
            for code in ordered[skip:wanted]]


__all__ = ["group_results"]
