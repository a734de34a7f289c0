"""What a shard adds to its partial answers so that the driver can merge them exactly.

Owns: the values that cross from shards to the driver beside the engine's own response — sort
parts comparable across shards (:func:`field_sort_part`), the packed relevance cost behind
``_rank``, per numeric facet the sum and number of values (``avg`` is merged from them), and the
body a shard's collection sees. Used by :mod:`roarsearch.cluster.shard` and
:mod:`roarsearch.cluster.shard_vectors`; the driver's side is :mod:`roarsearch.cluster.merge`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from roarsearch.facets.numeric import _candidate_values
from roarsearch.index.bitmaps import array_from_bitmap
from roarsearch.index.docstore import id_sort_key
from roarsearch.index.index import Index
from roarsearch.query.context import SearchContext
from roarsearch.query.facet_filters import NUMERIC
from roarsearch.query.geo import GEO_DISTANCE_FIELD

SortPart = tuple[int, Any]


def resolved_body() -> dict[str, Any]:
    """The body a shard's collection sees: it names ``searchFields``, so the collection keeps the
    driver's resolved list instead of re-applying the settings' ``*`` over this shard's fields."""
    return {"searchFields": ["(resolved by the driver)"]}


def relevance_cost(rank: float) -> int:
    """The packed cost behind ``_rank`` (exact: ``_rank`` is ``1 - cost / 2**32``)."""
    return round((1.0 - rank) * float(1 << 32))


def field_sort_part(index: Index, field: str, doc: int, descending: bool, record_id: Any = None,
                    distance: float | None = None) -> SortPart:
    """(class, value) of ``doc`` for one sort key, as ``ranking.sort`` orders it, but comparable
    across shards: class 0/1 = number/string (swapped when descending), 2 = missing; a string
    is ``(folded,)`` (values that fold alike tie); an array gives its smallest value ascending,
    its largest descending, in the order numbers < strings.
    ``id`` sorts by the id itself (integers first); ``_geoDistance`` by ``distance``, the exact
    distance (NaN or None: no point, last both ways)."""
    if field == "id":
        return (0, id_sort_key(record_id))
    if field == GEO_DISTANCE_FIELD and distance is not None:
        return (2, 0) if math.isnan(distance) else (0, distance)
    columns = index.field_columns(field)
    if columns is None:
        return (2, 0)
    part: SortPart = (2, 0)
    if columns.values is not None:
        dense = columns.values.dense_values()
        if dense is not None:  # pair i is doc i
            value_ids, lo, hi = dense, doc, min(doc + 1, dense.size)
        else:
            docs, value_ids = columns.values.pairs()
            lo, hi = int(np.searchsorted(docs, doc, side="left")), int(np.searchsorted(docs, doc, side="right"))
        if hi > lo:
            folded = columns.values.folded
            keys = [(folded[value_id],) for value_id in value_ids[lo:hi].tolist()]
            part = (0 if descending else 1, max(keys) if descending else min(keys))
    if columns.numeric is not None and not (descending and part[0] != 2):  # descending, a string wins
        source = columns.numeric.maximum.data if descending else columns.numeric.minimum.data
        if doc < source.size and not math.isnan(float(source[doc])):
            part = (1 if descending else 0, float(source[doc]))
    return part


def numeric_sums(context: SearchContext) -> list[tuple[float, int]]:
    """Per numeric facet of the request, the sum and the number of the values its stats run over
    (the driver's ``avg`` is their sums' quotient): ``_geoDistance`` in the whole metres results
    show; every other facet over its own candidates (disjunctive: its own facet filter left out)."""
    request, index = context.request, context.index
    around = request.geo.around if request.geo is not None else None
    sums = []
    for field in request.numeric_facets:
        if field == GEO_DISTANCE_FIELD and around is not None:  # the whole metres results show
            metres = np.floor(index.geo.distances(array_from_bitmap(context.candidates),
                                                  around.lat, around.lng) + 0.5)
            metres = metres[~np.isnan(metres)]
            sums.append((float(metres.sum()), int(metres.size)))
            continue
        columns = index.columns.get(field)
        candidates = context.without_facet_filter(field, NUMERIC)
        if columns is None or columns.numeric is None or not candidates:
            sums.append((0.0, 0))
            continue
        values, _docs = _candidate_values(columns, candidates, context.masks)
        sums.append((float(values.sum()), int(values.size)))
    return sums
