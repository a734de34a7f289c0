"""One collection's index: the doc store, lexicon, postings, positions and value columns.

Owns: the only mutation paths (:meth:`Index.add_records`, :meth:`Index.delete_ids`,
:meth:`Index.delete_docs`), each applying an already validated batch completely, and the read
side that the query stages use (field lookups, the ``FieldReader`` protocol of filters).

Data flow of an add: records → doc ids and msgpack payloads (``DocStore``) → leaves by field path
(``schema.iter_leaves``) → strings analysed per field in one batch call → term ids (``Lexicon``)
→ postings and positions (``FieldPostings``); numbers, short strings and booleans → columns.
The only per-record Python work is walking each record's leaves once.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from pyroaring import BitMap

from roarsearch.analysis.analyzer import analyze_batch
from roarsearch.analysis.normalize import fold_value
from roarsearch.index.bitmaps import EMPTY, union_all
from roarsearch.index.columns import MAX_VALUE_LENGTH, FieldColumns
from roarsearch.index.docstore import DocStore, RecordId
from roarsearch.index.postings import FieldPostings
from roarsearch.schema import iter_leaves

try:
    from roarsearch.index.lexicon import Lexicon
except ImportError:  # pragma: no cover - until the lexicon module lands
    from roarsearch.index._lexicon_interim import Lexicon  # type: ignore[assignment]

#: Positions of successive values of one field (array elements) are this far apart, so that
#: proximity never rewards words that sit in different elements.
ELEMENT_POSITION_GAP = 1024
#: Prefix unions kept between writes (see ``Index.prefix_docs``).
PREFIX_CACHE_SIZE = 4096


class _BatchFields:
    """Leaves of one batch grouped by field path, in doc order."""

    __slots__ = ("text_docs", "text_positions", "texts", "number_docs", "numbers", "value_docs", "value_keys", "present")

    def __init__(self) -> None:
        self.text_docs: list[int] = []
        self.text_positions: list[int] = []
        self.texts: list[str] = []
        self.number_docs: list[int] = []
        self.numbers: list[float] = []
        self.value_docs: list[int] = []
        self.value_keys: list[Any] = []
        self.present: list[int] = []


def _fields_of(by_field: dict[str, _BatchFields], path: str) -> _BatchFields:
    fields = by_field.get(path)
    if fields is None:
        fields = by_field[path] = _BatchFields()
    return fields


def _add_text(fields: _BatchFields, path: str, doc: int, element: int, value: str, first_texts: list[str]) -> None:
    if not fields.texts:
        first_texts.append(path)
    fields.text_docs.append(doc)
    fields.text_positions.append(element * ELEMENT_POSITION_GAP)
    fields.texts.append(value)
    if len(value) <= MAX_VALUE_LENGTH:
        fields.value_docs.append(doc)
        fields.value_keys.append(value)


def _collect_flat(doc: int, record: dict[str, Any], by_field: dict[str, _BatchFields], first_texts: list[str]) -> bool:
    """Collect a record whose values are scalars or arrays of scalars (the common shape) without
    the generic leaf walk; returns False, having collected nothing, for any other shape."""
    for key, value in record.items():
        kind = type(value)
        if kind is dict or (kind is list and any(type(element) in (dict, list) for element in value)):
            return False
    for key, value in record.items():
        if key == "id" or value is None:
            continue
        kind = type(value)
        fields = _fields_of(by_field, key)
        if kind is list:
            elements = [element for element in value if element is not None]
            if not elements:
                continue
            fields.present.append(doc)
            for element_index, element in enumerate(elements):
                _add_leaf(fields, key, doc, element_index, element, first_texts)
        else:
            fields.present.append(doc)
            _add_leaf(fields, key, doc, 0, value, first_texts)
    return True


def _add_leaf(fields: _BatchFields, path: str, doc: int, element: int, value: Any, first_texts: list[str]) -> None:
    if type(value) is str:
        _add_text(fields, path, doc, element, value, first_texts)
    elif type(value) is bool:
        fields.value_docs.append(doc)
        fields.value_keys.append(value)
    else:
        fields.number_docs.append(doc)
        fields.numbers.append(float(value))


def _collect_nested(doc: int, record: dict[str, Any], by_field: dict[str, _BatchFields], first_texts: list[str]) -> None:
    for path, element, value in iter_leaves(record):
        fields = _fields_of(by_field, path)
        fields.present.append(doc)
        _add_leaf(fields, path, doc, element, value, first_texts)


class Index:
    """The searchable state of one collection."""

    def __init__(self) -> None:
        self.docs = DocStore()
        self.lexicon = Lexicon()
        self.postings: dict[str, FieldPostings] = {}
        self.columns: dict[str, FieldColumns] = {}
        #: Fields that ever held a string, in order of first appearance (record by record): ``*``.
        self._text_fields: list[str] = []
        #: Incremented by every write; caches derived from the index key on it.
        self.generation = 0
        self._prefix_cache: dict[tuple[str, str], BitMap] = {}
        self._prefix_cache_generation = -1

    # ------------------------------------------------------------------ writes

    def add_records(self, records: list[dict[str, Any]]) -> None:
        """Insert or replace validated records (the last of repeated ids wins)."""
        new_docs, _replaced = self.docs.add(records)
        by_field: dict[str, _BatchFields] = {}
        first_texts: list[str] = []
        for doc, record in zip(new_docs.tolist(), records):
            if not _collect_flat(doc, record, by_field, first_texts):
                _collect_nested(doc, record, by_field, first_texts)
        for path, fields in by_field.items():
            self._add_field(path, fields)
        known = set(self._text_fields)
        self._text_fields.extend(path for path in first_texts if path not in known)
        self.generation += 1

    def _add_field(self, path: str, fields: _BatchFields) -> None:
        columns = self.columns.get(path)
        if columns is None:
            columns = self.columns[path] = FieldColumns()
        columns.exists.update(fields.present)
        if fields.texts:
            columns.has_text = True
            tokens, value_index, token_position = analyze_batch(fields.texts)
            if tokens:
                term_ids = self.lexicon.intern_many(tokens)
                docs = np.asarray(fields.text_docs, dtype=np.uint32)[value_index]
                positions = token_position + np.asarray(fields.text_positions, dtype=np.int64)[value_index]
                postings = self.postings.get(path)
                if postings is None:
                    postings = self.postings[path] = FieldPostings()
                postings.add(docs, term_ids, positions.astype(np.uint32))
        if fields.numbers:
            columns.numeric_column().add(np.asarray(fields.number_docs, dtype=np.uint32), np.asarray(fields.numbers))
        if fields.value_keys:
            value_column = columns.value_column()
            value_ids = value_column.intern_many(fields.value_keys)
            value_column.add(np.asarray(fields.value_docs, dtype=np.uint32), value_ids)

    def delete_ids(self, record_ids: list[RecordId]) -> list[bool]:
        found = self.docs.remove(record_ids)
        self.generation += 1
        return found

    def delete_docs(self, docs: BitMap) -> int:
        deleted = self.docs.remove_docs(docs)
        self.generation += 1
        return deleted

    # ------------------------------------------------------------------ reads

    @property
    def alive(self) -> BitMap:
        return self.docs.alive

    def text_fields(self) -> list[str]:
        """Fields that ever held a string, in order of first appearance (the order of ``*``)."""
        return self._text_fields

    def field_docs(self, path: str, term_ids: list[int]) -> BitMap:
        postings = self.postings.get(path)
        return EMPTY if postings is None else postings.bitmap(term_ids)

    def prefix_docs(self, path: str, prefix: str) -> BitMap:
        """Docs with a term starting with ``prefix`` in field ``path``.

        Short prefixes expand to thousands of terms; their unions are cached until the next write so
        that search-as-you-type pays for a one- or two-letter prefix once, not on every keystroke.
        """
        postings = self.postings.get(path)
        if postings is None:
            return EMPTY
        if self._prefix_cache_generation != self.generation:
            self._prefix_cache = {}
            self._prefix_cache_generation = self.generation
        key = (path, prefix)
        cached = self._prefix_cache.get(key)
        if cached is None:
            cached = postings.bitmap(self.lexicon.prefix_ids(prefix).tolist())
            if len(self._prefix_cache) >= PREFIX_CACHE_SIZE:
                self._prefix_cache.clear()
            self._prefix_cache[key] = cached
        return cached

    # FieldReader protocol (query.execute): filters evaluate through these.

    def known_fields(self) -> Collection[str]:
        return self.columns.keys()

    def equal_number(self, field: str, value: float) -> BitMap:
        columns = self.columns.get(field)
        if columns is None:
            return EMPTY
        found: list[BitMap] = []
        if columns.numeric is not None:
            found.append(columns.numeric.range(value, True, value, True))
        if columns.values is not None and value in (0, 1):
            found.append(columns.values.equal_bool(bool(value)))
        return union_all(found)

    def equal_text(self, field: str, text: str) -> BitMap:
        columns = self.columns.get(field)
        if columns is None or columns.values is None:
            return EMPTY
        return columns.values.equal_folded(fold_value(text))

    def equal_bool(self, field: str, value: bool) -> BitMap:
        columns = self.columns.get(field)
        if columns is None or columns.values is None:
            return EMPTY
        return columns.values.equal_bool(value)

    def number_range(self, field: str, low: float | None, low_inclusive: bool, high: float | None, high_inclusive: bool) -> BitMap:
        columns = self.columns.get(field)
        if columns is None or columns.numeric is None:
            return EMPTY
        return columns.numeric.range(low, low_inclusive, high, high_inclusive)

    def exists(self, field: str) -> BitMap:
        columns = self.columns.get(field)
        return EMPTY if columns is None else columns.exists
