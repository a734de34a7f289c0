"""The facets of one search response, each counted over its own disjunctive candidate set.

Owns: the response entries of ``textFacets`` and ``numericFacets`` in request order. A facet that
has its own facet filter counts over the match set without that filter (see
:meth:`SearchContext.without_facet_filter`); every other facet counts over the match set itself.
The request's dense candidate masks are shared by all of its facets.
"""

from __future__ import annotations

from typing import Any

from roarsearch.facets.numeric import numeric_facet
from roarsearch.facets.text import count_text_facet
from roarsearch.query.context import SearchContext


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
        numeric_facet(field, index.columns.get(field), context.without_facet_filter(field), intervals, context.masks)
        for field, intervals in context.request.numeric_facets.items()
    ]
