"""Numeric facets: interval strings, range counts and stats over the matching records.

Owns: the interval syntax shared by ``numericFacets`` and ``numericFacetFilters`` —
``[a,b)``, ``(a,b]``, ``[a,b]``, ``(a,b)`` with ``[``/``]`` inclusive and ``(``/``)`` exclusive,
and open ends written empty or ``*`` (``[10,)``, ``(*,5]``) — and the facet response:

    {"field": "price", "stats": {"min", "max", "avg", "count"},
     "ranges": [{"range": "[0,100)", "count": 7}, ...]}

``count`` in stats and in ranges is a number of records (a record with several values in a range
counts once); ``min``, ``max`` and ``avg`` are over the values of those records (every array
element counts); with no values they are ``null``.

A field that never held an array is read from its dense per-doc column (one gather of the
candidates' values); arrays from the (doc, value) pairs. Callers: ``engine.collection``
(numericFacets), ``facets.filters`` (numericFacetFilters).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap

from roarsearch.errors import BadRequestError
from roarsearch.facets.text import plain_number, select_pairs
from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array
from roarsearch.index.columns import FieldColumns

_INTERVAL = re.compile(r"\s*([\[(])\s*([^,\s]*)\s*,\s*([^,\s\])]*)\s*([\])])\s*")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True)
class Interval:
    low: float | None
    low_inclusive: bool
    high: float | None
    high_inclusive: bool
    text: str

    def contains(self, values: np.ndarray) -> np.ndarray:
        inside = np.ones(values.size, dtype=bool)
        if self.low is not None:
            inside &= values >= self.low if self.low_inclusive else values > self.low
        if self.high is not None:
            inside &= values <= self.high if self.high_inclusive else values < self.high
        return inside


def _bound(text: str, where: str, interval: str) -> float | None:
    if text in ("", "*"):
        return None
    if not _NUMBER.fullmatch(text):
        raise BadRequestError(f"{where}: bound {text!r} of {interval!r} is not a number", field=where.split(".")[0])
    value = float(text)
    if not np.isfinite(value):
        raise BadRequestError(f"{where}: bound {text!r} of {interval!r} is not finite", field=where.split(".")[0])
    return value


def parse_interval(text: str, where: str) -> Interval:
    """Parse ``[a,b)``-style interval text; a 400 naming ``where`` when it is malformed."""
    match = _INTERVAL.fullmatch(text)
    if match is None:
        raise BadRequestError(
            f"{where}: {text!r} is not an interval; expected '[low,high)', '(low,high]', '[low,high]' or "
            "'(low,high)' with an empty or '*' bound for an open end, like \"[0,100)\" or \"[100,)\"",
            field=where.split(".")[0],
        )
    opening, low_text, high_text, closing = match.groups()
    low, high = _bound(low_text, where, text), _bound(high_text, where, text)
    if low is not None and high is not None and low > high:
        raise BadRequestError(f"{where}: {text!r} has its low bound above its high bound", field=where.split(".")[0])
    return Interval(low, opening == "[", high, closing == "]", text)


def interval_docs(columns: FieldColumns | None, interval: Interval) -> BitMap:
    """Docs having a numeric value inside ``interval``."""
    if columns is None or columns.numeric is None:
        return BitMap()
    return columns.numeric.range(interval.low, interval.low_inclusive, interval.high, interval.high_inclusive)


def _candidate_values(columns: FieldColumns, candidates: BitMap) -> tuple[np.ndarray, np.ndarray | None]:
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
    docs, values = columns.numeric.pairs()
    selected_docs, selected = select_pairs(docs, values, candidates)  # pairs are in doc order
    return selected, selected_docs


def numeric_facet(field: str, columns: FieldColumns | None, candidates: BitMap, intervals: list[Interval]) -> dict[str, Any]:
    """Stats and range counts of ``field`` over the candidates."""
    stats: dict[str, Any] = {"min": None, "max": None, "avg": None, "count": 0}
    ranges = [{"range": interval.text, "count": 0} for interval in intervals]
    if columns is not None and columns.numeric is not None and candidates:
        values, docs = _candidate_values(columns, candidates)
        if values.size:

            def records(inside: np.ndarray | None) -> int:
                if docs is None:  # one value per record
                    return int(values.size if inside is None else np.count_nonzero(inside))
                return int(np.unique(docs if inside is None else docs[inside]).size)

            stats = {
                "min": plain_number(float(values.min())),
                "max": plain_number(float(values.max())),
                "avg": float(values.mean()),
                "count": records(None),
            }
            for entry, interval in zip(ranges, intervals):
                entry["count"] = records(interval.contains(values))
    return {"field": field, "stats": stats, "ranges": ranges}


def docs_in_intervals(columns: FieldColumns | None, intervals: list[Interval]) -> BitMap:
    """Docs with a value in any of ``intervals``."""
    result = BitMap()
    for interval in intervals:
        result |= interval_docs(columns, interval)
    return result


__all__ = ["Interval", "parse_interval", "interval_docs", "numeric_facet", "docs_in_intervals", "bitmap_from_array"]
