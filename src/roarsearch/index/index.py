"""One collection's index: the doc store, lexicon, postings, positions and value columns, and the
read side that the query stages use.

Owns: the structures (filled by :mod:`roarsearch.index.writer`, the only mutator), their write
generation, the cache of everything queries derive from them (:class:`IndexCache`, stamped with
the generation), and the lookups of the ``FieldReader`` protocol of filters. Saving and loading
live in :mod:`roarsearch.index.state`; the integrity check in :mod:`roarsearch.index.integrity`.

Nothing mutable escapes: ``alive`` and ``exists`` are frozen bitmaps replaced by each write, and
postings lookups return new bitmaps.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection
from typing import Any

import msgpack
import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.analysis.normalize import fold_value
from roarsearch.index import writer
from roarsearch.index.bitmaps import EMPTY, array_from_bitmap, bitmap_from_array, sorted_unique, union_all
from roarsearch.index.cache import IndexCache
from roarsearch.index.columns import (
    MAX_VALUE_LENGTH,
    RANGE_CHECK_THRESHOLD,
    FieldColumns,
    NumericColumn,
    ValueColumn,
    values_in_range,
)
from roarsearch.index.docstore import DocStore, RecordId
from roarsearch.index.geo import GeoColumn
from roarsearch.index.lexicon import Lexicon
from roarsearch.index.merges import BULK_LOAD_MERGE_TOKENS
from roarsearch.index.postings import FieldPostings
from roarsearch.index.vectors import VectorIndex
from roarsearch.schema import RecordColumns
from roarsearch.scratch import ScratchSpace

#: Unions of many postings (prefixes, wide typo expansions) kept between writes.
WORD_UNION_CACHE_SIZE = 4096
#: Per-value bitmaps of equality filters kept between writes.
EQUAL_VALUE_CACHE_SIZE = 4096
#: Whole-column doc sets of numeric ranges kept between writes to their column (a range is kept
#: from the second time it is asked for, like Lucene's query cache: a filter a user interface
#: repeats, not every range typed once).
RANGE_CACHE_SIZE = 128
#: Text that names an integer id: ASCII digits only (``"²".isdigit()`` is true, ``int("²")`` fails),
#: and at most 19 of them, so that no text can overflow the float conversion.
INTEGER_TEXT = re.compile(r"[+-]?[0-9]{1,19}")


class Index:
    """The searchable state of one collection."""

    def __init__(self) -> None:
        self.docs = DocStore()
        self.lexicon = Lexicon()
        self.postings: dict[str, FieldPostings] = {}
        #: Where every field's background merges write their output: the collection's folder once
        #: it is durable (one object, shared with each field's postings), else memory.
        self.scratch = ScratchSpace()
        #: While a bulk load runs: merges of more tokens than this wait for its end (every field's,
        #: those it creates included).
        self.bulk_merge_limit: int | None = None
        self.columns: dict[str, FieldColumns] = {}
        #: Records' ``_geo`` points by doc id (contract §9).
        self.geo = GeoColumn()
        #: Records' ``_vectors`` by declared space and doc id (contract §11).
        self.vectors = VectorIndex()
        #: Fields that ever held a string, in order of first appearance (record by record): ``*``.
        self._text_fields: list[str] = []
        #: Advanced by every write; entries of ``cache`` made before it are never returned.
        self.generation = 0
        self.cache = IndexCache()
        #: Fields whose exact values (short strings, booleans) are indexed and kept up to date by
        #: every write. A field joins when it first appears (write time, see ``auto_value_fields``)
        #: or, if it was left out, on first use (facet, equality filter, sort, group).
        self.value_fields: set[str] = set()
        #: The value fields indexed since their first write rather than on demand: they leave
        #: ``value_fields`` once they exceed :data:`~roarsearch.index.columns.AUTO_VALUE_LIMIT`
        #: distinct values.
        self.auto_value_fields: set[str] = set()
        #: Whether fields new to the index are indexed at write time (the integrity check's rebuild
        #: turns it off and indexes exactly the original's value fields).
        self.auto_values = True
        self._value_build_lock = threading.Lock()

    # ------------------------------------------------------------------ writes (see index.writer)

    def add_records(self, records: list[dict[str, Any]], payloads: list[bytes] | None = None) -> None:
        """``payloads``: the records already encoded by :func:`~roarsearch.index.docstore.pack_records`."""
        writer.add_records(self, records, payloads)

    def collect_add(self, records: list[dict[str, Any]], start: int,
                    by_column: RecordColumns | None = None) -> writer.CollectedAdd:
        """An add batch's leaves for docs from ``start``, collected ahead (see :meth:`prepare_add`);
        ``by_column``: the batch as validation read it."""
        return writer.collect_add(self, records, start, by_column)

    def prepare_add(self, records: list[dict[str, Any]], payloads: list[bytes] | None = None,
                    ahead: writer.CollectedAdd | None = None) -> writer.PreparedAdd:
        """An add's work that changes nothing (searches may run meanwhile); then :meth:`commit_add`.
        ``ahead``: the batch collected (and maybe analysed) beforehand."""
        return writer.prepare_add(self, records, payloads, ahead)

    def commit_add(self, prepared: writer.PreparedAdd) -> None:
        writer.commit_add(self, prepared)

    def delete_ids(self, record_ids: list[RecordId]) -> list[bool]:
        return writer.delete_ids(self, record_ids)

    def delete_docs(self, docs: AbstractBitMap) -> int:
        return writer.delete_docs(self, docs)

    def advance_generation(self) -> None:
        """Called by the writer after each applied batch: every cached derivation is now stale."""
        self.generation += 1

    def merging(self) -> bool:
        """Whether a background postings merge is queued or running for some field."""
        return any(postings.merging for postings in list(self.postings.values()))

    def merges_landed(self) -> int:
        """Background postings merges landed in all fields (a state saved at a smaller count holds
        chunks merged since)."""
        return sum(postings.merges for postings in list(self.postings.values()))

    def begin_bulk_load(self) -> None:
        """Until :meth:`end_bulk_load`, leave big postings merges (more than
        ``BULK_LOAD_MERGE_TOKENS``) for the load's end: a load that makes up the collection merges
        everything once then, instead of rewriting each token once per tier on the way."""
        self.bulk_merge_limit = BULK_LOAD_MERGE_TOKENS
        for postings in list(self.postings.values()):
            postings.merge_limit = BULK_LOAD_MERGE_TOKENS

    def end_bulk_load(self, settle: bool) -> None:
        """Merge each field's postings into one chunk in the background (``settle``: the load made
        up most of the collection), or let the merges the load left waiting run."""
        self.bulk_merge_limit = None
        for postings in list(self.postings.values()):
            if settle:
                postings.settle()
            else:
                postings.resume_merges()

    def unsettled(self, chunks: int = 2) -> bool:
        """Whether some field's postings are in at least ``chunks`` chunks (see :meth:`end_bulk_load`)."""
        return any(postings.chunk_count() >= chunks for postings in list(self.postings.values()))

    def wait_for_merges(self) -> int:
        """Wait for the fields' background postings merges; returns :meth:`merges_landed`."""
        for postings in list(self.postings.values()):
            postings.wait_for_merges()
        return self.merges_landed()

    def note_text_fields(self, paths: list[str]) -> None:
        known = set(self._text_fields)
        self._text_fields.extend(path for path in paths if path not in known)

    # ------------------------------------------------------------------ reads

    @property
    def alive(self) -> FrozenBitMap:
        """Docs whose record is current (an immutable set, replaced by every write)."""
        return self.docs.alive

    def text_fields(self) -> list[str]:
        """Fields that ever held a string, in order of first appearance (the order of ``*``)."""
        return list(self._text_fields)

    def field_docs(self, path: str, term_ids: list[int]) -> AbstractBitMap:
        postings = self.postings.get(path)
        return EMPTY if postings is None else postings.bitmap(term_ids)

    def cached_union(self, key: tuple[Any, ...], build: Any) -> AbstractBitMap:
        """A union of many postings (a wide typo expansion) kept until the next write."""
        result: AbstractBitMap = self.cache.get_or_build("word_docs", key, self.generation, build, WORD_UNION_CACHE_SIZE)
        return result

    def prefix_docs(self, path: str, prefix: str) -> AbstractBitMap:
        """Docs with a term starting with ``prefix`` in field ``path``.

        Short prefixes expand to thousands of terms; their unions are cached until the next write so
        that search-as-you-type pays for a one- or two-letter prefix once, not on every keystroke.
        """
        postings = self.postings.get(path)
        if postings is None:
            return EMPTY
        result: AbstractBitMap = self.cache.get_or_build(
            "prefix_docs", (path, prefix), self.generation,
            lambda: postings.bitmap(self.lexicon.prefix_ids(prefix).tolist()), WORD_UNION_CACHE_SIZE)
        return result

    def phrase_docs(self, path: str, term_ids: tuple[int, ...]) -> AbstractBitMap:
        """Docs holding the terms ``term_ids`` at consecutive positions in field ``path`` (one array
        element: elements are :data:`~roarsearch.index.writer.ELEMENT_POSITION_GAP` apart), kept until the next write."""
        postings = self.postings.get(path)
        if postings is None or not term_ids:
            return EMPTY

        def build() -> AbstractBitMap:
            assert postings is not None
            docs = postings.bitmap([term_ids[0]])
            for term in term_ids[1:]:
                docs = docs & postings.bitmap([term])
                if not docs:
                    return BitMap()
            if len(term_ids) == 1:
                return docs
            doc_array = array_from_bitmap(docs).astype(np.int64)
            mask = np.zeros(int(doc_array[-1]) + 1, dtype=bool)
            mask[doc_array] = True
            starts: np.ndarray | None = None
            for offset, term in enumerate(term_ids):
                term_docs, positions = postings.occurrences(np.asarray([term], dtype=np.uint32), mask)
                shifted = positions.astype(np.int64) - offset
                keep = shifted >= 0
                keys = sorted_unique((term_docs.astype(np.int64)[keep] << 32) | shifted[keep])
                starts = keys if starts is None else np.intersect1d(starts, keys, assume_unique=True)
                if starts.size == 0:
                    return BitMap()
            assert starts is not None
            return BitMap(sorted_unique(starts >> 32).astype(np.uint32).tolist())

        result: AbstractBitMap = self.cache.get_or_build("phrase_docs", (path, term_ids), self.generation, build,
                                                 WORD_UNION_CACHE_SIZE)
        return result

    def value_column(self, path: str) -> ValueColumn | None:
        """The exact values of ``path``, indexing them from the stored records on first use.

        Most fields never get here: a field is indexed from its first write while it has at most
        :data:`~roarsearch.index.columns.AUTO_VALUE_LIMIT` distinct values. The others (names,
        titles, cast lists) would cost more memory than the rest of the index if all were kept,
        and a schemaless engine cannot know which will be faceted, filtered or sorted on: the
        first request that needs one pays a pass over the stored records (seconds per million
        records); every write after that maintains the column, and snapshots keep it.
        """
        columns = self.columns.get(path)
        if columns is None:
            return None
        if path in self.value_fields:
            return columns.values
        with self._value_build_lock:  # concurrent searches: one builds, the others wait for it
            if path not in self.value_fields:
                columns.values = self._build_value_column(path)
                self.value_fields.add(path)
        return columns.values

    def field_columns(self, path: str) -> FieldColumns | None:
        """The columns of ``path`` with its exact values indexed (see :meth:`value_column`)."""
        self.value_column(path)
        return self.columns.get(path)

    def _build_value_column(self, path: str) -> ValueColumn | None:
        columns = self.columns.get(path)
        if columns is None or not (columns.has_text or columns.has_bool):
            return None  # numbers only (a sort or numeric facet): no record needs reading
        parts = path.split(".")
        unpackb = msgpack.unpackb
        payload_of = self.docs.payload
        value_docs: list[int] = []
        value_keys: list[Any] = []
        top_level = parts[0] if len(parts) == 1 else None
        alive = self.alive
        for doc in alive:
            record = unpackb(payload_of(doc), raw=False, strict_map_key=False)
            if top_level is not None:  # the common case: a top-level scalar or array of scalars
                value = record.get(top_level)
                found = value if type(value) is list else (value,)
            else:
                found = []
                values_at(record, parts, found)
            for value in found:
                if type(value) is bool or (type(value) is str and len(value) <= MAX_VALUE_LENGTH):
                    value_docs.append(doc)
                    value_keys.append(value)
        if not value_keys:
            return None
        column = ValueColumn()
        column.add(np.asarray(value_docs, dtype=np.uint32), column.intern_many(value_keys))
        return column

    # FieldReader protocol (query.execute): filters evaluate through these. ``id`` is a field
    # like any other (contract §3), read from the doc store rather than from columns.

    def known_fields(self) -> Collection[str]:
        return self.columns.keys()

    def _ids(self) -> _IdColumns:
        found: _IdColumns = self.cache.get_or_build("id_columns", None, self.generation,
                                                    lambda: _IdColumns(self.docs), 1)
        return found

    def equal_number(self, field: str, value: float) -> AbstractBitMap:
        if field == "id":
            return self._ids().equal_number(value)
        columns = self.columns.get(field)
        if columns is None:
            return EMPTY
        found: list[AbstractBitMap] = []
        if columns.numeric is not None:
            found.append(columns.numeric.range(value, True, value, True))
        values = self.value_column(field) if value in (0, 1) else None
        if values is not None:
            found.append(values.equal_bool(bool(value)))
        return union_all(found)

    def equal_text(self, field: str, text: str) -> AbstractBitMap:
        if field == "id":
            return self._ids().equal_text(text)
        values = self.value_column(field)
        if values is None:
            return EMPTY
        folded = fold_value(text)

        def extend(found: AbstractBitMap, made_at: int) -> AbstractBitMap:
            docs, value_ids = values.pairs_since(made_at)
            wanted = values.folded_ids(folded)
            return _with_docs(found, docs[value_ids == wanted[0] if len(wanted) == 1 else np.isin(value_ids, wanted)])

        # A value's docs are the postings of a keyword field: built once (a bitmap costs per doc,
        # tens of microseconds per thousand), then extended by the docs each write adds.
        found: AbstractBitMap = self.cache.get_or_extend(
            "equal_text", (field, folded), values, values.count, lambda: FrozenBitMap(values.equal_folded(folded)),
            extend, EQUAL_VALUE_CACHE_SIZE)
        return found

    def equal_bool(self, field: str, value: bool) -> AbstractBitMap:
        values = self.value_column(field)
        return EMPTY if values is None else values.equal_bool(value)

    def number_range(self, field: str, low: float | None, low_inclusive: bool, high: float | None,
                     high_inclusive: bool, within: AbstractBitMap | None = None) -> AbstractBitMap:
        if field == "id":
            return self._ids().numbers.range(low, low_inclusive, high, high_inclusive, within)
        columns = self.columns.get(field)
        if columns is None or columns.numeric is None:
            return EMPTY
        numeric = columns.numeric
        key = (field, low, low_inclusive, high, high_inclusive)

        def extend(found: AbstractBitMap, made_at: int) -> AbstractBitMap:
            docs, values = numeric.pairs_since(made_at)
            return _with_docs(found, docs[values_in_range(values, low, low_inclusive, high, high_inclusive)])

        # Kept and extended by the docs each write adds (the range's docs before it are the same).
        cached = self.cache.extended("number_range", key, numeric, numeric.count, extend, RANGE_CACHE_SIZE)
        if cached is not None:
            return cached  # a superset of the answer inside ``within``: callers intersect
        if within is not None and len(within) <= RANGE_CHECK_THRESHOLD and \
                self.cache.get("number_range_seen", key, id(numeric)) is None:
            # First time: checking the few docs of ``within`` costs less than the whole column.
            self.cache.put("number_range_seen", key, id(numeric), True, RANGE_CACHE_SIZE)
            return numeric.range(low, low_inclusive, high, high_inclusive, within)
        found = FrozenBitMap(numeric.range(low, low_inclusive, high, high_inclusive))
        self.cache.put_derived("number_range", key, numeric, numeric.count, found, RANGE_CACHE_SIZE)
        return found

    def single_valued_numbers(self, field: str) -> bool:
        """Whether no record holds two numbers in ``field`` (a range's two bounds then hold for
        one value, so they may be looked up as one range)."""
        if field == "id":
            return True
        columns = self.columns.get(field)
        return columns is not None and columns.numeric is not None and not columns.numeric.multi_valued

    def exists(self, field: str) -> AbstractBitMap:
        if field == "id":
            return self.alive
        columns = self.columns.get(field)
        return EMPTY if columns is None else columns.exists


def _with_docs(found: AbstractBitMap, docs: np.ndarray) -> AbstractBitMap:
    """A kept doc set with the docs a write added to it (itself when none)."""
    return FrozenBitMap(found | bitmap_from_array(docs)) if docs.size else found


def values_at(value: Any, parts: list[str], found: list[Any]) -> None:
    """Append the scalar values at dotted path ``parts`` of ``value`` (arrays are walked through)."""
    if isinstance(value, list):
        for element in value:
            values_at(element, parts, found)
    elif not parts:
        if value is not None and not isinstance(value, dict):
            found.append(value)
    elif isinstance(value, dict):
        if parts[0] in value:
            values_at(value[parts[0]], parts[1:], found)
        elif len(parts) > 1 and ".".join(parts) in value:  # a key that itself contains dots
            values_at(value[".".join(parts)], [], found)




class _IdColumns:
    """Record ids of the alive docs as filter columns: integer ids as numbers, string ids folded."""

    def __init__(self, docs: DocStore) -> None:
        record_ids = docs.record_ids
        self.folded: dict[str, list[int]] = {}
        self.numbers = NumericColumn()
        compact = record_ids.int_array()
        if compact is not None:  # every id an integer: one vectorised gather
            alive = array_from_bitmap(docs.alive)
            self.numbers.add(alive.astype(np.uint32), compact[alive].astype(np.float64))
            return
        int_docs: list[int] = []
        int_values: list[int] = []
        for doc in docs.alive:
            record_id = record_ids[doc]
            if isinstance(record_id, int):
                int_docs.append(doc)
                int_values.append(record_id)
            elif record_id is not None:
                self.folded.setdefault(fold_value(record_id), []).append(doc)
        self.numbers.add(np.asarray(int_docs, dtype=np.uint32), np.asarray(int_values, dtype=np.float64))

    def equal_number(self, value: float) -> AbstractBitMap:
        return self.numbers.range(value, True, value, True)

    def equal_text(self, text: str) -> AbstractBitMap:
        found = BitMap(self.folded.get(fold_value(text), []))
        stripped = text.strip()
        if INTEGER_TEXT.fullmatch(stripped):  # "5" also names the integer id 5, as for any field
            found |= self.equal_number(float(int(stripped)))
        return found
