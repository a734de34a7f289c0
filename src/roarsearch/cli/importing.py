"""Reading import files for ``roarsearch import``: records with their line numbers, from JSON Lines,
a JSON array or CSV, plain or compressed, with ids named or made.

Owns: opening a file (gzip, bz2 and xz found by magic bytes or extension), the three readers, CSV
cell typing, and giving records their ids (``--id-field``, ``--generate-ids``). It never writes:
``cli/main.py`` batches what it yields and hands the batches to the engine.

Invariants:
- every reader yields ``(line, record)`` where ``line`` is where the record starts in the
  (decompressed) text, and raises :class:`ImportFileError` naming the line for anything that does
  not parse, so that the caller can stop before the batch holding it is written;
- CSV is strict: every row has exactly the header's cell count and every quote is closed; a row
  swallowed by an unclosed quote is an error, never silently merged into its neighbour;
- a generated id depends only on the record's content, so importing the same file twice replaces
  records instead of duplicating them.
"""

from __future__ import annotations

import bz2
import contextlib
import csv
import gzip
import hashlib
import io
import json
import lzma
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from roarsearch.errors import BadRequestError
from roarsearch.schema import GEO_BOUNDS, GEO_FIELD, check_coordinate, record_location

#: A CSV cell becomes a number only in canonical form: "007" and "1.50e" stay text (zip codes,
#: codes with leading zeros), and "nan"/"inf" (which float() would take) are not numbers in JSON.
CSV_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?P<fraction>\.[0-9]+)?(?P<exponent>[eE][+-]?[0-9]+)?")
JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: Compressions by their first bytes, which win over the extension (a renamed file still opens).
MAGIC = {b"\x1f\x8b": "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}
COMPRESSED_EXTENSIONS = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".xz": "xz"}
OPENERS: dict[str, Callable[[IO[bytes]], IO[bytes]]] = {
    "gzip": lambda raw: gzip.GzipFile(fileobj=raw, mode="rb"),  # type: ignore[dict-item, return-value]
    "bz2": lambda raw: bz2.BZ2File(raw, mode="rb"),
    "xz": lambda raw: lzma.LZMAFile(raw, mode="rb"),
}
#: Hex digits of a generated id: 64 bits, so a collision needs billions of distinct records.
GENERATED_ID_DIGITS = 16


class ImportFileError(ValueError):
    """A record that cannot be read; the message names the file and the line."""


@dataclass
class InputFile:
    """An opened import file: its text, and the compressed bytes read so far (for progress)."""

    text: IO[str]
    raw: IO[bytes]
    size: int
    compression: str | None

    def bytes_read(self) -> int:
        return self.raw.tell()


def format_of(path: str) -> str:
    """``jsonl``, ``json`` or ``csv`` from the extension, a compression suffix left out (``a.csv.gz`` is CSV)."""
    stem, extension = os.path.splitext(path.lower())
    if extension in COMPRESSED_EXTENSIONS:
        extension = os.path.splitext(stem)[1]
    return {".csv": "csv", ".json": "json"}.get(extension, "jsonl")


def compression_of(path: str, head: bytes) -> str | None:
    for magic, name in MAGIC.items():
        if head.startswith(magic):
            return name
    return COMPRESSED_EXTENSIONS.get(os.path.splitext(path.lower())[1]) if not head else None


@contextlib.contextmanager
def open_input(path: str, kind: str) -> Iterator[InputFile]:
    """The file as UTF-8 text, decompressed when its magic bytes say so."""
    with open(path, "rb") as raw:
        compression = compression_of(path, raw.read(6))
        raw.seek(0)
        size = os.fstat(raw.fileno()).st_size
        binary: IO[bytes] = OPENERS[compression](raw) if compression else raw
        # CSV reads its own line ends (quoted cells may hold them); JSON takes any line end.
        text = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="" if kind == "csv" else None)
        try:
            yield InputFile(text, raw, size, compression)
        finally:
            text.detach()


def read_rows(name: str, source: InputFile, kind: str) -> Iterator[tuple[int, Any]]:
    """``(line, record)`` pairs of an opened file; damage and bad text become an :class:`ImportFileError`."""
    try:
        yield from READERS[kind](name, source.text)
    except UnicodeDecodeError as error:
        what = f"not UTF-8 text once decompressed ({source.compression})" if source.compression else "not UTF-8 text"
        raise ImportFileError(f"{name}: {what} ({error.reason})") from error
    except (EOFError, lzma.LZMAError, OSError) as error:
        if source.compression is None:
            raise
        raise ImportFileError(f"{name}: damaged {source.compression} data ({error})") from error


# ---------------------------------------------------------------------- readers

def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def jsonl_rows(name: str, handle: IO[str]) -> Iterator[tuple[int, Any]]:
    for line, text in enumerate(handle, start=1):
        if not text.strip():
            continue
        try:
            # Without its newline, so that a record cut short is reported at its own end.
            yield line, json.loads(text.rstrip("\r\n"), parse_constant=_reject_constant)
        except json.JSONDecodeError as error:
            raise ImportFileError(f"{name}: line {line}: malformed JSON: {error.msg} (column {error.colno})") from error
        except ValueError as error:
            raise ImportFileError(f"{name}: line {line}: {error}") from error


def json_array_rows(name: str, handle: IO[str]) -> Iterator[tuple[int, Any]]:
    """The elements of a JSON array one at a time, each with the line it starts on."""
    text = handle.read()
    decoder = json.JSONDecoder(parse_constant=_reject_constant)

    def skip(position: int) -> int:
        match = JSON_WHITESPACE.match(text, position)
        return match.end() if match else position

    def line_of(position: int) -> int:
        return text.count("\n", 0, position) + 1

    position = skip(0)
    if text[position:position + 1] != "[":
        raise ImportFileError(f"{name}: a JSON file must hold an array of records (use .jsonl for JSON Lines)")
    position = skip(position + 1)
    if text[position:position + 1] == "]":
        return
    line, counted_to = 1, 0
    while True:
        line += text.count("\n", counted_to, position)  # counted incrementally: one pass over the text
        counted_to = position
        try:
            record, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError as error:
            raise ImportFileError(f"{name}: line {error.lineno}: malformed JSON: {error.msg} (column {error.colno})") from error
        except ValueError as error:
            raise ImportFileError(f"{name}: line {line}: {error}") from error
        yield line, record
        position = skip(end)
        separator = text[position:position + 1]
        if separator == ",":
            position = skip(position + 1)
        elif separator == "]":
            rest = skip(position + 1)
            if rest != len(text):
                raise ImportFileError(f"{name}: line {line_of(rest)}: text after the end of the array")
            return
        else:
            raise ImportFileError(f"{name}: line {line_of(position)}: malformed JSON: expected ',' or ']' after a record")


def csv_value(text: str) -> Any:
    match = CSV_NUMBER.fullmatch(text)
    if match is None:
        return text
    if match["fraction"] is None and match["exponent"] is None:
        return int(text)
    return float(text)


def csv_rows(name: str, handle: IO[str]) -> Iterator[tuple[int, Any]]:
    # strict: a stray quote after a closing one, or a quote never closed, is an error, not text.
    reader = csv.reader(handle, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as error:
        raise ImportFileError(f"{name}: line 1: the header is not valid CSV ({error})") from error
    if header is None:
        return
    if len(set(header)) != len(header) or any(not column for column in header):
        raise ImportFileError(f"{name}: line 1: the header needs distinct, non-empty column names")
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader, None)
        except csv.Error as error:
            if "end of data" in str(error) or "EOF" in str(error):
                raise ImportFileError(f"{name}: line {start}: a quoted cell is never closed (it runs to the end "
                                      "of the file); is a closing quote missing?") from error
            raise ImportFileError(f"{name}: line {start}: not valid CSV ({error}){_spans(start, reader.line_num)}") \
                from error
        if cells is None:
            return
        if cells:  # a blank line
            if len(cells) != len(header):
                spans = _spans(start, reader.line_num)
                raise ImportFileError(f"{name}: line {start}: {len(cells)} cells, the header names {len(header)}{spans}")
            yield start, {column: csv_value(cell) for column, cell in zip(header, cells) if cell != ""}
        start = reader.line_num + 1


def _spans(start: int, end: int) -> str:
    # A record over several lines, when the file meant one per line, is the mark of an unclosed quote.
    return f" (the row runs from line {start} to line {end}: is a quote not closed?)" if end > start else ""


READERS: dict[str, Callable[[str, IO[str]], Iterator[tuple[int, Any]]]] = {
    "jsonl": jsonl_rows, "json": json_array_rows, "csv": csv_rows,
}


# ---------------------------------------------------------------------- ids

def generated_id(record: dict[str, Any]) -> str:
    """A stable id made from the record's content: the same record always gets the same id.

    The content is the record as canonical JSON (keys sorted, no spaces); its BLAKE2b hash, cut to
    64 bits, in hex. Re-importing a file therefore replaces its records rather than adding copies,
    and two identical records become one.
    """
    canonical = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.blake2b(canonical.encode("utf-8"), digest_size=GENERATED_ID_DIGITS // 2).hexdigest()


def with_ids(name: str, rows: Iterator[tuple[int, Any]], id_field: str | None,
             generate: bool) -> Iterator[tuple[int, Any]]:
    """Records with their ``id`` taken from ``id_field`` or generated from their content."""
    for line, record in rows:
        if isinstance(record, dict):
            if id_field is not None and id_field != "id":
                if id_field in record:
                    # First, as a reader expects it; an "id" field of its own is replaced.
                    record = {"id": record[id_field], **{key: value for key, value in record.items() if key != "id"}}
                elif not generate:
                    raise ImportFileError(f"{name}: line {line}: the record has no field {id_field!r} "
                                          "(named by --id-field; add --generate-ids to make ids for such records)")
            if generate and "id" not in record:
                record = {"id": generated_id(record), **record}  # first, as a reader expects it
        yield line, record


# ---------------------------------------------------------------------- locations

#: Field names that look like a latitude and a longitude (lower case): a hint when they give no location.
LATITUDE_NAMES = ("lat", "latitude")
LONGITUDE_NAMES = ("lng", "lon", "long", "longitude")


def with_locations(name: str, rows: Iterator[tuple[int, Any]], columns: tuple[str, str]) -> Iterator[tuple[int, Any]]:
    """Records given a location ``_geo: {"lat", "lng"}`` from the fields (CSV columns) named by
    ``--geo LAT,LNG``; the fields themselves stay. A record with neither field has no location."""
    lat_field, lng_field = columns
    for line, record in rows:
        if isinstance(record, dict) and (lat_field in record or lng_field in record):
            if record.get(GEO_FIELD) is not None:
                raise ImportFileError(f"{name}: line {line}: the record has a _geo of its own and the fields "
                                      f"{lat_field!r} and {lng_field!r} named by --geo")
            point = {}
            for field, key in ((lat_field, "lat"), (lng_field, "lng")):
                value = record.get(field)
                if value is None:
                    raise ImportFileError(f"{name}: line {line}: {field!r} (named by --geo): is empty or missing; "
                                          "a location needs both fields")
                try:
                    point[key] = check_coordinate(value, f"{field!r} (named by --geo)", GEO_BOUNDS[key], GEO_FIELD)
                except BadRequestError as error:
                    raise ImportFileError(f"{name}: line {line}: {error.data}") from None
            record = {**record, GEO_FIELD: point}
        yield line, record


def location_hint(record: Any, columns: tuple[str, str] | None) -> str | None:
    """Why a record with latitude/longitude-like fields got no location, and what to pass instead."""
    if columns is not None or not isinstance(record, dict) or record_location(record) is not None:
        return None
    keys = {key.lower(): key for key in record if isinstance(key, str)}
    lat = next((keys[key] for key in LATITUDE_NAMES if key in keys), None)
    lng = next((keys[key] for key in LONGITUDE_NAMES if key in keys), None)
    if lat is None or lng is None:
        return None
    return (f"the fields {lat!r} and {lng!r} give no location: a record's location is its _geo field "
            f"(or the two columns _geo.lat and _geo.lng); to search by distance, import with --geo {lat},{lng}")
