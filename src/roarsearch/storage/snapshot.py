"""Snapshots: a whole state in one checksummed msgpack file, replaced atomically.

Owns: writing a state (temporary file, fsync, ``os.replace``, directory fsync — the file is
either the old snapshot or the new one, whole) and reading one back (magic, version, length and
CRC checked before a byte of the body is decoded). Byte layout: :mod:`roarsearch.storage.format`.
Caller: :class:`~roarsearch.storage.store.CollectionStore`, which wraps the engine's index state
with the log position it includes.

Memory: the state's large binary values (serialised bitmaps, numpy buffers — passed as
``bytes``, ``bytearray`` or a contiguous ``memoryview``; as map values, items of short lists or
items of lists of binaries) are written straight from the caller's buffers, and everything else
is packed in ~1 MiB pieces, so writing a 500 MB state costs a few MiB on top of the state itself. Reading maps the file (page-cache pages, not a
private copy), checks it, and decodes a memoryview over the mapping in one msgpack call, so the
private memory it takes is the decoded state alone (msgpack copies binary values out).

Failpoints: ``snapshot.during_write`` (the temporary file holds part of the body and a zeroed
header), ``snapshot.after_rename`` (the new snapshot is durable, the caller has not reset its log).
"""

from __future__ import annotations

import gc
import itertools
import mmap
import os
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import msgpack

from roarsearch.errors import CorruptionError, StorageError
from roarsearch.storage import failpoints
from roarsearch.storage.format import (
    SNAPSHOT_HEADER,
    SNAPSHOT_MAGIC,
    crc32,
    describe_version_mismatch,
    pack_snapshot_header,
)
from roarsearch.storage.fs import FileSystem

#: Binary values at least this large are written from the caller's buffer, not copied.
DIRECT_WRITE_BYTES = 64 * 1024
#: Small pieces are gathered into writes of about this size.
WRITE_CHUNK_BYTES = 1024 * 1024
#: Long lists and maps are packed this many items at a time (C speed, bounded memory).
PACK_SLICE_ITEMS = 4096
#: Lists up to this long are walked item by item, so that large binary items inside stay uncopied.
WALK_LIST_ITEMS = 64

Buffer = bytes | bytearray | memoryview
_BUFFER_TYPES = {bytes, bytearray}


def _bin_header(length: int) -> bytes:
    """msgpack bin8/16/32 header (big-endian lengths, as msgpack specifies)."""
    if length < 1 << 8:
        return b"\xc4" + struct.pack(">B", length)
    if length < 1 << 16:
        return b"\xc5" + struct.pack(">H", length)
    return b"\xc6" + struct.pack(">I", length)


def _container_header_size(count: int) -> int:
    """Bytes of the array/map header msgpack puts before ``count`` items (fix, 16 or 32)."""
    return 1 if count < 16 else 3 if count < 1 << 16 else 5


def _pieces(value: Any, packer: msgpack.Packer) -> Iterator[Buffer]:
    """``value`` as msgpack, piece by piece; same bytes as ``packer.pack(value)``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        view = memoryview(value).cast("B") if isinstance(value, memoryview) else value
        if len(view) >= DIRECT_WRITE_BYTES:
            yield _bin_header(len(view))
            yield view
        else:
            yield packer.pack(bytes(view) if isinstance(view, memoryview) else view)
    elif isinstance(value, dict):
        yield packer.pack_map_header(len(value))
        if len(value) <= PACK_SLICE_ITEMS:
            for key, item in value.items():
                yield packer.pack(key)
                yield from _pieces(item, packer)
        else:
            items = iter(value.items())
            while piece := dict(itertools.islice(items, PACK_SLICE_ITEMS)):
                yield memoryview(packer.pack(piece))[_container_header_size(len(piece)):]
    elif isinstance(value, (list, tuple)):
        yield packer.pack_array_header(len(value))
        if len(value) <= WALK_LIST_ITEMS:
            for item in value:
                yield from _pieces(item, packer)
        else:
            for start in range(0, len(value), PACK_SLICE_ITEMS):
                part = value[start:start + PACK_SLICE_ITEMS]
                # A long list of binaries (bitmaps, say) is walked so its large items stay uncopied;
                # the check runs at C speed (map over types and lengths), not per item in Python.
                if set(map(type, part)) <= _BUFFER_TYPES and max(map(len, part)) >= DIRECT_WRITE_BYTES:
                    for item in part:
                        yield from _pieces(item, packer)
                else:
                    yield memoryview(packer.pack(part))[_container_header_size(len(part)):]
    else:
        yield packer.pack(value)


def encode_chunks(state: Any) -> Iterator[Buffer]:
    """``state`` as msgpack in writes of about ``WRITE_CHUNK_BYTES`` (large buffers passed through)."""
    packer = msgpack.Packer(use_bin_type=True)
    pending = bytearray()
    for piece in _pieces(state, packer):
        if len(piece) >= DIRECT_WRITE_BYTES:
            if pending:
                yield pending
                pending = bytearray()
            yield piece
        else:
            pending += piece
            if len(pending) >= WRITE_CHUNK_BYTES:
                yield pending
                pending = bytearray()
    if pending:
        yield pending


def write_snapshot(fs: FileSystem, path: str, state: dict[str, Any]) -> int:
    """Replace the snapshot at ``path`` with ``state``, durably; returns the file's size.

    On any I/O failure the previous snapshot is left in place, the temporary file is removed
    (best effort) and :class:`StorageError` is raised.
    """
    temporary = path + ".tmp"
    body = {"length": 0, "crc": 0}

    def chunks() -> Iterator[Buffer]:
        # A zeroed header first: a file cut short anywhere has no valid magic, and the real
        # header (which needs the body's length and CRC) is patched in once the body is written.
        yield bytes(SNAPSHOT_HEADER.size)
        for number, chunk in enumerate(encode_chunks(state)):
            yield chunk
            body["length"] += len(chunk)
            body["crc"] = zlib.crc32(chunk, body["crc"])
            if number == 0:
                failpoints.hit("snapshot.during_write")

    try:
        fs.write_new(temporary, chunks())
        fs.write_at(temporary, 0, pack_snapshot_header(body["length"], body["crc"]))
        fs.fsync(temporary)
        fs.replace(temporary, path)
    except OSError as error:
        try:
            fs.remove(temporary)
        except OSError:
            pass  # a leftover .tmp is harmless: it is never read and is removed at the next open
        raise StorageError(
            f"{path}: the snapshot could not be written ({error.strerror or error}); the previous snapshot is unchanged"
        ) from error
    try:
        fs.fsync_dir(os.path.dirname(path) or ".")
    except OSError as error:
        raise StorageError(
            f"{path}: the new snapshot is in place but its directory could not be synced ({error.strerror or error})"
        ) from error
    failpoints.hit("snapshot.after_rename")
    return SNAPSHOT_HEADER.size + body["length"]


def read_snapshot(fs: FileSystem, path: str) -> Any:
    """The state stored at ``path``, after checking magic, version, length and CRC.

    Raises ``FileNotFoundError`` when there is no file, :class:`CorruptionError` naming the file
    and offset when it is damaged, :class:`StorageError` when it cannot be read.
    """
    try:
        with fs.read_mapped(path) as data:
            return _decode(path, data)
    except (FileNotFoundError, CorruptionError):
        raise
    except OSError as error:
        raise StorageError(f"{path}: the snapshot could not be read ({error.strerror or error})") from error


def _decode(path: str, data: Buffer | mmap.mmap) -> Any:
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptionError(f"{path}: offset 0: snapshot header is cut short ({len(data)} of {SNAPSHOT_HEADER.size} bytes)")
    magic, length, checksum = SNAPSHOT_HEADER.unpack_from(data, 0)
    if magic != SNAPSHOT_MAGIC:
        raise CorruptionError(f"{path}: offset 0: {describe_version_mismatch(magic, SNAPSHOT_MAGIC, 'snapshot')}")
    if any(data[20:SNAPSHOT_HEADER.size]):
        raise CorruptionError(f"{path}: offset 20: snapshot header's reserved bytes are not zero")
    body_length = len(data) - SNAPSHOT_HEADER.size
    if body_length != length:
        where = SNAPSHOT_HEADER.size + min(body_length, length)
        raise CorruptionError(
            f"{path}: offset {where}: snapshot body is {body_length} bytes, its header says {length} "
            "(file cut short or extended)"
        )
    with memoryview(data) as whole, whole[SNAPSHOT_HEADER.size:] as body:
        if crc32(body) != checksum:
            raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body fails its checksum")
        # Decoding creates millions of objects and none of them can be garbage yet: without this
        # the cyclic collector would walk the growing state again and again.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return msgpack.unpackb(body, raw=False, strict_map_key=False)
        except Exception as error:
            raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body does not decode ({error})") from error
        finally:
            if collecting:
                gc.enable()
