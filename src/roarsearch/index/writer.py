"""The only mutator of an index: applies one validated batch completely.

Owns: adds (new doc ids, upserts retiring the old ones), deletes by record id and by doc set, and
the write generation that every one of them advances (caches of the index are stamped with it).
Called with the collection's write lock held, so no search runs meanwhile.

Data flow of an add: records → doc ids and msgpack payloads (``DocStore``) → leaves by field path
(``schema.iter_leaves``) → strings analysed per field in one batch call → term ids (``Lexicon``)
→ postings and positions (``FieldPostings``); numbers, short strings and booleans → columns.
The only per-record Python work is walking each record's leaves once.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.analysis.analyzer import analyze_batch
from roarsearch.index.columns import AUTO_VALUE_LIMIT, MAX_VALUE_LENGTH, FieldColumns
from roarsearch.index.docstore import RecordId
from roarsearch.index.geo import extract_points
from roarsearch.index.postings import FieldPostings
from roarsearch.schema import GEO_FIELD, iter_leaves

if TYPE_CHECKING:
    from roarsearch.index.index import Index

GEO_LAT, GEO_LNG = f"{GEO_FIELD}.lat", f"{GEO_FIELD}.lng"

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
        self.text_docs: list[int] = []
        self.text_positions: list[int] = []
        self.texts: list[str] = []
        self.number_docs: list[int] = []
        self.numbers: list[float] = []
        self.value_docs: list[int] = []
        self.value_keys: list[Any] = []
        self.present: list[int] = []


class _ValuePolicy:
    """Which fields of a batch have their exact values collected: those already indexed, and
    (when the index indexes new fields at write time) every field the index has never seen."""

    __slots__ = ("value_fields", "known")

    def __init__(self, index: Index) -> None:
        self.value_fields = index.value_fields
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


def add_records(index: Index, records: list[dict[str, Any]], payloads: list[bytes] | None = None) -> None:
    """Insert or replace validated records (the last of repeated ids wins); ``payloads``: the
    records already encoded, if they are."""
    new_docs, _replaced = index.docs.add(records, payloads)
    by_field: dict[str, _BatchFields] = {}
    first_texts: list[str] = []
    value_fields = _ValuePolicy(index)
    for doc, record in zip(new_docs.tolist(), records):
        if not _collect_flat(doc, record, by_field, first_texts, value_fields):
            _collect_nested(doc, record, by_field, first_texts, value_fields)
    for path, fields in by_field.items():
        _add_field(index, path, fields)
    _add_points(index, records, new_docs, by_field)
    index.note_text_fields(first_texts)
    index.advance_generation()


def _add_points(index: Index, records: list[dict[str, Any]], new_docs: np.ndarray,
                by_field: dict[str, _BatchFields]) -> None:
    """``_geo`` points from the leaves already collected: validation makes every ``_geo`` exactly
    one ``lat`` and one ``lng`` number, so the two leaf lists pair up doc by doc. Only a record
    whose own keys are literally named ``_geo.lat`` could break the pairing; then the points are
    read from the records themselves."""
    lat, lng = by_field.get(GEO_LAT), by_field.get(GEO_LNG)
    if lat is None or lng is None or not lat.numbers:
        return
    if lat.number_docs == lng.number_docs:
        index.geo.add(np.asarray(lat.number_docs, dtype=np.uint32), np.asarray(lat.numbers), np.asarray(lng.numbers))
        return
    positions, lat_values, lng_values = extract_points(records)
    index.geo.add(new_docs[positions], lat_values, lng_values)


def _add_field(index: Index, path: str, fields: _BatchFields) -> None:
    columns = index.columns.get(path)
    if columns is None:
        columns = index.columns[path] = FieldColumns(path, index.cache)
    columns.exists = FrozenBitMap(columns.exists | BitMap(fields.present))
    columns.has_bool |= fields.has_bool
    if fields.texts:
        columns.has_text = True
        tokens, value_index, token_position = analyze_batch(fields.texts)
        if tokens:
            term_ids = index.lexicon.intern_many(tokens)
            docs = np.asarray(fields.text_docs, dtype=np.uint32)[value_index]
            positions = token_position + np.asarray(fields.text_positions, dtype=np.int64)[value_index]
            postings = index.postings.get(path)
            if postings is None:
                postings = index.postings[path] = FieldPostings()
            postings.add(docs, term_ids, positions.astype(np.uint32))
    if fields.numbers:
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
