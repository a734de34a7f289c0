"""The only mutator of an index: applies one validated batch completely.

Owns: adds (new doc ids, upserts retiring the old ones), deletes by record id and by doc set, and
the write generation that every one of them advances (caches of the index are stamped with it).
An add is prepared (encoded, collected, analysed, its term ids planned and its postings built:
nearly all of its time) without the collection's write lock, so searches go on meanwhile, then
committed with it held, so no search sees half a batch.

Data flow of an add: records → doc ids and msgpack payloads (``DocStore``) → leaves by field path
(``schema.iter_leaves``) → strings analysed per field in one batch call → term ids (``Lexicon``)
→ postings and positions (``FieldPostings``); numbers, short strings and booleans → columns.
The only per-record Python work is walking each record's leaves once.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Collection
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any

import numpy as np
from pyroaring import AbstractBitMap, FrozenBitMap

from roarsearch.analysis.analyzer import Analysed, analyze_fields
from roarsearch.index.bitmaps import bitmap_from_array
from roarsearch.index.columns import AUTO_VALUE_LIMIT, MAX_VALUE_LENGTH, FieldColumns
from roarsearch.index.docstore import RecordId, compress_joined, compress_parts, joined_parts, pack_records
from roarsearch.index.geo import extract_points
from roarsearch.index.merges import PostingsPlan
from roarsearch.index.postings import FieldPostings
from roarsearch.index.vectors import VECTORS_FIELD
from roarsearch.schema import GEO_LAT, GEO_LNG, RecordColumns, iter_leaves, record_columns

if TYPE_CHECKING:
    from roarsearch.index.index import Index


#: Positions of successive values of one field (array elements) are this far apart, so that
#: proximity never rewards words that sit in different elements.
ELEMENT_POSITION_GAP = 1024


class _BatchFields:
    """Leaves of one batch grouped by field path, in doc order."""

    __slots__ = ("text_docs", "text_positions", "texts", "number_docs", "numbers", "value_docs", "value_keys",
                 "present", "keep_values", "has_bool")

    def __init__(self, keep_values: bool) -> None:
        #: Whether the field's exact values are indexed (see ``Index.value_column``); if not, none
        #: are collected.
        self.keep_values = keep_values
        self.has_bool = False
        # Lists while leaves are collected record by record; numpy arrays (docs, positions,
        # numbers) or lists (strings) when a field is taken whole by ``_collect_columns``.
        self.text_docs: Any = []
        self.text_positions: Any = []
        self.texts: list[str] = []
        self.number_docs: Any = []
        self.numbers: Any = []
        self.value_docs: Any = []
        self.value_keys: list[Any] = []
        self.present: Any = []


class _ValuePolicy:
    """Which fields of a batch have their exact values collected: those already indexed, and
    (when the index indexes new fields at write time) every field the index has never seen."""

    __slots__ = ("value_fields", "known")

    def __init__(self, index: Index) -> None:
        self.value_fields: Collection[str] = index.value_fields
        self.known: Collection[str] | None = index.columns if index.auto_values else None

    def keeps(self, path: str) -> bool:
        return path in self.value_fields or (self.known is not None and path not in self.known)


def _fields_of(by_field: dict[str, _BatchFields], path: str, value_fields: _ValuePolicy) -> _BatchFields:
    fields = by_field.get(path)
    if fields is None:
        fields = by_field[path] = _BatchFields(value_fields.keeps(path))
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
                  value_fields: _ValuePolicy) -> bool:
    """Collect a record whose values are scalars or arrays of scalars (the common shape) without
    the generic leaf walk; returns False, having collected nothing, for any other shape."""
    for value in record.values():
        kind = type(value)
        if kind is dict or (kind is list and any(type(element) in (dict, list) for element in value)):
            return False
    for key, value in record.items():
        if key == "id" or value is None:
            continue
        kind = type(value)
        fields = by_field.get(key)
        if fields is None:
            fields = by_field[key] = _BatchFields(value_fields.keeps(key))
        if kind is str:  # the common leaf, inlined (_add_text at element 0)
            fields.present.append(doc)
            if not fields.texts:
                first_texts.append(key)
            fields.text_docs.append(doc)
            fields.text_positions.append(0)
            fields.texts.append(value)
            if fields.keep_values and len(value) <= MAX_VALUE_LENGTH:
                fields.value_docs.append(doc)
                fields.value_keys.append(value)
            continue
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


def _collect_nested(doc: int, record: dict[str, Any], by_field: dict[str, _BatchFields], first_texts: list[str],
                    value_fields: _ValuePolicy) -> None:
    for path, element, value in iter_leaves(record):
        fields = _fields_of(by_field, path, value_fields)
        fields.present.append(doc)
        _add_leaf(fields, path, doc, element, value, first_texts)


#: Batches of at least this many records compress their stored parts (zlib releases the GIL) in
#: a second thread while this one collects and analyses the fields.
THREADED_STORE_RECORDS = 1_000

#: A field's tokens ready to commit: its postings (new ones for a new field), the planned add, its docs.
PlannedPostings = tuple[FieldPostings, PostingsPlan, np.ndarray]


class PreparedAdd:
    """An add batch's work that changes nothing (see :func:`prepare_add`), for :func:`commit_add`."""

    __slots__ = ("records", "payloads", "compressed", "start", "by_field", "first_texts", "new_terms", "first_term",
                 "postings")

    def __init__(self, records: list[dict[str, Any]], payloads: list[bytes], compressed: list[bytes], start: int,
                 by_field: dict[str, _BatchFields], first_texts: list[str], new_terms: list[str], first_term: int,
                 postings: dict[str, PlannedPostings]) -> None:
        self.records = records
        self.payloads = payloads
        self.compressed = compressed
        self.start = start
        self.by_field = by_field
        self.first_texts = first_texts
        self.new_terms = new_terms
        self.first_term = first_term
        self.postings = postings


class CollectedAdd:
    """An add batch's leaves, collected for the doc ids from ``start``, and once analysed (here or
    in the analysis worker) its text fields' tokens: :func:`prepare_add`'s first steps, which a
    bulk add does for the next batch while the current one is applied."""

    __slots__ = ("start", "by_field", "first_texts", "analysed", "term_ids")

    def __init__(self, start: int, by_field: dict[str, _BatchFields], first_texts: list[str]) -> None:
        self.start = start
        self.by_field = by_field
        self.first_texts = first_texts
        self.analysed: dict[str, Analysed] | None = None
        #: Per field, its distinct terms' ids as the analysis worker's copy of the lexicon gave
        #: them (-1: not in the copy); None when analysed without one.
        self.term_ids: dict[str, np.ndarray] | None = None

    def texts(self) -> dict[str, list[str]]:
        """Each text field's values, to analyse (:func:`~roarsearch.analysis.worker.analyze_fields`)."""
        return {path: fields.texts for path, fields in self.by_field.items() if fields.texts}


def collect_add(index: Index, records: list[dict[str, Any]], start: int | None = None,
                by_column: RecordColumns | None = None) -> CollectedAdd:
    """The leaves of an add batch whose first record will be doc ``start`` (default: the next doc
    id; a bulk add collects a batch before the one ahead of it is applied), field by field;
    ``by_column``: the batch already read field by field (validation did)."""
    start = index.docs.next_doc if start is None else start
    if (VECTORS_FIELD in by_column.keys) if by_column is not None else any(VECTORS_FIELD in record for record in records):
        # Vectors are never text, filters, facets or sort keys (contract §11): the vector index
        # takes them at commit.
        records = [{key: value for key, value in record.items() if key != VECTORS_FIELD} for record in records]
        by_column = None
    new_docs = np.arange(start, start + len(records), dtype=np.uint32)
    value_fields = _ValuePolicy(index)
    collected = _collect_columns(records, new_docs, value_fields, by_column)
    if collected is None:
        by_field: dict[str, _BatchFields] = {}
        first_texts: list[str] = []
        for doc, record in zip(new_docs.tolist(), records):
            if not _collect_flat(doc, record, by_field, first_texts, value_fields):
                _collect_nested(doc, record, by_field, first_texts, value_fields)
    else:
        by_field, first_texts = collected
    return CollectedAdd(start, by_field, first_texts)


def _values_changed(index: Index, by_field: dict[str, _BatchFields]) -> bool:
    """Whether a field's value indexing changed since ``by_field`` was collected (a search indexed
    its values on demand, or an add made it too diverse): its values were collected or not."""
    policy = _ValuePolicy(index)
    return any(fields.keep_values != policy.keeps(path) for path, fields in by_field.items())


def prepare_add(index: Index, records: list[dict[str, Any]], payloads: list[bytes] | None = None,
                ahead: CollectedAdd | None = None) -> PreparedAdd:
    """Encode, compress, collect and analyse an add batch, plan its term ids and build its postings
    (merges included) without changing ``index``: nearly all of an add's time, while searches may
    run (only :func:`commit_add` needs them held out). ``ahead``: the batch already collected
    (and maybe analysed); used when it still fits the index.

    It reads the next doc id, the lexicon, the postings and which fields keep their values: the
    caller keeps every other write out until the commit (a search that indexes a field's values
    or merges postings meanwhile is caught there).
    """
    if payloads is None:
        payloads = pack_records(records)
    compressed: list[bytes] = []
    failure: list[BaseException] = []
    compressor: threading.Thread | None = None
    if len(records) >= THREADED_STORE_RECORDS:
        parts = joined_parts(payloads)  # here: the thread then runs one call without the GIL

        def compress() -> None:
            try:
                compressed.extend(compress_joined(parts))
            except BaseException as error:  # re-raised below, in the writer's thread
                failure.append(error)
        compressor = threading.Thread(target=compress, name="roarsearch-compress")
        compressor.start()
    try:
        fields = _prepare_fields(index, records, ahead)
    finally:
        if compressor is not None:
            compressor.join()
    if failure:
        raise failure[0]
    if compressor is None:
        compressed = compress_parts(payloads)
    return PreparedAdd(records, payloads, compressed, index.docs.next_doc, *fields)


def _prepare_fields(index: Index, records: list[dict[str, Any]], ahead: CollectedAdd | None = None
                    ) -> tuple[dict[str, _BatchFields], list[str], list[str], int, dict[str, PlannedPostings]]:
    """:func:`prepare_add`'s index side (:class:`PreparedAdd`'s fields in its order): leaves
    collected, texts analysed, term ids planned and postings chunks built."""
    if ahead is None or ahead.start != index.docs.next_doc:
        ahead = collect_add(index, records)
    elif _values_changed(index, ahead.by_field):
        # Collected again for the values; the texts, and so their analysis, are the same.
        analysed_ahead, term_ids_ahead = ahead.analysed, ahead.term_ids
        ahead = collect_add(index, records)
        ahead.analysed, ahead.term_ids = analysed_ahead, term_ids_ahead
    by_field = ahead.by_field
    analysed = ahead.analysed if ahead.analysed is not None else analyze_fields(ahead.texts())
    known = ahead.term_ids if ahead.analysed is not None else None
    # Term ids of every field's distinct terms at once, in field order: as interning field by
    # field would give them.
    term_ids, new_terms, first_term = index.lexicon.plan_ids(
        list(chain.from_iterable(terms for terms, *_tokens in analysed.values())),
        known=np.concatenate([known[path] for path in analysed]) if known is not None and analysed else None)
    postings: dict[str, PlannedPostings] = {}
    offset = 0
    for path, (terms, counts, value_index, token_position, valued) in analysed.items():
        fields = by_field[path]
        ids = term_ids[offset:offset + len(terms)]
        offset += len(terms)
        text_docs = np.asarray(fields.text_docs, dtype=np.uint32)
        docs = text_docs[value_index]
        starts = np.asarray(fields.text_positions, dtype=np.int64)  # each value's first position
        positions = token_position + starts[value_index] if starts.any() else token_position
        field_postings = index.postings.get(path)
        if field_postings is None:  # a new field: installed by the commit
            field_postings = FieldPostings(index.scratch)
            field_postings.merge_limit = index.bulk_merge_limit
        plan = field_postings.plan_add(ids, counts, docs, positions)
        if plan is not None:
            postings[path] = (field_postings, plan, text_docs[valued])
    return by_field, ahead.first_texts, new_terms, first_term, postings


def commit_add(index: Index, prepared: PreparedAdd) -> None:
    """Apply a batch prepared by :func:`prepare_add` (no write in between)."""
    if index.docs.next_doc != prepared.start:
        raise RuntimeError("an add batch was prepared against an index that has changed since")
    if _values_changed(index, prepared.by_field):
        # A search indexed some field's values on demand since the batch was prepared: its
        # values were not collected, so collect again (rare; the compressed records still hold).
        prepared = PreparedAdd(prepared.records, prepared.payloads, prepared.compressed, prepared.start,
                               *_prepare_fields(index, prepared.records))
    records = prepared.records
    new_docs, _replaced = index.docs.add(records, prepared.payloads, prepared.compressed)
    index.lexicon.add_planned(prepared.new_terms, prepared.first_term)
    by_field = prepared.by_field
    for path, fields in by_field.items():
        _add_field(index, path, fields, prepared.postings.get(path))
    _add_points(index, records, new_docs, by_field)
    index.vectors.add(records, new_docs)
    index.note_text_fields(prepared.first_texts)
    index.advance_generation()


def add_records(index: Index, records: list[dict[str, Any]], payloads: list[bytes] | None = None) -> None:
    """Insert or replace validated records (the last of repeated ids wins); ``payloads``: the
    records already encoded, if they are."""
    commit_add(index, prepare_add(index, records, payloads))


_NONE = type(None)
_SCALAR_TEXT = frozenset((str, _NONE))
_SCALAR_NUMBER = frozenset((int, float, _NONE))
_LIST_OR_NONE = frozenset((list, _NONE))
_TEXT_ONLY = frozenset((str,))
_FLAT_KINDS = frozenset((str, int, float, bool, list, type(None)))
_NESTED_KINDS = frozenset((dict, list))


def _collect_columns(records: list[dict[str, Any]], new_docs: np.ndarray, value_fields: _ValuePolicy,
                     by_column: RecordColumns | None = None) -> tuple[dict[str, _BatchFields], list[str]] | None:
    """The leaves of a batch of flat records (top-level scalars and arrays of scalars, the common
    shape) collected field by field, a few C-level passes per field and none per record; None,
    having collected nothing, when some record has another shape (then the caller walks records).

    A field whose values are all strings (or all numbers) is taken whole; any other field (arrays,
    mixed kinds) is walked value by value, still in doc order.
    """
    if by_column is None:
        by_column = record_columns(records)
        if by_column is None:
            return None
    # Each field's values (None where a record lacks it) and their kinds, once: validation, the
    # shape check and the collection below all read them.
    keys, columns, column_kinds, column_elements = by_column
    for field_kinds, elements in zip(column_kinds, column_elements):
        if not field_kinds <= _FLAT_KINDS:
            return None
        if elements is not None and not elements[1].isdisjoint(_NESTED_KINDS):
            return None
    count = len(records)
    docs = new_docs
    by_field: dict[str, _BatchFields] = {}
    first_text_at: list[tuple[int, int, str]] = []  # (record, key position, field): the order of ``*``
    for key, values, field_kinds, elements in zip(keys, columns, column_kinds, column_elements):
        if key == "id":
            continue
        fields = by_field[key] = _BatchFields(value_fields.keeps(key))
        if field_kinds <= _SCALAR_TEXT:
            held = _held(values, str, field_kinds, count)
            if not held.any():
                del by_field[key]
                continue
            texts: list[str] = values if held.all() else list(compress(values, held))
            held_docs = docs[held]
            fields.present = held_docs
            fields.text_docs = held_docs
            fields.text_positions = np.zeros(held_docs.size, dtype=np.int64)
            fields.texts = texts
            if fields.keep_values:
                short = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) <= MAX_VALUE_LENGTH
                fields.value_docs = held_docs[short]
                fields.value_keys = texts if short.all() else list(compress(texts, short))
            first_text_at.append((int(np.argmax(held)), 0, key))
            continue
        if field_kinds <= _SCALAR_NUMBER:  # bool is not int here: its type is bool
            held = _held(values, None, field_kinds, count)
            fields.present = fields.number_docs = docs[held]
            fields.numbers = np.asarray(values if held.all() else list(compress(values, held)), dtype=np.float64)
            continue
        if field_kinds <= _LIST_OR_NONE and elements is not None:
            held = _held(values, list, field_kinds, count)
            lists: list[list[Any]] = list(compress(values, held))
            texts, element_kinds = elements
            if element_kinds <= _TEXT_ONLY:  # arrays of strings (tags): taken whole too
                lengths = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
                held_docs = docs[held][lengths > 0]
                if not held_docs.size:
                    del by_field[key]
                    continue
                fields.present = held_docs
                fields.text_docs = np.repeat(docs[held], lengths)
                fields.text_positions = (np.arange(lengths.sum(), dtype=np.int64)
                                         - np.repeat(np.cumsum(lengths) - lengths, lengths)) * ELEMENT_POSITION_GAP
                fields.texts = texts
                if fields.keep_values:
                    short = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) <= MAX_VALUE_LENGTH
                    fields.value_docs = fields.text_docs[short]
                    fields.value_keys = texts if short.all() else list(compress(texts, short))
                first_text_at.append((int(held_docs[0]) - int(docs[0]), 0, key))
                continue
        # Mixed kinds or arrays of other kinds: value by value (the rare shape), with the
        # per-record helpers.
        first_texts: list[str] = []
        first_text_doc: int | None = None
        for doc, value in zip(docs.tolist(), values):
            if value is None:
                continue
            if type(value) is list:
                held_elements = [element for element in value if element is not None]
                if not held_elements:
                    continue
                fields.present.append(doc)
                for element_index, element in enumerate(held_elements):
                    _add_leaf(fields, key, doc, element_index, element, first_texts)
            else:
                fields.present.append(doc)
                _add_leaf(fields, key, doc, 0, value, first_texts)
            if first_texts and first_text_doc is None:
                first_text_doc = doc
        if first_text_doc is not None:
            first_text_at.append((first_text_doc - int(docs[0]), 0, key))
        if not fields.present:
            del by_field[key]
    # ``*`` lists text fields in the order they first appear record by record, then key by key.
    ordered = sorted((record, list(records[record]).index(key), key) for record, _, key in first_text_at)
    return by_field, [key for _, _, key in ordered]


def _held(values: list[Any], kind: type | None, field_kinds: set[type], count: int) -> np.ndarray:
    """Which records hold a value of ``kind`` (None: any value, not null) in a field of scalar
    kinds ``field_kinds``: all of them without a look at each when the field has no other kind."""
    if kind is None:
        if _NONE not in field_kinds:
            return np.ones(count, dtype=bool)
        return np.fromiter(map(operator.is_not, values, repeat(None)), dtype=bool, count=count)
    if field_kinds == {kind}:
        return np.ones(count, dtype=bool)
    return np.fromiter(map(operator.is_, map(type, values), repeat(kind)), dtype=bool, count=count)


def _add_points(index: Index, records: list[dict[str, Any]], new_docs: np.ndarray,
                by_field: dict[str, _BatchFields]) -> None:
    """Locations from the leaves already collected: validation makes every location (a ``_geo``
    object, or the flat keys ``_geo.lat`` and ``_geo.lng``) exactly one ``lat`` and one ``lng``
    number, so the two leaf lists pair up doc by doc. Should they not, the points are read from
    the records themselves."""
    lat, lng = by_field.get(GEO_LAT), by_field.get(GEO_LNG)
    if lat is None or lng is None or not len(lat.numbers):
        return
    if np.array_equal(np.asarray(lat.number_docs), np.asarray(lng.number_docs)):
        index.geo.add(np.asarray(lat.number_docs, dtype=np.uint32), np.asarray(lat.numbers), np.asarray(lng.numbers))
        return
    positions, lat_values, lng_values = extract_points(records)
    index.geo.add(new_docs[positions], lat_values, lng_values)


def _add_field(index: Index, path: str, fields: _BatchFields, planned: PlannedPostings | None) -> None:
    columns = index.columns.get(path)
    if columns is None:
        columns = index.columns[path] = FieldColumns(path, index.cache)
    columns.exists = FrozenBitMap(columns.exists | bitmap_from_array(np.asarray(fields.present, dtype=np.uint32)))
    columns.has_bool |= fields.has_bool
    if fields.texts:
        columns.has_text = True
    if planned is not None:
        field_postings, plan, docs = planned
        index.postings.setdefault(path, field_postings).commit_add(plan, docs)
    if len(fields.numbers):
        columns.numeric_column().add(np.asarray(fields.number_docs, dtype=np.uint32), np.asarray(fields.numbers))
    if fields.keep_values and path not in index.value_fields:  # a new field, indexed from its first value
        index.value_fields.add(path)
        index.auto_value_fields.add(path)
    if fields.value_keys and path in index.value_fields:
        value_column = columns.value_column()
        value_ids = value_column.intern_many(fields.value_keys)
        value_column.add(np.asarray(fields.value_docs, dtype=np.uint32), value_ids)
        if path in index.auto_value_fields and len(value_column.values) > AUTO_VALUE_LIMIT:
            # Too many distinct values (names, titles): not worth their memory until a request
            # asks for them; the field is then indexed from the stored records like any other.
            columns.values = None
            index.value_fields.discard(path)
            index.auto_value_fields.discard(path)


def delete_ids(index: Index, record_ids: list[RecordId]) -> list[bool]:
    """Retire the records of ``record_ids``; one flag per id, False where it was absent."""
    found = index.docs.remove(record_ids)
    index.advance_generation()
    return found


def delete_docs(index: Index, docs: AbstractBitMap) -> int:
    """Retire the alive docs of ``docs`` (delete by filter, clear); returns how many."""
    deleted = index.docs.remove_docs(docs)
    index.advance_generation()
    return deleted
