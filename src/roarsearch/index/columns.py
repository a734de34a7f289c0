"""Value columns for filters, sorting and facets: numbers in numpy, exact values as bitmaps.

Owns, per field path:

- ``NumericColumn``: every numeric value as (doc, value) pairs in numpy (multi-valued: one pair per
  array element), a value-sorted view built lazily once per write for range filters and numeric
  facets, and dense per-doc ``min``/``max`` arrays for sorting.
- ``ValueColumn``: exact values (strings up to :data:`MAX_VALUE_LENGTH` characters, and booleans)
  with a value id each, one ``BitMap`` per value (equality filters, few-value facet counting), the
  (doc, value id) pairs (``numpy.bincount`` facet counting over many values), the folded form of
  each string (case- and accent-insensitive equality, sort order), and a dense per-doc first value
  id for sorting.
- ``exists``: docs having any non-null value in the field.

Everything is append-only; readers intersect with the alive docs. Text analysis is not done here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyroaring import BitMap

from roarsearch.analysis.normalize import fold_many
from roarsearch.index.bitmaps import EMPTY, GrowableArray, bitmap_from_array, union_all

#: Longer strings are searchable text but not exact values (no facet value, no equality filter):
#: a facet of paragraphs helps no one and would double the memory of long text fields.
MAX_VALUE_LENGTH = 256


class NumericColumn:
    """Numbers of one field: (doc, value) pairs, a lazily sorted view, per-doc min and max."""

    __slots__ = ("_docs", "_values", "_flat", "_sorted", "minimum", "maximum", "docs")

    def __init__(self) -> None:
        self._docs: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._flat: tuple[np.ndarray, np.ndarray] | None = None
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None
        self.minimum = GrowableArray(np.float64, np.nan)
        self.maximum = GrowableArray(np.float64, np.nan)
        self.docs = BitMap()

    def add(self, docs: np.ndarray, values: np.ndarray) -> None:
        if docs.size == 0:
            return
        docs = docs.astype(np.uint32)
        values = values.astype(np.float64)
        self._docs.append(docs)
        self._values.append(values)
        self._flat = None
        self._sorted = None
        top = int(docs.max()) + 1
        self.minimum.ensure(top)
        self.maximum.ensure(top)
        # fmin/fmax ignore the NaN of docs seeing their first value; .at handles repeated docs.
        np.fmin.at(self.minimum.data, docs, values)
        np.fmax.at(self.maximum.data, docs, values)
        self.docs |= bitmap_from_array(docs)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(docs, values) of every value, in insertion order."""
        if self._flat is None:
            if not self._docs:
                self._flat = (np.empty(0, np.uint32), np.empty(0, np.float64))
            else:
                self._flat = (np.concatenate(self._docs), np.concatenate(self._values))
                self._docs, self._values = [self._flat[0]], [self._flat[1]]
        return self._flat

    def sorted_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, docs) ordered by value: ranges become two binary searches and a slice."""
        if self._sorted is None:
            docs, values = self.pairs()
            order = np.argsort(values, kind="stable")
            self._sorted = (values[order], docs[order])
        return self._sorted

    def range(self, low: float | None, low_inclusive: bool, high: float | None, high_inclusive: bool) -> BitMap:
        values, docs = self.sorted_pairs()
        lo = 0 if low is None else int(np.searchsorted(values, low, side="left" if low_inclusive else "right"))
        hi = values.size if high is None else int(np.searchsorted(values, high, side="right" if high_inclusive else "left"))
        if hi <= lo:
            return BitMap()
        return bitmap_from_array(docs[lo:hi])


class ValueColumn:
    """Exact values (short strings and booleans) of one field, each with a value id and a bitmap."""

    __slots__ = ("ids", "values", "folded", "by_folded", "bitmaps", "_docs", "_vids", "_flat", "first", "docs", "_fold_rank")

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []
        self.folded: list[str] = []
        self.by_folded: dict[str, list[int]] = {}
        self.bitmaps: list[BitMap] = []
        self._docs: list[np.ndarray] = []
        self._vids: list[np.ndarray] = []
        self._flat: tuple[np.ndarray, np.ndarray] | None = None
        self.first = GrowableArray(np.int64, -1)
        self.docs = BitMap()
        self._fold_rank: np.ndarray | None = None

    def _register(self, value: Any, folded: str) -> int:
        value_id = self.ids[value] = len(self.values)
        self.values.append(value)
        self.folded.append(folded)
        if not isinstance(value, bool):
            self.by_folded.setdefault(folded, []).append(value_id)
        self.bitmaps.append(BitMap())
        self._fold_rank = None
        return value_id

    def intern_many(self, keys: list[Any]) -> np.ndarray:
        """Value ids of ``keys`` (strings and booleans), registering new values in first-seen order.

        Known values resolve in one C-level ``map``; new strings are folded together in one call.
        Booleans and strings never collide as keys: no int is ever stored here (True == 1).
        """
        get = self.ids.get
        found = list(map(get, keys))
        if None in found:
            new_values = list(dict.fromkeys(key for key, value_id in zip(keys, found) if value_id is None))
            strings = [value for value in new_values if not isinstance(value, bool)]
            folded = dict(zip(strings, fold_many(strings)))
            for value in new_values:
                self._register(value, ("true" if value else "false") if isinstance(value, bool) else folded[value])
            found = list(map(get, keys))
        return np.asarray(found, dtype=np.int64)

    def add(self, docs: np.ndarray, value_ids: np.ndarray) -> None:
        """Add (doc, value id) pairs in doc order; a value repeated within one doc counts once."""
        if docs.size == 0:
            return
        pairs = np.unique(np.stack((docs.astype(np.int64), value_ids.astype(np.int64)), axis=1), axis=0)
        docs, value_ids = pairs[:, 0].astype(np.uint32), pairs[:, 1].astype(np.int64)
        order = np.argsort(value_ids, kind="stable")
        sorted_vids, sorted_docs = value_ids[order], docs[order]
        boundaries = np.flatnonzero(np.diff(sorted_vids)) + 1
        starts = np.concatenate(([0], boundaries))
        ends = np.concatenate((boundaries, [sorted_vids.size]))
        for value_id, lo, hi in zip(sorted_vids[starts].tolist(), starts.tolist(), ends.tolist()):
            self.bitmaps[value_id] |= bitmap_from_array(sorted_docs[lo:hi])
        self._docs.append(docs)
        self._vids.append(value_ids.astype(np.uint32))
        self._flat = None
        top = int(docs.max()) + 1
        self.first.ensure(top)
        # The sort key of a multi-valued doc is its smallest folded value (set below by fold rank).
        unique_docs, first_index = np.unique(docs, return_index=True)
        self.first.data[unique_docs] = value_ids[first_index]
        self.docs |= bitmap_from_array(docs)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(docs, value ids) of every distinct value of every doc."""
        if self._flat is None:
            if not self._docs:
                self._flat = (np.empty(0, np.uint32), np.empty(0, np.uint32))
            else:
                self._flat = (np.concatenate(self._docs), np.concatenate(self._vids))
                self._docs, self._vids = [self._flat[0]], [self._flat[1]]
        return self._flat

    def equal_folded(self, folded: str) -> BitMap:
        value_ids = self.by_folded.get(folded)
        if not value_ids:
            return EMPTY
        return union_all([self.bitmaps[value_id] for value_id in value_ids])

    def equal_bool(self, value: bool) -> BitMap:
        # Only booleans and strings are keys here, and no string equals True or False.
        value_id = self.ids.get(value)
        return EMPTY if value_id is None else self.bitmaps[value_id]

    def fold_rank(self) -> np.ndarray:
        """Per value id, its rank in folded order (ties by original value); computed once per new value."""
        if self._fold_rank is None:
            order = sorted(range(len(self.values)), key=lambda vid: (self.folded[vid], str(self.values[vid])))
            rank = np.empty(len(self.values), dtype=np.int64)
            rank[np.asarray(order, dtype=np.int64)] = np.arange(len(order), dtype=np.int64)
            self._fold_rank = rank
        return self._fold_rank


class FieldColumns:
    """The columns of one field path; either part may be absent."""

    __slots__ = ("numeric", "values", "exists", "has_text")

    def __init__(self) -> None:
        self.numeric: NumericColumn | None = None
        self.values: ValueColumn | None = None
        self.exists = BitMap()
        self.has_text = False

    def numeric_column(self) -> NumericColumn:
        if self.numeric is None:
            self.numeric = NumericColumn()
        return self.numeric

    def value_column(self) -> ValueColumn:
        if self.values is None:
            self.values = ValueColumn()
        return self.values
