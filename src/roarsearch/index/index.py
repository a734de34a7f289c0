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

import threading
from collections.abc import Collection
from typing import Any

import msgpack
import numpy as np
from pyroaring import BitMap

from roarsearch.analysis.analyzer import analyze_batch
from roarsearch.analysis.normalize import fold_value
from roarsearch.index.bitmaps import EMPTY, bitmap_from_array, union_all
from roarsearch.index.columns import MAX_VALUE_LENGTH, FieldColumns, ValueColumn
from roarsearch.index.docstore import DocStore, RecordId
from roarsearch.index.postings import FieldPostings
from roarsearch.schema import iter_leaves

from roarsearch.index.lexicon import Lexicon

#: Positions of successive values of one field (array elements) are this far apart, so that
#: proximity never rewards words that sit in different elements.
ELEMENT_POSITION_GAP = 1024
#: Prefix unions kept between writes (see ``Index.prefix_docs``).
PREFIX_CACHE_SIZE = 4096


class _BatchFields:
    """Leaves of one batch grouped by field path, in doc order."""

    __slots__ = ("text_docs", "text_positions", "texts", "number_docs", "numbers", "value_docs", "value_keys",
                 "present", "keep_values", "has_bool")

    def __init__(self, keep_values: bool) -> None:
        #: Whether the field's exact values are indexed (see ``Index.value_column``); if not, none
        #: are collected.
        self.keep_values = keep_values
        self.has_bool = False
        self.text_docs: list[int] = []
        self.text_positions: list[int] = []
        self.texts: list[str] = []
        self.number_docs: list[int] = []
        self.numbers: list[float] = []
        self.value_docs: list[int] = []
        self.value_keys: list[Any] = []
        self.present: list[int] = []


def _fields_of(by_field: dict[str, _BatchFields], path: str, value_fields: set[str]) -> _BatchFields:
    fields = by_field.get(path)
    if fields is None:
        fields = by_field[path] = _BatchFields(path in value_fields)
    return fields


def _add_text(fields: _BatchFields, path: str, doc: int, element: int, value: str, first_texts: list[str]) -> None:
    if not fields.texts:
        first_texts.append(path)
    fields.text_docs.append(doc)
    fields.text_positions.append(element * ELEMENT_POSITION_GAP)
    fields.texts.append(value)
    if fields.keep_values and len(value) <= MAX_VALUE_LENGTH:
        fields.value_docs.append(doc)
        fields.value_keys.append(value)


def _add_texts(fields: _BatchFields, path: str, doc: int, values: list[str], first_texts: list[str]) -> None:
    """An array of strings in a few list operations instead of one call per element."""
    if not fields.texts:
        first_texts.append(path)
    count = len(values)
    fields.text_docs.extend([doc] * count)
    fields.text_positions.extend(range(0, count * ELEMENT_POSITION_GAP, ELEMENT_POSITION_GAP))
    fields.texts.extend(values)
    if fields.keep_values:
        short = [value for value in values if len(value) <= MAX_VALUE_LENGTH]
        fields.value_docs.extend([doc] * len(short))
        fields.value_keys.extend(short)


def _collect_flat(doc: int, record: dict[str, Any], by_field: dict[str, _BatchFields], first_texts: list[str],
                  value_fields: set[str]) -> bool:
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
        fields = _fields_of(by_field, key, value_fields)
        if kind is list:
            elements = [element for element in value if element is not None]
            if not elements:
                continue
            fields.present.append(doc)
            if all(type(element) is str for element in elements):
                _add_texts(fields, key, doc, elements, first_texts)
                continue
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
        fields.has_bool = True
        if fields.keep_values:
            fields.value_docs.append(doc)
            fields.value_keys.append(value)
    else:
        fields.number_docs.append(doc)
        fields.numbers.append(float(value))


def _values_at(value: Any, parts: list[str], found: list[Any]) -> None:
    """Append the scalar values at dotted path ``parts`` of ``value`` (arrays are walked through)."""
    if isinstance(value, list):
        for element in value:
            _values_at(element, parts, found)
    elif not parts:
        if value is not None and not isinstance(value, dict):
            found.append(value)
    elif isinstance(value, dict):
        if parts[0] in value:
            _values_at(value[parts[0]], parts[1:], found)
        elif len(parts) > 1 and ".".join(parts) in value:  # a key that itself contains dots
            _values_at(value[".".join(parts)], [], found)


def _collect_nested(doc: int, record: dict[str, Any], by_field: dict[str, _BatchFields], first_texts: list[str],
                    value_fields: set[str]) -> None:
    for path, element, value in iter_leaves(record):
        fields = _fields_of(by_field, path, value_fields)
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
        self._word_docs_cache: dict[tuple[Any, ...], BitMap] = {}
        self._prefix_cache_generation = -1
        #: Fields whose exact values (short strings, booleans) are indexed. A field joins on first
        #: use (facet, equality filter, sort, group) and is then kept up to date by every write.
        self._value_fields: set[str] = set()
        self._value_build_lock = threading.Lock()

    # ------------------------------------------------------------------ writes

    def add_records(self, records: list[dict[str, Any]]) -> None:
        """Insert or replace validated records (the last of repeated ids wins)."""
        new_docs, _replaced = self.docs.add(records)
        by_field: dict[str, _BatchFields] = {}
        first_texts: list[str] = []
        value_fields = self._value_fields
        for doc, record in zip(new_docs.tolist(), records):
            if not _collect_flat(doc, record, by_field, first_texts, value_fields):
                _collect_nested(doc, record, by_field, first_texts, value_fields)
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
        columns.has_bool |= fields.has_bool
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
        if fields.value_keys and path in self._value_fields:
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

    def word_docs_cache_get(self, key: tuple[Any, ...]) -> BitMap | None:
        """A word's docs (a union of many postings) computed by an earlier query since the last write."""
        if self._prefix_cache_generation != self.generation:
            return None
        return self._word_docs_cache.get(key)

    def word_docs_cache_put(self, key: tuple[Any, ...], docs: BitMap) -> None:
        if self._prefix_cache_generation != self.generation:
            self._prefix_cache, self._word_docs_cache = {}, {}
            self._prefix_cache_generation = self.generation
        if len(self._word_docs_cache) >= PREFIX_CACHE_SIZE:
            self._word_docs_cache.clear()
        self._word_docs_cache[key] = docs

    def prefix_docs(self, path: str, prefix: str) -> BitMap:
        """Docs with a term starting with ``prefix`` in field ``path``.

        Short prefixes expand to thousands of terms; their unions are cached until the next write so
        that search-as-you-type pays for a one- or two-letter prefix once, not on every keystroke.
        """
        postings = self.postings.get(path)
        if postings is None:
            return EMPTY
        if self._prefix_cache_generation != self.generation:
            self._prefix_cache, self._word_docs_cache = {}, {}
            self._prefix_cache_generation = self.generation
        key = (path, prefix)
        cached = self._prefix_cache.get(key)
        if cached is None:
            cached = postings.bitmap(self.lexicon.prefix_ids(prefix).tolist())
            if len(self._prefix_cache) >= PREFIX_CACHE_SIZE:
                self._prefix_cache.clear()
            self._prefix_cache[key] = cached
        return cached

    def value_column(self, path: str) -> ValueColumn | None:
        """The exact values of ``path``, indexing them from the stored records on first use.

        Why lazily: a schemaless engine cannot know which of its string fields will be faceted,
        filtered or sorted on, and indexing every distinct string of every field (names, titles,
        cast lists) costs more memory than the rest of the index. The first request that needs a
        field pays one pass over the stored records (about a second per million records); every
        write after that maintains the column, and snapshots keep it.
        """
        columns = self.columns.get(path)
        if columns is None:
            return None
        if path in self._value_fields:
            return columns.values
        with self._value_build_lock:  # concurrent searches: one builds, the others wait for it
            if path not in self._value_fields:
                columns.values = self._build_value_column(path)
                self._value_fields.add(path)
        return columns.values

    def field_columns(self, path: str) -> FieldColumns | None:
        """The columns of ``path`` with its exact values indexed (see :meth:`value_column`)."""
        self.value_column(path)
        return self.columns.get(path)

    def _build_value_column(self, path: str) -> ValueColumn | None:
        parts = path.split(".")
        unpackb = msgpack.unpackb
        payloads = self.docs.payloads
        value_docs: list[int] = []
        value_keys: list[Any] = []
        top_level = parts[0] if len(parts) == 1 else None
        for doc, payload in zip(self.alive, map(payloads.__getitem__, self.alive)):
            record = unpackb(payload, raw=False, strict_map_key=False)
            if top_level is not None:  # the common case: a top-level scalar or array of scalars
                value = record.get(top_level)
                found = value if type(value) is list else (value,)
            else:
                found = []
                _values_at(record, parts, found)
            for value in found:
                if type(value) is bool or (type(value) is str and len(value) <= MAX_VALUE_LENGTH):
                    value_docs.append(doc)
                    value_keys.append(value)
        if not value_keys:
            return None
        column = ValueColumn()
        column.add(np.asarray(value_docs, dtype=np.uint32), column.intern_many(value_keys))
        return column

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
        values = self.value_column(field) if value in (0, 1) else None
        if values is not None:
            found.append(values.equal_bool(bool(value)))
        return union_all(found)

    def equal_text(self, field: str, text: str) -> BitMap:
        values = self.value_column(field)
        return EMPTY if values is None else values.equal_folded(fold_value(text))

    def equal_bool(self, field: str, value: bool) -> BitMap:
        values = self.value_column(field)
        return EMPTY if values is None else values.equal_bool(value)

    def number_range(self, field: str, low: float | None, low_inclusive: bool, high: float | None,
                     high_inclusive: bool, within: BitMap | None = None) -> BitMap:
        columns = self.columns.get(field)
        if columns is None or columns.numeric is None:
            return EMPTY
        return columns.numeric.range(low, low_inclusive, high, high_inclusive, within)

    def exists(self, field: str) -> BitMap:
        columns = self.columns.get(field)
        return EMPTY if columns is None else columns.exists


# ---------------------------------------------------------------------- state (snapshots)

INDEX_STATE_VERSION = 1


def _bytes(array: np.ndarray) -> memoryview:
    # A view, not a copy: the snapshot writer streams it straight from the array's buffer.
    return memoryview(np.ascontiguousarray(array)).cast("B")


def _array(buffer: bytes, dtype: type) -> np.ndarray:
    return np.frombuffer(buffer, dtype=dtype).copy()


def index_to_state(index: Index) -> dict[str, Any]:
    """The whole index as msgpack-ready data: bitmaps serialised, numpy arrays as raw buffers.

    Layout (version 1): ``docs`` (record ids, msgpack payloads, alive bitmap, id-order flag),
    ``lexicon`` (the lexicon's own state), ``text_fields``, ``postings`` per field (term ids,
    their bitmaps serialised back to back with offsets, the flat token arrays and per-doc token
    ranges), ``columns`` per field (exists bitmap, numeric pairs and per-doc min/max, exact values
    with their pairs and per-doc first value id).
    """
    docstore = index.docs
    postings_state: dict[str, Any] = {}
    for path, postings in index.postings.items():
        all_terms = postings.all_terms()
        term_ids = np.fromiter(sorted(all_terms), dtype=np.uint32, count=len(all_terms))
        blobs = [all_terms[term].serialize() for term in term_ids.tolist()]
        offsets = np.zeros(len(blobs) + 1, dtype=np.uint64)
        np.cumsum([len(blob) for blob in blobs], out=offsets[1:])
        token_terms, token_docs, token_positions = postings.token_arrays()
        postings_state[path] = {
            "term_ids": _bytes(term_ids), "bitmaps": b"".join(blobs), "offsets": _bytes(offsets),
            "field_docs": postings.docs.serialize(),
            "token_terms": _bytes(token_terms), "token_docs": _bytes(token_docs),
            "token_positions": _bytes(token_positions),
        }
    columns_state: dict[str, Any] = {}
    for path, columns in index.columns.items():
        state: dict[str, Any] = {"exists": columns.exists.serialize(), "has_text": columns.has_text,
                                 "has_bool": columns.has_bool}
        if columns.numeric is not None:
            docs, values = columns.numeric.pairs()
            state["numeric"] = {"docs": _bytes(docs), "values": _bytes(values),
                                "min": _bytes(columns.numeric.minimum.data), "max": _bytes(columns.numeric.maximum.data)}
        if columns.values is not None:
            docs, value_ids = columns.values.pairs()
            state["values"] = {"values": columns.values.values, "docs": _bytes(docs), "vids": _bytes(value_ids),
                               "first": _bytes(columns.values.first.data)}
        columns_state[path] = state
    return {
        "version": INDEX_STATE_VERSION,
        "docs": {"record_ids": docstore.record_ids, "payloads": docstore.payloads,
                 "alive": docstore.alive.serialize(), "ids_in_doc_order": docstore.ids_in_doc_order,
                 "last_id": None if docstore._last_id_key is None else docstore._last_id_key[1]},
        "lexicon": index.lexicon.to_state(),
        "text_fields": index._text_fields,
        "value_fields": sorted(index._value_fields),
        "postings": postings_state,
        "columns": columns_state,
    }


def index_from_state(state: dict[str, Any]) -> Index:
    """Rebuild an :class:`Index` from :func:`index_to_state` output without re-analysing records."""
    from roarsearch.index.columns import NumericColumn
    from roarsearch.index.docstore import id_sort_key

    if state.get("version") != INDEX_STATE_VERSION:
        raise ValueError(f"unsupported index state version {state.get('version')!r}")
    index = Index()
    docs_state = state["docs"]
    docstore = index.docs
    docstore.record_ids = list(docs_state["record_ids"])
    docstore.payloads = list(docs_state["payloads"])
    docstore.alive = BitMap.deserialize(docs_state["alive"])
    docstore.doc_of = {record_id: doc for doc, record_id in enumerate(docstore.record_ids) if record_id is not None}
    docstore.ids_in_doc_order = bool(docs_state["ids_in_doc_order"])
    last_id = docs_state["last_id"]
    docstore._last_id_key = None if last_id is None else id_sort_key(last_id)
    index.lexicon = Lexicon.from_state(state["lexicon"])
    index._text_fields = list(state["text_fields"])
    index._value_fields = set(state.get("value_fields", []))
    for path, saved in state["postings"].items():
        postings = FieldPostings()
        postings.load_saved(np.frombuffer(saved["term_ids"], dtype=np.uint32),
                            np.frombuffer(saved["offsets"], dtype=np.uint64), saved["bitmaps"])
        postings.docs = BitMap.deserialize(saved["field_docs"])
        postings.load_token_arrays(_array(saved["token_terms"], np.uint32), _array(saved["token_docs"], np.uint32),
                                   _array(saved["token_positions"], np.uint32))
        index.postings[path] = postings
    for path, saved in state["columns"].items():
        columns = FieldColumns()
        columns.exists = BitMap.deserialize(saved["exists"])
        columns.has_text = bool(saved["has_text"])
        columns.has_bool = bool(saved.get("has_bool", False))
        if "numeric" in saved:
            numeric = NumericColumn()
            docs = _array(saved["numeric"]["docs"], np.uint32)
            numeric._docs, numeric._values = [docs], [_array(saved["numeric"]["values"], np.float64)]
            numeric.minimum.data = _array(saved["numeric"]["min"], np.float64)
            numeric.maximum.data = _array(saved["numeric"]["max"], np.float64)
            numeric.docs = bitmap_from_array(docs)
            columns.numeric = numeric
        if "values" in saved:
            values = ValueColumn()
            values.values = list(saved["values"]["values"])
            values.ids = {value: value_id for value_id, value in enumerate(values.values)}
            docs = _array(saved["values"]["docs"], np.uint32)
            values._docs, values._vids = [docs], [_array(saved["values"]["vids"], np.uint32)]
            values.first.data = _array(saved["values"]["first"], np.int64)
            values.docs = bitmap_from_array(docs)
            columns.values = values
        index.columns[path] = columns
    return index


def compare_indexes(loaded: Index, rebuilt: Index) -> list[str]:
    """Differences between two indexes of the same records, compared by record id (doc ids differ).

    Used by ``check()``: ``rebuilt`` is made from the stored records alone, so any difference means
    the loaded index does not answer queries as its records say it should.
    """
    problems: list[str] = []

    def record_ids(index: Index, docs: BitMap) -> set[Any]:
        live = docs & index.alive
        ids = index.docs.record_ids
        return {ids[doc] for doc in live}

    loaded_ids = record_ids(loaded, loaded.alive)
    rebuilt_ids = record_ids(rebuilt, rebuilt.alive)
    if loaded_ids != rebuilt_ids:
        problems.append(f"records: {len(loaded_ids ^ rebuilt_ids)} record ids differ between the index and the stored records")
    for path in sorted(set(loaded.postings) | set(rebuilt.postings)):
        left, right = loaded.postings.get(path), rebuilt.postings.get(path)
        left_terms = {} if left is None else {loaded.lexicon.term_of(t): b for t, b in left.all_terms().items()}
        right_terms = {} if right is None else {rebuilt.lexicon.term_of(t): b for t, b in right.all_terms().items()}
        for term in sorted(set(left_terms) | set(right_terms)):
            a = record_ids(loaded, left_terms.get(term, BitMap()))
            b = record_ids(rebuilt, right_terms.get(term, BitMap()))
            if a != b:
                problems.append(f"postings {path!r} term {term!r}: index has {len(a)} live records, stored records give {len(b)}")
                if len(problems) > 100:
                    return problems + ["... (more differences not listed)"]
    for path in sorted(set(loaded.columns) | set(rebuilt.columns)):
        for name, reader in (("exists", lambda ix: ix.exists(path)),):
            a, b = record_ids(loaded, reader(loaded)), record_ids(rebuilt, reader(rebuilt))
            if a != b:
                problems.append(f"column {path!r} {name}: {len(a ^ b)} records differ")
        for kind in ("numeric", "values"):
            a_col = getattr(loaded.columns.get(path), kind, None)
            b_col = getattr(rebuilt.columns.get(path), kind, None)
            a_pairs = _column_pairs(loaded, a_col, kind)
            b_pairs = _column_pairs(rebuilt, b_col, kind)
            if a_pairs != b_pairs:
                problems.append(f"column {path!r} {kind}: {len(a_pairs ^ b_pairs)} (record, value) pairs differ")
    return problems


def _column_pairs(index: Index, column: Any, kind: str) -> set[tuple[Any, Any]]:
    if column is None:
        return set()
    docs, values = column.pairs()
    alive = np.zeros(len(index.docs.record_ids), dtype=bool)
    alive_docs = np.frombuffer(index.alive.to_array(), dtype=np.uint32) if index.alive else np.empty(0, np.uint32)
    alive[alive_docs] = True
    keep = alive[docs] if docs.size else np.zeros(0, dtype=bool)
    ids = index.docs.record_ids
    if kind == "numeric":
        return {(ids[doc], value) for doc, value in zip(docs[keep].tolist(), values[keep].tolist())}
    return {(ids[doc], column.values[value_id]) for doc, value_id in zip(docs[keep].tolist(), values[keep].tolist())}


def rebuild_index(index: Index) -> Index:
    """A fresh index from the live stored records of ``index``, in doc order."""
    rebuilt = Index()
    rebuilt._value_fields = set(index._value_fields)  # index the same exact values as the original
    live = [index.docs.record(doc) for doc in index.alive]
    for start in range(0, len(live), 10_000):
        rebuilt.add_records(live[start:start + 10_000])
    return rebuilt
