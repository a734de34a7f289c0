"""Facet filters: ``textFacetFilters`` and ``numericFacetFilters`` as bitmaps per field.

Owns: "any of these values within a field" (text) and "any of these intervals within a field"
(numeric). The pipeline ANDs fields together and with ``filter``, and leaves a facet's own entry
out when that facet is counted (disjunctive facets). Text values compare as filter equality does:
strings ignoring case and accents, numbers numerically (and as their spelling), booleans exactly.
"""

from __future__ import annotations

from typing import Any

from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.index import Index
from roarsearch.query.intervals import Interval, docs_in_intervals


def text_facet_filter_docs(index: Index, field: str, values: tuple[Any, ...]) -> AbstractBitMap:
    """Docs whose ``field`` holds any of ``values``."""
    if field != "id" and field not in index.columns:  # no record holds it: nothing to look up
        return BitMap()
    result = BitMap()
    for value in values:
        if isinstance(value, bool):
            result |= index.equal_bool(field, value)
        elif isinstance(value, (int, float)):
            result |= index.equal_number(field, float(value))
            text = str(int(value)) if float(value).is_integer() else str(value)
            result |= index.equal_text(field, text)
        else:
            result |= index.equal_text(field, str(value))
    return result


def numeric_facet_filter_docs(index: Index, field: str, intervals: tuple[Interval, ...]) -> AbstractBitMap:
    """Docs whose ``field`` has a value in any of ``intervals``."""
    return docs_in_intervals(index.columns.get(field), intervals)


def facet_filter_docs(index: Index, text_filters: dict[str, tuple[Any, ...]],
                      numeric_filters: dict[str, tuple[Interval, ...]]) -> dict[str, AbstractBitMap]:
    """Per field, the docs its text and numeric facet filter entries select (ANDed when both)."""
    selected: dict[str, AbstractBitMap] = {}
    for field, values in text_filters.items():
        if values:
            selected[field] = text_facet_filter_docs(index, field, values)
    for field, intervals in numeric_filters.items():
        if intervals:
            docs = numeric_facet_filter_docs(index, field, intervals)
            selected[field] = selected[field] & docs if field in selected else docs
    return selected
