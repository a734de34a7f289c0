"""Interval strings of ``numericFacets`` and ``numericFacetFilters``, and the docs inside them.

Owns: the syntax ``[a,b)``, ``(a,b]``, ``[a,b]``, ``(a,b)`` with ``[``/``]`` inclusive and
``(``/``)`` exclusive, open ends written empty or ``*`` (``[10,)``, ``(*,5]``); parsed once when
the request is validated, with a 400 naming the request field and position when malformed.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.errors import BadRequestError
from roarsearch.index.bitmaps import union_all
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
    if not math.isfinite(value):
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


@functools.lru_cache(maxsize=4096)
def _valid_interval(text: str) -> Interval | None:
    try:
        return parse_interval(text, "interval")
    except BadRequestError:
        return None


def parse_interval_cached(text: str, where: str) -> Interval:
    """:func:`parse_interval` remembering valid texts: a request may repeat one interval for many
    fields (10,000 intervals in all are allowed), and dashboards send the same ones every time."""
    found = _valid_interval(text)
    return found if found is not None else parse_interval(text, where)


def interval_docs(columns: FieldColumns | None, interval: Interval) -> AbstractBitMap:
    """Docs having a numeric value inside ``interval``."""
    if columns is None or columns.numeric is None:
        return BitMap()
    return columns.numeric.range(interval.low, interval.low_inclusive, interval.high, interval.high_inclusive)


def docs_in_intervals(columns: FieldColumns | None, intervals: tuple[Interval, ...] | list[Interval]) -> AbstractBitMap:
    """Docs with a value in any of ``intervals``."""
    return union_all([interval_docs(columns, interval) for interval in intervals])
