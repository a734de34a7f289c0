"""Byte layouts of roarsearch's data files, format version 1. All integers are little-endian.

Data directory::

    DATA/
      FORMAT                      b"roarsearch data directory\\n" + b"version 1\\n"
      LOCK                        the pid of the engine holding the directory (fcntl lock)
      collections/<collectionId>/
        snapshot.rsnap            the whole collection state (below), replaced atomically
        wal.rlog                  batches written since that snapshot (below)

Write-ahead log (``wal.rlog``)::

    header   8 bytes   magic b"RSWAL" + version (u8) + 2 reserved zero bytes
    record   repeated:
             u32  payload length n
             u64  sequence number (increasing by 1 from 1, never reset by a snapshot)
             u32  CRC-32 (zlib) of the 12 bytes above
             u32  CRC-32 of the payload
             n    msgpack payload: {"op": "add", "records": [...]} | {"op": "delete", "ids": [...]}
                  | {"op": "clear"}

A record is acknowledged once it is fsynced. On open, a damaged or incomplete record with no
intact record after it is the tail of a write cut by a crash: it is cut off (and reported by
``check()``). A damaged record followed by an intact one is corruption in the middle of the log:
opening fails with a ``CorruptionError`` naming the file and the byte offset, and nothing is
dropped. The header has its own CRC so that a damaged length cannot hide the records after it.

Snapshot (``snapshot.rsnap``)::

    header   24 bytes  magic b"RSSNP" + version (u8) + 2 reserved zero bytes
                       + u64 body length + u32 CRC-32 of the body + 4 reserved zero bytes
    body     msgpack   {"format": 1, "last_seq": <last WAL sequence number included>,
                        "index": <roarsearch.index.index.index_to_state(...)>}

Written to ``snapshot.rsnap.tmp``, fsynced, renamed over ``snapshot.rsnap``, directory fsynced;
only then is the log reset. WAL records whose sequence number is at most ``last_seq`` are skipped on
replay, so a crash between the rename and the reset never applies a batch twice.
"""

from __future__ import annotations

import struct
import zlib

FORMAT_VERSION = 1
WAL_MAGIC = b"RSWAL" + bytes([FORMAT_VERSION]) + b"\0\0"
SNAPSHOT_MAGIC = b"RSSNP" + bytes([FORMAT_VERSION]) + b"\0\0"
WAL_RECORD_HEADER = struct.Struct("<IQII")  # length, sequence, header crc, payload crc
SNAPSHOT_HEADER = struct.Struct("<8sQI4x")  # magic, body length, crc
DIRECTORY_FORMAT = b"roarsearch data directory\nversion 1\n"


def crc32(*parts: bytes) -> int:
    value = 0
    for part in parts:
        value = zlib.crc32(part, value)
    return value
