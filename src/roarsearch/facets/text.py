"""Text facets: how many matching records hold each value of a field.

Owns: exact counts (never sampled) of a field's values over a candidate bitmap, ordered by count
descending, then value ascending (numbers < booleans < strings; strings by folded text, then raw).
A record counts once per distinct value, however often the value repeats in its array.

Strings and booleans are counted by one of three algorithms:

- few distinct values (at most :data:`PER_VALUE_LIMIT`, or :data:`PER_VALUE_LIMIT_MANY_CANDIDATES`
  when the candidates are too many to gather): one roaring ``intersection_cardinality`` per value
  between the value's bitmap (built once per write of the column and kept here) and the
  candidates — no numpy pass over the pairs at all;
- many values, few candidates (:func:`gathers`: under 1/:data:`GATHER_RATIO` of the field's
  pairs and under :data:`GATHER_THRESHOLD`): the (doc, value id) pairs are in doc order, so each
  candidate's values are found by binary search and gathered, and ``numpy.bincount`` counts them
  — cost follows the candidates;
- many values, many candidates: a dense boolean mask of the candidates selects pairs and
  ``numpy.bincount`` counts value ids — one pass over the field's pairs.

Numbers are counted from the numeric pairs selected the same way (gather or mask).
Measured on 1M places with ``python -m benchmarks.bench_facets`` (figures in docs/facets.md): per
value intersections beat counting pairs 4-45x for countryCode (~250 values) at 1% and 45% of
the records; gathering beats the mask below about 1/25 of the pairs.

Callers: ``facets.counts`` (textFacets), ``facets.value_search`` and ``facets.groups`` (pair
selection, :func:`string_counts`). Per-value bitmaps live in the index's cache; the dense masks
of one request's candidate sets in that request's :class:`DocMasks`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import DocMasks, array_from_bitmap, bitmap_from_array
from roarsearch.index.columns import FieldColumns, NumericColumn, ValueColumn

#: Candidate sets smaller than the field's pairs / GATHER_RATIO gather their values by binary
#: search instead of masking (the mask costs a pass over every pair; gathering, a binary search
#: per candidate): measured crossover 1/25 of the pairs at 1M records, 1/30 at 100k.
GATHER_RATIO = 32
#: ... and never when they are more than this (the mask of a small field is cheap anyway).
GATHER_THRESHOLD = 65536
#: Fields whose per-value bitmaps are kept (the fields being faceted on).
CACHED_COLUMNS = 64
#: Fields with at most this many distinct strings/booleans always count by one bitmap
#: intersection per value (measured: 0.3-1.3 ms for 250-670 values at 1M records, 2-40x faster
#: than counting pairs).
PER_VALUE_LIMIT = 1024
#: Candidates at most this many times the values (of a field with at least FEW_CANDIDATES_MIN_VALUES
#: values, and few enough to gather) count by gathering their pairs: a binary search each beats
#: an intersection per value, most of them empty (measured at 100k: 196 values, 100 candidates,
#: 25 against 56 us; below ~30 values the gather's fixed cost loses).
FEW_CANDIDATES_PER_VALUE = 1
FEW_CANDIDATES_MIN_VALUES = 32
#: A field with one value per doc (and 16+ values) counts up to this many candidates per value by
#: gathering their value ids from the dense per-doc column (a few numpy calls, not an intersection
#: per value: places' 213 time zones, 400 candidates, 10 against 118 us).
DENSE_PER_VALUE = 64
#: Up to this many values, intersections per value are still used when the candidates are too
#: many to gather (3,839 values at 1M records: 1.5 ms against 12.7 ms for mask + bincount).
PER_VALUE_LIMIT_MANY_CANDIDATES = 16384
def value_bitmaps(columns: FieldColumns) -> list[AbstractBitMap]:
    """One bitmap of docs per value id of the field (retired docs included), kept in the index's
    cache and extended by the pairs each write adds (deletes change nothing here)."""
    column = columns.values
    assert column is not None

    def extend(bitmaps: list[AbstractBitMap], made_at: tuple[int, int]) -> list[AbstractBitMap]:
        docs, value_ids = column.pairs_since(made_at[0])
        grown = bitmaps + [BitMap() for _ in range(len(column.values) - len(bitmaps))]
        if docs.size:
            order = np.argsort(value_ids, kind="stable")
            sorted_ids = value_ids[order]
            bounds = np.flatnonzero(np.concatenate(([True], sorted_ids[1:] != sorted_ids[:-1], [True])))
            for value_id, lo, hi in zip(sorted_ids[bounds[:-1]].tolist(), bounds[:-1].tolist(), bounds[1:].tolist()):
                grown[value_id] = grown[value_id] | bitmap_from_array(docs[order[lo:hi]])
        return grown

    bitmaps: list[AbstractBitMap] = columns.cache.get_or_extend(
        "value_bitmaps", columns.path, column, (column.count, len(column.values)),
        lambda: [column.value_docs(value_id) for value_id in range(len(column.values))], extend, CACHED_COLUMNS)
    return bitmaps


def gathers(candidate_count: int, pair_count: int) -> bool:
    """Whether pairs are selected by gathering the candidates' (rather than by a dense mask)."""
    return candidate_count < GATHER_THRESHOLD and candidate_count * GATHER_RATIO < pair_count


def select_pairs(column: NumericColumn | ValueColumn, candidates: AbstractBitMap,
                 masks: DocMasks | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The column's (doc, value) pairs whose doc is a candidate, in doc order (``masks``: the
    request's)."""
    dense = column.dense_values()
    if dense is not None:  # pair i is doc i: a gather
        wanted = array_from_bitmap(candidates)
        wanted = wanted[:np.searchsorted(wanted, dense.size)]
        return wanted, dense[wanted]
    docs, values = column.pairs()
    if docs.size == 0 or not candidates:
        return docs[:0], values[:0]
    if gathers(len(candidates), docs.size):
        wanted = array_from_bitmap(candidates)
        lo = np.searchsorted(docs, wanted, side="left")
        hi = np.searchsorted(docs, wanted, side="right")
        lengths = hi - lo
        index = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
        return docs[index], values[index]
    masks = masks if masks is not None else DocMasks()
    keep = masks.mask(candidates, int(docs[-1]) + 1)[docs]  # the mask covers every doc of ``docs``
    return docs[keep], values[keep]


def plain_number(value: float) -> int | float:
    """JSON-friendly number: integral floats become ints."""
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)


def string_counts(columns: FieldColumns, candidates: AbstractBitMap, masks: DocMasks | None = None) -> np.ndarray:
    """Per value id of the field's value column, the number of candidates holding it."""
    column = columns.values
    assert column is not None
    pairs = column.count
    if (len(column.values) >= FEW_CANDIDATES_MIN_VALUES // 2 and pairs == len(column.docs)
            and len(candidates) <= DENSE_PER_VALUE * len(column.values)):
        # One value per doc (as many pairs as docs): the per-doc value ids, gathered and counted.
        wanted = array_from_bitmap(candidates)
        dense = column.first.data
        held = dense[wanted[wanted < dense.size]]
        return np.bincount(held[held >= 0], minlength=len(column.values))
    few = (len(column.values) >= FEW_CANDIDATES_MIN_VALUES
           and len(candidates) <= FEW_CANDIDATES_PER_VALUE * len(column.values)
           and gathers(len(candidates), pairs))
    if (not few and len(column.values) <= PER_VALUE_LIMIT) or (
            len(column.values) <= PER_VALUE_LIMIT_MANY_CANDIDATES and not gathers(len(candidates), pairs)):
        intersect = BitMap.intersection_cardinality
        return np.fromiter((intersect(bitmap, candidates) for bitmap in value_bitmaps(columns)),
                           dtype=np.int64, count=len(column.values))
    _, selected = select_pairs(column, candidates, masks)
    return np.bincount(selected, minlength=len(column.values))


def _string_entries(columns: FieldColumns, candidates: AbstractBitMap, limit: int,
                    masks: DocMasks | None) -> list[tuple[int, int, int, Any, int]]:
    """The best ``limit`` (-count, kind, order within kind, value, count) of the strings/booleans."""
    column = columns.values
    assert column is not None
    counts = string_counts(columns, candidates, masks)
    chosen = np.flatnonzero(counts)
    if not chosen.size:
        return []
    # One int64 key orders (count descending, booleans before strings, folded then raw value):
    # the best ``limit`` are an argpartition away, whatever the number of distinct values.
    size = len(column.values)
    is_string = np.ones(size, dtype=bool)
    for flag in (False, True):  # the only two booleans a column can hold
        if (value_id := column.ids.get(flag)) is not None:
            is_string[value_id] = False
    chosen_counts = counts[chosen]
    most = int(chosen_counts.max())
    position = column.fold_rank()[chosen] + np.where(is_string[chosen], size, 0)
    key = (most - chosen_counts) * (2 * size) + position
    if key.size > limit:
        keep = np.argpartition(key, limit - 1)[:limit]
        chosen, key = chosen[keep], key[keep]
    best = chosen[np.argsort(key, kind="stable")]
    fold_rank = column.fold_rank()
    return [(-int(counts[value_id]), 2 if is_string[value_id] else 1, int(fold_rank[value_id]),
             column.values[value_id], int(counts[value_id])) for value_id in best.tolist()]


def _number_entries(columns: FieldColumns, candidates: AbstractBitMap, limit: int,
                    masks: DocMasks | None) -> list[tuple[int, int, float, Any, int]]:
    """The best ``limit`` (-count, 0, number, JSON number, count) of the field's numbers."""
    if columns.numeric is None:
        return []
    selected_docs, selected = select_pairs(columns.numeric, candidates, masks)
    if not selected.size:
        return []
    if columns.numeric.multi_valued:
        # A record counts once per distinct value: deduplicate (doc, value) first.
        selected = np.unique(np.stack((selected_docs.astype(np.float64), selected)), axis=1)[1]
    distinct, counts = np.unique(selected, return_counts=True)
    order = np.lexsort((distinct, -counts))[:limit]
    return [(-count, 0, number, plain_number(number), count)
            for number, count in zip(distinct[order].tolist(), counts[order].tolist())]


def count_text_facet(columns: FieldColumns | None, candidates: AbstractBitMap, limit: int,
                     masks: DocMasks | None = None) -> list[dict[str, Any]]:
    """``[{"value": v, "count": n}, ...]``: the ``limit`` most frequent values among the candidates."""
    if limit <= 0 or columns is None or not candidates:
        return []
    entries: list[tuple[Any, ...]] = []
    if columns.values is not None:
        entries.extend(_string_entries(columns, candidates, limit, masks))
    entries.extend(_number_entries(columns, candidates, limit, masks))
    entries.sort(key=lambda entry: entry[:3])
    return [{"value": value, "count": count} for *_, value, count in entries[:limit]]
