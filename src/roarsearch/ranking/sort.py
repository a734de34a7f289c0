"""Explicit sort: ``field``, ``-field``, ``field:asc|desc`` and ``_rank`` keys over numpy columns.

Owns: the order of a request with ``sort``. Keys apply in turn; relevance breaks the remaining ties
(unless ``_rank`` is itself a key, which places it among them), then record id ascending.

Per key and doc: its smallest value ascending and its largest descending, in the order numbers <
strings (so ascending a number wins over a string, descending a string over a number); strings
by their folded text alone (values that fold alike tie, and the next key decides; booleans as
"false" < "true"; strings over 256 characters are text only and do not sort). Records lacking
the field come last in both directions.

Top-k: the first key is partitioned with ``numpy.partition`` so only the docs that can reach
page ``skip + count`` (ties at the cut included) are fully sorted with ``numpy.lexsort``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from pyroaring import AbstractBitMap

from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array, contains_each
from roarsearch.index.docstore import DocStore
from roarsearch.index.index import Index
from roarsearch.query.geo import GEO_DISTANCE_FIELD
from roarsearch.query.request import SortKey
from roarsearch.ranking.bucket_sort import RelevanceRules

RANK_KEY = "_rank"
_MISSING = 2.0


def _field_keys(index: Index, field: str, docs: np.ndarray, descending: bool,
                origin: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(class, value) per doc, both ascending-is-better: class 0/1 = number/string (swapped when
    descending), 2 = missing; value negated when descending."""
    kind = np.full(docs.size, _MISSING)
    value = np.zeros(docs.size)
    if field == GEO_DISTANCE_FIELD and origin is not None:
        # Exact distances (not the rounded metres shown), so ties in whole metres keep their order;
        # records without a point come last both ways.
        distance = index.geo.distances(docs, origin[0], origin[1])
        missing = np.isnan(distance)
        kind[~missing] = 0.0
        value[~missing] = -distance[~missing] if descending else distance[~missing]
        return kind, value
    if field == "id":  # every record has one; id order puts integers before strings, as sorts do
        id_rank = index.docs.id_rank()
        ranks = (id_rank[docs] if id_rank is not None else docs).astype(np.float64)
        return np.zeros(docs.size), (-ranks if descending else ranks)
    columns = index.field_columns(field)
    if columns is None:
        return kind, value
    if columns.values is not None:
        smallest, largest = columns.values.sort_ranks()
        source = largest if descending else smallest
        ranks = np.full(docs.size, -1, dtype=np.int64)
        in_range = docs < source.size
        ranks[in_range] = source[docs[in_range]]
        has_string = ranks >= 0
        kind[has_string] = 0.0 if descending else 1.0
        value[has_string] = ranks[has_string]
    if columns.numeric is not None:
        source = columns.numeric.maximum.data if descending else columns.numeric.minimum.data
        numbers = np.full(docs.size, np.nan)
        in_range = docs < source.size
        numbers[in_range] = source[docs[in_range]]
        has_number = ~np.isnan(numbers)
        if descending:
            # Strings come before numbers descending: an array holding both is placed by its
            # largest string, so its numbers only place docs that hold no string.
            has_number &= kind == _MISSING
        kind[has_number] = 1.0 if descending else 0.0
        value[has_number] = numbers[has_number]
    if descending:
        value = -value
    return kind, value


#: Docs taken per step when walking a value-sorted column from its best end.
PRESORTED_CHUNK = 4096
#: The walk is taken when candidates² is at least this many times (page end × the column's pairs).
PRESORTED_MIN_RATIO = 8


def _value_order_chunks(runs: list[tuple[np.ndarray, np.ndarray]], descending: bool, step: int
                        ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(values, docs) of a numeric column in value order from its best end, in chunks that grow
    from ``step`` to :data:`PRESORTED_CHUNK`: the big run's chunks, each with the small run's
    pairs that come before the chunk's last value merged in (ties of the two runs in either
    order: the walk takes every tie)."""
    values, docs = runs[0]
    recent_values, recent_docs = runs[1] if len(runs) > 1 else (values[:0], docs[:0])
    ascending_recent = recent_values
    if descending:
        values, docs = values[::-1], docs[::-1]
        recent_values, recent_docs = recent_values[::-1], recent_docs[::-1]
    taken, start = 0, 0
    while start < docs.size or taken < recent_docs.size:
        chunk_values, chunk_docs = values[start:start + step], docs[start:start + step]
        start, step = start + step, min(2 * step, PRESORTED_CHUNK)
        if taken < recent_docs.size:
            if start >= docs.size:
                end = recent_docs.size
            elif descending:  # the small run's values >= the chunk's last come first once reversed
                end = recent_docs.size - int(np.searchsorted(ascending_recent, chunk_values[-1], side="left"))
            else:
                end = int(np.searchsorted(recent_values, chunk_values[-1], side="right"))
            if end > taken:
                merged_values = np.concatenate((chunk_values, recent_values[taken:end]))
                merged_docs = np.concatenate((chunk_docs, recent_docs[taken:end]))
                order = np.argsort(-merged_values if descending else merged_values, kind="stable")
                chunk_values, chunk_docs, taken = merged_values[order], merged_docs[order], end
        yield chunk_values, chunk_docs


def _presorted_docs(index: Index, candidates: AbstractBitMap, keys: tuple[SortKey, ...], wanted: int) -> np.ndarray | None:
    """For one numeric sort key: the candidates that can reach the page, read from the column's
    value-sorted pairs starting at the best end, instead of keying every candidate.

    Returns every candidate whose value ranks at or before the ``wanted``-th distinct candidate's
    value (ties included), or None when this shortcut does not apply (several keys, ``_rank``, a
    field holding strings too, or too few candidates with a value).
    """
    if len(keys) != 1 or keys[0].field == RANK_KEY:
        return None
    columns = index.columns.get(keys[0].field)
    if columns is None or columns.numeric is None or columns.has_text or columns.has_bool:
        return None  # strings and booleans sort in their own class: not in the numeric pairs
    runs = columns.numeric.value_runs()
    if len(candidates) ** 2 < PRESORTED_MIN_RATIO * wanted * runs.count:
        # Few candidates: the walk would test about ``wanted * pairs / candidates`` docs one by one,
        # more than keying every candidate at once costs.
        return None
    chosen: dict[int, None] = {}
    cut_value = None
    # Steps grow from a few times the page: a selective filter reads further, a loose one (most
    # browse pages) stops after a few hundred membership tests instead of a whole step's.
    for chunk_values, chunk_docs in _value_order_chunks(runs.runs(), keys[0].descending,
                                                        min(max(4 * wanted, 64), PRESORTED_CHUNK)):
        keep = contains_each(candidates, chunk_docs)
        for doc, value in zip(chunk_docs[keep].tolist(), chunk_values[keep].tolist()):
            if cut_value is not None and value != cut_value:
                return np.sort(np.fromiter(chosen, dtype=np.uint32, count=len(chosen)))
            chosen.setdefault(doc, None)
            if cut_value is None and len(chosen) >= wanted:
                cut_value = value  # keep taking docs tied with the cut
    return None  # fewer than ``wanted`` candidates have a value: the missing ones are needed too


def _id_column(index: Index, docs: np.ndarray) -> np.ndarray:
    id_rank = index.docs.id_rank()
    return id_rank[docs] if id_rank is not None else docs.astype(np.int64)


def order_by_keys(index: Index, keys: tuple[SortKey, ...]) -> Callable[[DocStore, AbstractBitMap, int, int], list[int]]:
    """A bucket orderer for :func:`~roarsearch.ranking.bucket_sort.bucket_sort`: docs ``start:stop``
    of a bucket by ``keys`` (the settings' ``customRanking``), then record id ascending."""

    def order(docstore: DocStore, bucket: AbstractBitMap, start: int, stop: int) -> list[int]:
        if start >= stop:
            return []
        docs = array_from_bitmap(bucket)
        if stop < docs.size // 4:
            # Top-k on the first key: only docs that can reach position ``stop`` (ties at the cut
            # included) are fully sorted.
            kind, value = _field_keys(index, keys[0].field, docs, keys[0].descending)
            spread = float(np.abs(value).max()) * 2.0 + 1.0 if value.size else 1.0
            if np.isfinite(spread * 3):
                primary = kind * spread + value
                cut = np.partition(primary, stop - 1)[stop - 1]
                docs = docs[primary <= cut]
        columns: list[np.ndarray] = []
        for key in keys:
            columns.extend(_field_keys(index, key.field, docs, key.descending))
        columns.append(_id_column(index, docs))
        ordered = np.lexsort(tuple(reversed(columns)))
        result: list[int] = docs[ordered[start:stop]].tolist()
        return result

    return order


def sort_page(
    index: Index,
    candidates: AbstractBitMap,
    keys: tuple[SortKey, ...],
    relevance: RelevanceRules | None,
    skip: int,
    count: int,
    tie_keys: tuple[SortKey, ...] = (),
    origin: tuple[float, float] | None = None,
) -> list[tuple[int, int]]:
    """Docs of page ``skip:skip+count`` in sort order, each with its packed relevance cost (0 when none)."""
    if count == 0 or skip >= len(candidates):
        return []
    presorted = _presorted_docs(index, candidates, keys, skip + count)
    docs = presorted if presorted is not None else array_from_bitmap(candidates)
    wanted = min(skip + count, len(candidates))
    costs: np.ndarray | None = None

    def relevance_costs(subset: np.ndarray) -> np.ndarray:
        if relevance is None or not relevance.words:
            return np.zeros(subset.size, dtype=np.int64)
        ordered_docs, packed = relevance.all_costs(bitmap_from_array(subset))
        return packed[np.searchsorted(ordered_docs, subset)]

    # Narrow to the docs that can reach the page using the first key alone.
    first = keys[0]
    if first.field == RANK_KEY:
        costs = relevance_costs(docs)
        primary: np.ndarray | None = (-costs if not first.descending else costs).astype(np.float64)
    else:
        kind, value = _field_keys(index, first.field, docs, first.descending, origin)
        # One float that orders like (class, value): classes are spaced wider than all values.
        spread = float(np.abs(value).max()) * 2.0 + 1.0
        primary = kind * spread + value if np.isfinite(spread * 3) else None
    if wanted < docs.size and primary is not None:
        cut = np.partition(primary, wanted - 1)[wanted - 1]
        keep = primary <= cut
        docs, primary = docs[keep], primary[keep]
        if costs is not None:
            costs = costs[keep]

    columns: list[np.ndarray] = []
    for key in keys:
        if key.field == RANK_KEY:
            if costs is None:
                costs = relevance_costs(docs)
            columns.append(-costs if not key.descending else costs)
        else:
            kind, value = _field_keys(index, key.field, docs, key.descending, origin)
            columns.extend((kind, value))
    if costs is None:
        costs = relevance_costs(docs)
    columns.append(costs)  # relevance breaks ties: lower packed cost is better
    for key in tie_keys:  # then the settings' customRanking
        columns.extend(_field_keys(index, key.field, docs, key.descending, origin))
    columns.append(_id_column(index, docs))
    order = np.lexsort(tuple(reversed(columns)))
    page = order[skip:wanted]
    return list(zip(docs[page].tolist(), costs[page].tolist()))
