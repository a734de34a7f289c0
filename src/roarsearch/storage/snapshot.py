"""Snapshots: the whole collection state in one checksummed file, replaced atomically.

Owns: writing (temporary file, fsync, ``os.replace``, directory fsync) and reading (magic,
version, length and CRC checked before the body is decoded). Format in
:mod:`roarsearch.storage.format`.
"""

from __future__ import annotations

import os
from typing import Any

import msgpack

from roarsearch.errors import CorruptionError
from roarsearch.storage import failpoints
from roarsearch.storage.format import FORMAT_VERSION, SNAPSHOT_HEADER, SNAPSHOT_MAGIC, crc32
from roarsearch.storage.fs import FileSystem


def write_snapshot(fs: FileSystem, path: str, last_seq: int, index_state: dict[str, Any]) -> None:
    body = msgpack.packb({"format": FORMAT_VERSION, "last_seq": last_seq, "index": index_state}, use_bin_type=True)
    header = SNAPSHOT_HEADER.pack(SNAPSHOT_MAGIC, len(body), crc32(body))
    temporary = path + ".tmp"
    if failpoints._armed.get("snapshot.during_write"):
        half = len(body) // 2
        fs.write_new(temporary, [header, body[:half]])
        failpoints.hit("snapshot.during_write")
        fs.write_new(temporary, [header, body])
    else:
        fs.write_new(temporary, [header, body])
    fs.replace(temporary, path)
    fs.fsync_dir(os.path.dirname(path))
    failpoints.hit("snapshot.after_rename")


def read_snapshot(fs: FileSystem, path: str) -> tuple[int, dict[str, Any]] | None:
    """``(last_seq, index state)`` of the snapshot at ``path``, or None when there is none."""
    if not fs.exists(path):
        return None
    data = fs.read(path)
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptionError(f"{path}: offset 0: snapshot header is cut short ({len(data)} bytes)")
    magic, length, checksum = SNAPSHOT_HEADER.unpack_from(data, 0)
    if magic != SNAPSHOT_MAGIC:
        raise CorruptionError(f"{path}: offset 0: not a roarsearch snapshot of format version {FORMAT_VERSION}")
    body = memoryview(data)[SNAPSHOT_HEADER.size:]
    if len(body) != length:
        raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body is {len(body)} bytes, header says {length}")
    if crc32(body) != checksum:
        raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body fails its checksum")
    try:
        decoded = msgpack.unpackb(body, raw=False, strict_map_key=False)
        return int(decoded["last_seq"]), decoded["index"]
    except Exception as error:  # noqa: BLE001 - a checksummed body that does not decode is corruption too
        raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body does not decode ({error})") from error
