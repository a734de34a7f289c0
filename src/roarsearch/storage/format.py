"""Byte layouts of roarsearch's data files, format version 1, and the framing helpers for them.

Owns: every magic number, header layout and checksum rule of the data directory. The writers
(:mod:`~roarsearch.storage.wal`, :mod:`~roarsearch.storage.snapshot`,
:mod:`~roarsearch.storage.store`) frame and unframe bytes only through the helpers here, so the
layout is specified — and changed — in one place. Imports no other roarsearch module.

All integers are little-endian. Checksums are **CRC-32 (IEEE, ``zlib.crc32``)**, not CRC-32C:
zlib's is in the standard library and runs at several GB/s here, so checksumming a 500 MB
snapshot costs well under 0.1 s. A checksum guards against torn writes and media damage, not
against malice.

Data directory::

    DATA/
      FORMAT                      b"roarsearch data directory\\n" + b"version 1\\n"
      LOCK                        the pid of the engine holding the directory (fcntl.flock), "1234\\n"
      collections/<collectionId>/
        snapshot.rsnap            the whole collection state (below), replaced atomically
        wal.rlog                  batches written since that snapshot (below)

Every file names its format version: ``FORMAT`` in its second line, ``wal.rlog`` and
``snapshot.rsnap`` in the byte after their 5-byte magic. A file of another version is refused with
a message naming both versions, never misread. ``LOCK`` holds no data.

Write-ahead log (``wal.rlog``)::

    offset  size  field
    0       5     magic b"RSWAL"
    5       1     format version (1)
    6       2     reserved, zero
    8       ...   records, back to back:
                    +0   u32  payload length n
                    +4   u64  sequence number (increasing by 1; never reset, not even by a snapshot)
                    +12  u32  CRC-32 of the 12 bytes at +0
                    +16  u32  CRC-32 of the payload
                    +20  n    msgpack payload: {"op": "add", "records": [...]}
                              | {"op": "delete", "ids": [...]} | {"op": "clear"}
                              | {"op": "settings", "settings": {...every settings key}}

A record is acknowledged once it is fsynced. The header has its own CRC so that a damaged length
can never make the reader skip or invent records. On open, a damaged or incomplete record with no
intact record after it is the tail of a write cut by a crash: it is cut off (and reported by
``check()``). A damaged record followed by an intact one is corruption in the middle of the log:
opening fails with a ``CorruptionError`` naming the file and the byte offset, and nothing is
dropped.

Snapshot (``snapshot.rsnap``)::

    offset  size  field
    0       5     magic b"RSSNP"
    5       1     format version (4: the blob layout of docs/durability.md with compressed token
                  columns; versions 1 and 2 still read)
    6       2     reserved, zero
    8       8     u64 body length
    16      4     u32 CRC-32 of the body
    20      4     reserved, zero
    24      ...   body, msgpack: {"format": 1, "last_seq": <last WAL sequence number included>,
                                  "index": <the engine's index state, with a "settings" key
                                            when the collection has non-default settings>}

The body is streamed to ``snapshot.rsnap.tmp`` behind a zeroed header, the real header is written
last (so a half-written file never carries a valid one), then fsync, rename over
``snapshot.rsnap``, directory fsync; only then is the log reset. WAL records whose sequence number
is at most ``last_seq`` are skipped on replay, so a crash between the rename and the reset never
applies a batch twice.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

FORMAT_VERSION = 1

WAL_MAGIC = b"RSWAL" + bytes([FORMAT_VERSION]) + b"\0\0"
#: Snapshots are version 2 since their body took the blob layout, version 4 since their token
#: columns are compressed (an older roarsearch must refuse them by name, not misread them);
#: versions 1 and 2 still load. 3 is skipped: one flipped bit would turn it into 2 or 1, a readable
#: version, where 4 is two bits away from both (the header's version byte has no checksum).
SNAPSHOT_VERSION = 4
SNAPSHOT_MAGIC = b"RSSNP" + bytes([SNAPSHOT_VERSION]) + b"\0\0"
READABLE_SNAPSHOT_VERSIONS = (1, 2, SNAPSHOT_VERSION)
READABLE_SNAPSHOT_MAGICS = frozenset(b"RSSNP" + bytes([version]) + b"\0\0" for version in READABLE_SNAPSHOT_VERSIONS)
#: length, sequence, header crc, payload crc
WAL_RECORD_HEADER = struct.Struct("<IQII")
#: the part of the record header its own CRC covers
WAL_HEADER_CHECKED = 12
#: magic + version + reserved, body length, body crc, reserved
SNAPSHOT_HEADER = struct.Struct("<8sQI4x")
DIRECTORY_FORMAT = b"roarsearch data directory\nversion 1\n"
DIRECTORY_FORMAT_PREFIX = b"roarsearch data directory\nversion "

#: A payload's length is a u32.
MAX_WAL_PAYLOAD = 2**32 - 1

_SEQUENCE = struct.Struct("<Q")


def crc32(*parts: bytes | memoryview) -> int:
    """CRC-32 (zlib) of the concatenation of ``parts``, without concatenating them."""
    value = 0
    for part in parts:
        value = zlib.crc32(part, value)
    return value


def pack_wal_record(seq: int, payload: bytes) -> bytes:
    """One framed log record: header (length, sequence, their CRC, payload CRC) + payload."""
    checked = struct.pack("<IQ", len(payload), seq)
    return checked + struct.pack("<II", crc32(checked), crc32(payload)) + payload


class WalRecord(NamedTuple):
    seq: int
    body_start: int
    end: int


def read_wal_record(data: bytes | memoryview, offset: int) -> WalRecord | None:
    """The intact record at ``offset`` of a log, or None if it is incomplete or fails a checksum."""
    header_end = offset + WAL_RECORD_HEADER.size
    if header_end > len(data):
        return None
    length, seq, header_checksum, body_checksum = WAL_RECORD_HEADER.unpack_from(data, offset)
    if crc32(data[offset:offset + WAL_HEADER_CHECKED]) != header_checksum:
        return None
    end = header_end + length
    if end > len(data) or crc32(data[header_end:end]) != body_checksum:
        return None
    return WalRecord(seq, header_end, end)


def wal_record_length(data: bytes | memoryview, offset: int) -> int | None:
    """Total length of the record at ``offset`` when its header (not its body) is intact."""
    if offset + WAL_RECORD_HEADER.size > len(data):
        return None
    length, _seq, header_checksum, _body = WAL_RECORD_HEADER.unpack_from(data, offset)
    if crc32(data[offset:offset + WAL_HEADER_CHECKED]) != header_checksum:
        return None
    return WAL_RECORD_HEADER.size + int(length)


def find_wal_record(data: bytes, start: int, seq: int) -> int | None:
    """Offset of an intact record numbered ``seq`` starting at or after ``start``, if any.

    Looks for the sequence number's bytes (C speed) and checks each hit's checksums, so finding
    what lies behind a damaged record costs a few ``bytes.find`` calls, not a CRC per offset.
    """
    pattern = _SEQUENCE.pack(seq)
    position = data.find(pattern, start + 4)
    while position != -1:
        if read_wal_record(data, position - 4) is not None:
            return position - 4
        position = data.find(pattern, position + 1)
    return None


def pack_snapshot_header(body_length: int, body_crc: int) -> bytes:
    return SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, body_length, body_crc)


def describe_version_mismatch(found: bytes, magic: bytes, what: str, readable: str = str(FORMAT_VERSION)) -> str:
    """Why a file header does not match ``magic``: another version of ours, or not ours at all."""
    if found[:5] == magic[:5] and len(found) > 5:
        versions = "versions" if " " in readable else "version"
        return f"{what} of format version {found[5]}; this roarsearch reads format {versions} {readable}"
    return f"not a roarsearch {what} (bad magic bytes)"
