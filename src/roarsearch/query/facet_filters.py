"""Facet filters: ``textFacetFilters`` and ``numericFacetFilters`` as bitmaps per field.

Owns: "any of these values within a field" (text) and "any of these intervals within a field"
(numeric). The pipeline ANDs entries together and with ``filter``, and leaves a facet's own entry
of its own kind out when that facet is counted (disjunctive facets): a numeric facet on ``qty``
still applies ``textFacetFilters.qty``, a text facet on ``qty`` still applies
``numericFacetFilters.qty``. Text values compare as filter equality does:
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


#: Facet filter kinds: a facet leaves out only its own filter of its own kind.
TEXT = "text"
NUMERIC = "numeric"


def facet_filter_docs(index: Index, text_filters: dict[str, tuple[Any, ...]],
                      numeric_filters: dict[str, tuple[Interval, ...]]) -> dict[tuple[str, str], AbstractBitMap]:
    """Per (kind, field), the docs that field's text or numeric facet filter entry selects."""
    selected: dict[tuple[str, str], AbstractBitMap] = {}
    for field, values in text_filters.items():
        if values:
            selected[(TEXT, field)] = text_facet_filter_docs(index, field, values)
    for field, intervals in numeric_filters.items():
        if intervals:
            selected[(NUMERIC, field)] = numeric_facet_filter_docs(index, field, intervals)
    return selected
