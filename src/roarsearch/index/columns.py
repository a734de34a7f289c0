"""Value columns for filters, sorting and facets: numbers in numpy, exact values as bitmaps.

Owns, per field path:

- ``NumericColumn``: every numeric value as (doc, value) pairs in numpy (multi-valued: one pair per
  array element), a value-sorted view for range filters and numeric facets (built lazily once,
  then extended: a write's pairs are merged into it, not the whole column sorted again), and
  dense per-doc ``min``/``max`` arrays for sorting.
- ``ValueColumn``: exact values (strings up to :data:`MAX_VALUE_LENGTH` characters, and booleans)
  with a value id each; the (doc, value id) pairs (``numpy.bincount`` facet counting) and their
  value-sorted view (docs of one value: equality filters, facet value bitmaps); the folded form of
  each string, built on first use (case- and accent-insensitive equality, sort order); a dense
  per-doc first value id for sorting and grouping.
- ``exists``: docs having any non-null value in the field.

Everything is append-only; readers intersect with the alive docs. Text analysis is not done here.

Concurrency: writes happen under the collection's write lock, with no reader running, but the
derived views (value-sorted views, folded forms) are built lazily by readers, several of which
may run at once. Each column builds its views under its own lock. The pairs themselves live in
arrays with room to grow (``_Pairs``): reading them is a view that later writes never change.
``version`` counts the writes to a column; ``count`` counts its pairs: as pairs are only ever
appended (new docs), a structure derived from the first ``count`` pairs (value-sorted views
here, equality, range and per-value bitmaps in the index cache) is brought up to date from
:meth:`pairs_since` rather than rebuilt, which is what keeps a steady writer from paying a pass
over every column it touches per write.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from itertools import compress, repeat
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.analysis.normalize import fold_many
from roarsearch.index.bitmaps import (
    DENSE_MASK_SHARE,
    EMPTY,
    GrowableArray,
    array_from_bitmap,
    bitmap_from_array,
    bitmap_from_mask,
    sorted_unique,
    union_all,
)
from roarsearch.index.cache import IndexCache

#: Longer strings are searchable text but not exact values (no facet value, no equality filter):
#: a facet of paragraphs helps no one and would double the memory of long text fields.
MAX_VALUE_LENGTH = 256

#: A field's exact values are indexed as it is written, from its first record, while it has at
#: most this many distinct values (countries, categories, tags, flags: a first facet, equality
#: filter or sort costs nothing after a restart). A field that grows past it (names, titles) is
#: dropped from write-time indexing and indexed from the stored records on first use instead.
AUTO_VALUE_LIMIT = 65_536


def _first_of_each_doc(docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """(distinct docs, index of each one's first entry, whether ``docs`` were in doc order): for
    docs in doc order (the writer's), where each doc's run starts, in one pass; otherwise
    ``np.unique`` (a sort)."""
    if docs.size < 2 or bool((docs[1:] >= docs[:-1]).all()):
        starts = np.flatnonzero(np.concatenate(([True], docs[1:] != docs[:-1])))
        return docs[starts], starts, True
    first_docs, first_index = np.unique(docs, return_index=True)
    return first_docs, first_index, False


class _Pairs:
    """(doc, value) pairs appended write by write into arrays with room to grow: reading them all
    is a view (joining each write's arrays again cost a pass over the column per write), and a
    view handed out never changes (later pairs go past its end, or into new arrays).

    While pair ``i`` is doc ``i`` with its one value (a field every record holds once, written in
    doc order: the common case), the pairs are not stored at all: they are read from the column's
    per-doc array (``dense``), which holds the same values. That is two thirds of a value
    column's bytes and three fifths of a numeric one's (at 10M records, 760 MB of a load's
    columns). The first write that breaks it (a doc without the field, a doc with two values, a
    doc out of order) copies them into arrays of their own, once."""

    __slots__ = ("docs", "values", "count", "dense")

    def __init__(self, value_type: type, dense: GrowableArray | None = None) -> None:
        self.docs: np.ndarray = np.empty(0, dtype=np.uint32)
        self.values: np.ndarray = np.empty(0, dtype=value_type)
        self.count = 0
        #: The per-doc array the pairs are read from while they are doc 0, 1, 2, ... (else None).
        self.dense = dense

    def append(self, docs: np.ndarray, values: np.ndarray) -> None:
        """Append pairs; call it before the column's per-doc array changes for them (a copy out
        of ``dense`` must see the values the earlier pairs had)."""
        end = self.count + docs.size
        if self.dense is not None:
            if (int(docs[0]) == self.count and int(docs[-1]) == end - 1
                    and (docs.size < 2 or bool((docs[1:] > docs[:-1]).all()))):
                self.count = end  # docs count, count + 1, ...: still read from the per-doc array
                return
            self._store()
        if end > self.docs.size:  # room for half as many again (a loaded column has none)
            capacity = max(end, self.docs.size + self.docs.size // 2, 1024)
            for name in ("docs", "values"):
                old = getattr(self, name)
                grown = np.empty(capacity, dtype=old.dtype)
                grown[:self.count] = old[:self.count]
                setattr(self, name, grown)
        self.docs[self.count:end] = docs
        self.values[self.count:end] = values
        self.count = end

    def _store(self) -> None:
        """Give the pairs arrays of their own: the per-doc array's buffer becomes their values
        (so a view handed out before never changes) and the column's per-doc array a copy of it."""
        dense = self.dense
        assert dense is not None
        self.values = dense.data[:self.count].view(self.values.dtype)
        self.docs = np.arange(self.count, dtype=np.uint32)
        dense.data = dense.data.copy()
        self.dense = None

    def adopt(self, docs: np.ndarray, values: np.ndarray) -> None:
        """Pairs as saved (read-only arrays are fine: the next append copies them)."""
        self.docs, self.values, self.count, self.dense = docs, values, int(docs.size), None

    def adopt_dense(self, count: int, dense: GrowableArray) -> None:
        """Pairs as saved, when they are docs ``0..count-1`` with the values ``dense`` holds."""
        self.count, self.dense = count, dense

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.since(0)

    def dense_values(self) -> np.ndarray | None:
        """Pair ``i``'s value for each i, while the pairs are doc 0, 1, 2, ... (else None)."""
        if self.dense is None:
            return None
        values = self.dense.data[:self.count]
        return values if values.dtype == self.values.dtype else values.view(self.values.dtype)

    def since(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        dense = self.dense_values()
        if dense is not None:
            return np.arange(start, self.count, dtype=np.uint32), dense[start:]
        return self.docs[start:self.count], self.values[start:self.count]


def dense_pairs(docs: np.ndarray, values: np.ndarray, per_doc: np.ndarray) -> bool:
    """Whether saved pairs are doc 0, 1, 2, ... with the values ``per_doc`` holds for them."""
    count = docs.size
    return (count <= per_doc.size and bool((docs == np.arange(count, dtype=docs.dtype)).all())
            and bool((per_doc[:count].view(values.dtype) == values).all()))


def _merge_sorted(old_keys: np.ndarray, new_keys: np.ndarray, new_order: np.ndarray, *columns: tuple[np.ndarray, np.ndarray]
                  ) -> tuple[np.ndarray, ...]:
    """Insert pairs appended after the ones a stable key order was made of: ``new_order`` sorts
    ``new_keys`` stably, and each goes after every old pair of an equal key (its index is
    larger), which is the order a stable sort of all the pairs gives. ``columns``: (old column in
    key order, new column in append order) pairs, merged the same way; returns them merged."""
    sorted_new = new_keys[new_order]
    at = np.searchsorted(old_keys, sorted_new, side="right")
    return tuple(np.insert(old, at, new[new_order]) for old, new in columns)


#: A value order keeps the pairs added since it was last made whole in a small sorted run of their
#: own until they number this share of it: a write then sorts the small run again, not the whole
#: column (at 10M records, inserting each 1,000-record batch into the 10M-long sorted arrays made
#: the next range filter or sorted browse take most of a second).
RECENT_RUN_SHARE = 1 / 32


class _ValueRuns:
    """A numeric column's pairs in stable value order, as a big run (``order``: indexes of the
    first ``order.size`` pairs; ``values``/``docs``: those pairs gathered in that order) and a small
    run of the pairs added after it, sorted alone. Immutable: a write's pairs make a new one, so a
    reader holds a consistent pair of runs."""

    __slots__ = ("order", "values", "docs", "recent_values", "recent_docs", "recent_order")

    def __init__(self, order: np.ndarray, values: np.ndarray, docs: np.ndarray,
                 recent: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        self.order, self.values, self.docs = order, values, docs
        empty = np.empty(0, dtype=np.uint32)
        recent_values, recent_docs, recent_order = recent or (np.empty(0), empty, empty)
        self.recent_values: np.ndarray = recent_values
        self.recent_docs: np.ndarray = recent_docs
        self.recent_order: np.ndarray = recent_order

    @property
    def count(self) -> int:
        return self.order.size + self.recent_order.size

    def runs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """(values, docs) of each non-empty run, each in value order."""
        found = [(self.values, self.docs)]
        if self.recent_order.size:
            found.append((self.recent_values, self.recent_docs))
        return found

    def whole_order(self) -> np.ndarray:
        """Indexes of every pair in stable value order: the small run merged into the big one."""
        if not self.recent_order.size:
            return self.order
        (order,) = _merge_sorted(self.values, self.recent_values, np.arange(self.recent_order.size),
                                 (self.order, self.recent_order))
        return order


class NumericColumn:
    """Numbers of one field: (doc, value) pairs, their value order (two runs), per-doc min and max."""

    __slots__ = ("_pairs", "_runs", "_order", "minimum", "maximum", "first", "docs", "multi_valued",
                 "version", "count", "_lock", "__weakref__")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.version = 0
        #: Pairs so far (they are only ever appended).
        self.count = 0
        self.minimum = GrowableArray(np.float64, np.nan)
        self._pairs = _Pairs(np.float64, self.minimum)
        #: The pairs in value order (:class:`_ValueRuns`), made from ``_order`` on first read and
        #: brought up to date by each read after a write (:meth:`value_runs`).
        self._runs: _ValueRuns | None = None
        #: A saved stable value order of the first ``_order.size`` pairs (a snapshot's: a load
        #: gathers instead of sorting), until the runs are made from it.
        self._order: np.ndarray | None = None
        # While no doc holds several values, a doc's min, max and first number are its one value:
        # the three are one array (8 bytes per doc, not 24), split when a doc gets a second value.
        self.maximum = self.minimum
        #: Per doc, its first number in element order (grouping by an array's first element).
        self.first = self.minimum
        self.docs: AbstractBitMap = BitMap()
        #: Whether any doc ever held several values: if not, min == max is the doc's only value.
        self.multi_valued = False

    def add(self, docs: np.ndarray, values: np.ndarray) -> None:
        if docs.size == 0:
            return
        if not self.multi_valued and (bool((docs[1:] == docs[:-1]).any()) or self._any_valued(docs)):
            self.become_multi_valued()
        docs = docs.astype(np.uint32)
        values = values.astype(np.float64)
        self._pairs.append(docs, values)
        self.version += 1
        self.count = self._pairs.count
        top = int(docs.max()) + 1
        self.minimum.ensure(top)
        self.maximum.ensure(top)
        # fmin/fmax ignore the NaN of docs seeing their first value; .at handles repeated docs.
        np.fmin.at(self.minimum.data, docs, values)
        np.fmax.at(self.maximum.data, docs, values)
        self.first.ensure(top)
        first_docs, first_index, _in_order = _first_of_each_doc(docs)
        self.first.data[first_docs] = values[first_index]
        self.docs |= bitmap_from_array(docs)

    def _any_valued(self, docs: np.ndarray) -> bool:
        """Whether one of ``docs`` already holds a number (from an earlier add)."""
        known = self.minimum.data
        inside = docs[docs < known.size]
        return bool(inside.size) and not bool(np.isnan(known[inside]).all())

    def become_multi_valued(self) -> None:
        """Give max and first arrays of their own (a doc is about to hold several values)."""
        self.multi_valued = True
        if self.maximum is self.minimum:
            self.maximum = GrowableArray(np.float64, np.nan)
            self.maximum.data = self.minimum.data.copy()
        if self.first is self.minimum:
            self.first = GrowableArray(np.float64, np.nan)
            self.first.data = self.minimum.data.copy()

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(docs, values) of every value, in insertion order."""
        return self._pairs.view()

    def dense_values(self) -> np.ndarray | None:
        """While pair ``i`` is doc ``i`` (see ``_Pairs``): each pair's value, a view, no copy."""
        return self._pairs.dense_values()

    def load_pairs(self, docs: np.ndarray, values: np.ndarray) -> None:
        """Adopt saved (doc, value) pairs (a snapshot's: an empty column)."""
        self._pairs.adopt(docs, values)
        self.count = self._pairs.count

    def share_dense_pairs(self) -> None:
        """Once loaded: read the pairs from the per-doc values when they hold them (see ``_Pairs``)."""
        docs, values = self._pairs.view()
        if not self.multi_valued and dense_pairs(docs, values, self.minimum.data):
            self._pairs.adopt_dense(self.count, self.minimum)

    def pairs_since(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """(docs, values) of pairs ``start:`` (those appended since the column had ``start``)."""
        return self._pairs.since(start)

    def value_runs(self) -> _ValueRuns:
        """The pairs in value order, covering every pair: the pairs added since the last read sorted
        into the small run, which is merged into the big one once it outgrows its share."""
        found = self._runs
        if found is None or found.count != self.count:
            with self._lock:
                found = self._runs
                if found is None:
                    found = self._first_runs()
                elif found.count != self.count:
                    found = self._extended_runs(found)
                self._runs = found
        return found

    def _first_runs(self) -> _ValueRuns:
        docs, values = self.pairs()
        order = self._order
        if order is None or order.size > self.count:
            order = np.argsort(values, kind="stable").astype(np.uint32)
        self._order = None  # the runs hold it from now on
        runs = _ValueRuns(order, values[order], docs[order])
        return self._extended_runs(runs) if runs.count != self.count else runs

    def _extended_runs(self, runs: _ValueRuns) -> _ValueRuns:
        covered = runs.order.size
        new_docs, new_values = self.pairs_since(covered)
        new_order = np.argsort(new_values, kind="stable").astype(np.uint32)
        if new_order.size <= covered * RECENT_RUN_SHARE:
            return _ValueRuns(runs.order, runs.values, runs.docs,
                              (new_values[new_order], new_docs[new_order], new_order + np.uint32(covered)))
        indexes = np.arange(covered, self.count, dtype=np.uint32)
        order, values, docs = _merge_sorted(runs.values, new_values, new_order, (runs.order, indexes),
                                            (runs.values, new_values), (runs.docs, new_docs))
        return _ValueRuns(order, values, docs)

    def sort_order(self) -> np.ndarray:
        """Indexes of ``pairs()`` in stable value order (uint32): what a snapshot saves. Without
        runs (no range or sort read the column yet) the order alone is made and kept, not the
        value-ordered pairs a search needs."""
        known = self.known_sort_order()
        if known is not None:
            return known
        with self._lock:
            if self._runs is not None:
                return self.value_runs().whole_order()
            order = self._order
            if order is None or order.size != self.count:
                order = self._order = np.argsort(self.pairs()[1], kind="stable").astype(np.uint32)
            return order

    def known_sort_order(self) -> np.ndarray | None:
        """:meth:`sort_order` if one was made since the last write, else None (nothing sorted here)."""
        runs, order = self._runs, self._order
        if runs is not None and runs.count == self.count:
            return runs.whole_order()
        return order if order is not None and order.size == self.count else None

    def load_order(self, order: np.ndarray) -> None:
        """Adopt a saved :meth:`sort_order` (ignored unless it fits the pairs)."""
        if order.size == self.count:
            self._order = order
            self._runs = None

    def range(self, low: float | None, low_inclusive: bool, high: float | None, high_inclusive: bool,
              within: AbstractBitMap | None = None) -> AbstractBitMap:
        """Docs with a value in the range (retired docs included unless ``within`` excludes them).

        Three ways, by size: docs of a small ``within`` set are checked directly (per-doc values, or
        their pairs for multi-valued fields); a narrow range is a slice of the value-sorted pairs;
        a wide range over a single-valued field is a vectorised scan of the per-doc values, which
        yields doc ids already sorted (cheaper for the bitmap than a large unsorted slice).
        """
        if within is not None and len(within) <= RANGE_CHECK_THRESHOLD:
            return self._check(array_from_bitmap(within), low, low_inclusive, high, high_inclusive, within)
        slices = []
        for values, docs in self.value_runs().runs():
            lo = 0 if low is None else int(np.searchsorted(values, low, side="left" if low_inclusive else "right"))
            hi = values.size if high is None else int(np.searchsorted(values, high, side="right" if high_inclusive else "left"))
            if hi > lo:
                slices.append(docs[lo:hi])
        if not slices:
            return BitMap()
        if not self.multi_valued and sum(map(len, slices)) * 8 > self.minimum.data.size:
            return self._check(None, low, low_inclusive, high, high_inclusive)
        return bitmap_from_array(slices[0] if len(slices) == 1 else np.concatenate(slices))

    def _check(self, docs: np.ndarray | None, low: float | None, low_inclusive: bool, high: float | None,
               high_inclusive: bool, within: AbstractBitMap | None = None) -> AbstractBitMap:
        if self.multi_valued and docs is not None:
            pair_docs, pair_values = self.pairs()
            start = np.searchsorted(pair_docs, docs, side="left")
            end = np.searchsorted(pair_docs, docs, side="right")
            lengths = end - start
            index = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(start - (np.cumsum(lengths) - lengths), lengths)
            candidates, values = pair_docs[index], pair_values[index]
        else:
            values = self.minimum.data if docs is None else self.minimum.data[docs[docs < self.minimum.data.size]]
            candidates = None if docs is None else docs[docs < self.minimum.data.size]
        inside = values_in_range(values, low, low_inclusive, high, high_inclusive)
        if (within is not None and docs is not None and candidates is not None and not self.multi_valued
                and 2 * int(inside.sum()) > docs.size):
            # Most of ``within`` passes: building the bitmap of the few that fail (a bitmap costs
            # per doc put in it) and taking them out is cheaper. Docs past the column have no value.
            return within - bitmap_from_array(np.concatenate((candidates[~inside], docs[docs >= self.minimum.data.size])))
        if candidates is None and np.count_nonzero(inside) >= inside.size * DENSE_MASK_SHARE:
            return bitmap_from_mask(inside)  # a wide range: the mask packed to roaring's containers
        # No np.unique: the bitmap takes the doc-sorted candidates (a multi-valued doc repeated) as they are.
        selected = np.flatnonzero(inside) if candidates is None else candidates[inside]
        return bitmap_from_array(selected)


def values_in_range(values: np.ndarray, low: float | None, low_inclusive: bool, high: float | None,
                    high_inclusive: bool) -> np.ndarray:
    """Which of ``values`` (NaN: none) are inside the range (a bound of None: open)."""
    inside: np.ndarray = ~np.isnan(values)
    if low is not None:
        inside &= (values >= low) if low_inclusive else (values > low)
    if high is not None:
        inside &= (values <= high) if high_inclusive else (values < high)
    return inside


#: A ``within`` set at most this large is checked doc by doc instead of slicing the whole range.
RANGE_CHECK_THRESHOLD = 50_000


class ValueColumn:
    """Exact values (short strings and booleans) of one field, each with a dense value id.

    Memory is what limits a schemaless engine that facets every field, so a value costs one dict
    entry and one list slot; nothing per value is built eagerly. The (doc, value id) pairs are the
    source of truth; a value-sorted view of them (built once per write, like numeric ranges) turns
    "docs with value v" into a binary search and a slice, and the folded forms used by equality
    filters and sorting are computed the first time a filter or sort needs them.
    """

    __slots__ = ("ids", "values", "_folded", "_by_folded", "_pairs", "_by_value",
                 "first", "docs", "_fold_rank", "_text_rank", "_sort_ranks", "version", "count", "_lock", "__weakref__")

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.version = 0
        #: Pairs so far (they are only ever appended).
        self.count = 0
        self.ids: dict[Any, int] = {}
        self.values: list[Any] = []
        self._folded: list[str] | None = None
        self._by_folded: dict[str, list[int]] | None = None
        #: Per doc, the value id of its first value (-1: none); 32 bits, as value ids are.
        self.first = GrowableArray(np.int32, -1)
        self._pairs = _Pairs(np.uint32, self.first)
        self._by_value: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.docs: AbstractBitMap = BitMap()
        self._fold_rank: np.ndarray | None = None
        #: Per value id, its rank by folded text alone (equal folded forms share a rank): sorting.
        self._text_rank: np.ndarray | None = None
        #: (smallest, largest, pairs covered): see :meth:`sort_ranks`.
        self._sort_ranks: tuple[np.ndarray, np.ndarray, int] | None = None

    def intern_many(self, keys: list[Any]) -> np.ndarray:
        """Value ids of ``keys`` (strings and booleans), registering new values in first-seen order.

        Known values resolve in one C-level ``map``. Booleans and strings never collide as keys: no
        int is ever stored here (True == 1 would).
        """
        get = self.ids.get
        found = np.fromiter(map(get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        absent = found < 0
        if absent.any():
            self.version += 1
            missing = list(compress(keys, absent.tolist()))
            new_values = list(dict.fromkeys(missing))
            start = len(self.values)
            self.ids.update(zip(new_values, range(start, start + len(new_values))))
            self.values.extend(new_values)
            if self._folded is not None:
                self._extend_folded(new_values, start)
            self._fold_rank = None
            self._text_rank = None
            self._sort_ranks = None
            found[absent] = np.fromiter(map(get, missing), dtype=np.int64, count=len(missing))
        return found

    def _extend_folded(self, new_values: list[Any], start: int) -> None:
        assert self._folded is not None and self._by_folded is not None
        strings = [value for value in new_values if not isinstance(value, bool)]
        folded_strings = iter(fold_many(strings))
        for offset, value in enumerate(new_values):
            if isinstance(value, bool):
                self._folded.append("true" if value else "false")
            else:
                folded = next(folded_strings)
                self._folded.append(folded)
                self._by_folded.setdefault(folded, []).append(start + offset)

    @property
    def folded(self) -> list[str]:
        """Folded form of every value (booleans as "true"/"false"), built on first use."""
        folded = self._folded
        if folded is None:
            with self._lock:
                if self._folded is None:
                    self._by_folded = {}
                    self._folded = []
                    self._extend_folded(self.values, 0)
                folded = self._folded
        return folded

    def add(self, docs: np.ndarray, value_ids: np.ndarray) -> None:
        """Add (doc, value id) pairs in doc order; a value repeated within one doc counts once."""
        if docs.size == 0:
            return
        # The first value of each doc in element order (grouping uses an array's first element).
        first_docs, first_index, in_order = _first_of_each_doc(docs)
        first_ids = value_ids[first_index]
        if in_order and first_docs.size == docs.size:  # one value per doc, in doc order: the pairs are sorted
            docs, value_ids = docs.astype(np.uint32), value_ids.astype(np.uint32)
        else:
            # Distinct (doc, value) pairs in (doc, value) order: one sort of the pairs packed in a
            # uint64 (docs and value ids fit 32 bits), several times faster than ``np.unique(..., axis=0)``.
            pairs = sorted_unique((docs.astype(np.uint64) << np.uint64(32)) | value_ids.astype(np.uint64))
            docs, value_ids = (pairs >> np.uint64(32)).astype(np.uint32), (pairs & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        self._pairs.append(docs, value_ids)
        self.first.ensure(int(first_docs[-1]) + 1)
        self.first.data[first_docs] = first_ids
        self.version += 1
        self.count = self._pairs.count
        self.docs |= bitmap_from_array(docs)

    def load_pairs(self, docs: np.ndarray, value_ids: np.ndarray) -> None:
        """Adopt saved (doc, value id) pairs (a snapshot's: an empty column)."""
        self._pairs.adopt(docs, value_ids)
        self.count = self._pairs.count

    def share_dense_pairs(self) -> None:
        """Once loaded: read the pairs from the per-doc first values when they hold them (``_Pairs``)."""
        docs, value_ids = self._pairs.view()
        if dense_pairs(docs, value_ids, self.first.data):
            self._pairs.adopt_dense(self.count, self.first)

    def pairs_since(self, start: int) -> tuple[np.ndarray, np.ndarray]:
        """(docs, value ids) of pairs ``start:`` (those appended since the column had ``start``)."""
        return self._pairs.since(start)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(docs, value ids) of every distinct value of every doc."""
        return self._pairs.view()

    def dense_values(self) -> np.ndarray | None:
        """While pair ``i`` is doc ``i`` (see ``_Pairs``): each pair's value id, a view, no copy."""
        return self._pairs.dense_values()

    def _value_view(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(docs ordered by value id, start offset per value id, end offset per value id):
        built once, then extended by the pairs added since (see :meth:`_extended_view`)."""
        found = self._by_value
        if found is None or found[0].size != self.count or found[1].size != len(self.values):
            with self._lock:
                found = self._by_value
                if found is not None and (found[0].size != self.count or found[1].size != len(self.values)):
                    found = self._extended_view(found)
                if found is None:
                    docs, value_ids = self.pairs()
                    order = np.argsort(value_ids, kind="stable")
                    sorted_ids = value_ids[order]
                    all_ids = np.arange(len(self.values), dtype=np.uint32)
                    starts = np.searchsorted(sorted_ids, all_ids, side="left")
                    ends = np.searchsorted(sorted_ids, all_ids, side="right")
                    found = (docs[order], starts, ends)
                self._by_value = found
        return found

    def _extended_view(self, found: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The value view with the pairs added since merged in: each after the older docs of its
        value, as the stable sort of all the pairs orders them."""
        docs, starts, ends = found
        new_docs, new_ids = self.pairs_since(docs.size)
        value_count = len(self.values)
        counts = np.zeros(value_count, dtype=np.int64)
        counts[:ends.size] = ends - starts
        old_ends = np.full(value_count, docs.size, dtype=np.int64)  # new values go after every old pair
        old_ends[:ends.size] = ends
        new_order = np.argsort(new_ids, kind="stable")
        merged = np.insert(docs, old_ends[new_ids[new_order]], new_docs[new_order])
        counts += np.bincount(new_ids, minlength=value_count)
        merged_ends = np.cumsum(counts)
        return merged, merged_ends - counts, merged_ends

    def value_docs(self, value_id: int) -> AbstractBitMap:
        """Docs holding value ``value_id`` (retired docs included: intersect with alive)."""
        docs, starts, ends = self._value_view()
        if value_id >= starts.size:
            return BitMap()
        return bitmap_from_array(docs[starts[value_id]:ends[value_id]])

    def value_count(self, value_id: int) -> int:
        _docs, starts, ends = self._value_view()
        return int(ends[value_id] - starts[value_id]) if value_id < starts.size else 0

    def folded_ids(self, folded: str) -> list[int]:
        """Value ids whose folded form is ``folded``."""
        self.folded  # noqa: B018 - builds the folded index on first use
        assert self._by_folded is not None
        return self._by_folded.get(folded, [])

    def equal_folded(self, folded: str) -> AbstractBitMap:
        value_ids = self.folded_ids(folded)
        if not value_ids:
            return EMPTY
        return union_all([self.value_docs(value_id) for value_id in value_ids])

    def equal_bool(self, value: bool) -> AbstractBitMap:
        # Only booleans and strings are keys here, and no string equals True or False.
        value_id = self.ids.get(value)
        return EMPTY if value_id is None else self.value_docs(value_id)

    def fold_rank(self) -> np.ndarray:
        """Per value id, its rank in folded order (ties by original value); computed once per new value."""
        found = self._fold_rank
        if found is None:
            with self._lock:
                if self._fold_rank is None:
                    folded = self.folded
                    order = sorted(range(len(self.values)), key=lambda vid: (folded[vid], str(self.values[vid])))
                    rank = np.empty(len(self.values), dtype=np.int64)
                    positions = np.asarray(order, dtype=np.int64)
                    rank[positions] = np.arange(len(order), dtype=np.int64)
                    # Dense rank of the folded text: a value sorts level with every value that
                    # folds to the same text (``Acme`` and ``acme``), so the next sort key decides.
                    text_rank = np.empty(len(self.values), dtype=np.int64)
                    changes = [0] + [1 if folded[order[i]] != folded[order[i - 1]] else 0 for i in range(1, len(order))]
                    text_rank[positions] = np.cumsum(np.asarray(changes, dtype=np.int64))[:len(order)]
                    self._sort_ranks = None
                    self._text_rank = text_rank
                    self._fold_rank = rank
                found = self._fold_rank
        return found

    def text_rank(self) -> np.ndarray:
        """Per value id, its rank by folded text alone: values that fold alike share a rank."""
        self.fold_rank()
        found = self._text_rank
        if found is None:  # a write between the two reads: take both again under the lock
            with self._lock:
                self.fold_rank()
                found = self._text_rank
        assert found is not None
        return found

    def sort_ranks(self) -> tuple[np.ndarray, np.ndarray]:
        """Per doc, the smallest and the largest text rank of its values (-1 where it has none).

        Ascending sorts use the smallest value of an array, descending ones the largest; computed
        from the pairs once, then extended by the pairs each write adds (a new value, which moves
        the ranks, makes them again), not per query.
        """
        found = self._sort_ranks
        if found is None or found[2] != self.count:
            with self._lock:
                rank = self.text_rank()  # a new fold rank forgets the sort ranks
                found = self._sort_ranks
                if found is None:
                    docs, value_ids = self.pairs()
                    found = (*_rank_extremes(np.full(self.first.data.size, np.iinfo(np.int64).max, dtype=np.int64),
                                             np.full(self.first.data.size, -1, dtype=np.int64), docs,
                                             rank[value_ids] if value_ids.size else np.empty(0, np.int64)),
                             self.count)
                elif found[2] != self.count:
                    found = self._extended_ranks(found, rank)
                self._sort_ranks = found
        return found[0], found[1]

    def _extended_ranks(self, found: tuple[np.ndarray, np.ndarray, int], rank: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """The sort ranks with the pairs added since (new docs, no new value) taken in; copies,
        as readers may hold the arrays."""
        smallest, largest, covered = found
        docs, value_ids = self.pairs_since(covered)
        size = max(self.first.data.size, smallest.size)
        grown_smallest = np.full(size, -1, dtype=np.int64)
        grown_largest = np.full(size, -1, dtype=np.int64)
        grown_smallest[:smallest.size] = smallest
        grown_largest[:largest.size] = largest
        grown_smallest[docs] = np.iinfo(np.int64).max  # new docs: no value before these
        return (*_rank_extremes(grown_smallest, grown_largest, docs, rank[value_ids]), self.count)


def _rank_extremes(smallest: np.ndarray, largest: np.ndarray, docs: np.ndarray, ranks: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Fold each pair's rank into its doc's smallest and largest (in place); docs left without
    any value (largest still -1) get -1 as their smallest too."""
    np.minimum.at(smallest, docs, ranks)
    np.maximum.at(largest, docs, ranks)
    smallest[largest < 0] = -1
    return smallest, largest


#: Held while a loaded field's columns are inflated on first use (one field at a time: rare).
_LOAD_LOCK = threading.Lock()


class FieldColumns:
    """The columns of one field path; either part may be absent.

    ``path`` and ``cache`` tie the columns to their index: structures derived from them for
    queries (per-value bitmaps, facet value search) are kept in the index's cache under ``path``.
    """

    __slots__ = ("_numeric", "_values", "exists", "has_text", "has_bool", "path", "cache", "_loader", "_unread")

    def __init__(self, path: str = "", cache: IndexCache | None = None) -> None:
        self.path = path
        self.cache = cache if cache is not None else IndexCache()
        self._numeric: NumericColumn | None = None
        self._values: ValueColumn | None = None
        self.exists: AbstractBitMap = FrozenBitMap()
        self.has_text = False  # ever held a string
        self.has_bool = False  # ever held a boolean
        #: Columns loaded from a snapshot and not read since: how to inflate them, and their
        #: saved state (a snapshot taken meanwhile saves it again as it is).
        self._loader: Callable[[], tuple[NumericColumn | None, ValueColumn | None]] | None = None
        self._unread: dict[str, Any] | None = None

    def load_on_first_use(self, loader: Callable[[], tuple[NumericColumn | None, ValueColumn | None]],
                          saved: dict[str, Any]) -> None:
        """Columns saved in a snapshot, inflated by ``loader`` the first time either is read or
        written (opening a collection then inflates none of them)."""
        self._loader, self._unread = loader, saved

    def unread_state(self) -> dict[str, Any] | None:
        """The saved state of columns loaded and not read since (None once read)."""
        return self._unread

    def _load(self) -> None:
        with _LOAD_LOCK:  # readers wanting the same columns wait for one inflation
            loader = self._loader
            if loader is not None:
                self._numeric, self._values = loader()
                self._loader = None  # after the columns: a reader seeing None finds them set
                self._unread = None

    @property
    def numeric(self) -> NumericColumn | None:
        if self._loader is not None:
            self._load()
        return self._numeric

    @numeric.setter
    def numeric(self, column: NumericColumn | None) -> None:
        if self._loader is not None:
            self._load()
        self._numeric = column

    @property
    def values(self) -> ValueColumn | None:
        if self._loader is not None:
            self._load()
        return self._values

    @values.setter
    def values(self, column: ValueColumn | None) -> None:
        if self._loader is not None:
            self._load()
        self._values = column

    def numeric_column(self) -> NumericColumn:
        if self.numeric is None:
            self.numeric = NumericColumn()
        return self.numeric

    def value_column(self) -> ValueColumn:
        if self.values is None:
            self.values = ValueColumn()
        return self.values
