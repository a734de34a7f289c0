"""The facets of one search response, each counted over its own disjunctive candidate set.

Owns: the response entries of ``textFacets`` and ``numericFacets`` in request order. A facet that
has its own facet filter of its own kind counts over the match set without that filter (see
:meth:`SearchContext.without_facet_filter`); every other facet counts over the match set itself.
The request's dense candidate masks are shared by all of its facets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from roarsearch.facets.numeric import facet_of_values, numeric_facet
from roarsearch.facets.text import count_text_facet
from roarsearch.index.bitmaps import array_from_bitmap
from roarsearch.query.context import SearchContext
from roarsearch.query.facet_filters import NUMERIC
from roarsearch.query.geo import GEO_DISTANCE_FIELD
from roarsearch.query.intervals import Interval


def text_facets(context: SearchContext) -> list[dict[str, Any]]:
    request, index = context.request, context.index
    return [
        {"field": field,
         "values": count_text_facet(index.field_columns(field), context.without_facet_filter(field),
                                    request.facet_count, context.masks)}
        for field in request.text_facets
    ]


def numeric_facets(context: SearchContext) -> list[dict[str, Any]]:
    index = context.index
    return [
        _distance_facet(context, intervals) if field == GEO_DISTANCE_FIELD else
        numeric_facet(field, index.columns.get(field), context.without_facet_filter(field, NUMERIC), intervals,
                      context.masks)
        for field, intervals in context.request.numeric_facets.items()
    ]


def _distance_facet(context: SearchContext, intervals: tuple[Interval, ...]) -> dict[str, Any]:
    """``_geoDistance`` as a numeric facet: the whole metres each result shows, from ``geo.around``."""
    around = context.request.geo.around if context.request.geo is not None else None
    assert around is not None  # request validation refuses _geoDistance without around
    docs = array_from_bitmap(context.candidates)
    metres = np.floor(context.index.geo.distances(docs, around.lat, around.lng) + 0.5)
    return facet_of_values(GEO_DISTANCE_FIELD, metres[~np.isnan(metres)], None, intervals)
