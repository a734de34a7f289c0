"""Facet filters: ``textFacetFilters`` and ``numericFacetFilters`` as bitmaps per field.

Owns: "any of these values within a field" (text) and "any of these intervals within a field"
(numeric). The pipeline ANDs fields together and with ``filter``, and leaves a facet's own entry
out when that facet is counted (disjunctive facets). Text values compare as filter equality does:
strings ignoring case and accents, numbers numerically (and as their spelling), booleans exactly.
"""

from __future__ import annotations

from typing import Any

from pyroaring import BitMap

from roarsearch.facets.numeric import docs_in_intervals, parse_interval
from roarsearch.index.index import Index


def text_facet_filter_docs(index: Index, field: str, values: tuple[Any, ...]) -> BitMap:
    """Docs whose ``field`` holds any of ``values``."""
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


def numeric_facet_filter_docs(index: Index, field: str, intervals: tuple[str, ...], where: str) -> BitMap:
    """Docs whose ``field`` has a value in any of ``intervals`` (interval strings, validated here)."""
    parsed = [parse_interval(text, f"{where}[{position}]") for position, text in enumerate(intervals)]
    return docs_in_intervals(index.columns.get(field), parsed)
