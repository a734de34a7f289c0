"""Numeric facets: range counts and stats over the matching records.

Owns: the facet response (intervals are parsed by :mod:`roarsearch.query.intervals`):

    {"field": "price", "stats": {"min", "max", "avg", "count"},
     "ranges": [{"range": "[0,100)", "count": 7}, ...]}

``count`` in stats and in ranges is a number of records (a record with several values in a range
counts once); ``min``, ``max`` and ``avg`` are over the values of those records (every array
element counts); with no values they are ``null``.

A field that never held an array is read from its dense per-doc column (one gather of the
candidates' values); arrays from the (doc, value) pairs. Caller: ``facets.counts``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyroaring import AbstractBitMap

from roarsearch.facets.text import plain_number, select_pairs
from roarsearch.index.bitmaps import DocMasks, array_from_bitmap, sorted_unique
from roarsearch.index.columns import FieldColumns
from roarsearch.query.intervals import Interval, docs_in_intervals, interval_docs, parse_interval


def _candidate_values(columns: FieldColumns, candidates: AbstractBitMap, masks: DocMasks | None) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, their docs or None) of the candidates' numbers.

    A field that never held an array has one value per doc, kept dense by doc in the column's
    per-doc minimum (NaN where a doc has none): the candidates' values are one gather, and
    every value is its own record (docs are not needed to count records). Arrays go through
    the (doc, value) pairs.
    """
    assert columns.numeric is not None
    if not columns.numeric.multi_valued:
        dense = columns.numeric.minimum.data
        docs = array_from_bitmap(candidates)
        docs = docs[: np.searchsorted(docs, dense.size)]  # docs past the array have no value
        values = dense[docs]
        return values[~np.isnan(values)], None
    selected_docs, selected = select_pairs(columns.numeric, candidates, masks)
    return selected, selected_docs


def numeric_facet(field: str, columns: FieldColumns | None, candidates: AbstractBitMap,
                  intervals: list[Interval] | tuple[Interval, ...], masks: DocMasks | None = None) -> dict[str, Any]:
    """Stats and range counts of ``field`` over the candidates."""
    if columns is not None and columns.numeric is not None and candidates:
        values, docs = _candidate_values(columns, candidates, masks)
        return facet_of_values(field, values, docs, intervals)
    return facet_of_values(field, np.empty(0), None, intervals)


def facet_of_values(field: str, values: np.ndarray, docs: np.ndarray | None,
                    intervals: list[Interval] | tuple[Interval, ...]) -> dict[str, Any]:
    """Stats and range counts of ``values`` (one per record when ``docs`` is None, else the
    records each belongs to): the response entry of a numeric facet, also for ``_geoDistance``."""
    stats: dict[str, Any] = {"min": None, "max": None, "avg": None, "count": 0}
    ranges = [{"range": interval.text, "count": 0} for interval in intervals]
    if values.size:

        def records(inside: np.ndarray | None) -> int:
            if docs is None:  # one value per record
                return int(values.size if inside is None else np.count_nonzero(inside))
            return int(sorted_unique(docs if inside is None else docs[inside]).size)

        stats = {
            "min": plain_number(float(values.min())),
            "max": plain_number(float(values.max())),
            "avg": float(values.mean()),
            "count": records(None),
        }
        for entry, interval in zip(ranges, intervals):
            entry["count"] = records(interval.contains(values))
    return {"field": field, "stats": stats, "ranges": ranges}


__all__ = ["Interval", "docs_in_intervals", "facet_of_values", "interval_docs", "numeric_facet", "parse_interval"]
