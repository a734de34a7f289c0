"""Grouping: results grouped by a field's value, groups in the order of their best record.

Owns: ``groupBy`` / ``groupCount`` / ``groupLimit`` (contract §3–§4). Every matching record is in
exactly one group: the group of its field's value, of its array's first element for an array,
and the group whose value is ``null`` when it lacks the field. Groups come in the order of their
best-ranked record; inside a group records keep the overall order; ``skip`` counts groups; each
group reports its exact ``totalHits``.

Keys come from dense per-doc columns (the first string or boolean value id, the first number),
so keying every candidate is one numpy gather and counting the groups one ``bincount``. A record
holding both kinds (an array mixing them) is keyed by whichever its array holds first, read from
the stored record: the columns keep each kind's first value, not their order.
Grouping does not rank every candidate, nor each group apart: one walk over ranked pages of
growing size places each group at its first record and fills the shown groups with the records
that follow, stopping once enough groups are known and full. Groups whose best record lies
beyond the walk are ordered by ranking their best records against each other; a shown group the
walk left short is filled by ranking its own records.
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
#: A doc's first value of the grouped field, in the order its record holds them.
FirstValue = Callable[[int], Any]
#: Code of the group of records lacking the field.
NULL_GROUP = -1


class _GroupKeys:
    """Per candidate doc, an integer group code; codes map back to group values.

    Codes need no compaction: a string or boolean's code is its column value id (after the
    distinct numbers), so keying every candidate is one gather and counting the groups one
    ``bincount`` — no hash or sort over the candidates (numbers, rarer as group keys, are sorted).
    """

    def __init__(self, columns: FieldColumns | None, candidates: AbstractBitMap, first_value: FirstValue) -> None:
        self.docs = array_from_bitmap(candidates)
        codes = np.full(self.docs.size, NULL_GROUP, dtype=np.int64)
        self.numbers: list[Any] = []
        self.strings: list[Any] = []
        has_number: np.ndarray | None = None
        if columns is not None and columns.numeric is not None:
            numbers = _per_doc(columns.numeric.first.data, self.docs, np.nan)
            has_number = ~np.isnan(numbers)
            if has_number.any():
                distinct, inverse = np.unique(numbers[has_number], return_inverse=True)
                codes[has_number] = inverse
                self.numbers = [plain_number(number) for number in distinct.tolist()]
            else:
                has_number = None
        if columns is not None and columns.values is not None:
            value_ids = _per_doc(columns.values.first.data, self.docs, -1)
            has_value = value_ids >= 0
            if has_number is not None:
                mixed = np.flatnonzero(has_value & has_number)
                if mixed.size:  # both kinds: the one the record holds first (a bool is no number)
                    number_first = [not isinstance(value, (str, bool))
                                    for value in map(first_value, self.docs[mixed].tolist())]
                    has_value[mixed[number_first]] = False
            # One pass over the candidates (no boolean gathers): most hold a value, or most none.
            codes = np.where(has_value, value_ids.astype(np.int64) + len(self.numbers), codes)
            self.strings = columns.values.values
        self.codes = codes
        #: Docs per code, shifted by one (the null group's -1 is slot 0).
        self.totals = np.bincount(codes + 1)

    def of(self, docs: list[int]) -> list[int]:
        positions = np.searchsorted(self.docs, np.asarray(docs, dtype=np.uint32))
        found: list[int] = self.codes[positions].tolist()
        return found

    def total(self, code: int) -> int:
        return int(self.totals[code + 1])

    def members(self, code: int) -> AbstractBitMap:
        return bitmap_from_array(self.docs[self.codes == code])

    def value(self, code: int) -> Any:
        if code == NULL_GROUP:
            return None
        if code < len(self.numbers):
            return self.numbers[code]
        return self.strings[code - len(self.numbers)]


def _per_doc(dense: np.ndarray, docs: np.ndarray, missing: float) -> np.ndarray:
    """``dense[docs]`` (``docs`` sorted), ``missing`` for docs past the column's end."""
    if not docs.size or int(docs[-1]) < dense.size:
        gathered: np.ndarray = dense[docs]
        return gathered
    inside = int(np.searchsorted(docs, dense.size))  # sorted: the docs inside come first
    values = np.full(docs.size, missing, dtype=dense.dtype)
    values[:inside] = dense[docs[:inside]]
    return values


def group_results(
    columns: FieldColumns | None,
    candidates: AbstractBitMap,
    rank_docs: RankDocs,
    skip: int,
    group_count: int,
    group_limit: int,
    first_value: FirstValue,
) -> list[tuple[Any, int, list[int]]]:
    """``[(value, totalHits, docs of the group's page), ...]`` for groups ``skip:skip+group_count``;
    ``first_value(doc)``: the doc's first value of the field (asked only of a doc holding both a
    number and a string or boolean there).

    One pass over the ranked candidates, in pages of growing size: each doc's group code is read
    from the column; a group is placed when its first (best) doc is met, and each shown group
    keeps its first ``group_limit`` docs. The walk stops once the wanted groups are known and
    each holds ``group_limit`` docs (or all of its docs). Ranking a subset of the candidates keeps
    their relative order, so what the walk did not reach is finished by ranking a group's own docs.
    """
    if not candidates or group_count <= 0:
        return []
    keys = _GroupKeys(columns, candidates, first_value)
    wanted = min(skip + group_count, int(np.count_nonzero(keys.totals)))
    if wanted <= skip:
        return []
    ordered: list[int] = []
    before_page: set[int] = set()  # groups placed before ``skip``: their docs are not shown
    page_of: dict[int, list[int]] = {}  # the shown groups' docs so far
    unfilled = 0  # shown groups placed but not yet holding all the docs they show
    page = max(64, wanted * max(group_limit, WALK_DOCS_PER_GROUP))
    walked = 0
    for _ in range(WALK_ROUNDS):
        docs = rank_docs(candidates, walked, page - walked)
        for doc, code in zip(docs, keys.of(docs)):
            shown = page_of.get(code)
            if shown is None:
                if code in before_page or len(ordered) >= wanted:
                    continue
                ordered.append(code)
                if len(ordered) <= skip:
                    before_page.add(code)
                    continue
                shown = page_of[code] = []
                unfilled += 1
            if len(shown) < group_limit:
                shown.append(doc)
                if len(shown) == min(group_limit, keys.total(code)):
                    unfilled -= 1
        walked = page
        if (len(ordered) >= wanted and not unfilled) or walked >= len(candidates):
            break
        page *= 2
    _finish_small(keys, rank_docs, ordered, before_page, page_of, skip, wanted, group_limit)
    if len(ordered) < wanted:
        # The remaining groups' best records all rank after the walked ones: order them by ranking
        # each group's best record against the others.
        seen = set(ordered)
        best: dict[int, int] = {}
        for code in (np.flatnonzero(keys.totals) - 1).tolist():
            if code not in seen:
                top = rank_docs(keys.members(code), 0, 1)
                if top:
                    best[top[0]] = code
        ordered.extend(best[doc] for doc in rank_docs(BitMap(best), 0, len(best)))
    results = []
    for code in ordered[skip:wanted]:
        shown = page_of.get(code)
        if shown is None or len(shown) < min(group_limit, keys.total(code)):
            shown = rank_docs(keys.members(code), 0, group_limit)
        results.append((keys.value(code), keys.total(code), shown))
    return results


def _finish_small(keys: _GroupKeys, rank_docs: RankDocs, ordered: list[int], before_page: set[int],
                  page_of: dict[int, list[int]], skip: int, wanted: int, group_limit: int) -> None:
    """What the walk left open — groups not met yet, shown groups short of records — from one
    ranked pass over those groups' records, when they are at most :data:`FINISH_IN_ONE_PASS`
    (rare values: a few records each). Ranking a subset keeps the overall order, so the groups not
    met come in the order of their best records, after every group met (whose best records the
    walk already passed). Larger leftovers stay for the per-group ranking after this."""
    short = [code for code in ordered[skip:wanted] if len(page_of[code]) < min(group_limit, keys.total(code))]
    placed = set(ordered)
    unmet = [] if len(ordered) >= wanted else [code for code in (np.flatnonzero(keys.totals) - 1).tolist()
                                               if code not in placed]
    pending = short + unmet
    if not pending:
        return
    selected = np.isin(keys.codes, np.asarray(pending, dtype=np.int64))
    if int(np.count_nonzero(selected)) > FINISH_IN_ONE_PASS:
        return
    for code in short:
        page_of[code] = []  # refilled in order from the pass, which holds all of the group
    docs = rank_docs(bitmap_from_array(keys.docs[selected]), 0, int(np.count_nonzero(selected)))
    for doc, code in zip(docs, keys.of(docs)):
        shown = page_of.get(code)
        if shown is None:
            if code in before_page or code in placed or len(ordered) >= wanted:
                continue
            placed.add(code)
            ordered.append(code)
            if len(ordered) <= skip:
                before_page.add(code)
                continue
            shown = page_of[code] = []
        if len(shown) < group_limit:
            shown.append(doc)


#: Records of the groups a walk left open that are ranked together in one pass.
FINISH_IN_ONE_PASS = 2048

__all__ = ["group_results"]
