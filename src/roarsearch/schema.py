"""Records: validation and flattening into dotted field paths.

Owns: what a valid record is (contract §2) and how a record's nested values become the leaves
that the index stores. No bitmaps, no I/O.

A record is a JSON object with an ``id`` (signed 64-bit integer or a non-empty string of at most
512 UTF-8 bytes). Other fields hold strings, numbers, booleans, null, arrays of these and nested
objects; nested keys are addressed with dots (``address.city``) and arrays are multi-valued.
Validation is all-or-nothing over a batch: the first problem raises a 400 naming the record's
index in the batch and the field.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterator
from itertools import chain, compress, repeat
from typing import Any, NamedTuple

import msgpack
import numpy as np

from roarsearch.errors import BadRequestError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_ID_BYTES = 512
#: Nesting deeper than this is almost certainly a bug in the caller; refusing it keeps flattening bounded.
MAX_DEPTH = 32
#: The field that holds a record's location (contract §9).
GEO_FIELD = "_geo"
#: A location given as two flat keys (a CSV's ``_geo.lat`` and ``_geo.lng`` columns): the same
#: field paths as the object ``_geo: {"lat", "lng"}`` gives, so the same location.
GEO_LAT, GEO_LNG = f"{GEO_FIELD}.lat", f"{GEO_FIELD}.lng"
#: Bounds of each coordinate, in degrees.
GEO_BOUNDS = {"lat": 90.0, "lng": 180.0}

RecordId = int | str


def check_record_id(value: Any, where: str) -> RecordId:
    """Return ``value`` if it is a valid record id, else raise a 400 that names ``where``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise BadRequestError(
            f"{where}: must be an integer or a non-empty string, got {type_name(value)}", field="id"
        )
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise BadRequestError(f"{where}: integer {integer_text(value)} is outside the signed 64-bit range", field="id")
        return value
    if value == "":
        raise BadRequestError(f"{where}: must not be an empty string", field="id")
    check_unicode(value, where, "id")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
        raise BadRequestError(f"{where}: string ids are at most {MAX_ID_BYTES} bytes", field="id")
    return value


def integer_text(value: int) -> str:
    """An integer as an error message shows it; past Python's 4,300-digit printing limit, by its size."""
    return str(value) if value.bit_length() <= 10_000 else f"<a {value.bit_length()}-bit integer>"


def preview(value: Any, width: int) -> str:
    """``repr(value)`` cut to ``width`` characters for an error message; a value holding an integer
    past Python's printing limit (which ``repr`` refuses) is shown by its type."""
    if isinstance(value, int) and not isinstance(value, bool):
        return integer_text(value)[:width]
    try:
        return repr(value)[:width]
    except ValueError:
        return f"<an {type_name(value)} holding a number too long to show>"


def type_name(value: Any) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def check_unicode(text: str, where: str, field: str) -> str:
    """``text`` if it is valid Unicode; a 400 naming ``where`` for a lone surrogate (``\\ud800``),
    which JSON can carry but UTF-8 cannot encode, so it could never be stored or answered."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise BadRequestError(
            f"{where}: is not valid Unicode (a lone surrogate \\u{ord(text[error.start]):04x} at character {error.start})",
            field=field) from None
    return text


def check_strings(value: Any, where: str) -> None:
    """A 400 for the first string (or key) of ``value`` that is not valid Unicode.

    Iterative, so that a body nested as deep as the JSON decoder allows cannot exhaust the stack
    of a worker thread (a RecursionError would be a 500).
    """
    if isinstance(value, (list, tuple, dict)):
        try:  # one C-level pass finds invalid Unicode anywhere; only then is the value walked for where
            msgpack.packb(value)
            return
        except UnicodeEncodeError:
            pass
        except (OverflowError, ValueError, TypeError):  # a huge integer, deep nesting: walk it
            pass
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        item, place = stack.pop()
        if isinstance(item, str):
            check_unicode(item, place, place)
        elif isinstance(item, (list, tuple)):
            stack.extend((element, f"{place}[{position}]") for position, element in reversed(list(enumerate(item))))
        elif isinstance(item, dict):
            children = []
            for key, element in item.items():
                if isinstance(key, str):
                    check_unicode(key, f"{place}: field name {key!r}", place)
                children.append((element, f"{place}.{key}"))
            stack.extend(reversed(children))


_NUMBER_KINDS = frozenset((int, float))


def _plain_numbers(values: list[Any] | tuple[Any, ...]) -> bool:
    """Whether ``values`` holds only finite floats and signed 64-bit integers (False also when it
    cannot tell: the element walk then names the problem)."""
    kinds = set(map(type, values))
    if not kinds <= _NUMBER_KINDS:
        return False
    if int in kinds:
        integers = [value for value in values if type(value) is int] if float in kinds else values
        if not INT64_MIN <= min(integers) <= max(integers) <= INT64_MAX:
            return False
    if float in kinds:
        floats = [value for value in values if type(value) is float] if int in kinds else values
        return bool(np.isfinite(np.asarray(floats, dtype=np.float64)).all())
    return True


def _check_value(value: Any, where: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise BadRequestError(f"{where}: nested deeper than {MAX_DEPTH} levels", field=where)
    if value is None or isinstance(value, (str, bool)):
        return
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise BadRequestError(f"{where}: integer {integer_text(value)} is outside the signed 64-bit range", field=where)
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise BadRequestError(f"{where}: numbers must be finite, got {value}", field=where)
        return
    if isinstance(value, (list, tuple)):
        if all(type(element) is str for element in value):  # the common array: nothing to check
            return
        if len(value) >= 16 and _plain_numbers(value):  # an embedding: a few C-level passes, not one call a number
            return
        for position, element in enumerate(value):
            _check_value(element, f"{where}[{position}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, element in value.items():
            if not isinstance(key, str) or key == "":
                raise BadRequestError(f"{where}: field names must be non-empty strings, got {key!r}", field=where)
            _check_value(element, f"{where}.{key}", depth + 1)
        return
    raise BadRequestError(f"{where}: unsupported value of type {type_name(value)}", field=where)


def validate_records(records: Any) -> list[dict[str, Any]]:
    """Validate an add payload (one record or a list) and return the list of records.

    Raises :class:`BadRequestError` for the first problem, naming ``records[i]`` and the field;
    nothing is returned (and so nothing is written) when any record is invalid.
    """
    return validate_and_pack_records(records)[0]


#: Values that need no check beyond their type (strings' Unicode is checked by encoding them).
_PLAIN_KINDS = frozenset((str, bool, type(None)))


#: A field's array elements: those of all its arrays, in record order, and their set of types.
ArrayElements = tuple[list[Any], set[type]]


class RecordColumns(NamedTuple):
    """A batch of records field by field, read once for validation and again for indexing: each
    field name (in first-seen order), its values in record order (None where a record lacks the
    field), each field's set of types, and, for a field that holds arrays, their elements
    (validation checks their types and indexing takes them: read once, not once each)."""

    keys: list[Any]
    values: list[list[Any]]
    kinds: list[set[type]]
    elements: list[ArrayElements | None]


def record_columns(batch: list[Any]) -> RecordColumns | None:
    """``batch`` as :class:`RecordColumns`; None when some record is not an object."""
    if set(map(type, batch)) != {dict}:
        return None
    keys = list(dict.fromkeys(chain.from_iterable(batch)))
    values = [list(map(dict.get, batch, repeat(key))) for key in keys]
    kinds = [set(map(type, column)) for column in values]
    return RecordColumns(keys, values, kinds, [_array_elements(column) if list in column_kinds else None
                                               for column, column_kinds in zip(values, kinds)])


def _array_elements(column: list[Any]) -> ArrayElements:
    arrays = compress(column, map(operator.is_, map(type, column), repeat(list)))
    elements = list(chain.from_iterable(arrays))
    return elements, set(map(type, elements))


class ValidatedBatch(NamedTuple):
    """What :func:`validate_and_pack_records` returns."""

    records: list[dict[str, Any]]
    #: Each record's msgpack bytes.
    packed: list[bytes]
    #: The batch field by field, when asked for (and every record is an object).
    columns: RecordColumns | None = None


def validate_and_pack_records(records: Any, columns: bool = False) -> ValidatedBatch:
    """:func:`validate_records`, also returning each record's msgpack bytes: encoding is how
    invalid Unicode is found in one C-level pass, and the bytes are what the log and the doc
    store keep, so a write encodes its records once. ``columns``: read the batch field by field
    (:class:`RecordColumns`, returned too) and validate it that way — a few C-level passes per
    field, cheaper than checking value by value once indexing reads the same columns (bulk adds)."""
    if isinstance(records, dict):
        batch = [records]
    elif isinstance(records, (list, tuple)):
        batch = list(records)
    else:
        raise BadRequestError(
            f"records: must be a JSON object or an array of objects, got {type_name(records)}", field="records"
        )
    if not batch:
        raise BadRequestError("records: must not be empty", field="records")
    by_field = record_columns(batch) if columns else None
    if by_field is None or not _valid_by_columns(by_field):
        _check_records(batch)
    # One packer for the batch (``msgpack.packb`` makes one per call, a third of the encoding time).
    packer = msgpack.Packer(use_bin_type=True)
    try:  # one C-level pass finds invalid Unicode anywhere; only then is the batch walked for where
        packed = list(map(packer.pack, batch))
    except UnicodeEncodeError:
        _check_records(batch)  # an invalid string id is named as the id
        for index, record in enumerate(batch):
            check_strings(record, f"records[{index}]")
        raise BadRequestError("records: a string is not valid Unicode", field="records") from None
    return ValidatedBatch(batch, packed, by_field)


#: Types of the values :func:`_valid_by_columns` checks (arrays: when they hold only strings).
_COLUMN_KINDS = frozenset((str, bool, type(None), list, int, float))


def _valid_by_columns(columns: RecordColumns) -> bool:
    """Whether every record passes :func:`_check_records`, decided a few C-level passes per field.
    False says only "not shown valid": :func:`_check_records` then finds (and names) the first
    problem, or accepts what this does not handle (nested objects, arrays of numbers, locations)."""
    if ("id" not in columns.keys or GEO_FIELD in columns.keys or GEO_LAT in columns.keys or GEO_LNG in columns.keys
            or not all(type(key) is str and key for key in columns.keys)):
        return False
    for key, values, kinds, elements in zip(columns.keys, columns.values, columns.kinds, columns.elements):
        if key == "id":
            if kinds == {int}:
                if not INT64_MIN <= min(values) <= max(values) <= INT64_MAX:
                    return False
            elif kinds != {str} or min(map(len, values)) == 0 or max(map(len, values)) * 4 > MAX_ID_BYTES:
                return False  # a missing id, another type, an empty or maybe too long string
            continue
        if not kinds <= _COLUMN_KINDS:
            return False
        if int in kinds:
            integers = values if kinds == {int} else [value for value in values if type(value) is int]
            if not INT64_MIN <= min(integers) <= max(integers) <= INT64_MAX:
                return False
        if float in kinds:
            floats = values if kinds == {float} else [value for value in values if type(value) is float]
            if not np.isfinite(np.asarray(floats, dtype=np.float64)).all():
                return False
        if elements is not None and not elements[1] <= {str}:
            return False
    return True


def _check_records(batch: list[Any]) -> None:
    """Check ``batch`` record by record, raising a 400 for the first problem."""
    plain = _PLAIN_KINDS
    for index, record in enumerate(batch):
        where = f"records[{index}]"
        if not isinstance(record, dict):
            raise BadRequestError(f"{where}: must be a JSON object, got {type_name(record)}", field="records")
        if "id" not in record:
            raise BadRequestError(f"{where}.id: is required", field="id")
        check_record_id(record["id"], f"{where}.id")
        for key, value in record.items():
            if type(value) in plain and type(key) is str and key and key != GEO_FIELD:
                continue  # the common leaf: nothing more to check
            if not isinstance(key, str) or key == "":
                raise BadRequestError(f"{where}: field names must be non-empty strings, got {key!r}", field="records")
            if key == GEO_FIELD:
                if value is not None:  # null is no value: the record has no location
                    check_geo_point(value, f"{where}.{GEO_FIELD}")
            elif key != "id":
                _check_value(value, f"{where}.{key}", 1)
        if GEO_LAT in record or GEO_LNG in record:
            check_flat_point(record, where)


def check_flat_point(record: dict[str, Any], where: str) -> None:
    """A location given as the flat keys ``_geo.lat`` and ``_geo.lng``: both numbers in range (or
    both null or absent: no location), and no ``_geo`` object beside them."""
    lat, lng = record.get(GEO_LAT), record.get(GEO_LNG)
    if lat is None and lng is None:
        return
    if record.get(GEO_FIELD) is not None:
        raise BadRequestError(f"{where}.{GEO_FIELD}: a location is either the object _geo or the keys _geo.lat and "
                              "_geo.lng, not both", field=GEO_FIELD)
    for key, value, other in ((GEO_LAT, lat, GEO_LNG), (GEO_LNG, lng, GEO_LAT)):
        if value is None:
            raise BadRequestError(f"{where}.{key}: is required with {other} (a location needs both)", field=GEO_FIELD)
        check_coordinate(value, f"{where}.{key}", GEO_BOUNDS[key.rsplit(".", 1)[1]], GEO_FIELD)


def record_location(record: dict[str, Any]) -> Any:
    """A record's location as stored: its ``_geo`` value, or ``{"lat", "lng"}`` from its flat keys
    ``_geo.lat`` and ``_geo.lng``; None when it has none. (Not validated: stored records of old
    versions may hold anything.)"""
    value = record.get(GEO_FIELD)
    if value is not None:
        return value
    lat, lng = record.get(GEO_LAT), record.get(GEO_LNG)
    if lat is None and lng is None:
        return None
    return {"lat": lat, "lng": lng}


def describe_value(value: Any) -> str:
    """A JSON value as an error message shows it: ``string "48.8"``, ``boolean true``, ``91``.

    >>> describe_value("48.8"), describe_value(True), describe_value(91.5), describe_value(float("nan"))
    ('string "48.8"', 'boolean true', '91.5', 'NaN')
    """
    if isinstance(value, bool):
        return f"boolean {'true' if value else 'false'}"
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, int):
        return integer_text(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:40] + "..."
        return f'string "{shown}"'
    return type_name(value)


def check_coordinate(value: Any, where: str, bound: float, field: str) -> float:
    """``value`` as a float if it is a JSON number in [-bound, bound], else a 400 naming ``where``.

    Strings (even numeric ones), booleans, NaN and infinities are refused.
    """
    # Compared before any float conversion: a huge JSON integer must not overflow into a 500.
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value)) or not -bound <= value <= bound):
        raise BadRequestError(
            f"{where}: must be a number between -{bound:g} and {bound:g}, got {describe_value(value)}", field=field
        )
    return float(value)


def check_geo_point(value: Any, where: str, field: str = GEO_FIELD) -> tuple[float, float]:
    """Validate a location object ``{"lat": ..., "lng": ...}`` and return ``(lat, lng)``.

    Used for a record's ``_geo`` (``where`` is ``records[i]._geo``) and for the points of a request's
    ``geo.polygon``; messages name ``where.lat``, ``where.lng`` or the unknown key.
    """
    if not isinstance(value, dict):
        raise BadRequestError(
            f'{where}: must be an object like {{"lat": 48.8566, "lng": 2.3522}}, got {describe_value(value)}',
            field=field,
        )
    for key in value:
        if key not in GEO_BOUNDS:
            raise BadRequestError(f"{where}.{key}: unknown field; a location holds only lat and lng", field=field)
    coordinates = []
    for key, bound in GEO_BOUNDS.items():
        if key not in value:
            raise BadRequestError(f"{where}.{key}: is required", field=field)
        coordinates.append(check_coordinate(value[key], f"{where}.{key}", bound, field))
    return coordinates[0], coordinates[1]


def iter_leaves(record: dict[str, Any]) -> Iterator[tuple[str, int, Any]]:
    """Yield ``(path, element, value)`` for every scalar leaf of a validated record except ``id``.

    ``element`` numbers the values of one path in order (0 for a plain value, the running index
    for array elements and for values reached through arrays of objects), so that positions of
    different elements can be kept apart. ``null`` leaves are skipped: a null field is absent.

    >>> list(iter_leaves({"id": 1, "a": {"b": ["x", "y"]}, "n": None}))
    [('a.b', 0, 'x'), ('a.b', 1, 'y')]
    """
    counters: dict[str, int] = {}
    stack: list[tuple[str, Any]] = [(key, value) for key, value in reversed(record.items()) if key != "id"]
    while stack:
        path, value = stack.pop()
        if value is None:
            continue
        if isinstance(value, dict):
            stack.extend((f"{path}.{key}", element) for key, element in reversed(value.items()))
        elif isinstance(value, (list, tuple)):
            stack.extend((path, element) for element in reversed(value))
        else:
            element = counters.get(path, 0)
            counters[path] = element + 1
            yield path, element, value


def first_leaf(record: dict[str, Any], path: str) -> Any:
    """The first value :func:`iter_leaves` yields at ``path`` (None when the record has none).

    >>> first_leaf({"id": 1, "g": [None, 3, "a"]}, "g")
    3
    """
    return next((value for leaf_path, _element, value in iter_leaves(record) if leaf_path == path), None)


def project(record: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    """Keep only ``paths`` (dotted) of ``record``, preserving nesting; ``id`` is always kept.

    >>> project({"id": 1, "a": {"b": 2, "c": 3}, "d": 4}, ["a.b"])
    {'id': 1, 'a': {'b': 2}}
    """
    result: dict[str, Any] = {"id": record["id"]}
    for path in paths:
        _copy_path(record, result, path.split("."))
    return result


def _copy_path(source: Any, target: dict[str, Any], parts: list[str]) -> None:
    head, rest = parts[0], parts[1:]
    if not isinstance(source, dict) or head not in source:
        return
    value = source[head]
    if not rest:
        target[head] = value
        return
    if isinstance(value, dict):
        child = target.setdefault(head, {})
        if isinstance(child, dict):
            _copy_path(value, child, rest)
    elif isinstance(value, list):
        # An array of objects: keep, element by element, the sub-path of each object.
        projected = []
        for element in value:
            if isinstance(element, dict):
                holder: dict[str, Any] = {}
                _copy_path(element, holder, rest)
                if holder:
                    projected.append(holder)
        if projected:
            target[head] = projected
