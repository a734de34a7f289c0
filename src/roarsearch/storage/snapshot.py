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

from roarsearch.buffers import JoinedBuffers
from roarsearch.errors import CorruptionError, StorageError
from roarsearch.memory import drop_file_pages
from roarsearch.storage import failpoints
from roarsearch.storage.format import (
    READABLE_SNAPSHOT_MAGICS,
    SNAPSHOT_HEADER,
    SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
    describe_version_mismatch,
    pack_snapshot_header,
)
from roarsearch.storage.fs import FileSystem

#: Binary values at least this large are written from the caller's buffer, not copied.
DIRECT_WRITE_BYTES = 64 * 1024
#: The body of a snapshot in the blob layout (:func:`encode_with_blobs`) starts with these bytes
#: (an older body is a msgpack map, whose first byte is never ``R``).
BLOB_MAGIC = b"RSBLOBS\x01"
#: msgpack extension code of a reference into the blob region, and the reference's layout.
BLOB_EXT = 1
BLOB_REFERENCE = struct.Struct("<QQ")
BLOB_ALIGN = 8
#: The blob region starts this far into the body (after the magic and its 8-byte length).
BLOB_REGION_OFFSET = len(BLOB_MAGIC) + 8
#: The checksum pass reads the mapping in slices of this many bytes and lets go of each slice's
#: pages afterwards, so that checking a snapshot does not leave all of it resident.
CHECK_SLICE_BYTES = 16 * 1024 * 1024
#: Small pieces are gathered into writes of about this size.
WRITE_CHUNK_BYTES = 1024 * 1024
#: Long lists and maps are packed this many items at a time (C speed, bounded memory).
PACK_SLICE_ITEMS = 4096
#: Lists up to this long are walked item by item, so that large binary items inside stay uncopied.
WALK_LIST_ITEMS = 64

Buffer = bytes | bytearray | memoryview
_BUFFER_TYPES = {bytes, bytearray}
#: Items of a long list that make it walked item by item (see :func:`_pieces`).
_WALKED_TYPES = {dict, list, tuple, memoryview, JoinedBuffers}


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


class _Blobs:
    """Large binary values set aside for the blob region: each an 8-byte aligned byte range.
    ``placements``, when given, records each value's offset in the region by ``id(value)`` (the
    value as the state holds it, not a view made of it here)."""

    def __init__(self, placements: dict[int, int] | None = None) -> None:
        self.views: list[Buffer] = []
        self.size = 0
        self.placements = placements

    def add(self, view: Buffer | JoinedBuffers, value: object = None) -> bytes:
        """Set ``view`` (of the state's ``value``, if another object) aside; returns the packed
        reference to it that goes in its place."""
        offset = self.size
        if self.placements is not None:
            self.placements[id(view if value is None else value)] = offset
        parts = view if isinstance(view, JoinedBuffers) else (view,)
        self.views.extend(parts)
        length = view.size if isinstance(view, JoinedBuffers) else len(view)
        self.size += length
        padding = -self.size % BLOB_ALIGN
        if padding:
            self.views.append(bytes(padding))
            self.size += padding
        return msgpack.packb(msgpack.ExtType(BLOB_EXT, BLOB_REFERENCE.pack(offset, length)))


def _pieces(value: Any, packer: msgpack.Packer, blobs: _Blobs | None = None) -> Iterator[Buffer]:
    """``value`` as msgpack, piece by piece; same bytes as ``packer.pack(value)`` — except, with
    ``blobs``, that large binary values are references into the blob region."""
    if isinstance(value, JoinedBuffers):
        if blobs is not None:
            yield blobs.add(value)
        else:
            yield _bin_header(value.size)
            yield from value
    elif isinstance(value, (bytes, bytearray, memoryview)):
        view = memoryview(value).cast("B") if isinstance(value, memoryview) else value
        if len(view) >= DIRECT_WRITE_BYTES and blobs is not None:
            yield blobs.add(view, value)
        elif len(view) >= DIRECT_WRITE_BYTES:
            yield _bin_header(len(view))
            yield view
        else:
            yield packer.pack(bytes(view) if isinstance(view, memoryview) else view)
    elif isinstance(value, dict):
        yield packer.pack_map_header(len(value))
        if len(value) <= PACK_SLICE_ITEMS:
            for key, item in value.items():
                yield packer.pack(key)
                yield from _pieces(item, packer, blobs)
        else:
            items = iter(value.items())
            while piece := dict(itertools.islice(items, PACK_SLICE_ITEMS)):
                yield memoryview(packer.pack(piece))[_container_header_size(len(piece)):]
    elif isinstance(value, (list, tuple)):
        yield packer.pack_array_header(len(value))
        if len(value) <= WALK_LIST_ITEMS:
            for item in value:
                yield from _pieces(item, packer, blobs)
        else:
            for start in range(0, len(value), PACK_SLICE_ITEMS):
                part = value[start:start + PACK_SLICE_ITEMS]
                # A long list of binaries (bitmaps, say) is walked so its large items stay uncopied,
                # and so is one holding containers or views, which may hold large binaries (a
                # field's chunks: 232 at 10M records, each with its token blocks and doc sets,
                # were packed whole into the snapshot's own buffer, copies of gigabytes); the
                # checks run at C speed (map over types and lengths), not per item in Python.
                kinds = set(map(type, part))
                if (kinds & _WALKED_TYPES
                        or (kinds <= _BUFFER_TYPES and max(map(len, part)) >= DIRECT_WRITE_BYTES)):
                    for item in part:
                        yield from _pieces(item, packer, blobs)
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


def encode_with_blobs(state: Any, placements: dict[int, int] | None = None) -> Iterator[Buffer]:
    """``state`` in the blob layout: :data:`BLOB_MAGIC`, the blob region's length (8 bytes,
    little-endian), the blob region (every binary value of at least ``DIRECT_WRITE_BYTES``, each
    8-byte aligned, written from the caller's buffer), then the msgpack of the rest, where each
    of those values is an ``ExtType(BLOB_EXT, (offset, length))``. A reader maps the file and
    hands out views of the region: opening copies none of the large arrays. ``placements``: see
    :class:`_Blobs` (offsets from the region's start, :data:`BLOB_REGION_OFFSET` into the body).

    Values that are views of a mapped file (an earlier snapshot's stored records) are faulted in
    as they are written; their pages are dropped from this process's mapping every
    :data:`CHECK_SLICE_BYTES` (they stay in the page cache), so that rewriting a large snapshot
    does not make all of the old one resident."""
    packer = msgpack.Packer(use_bin_type=True)
    blobs = _Blobs(placements)
    rest: list[Buffer] = []
    pending = bytearray()
    for piece in _pieces(state, packer, blobs):
        pending += piece
        if len(pending) >= WRITE_CHUNK_BYTES:
            rest.append(pending)
            pending = bytearray()
    if pending:
        rest.append(pending)
    yield BLOB_MAGIC + struct.pack("<Q", blobs.size)
    mapped_bytes = 0
    # Every mapping read since the last drop: records come from one old snapshot or from many
    # spill-file mappings (one per batch), and dropping only the latest left the others resident.
    touched: dict[int, mmap.mmap] = {}
    for view in blobs.views:
        source = getattr(view, "obj", None)  # a memoryview's exporter; bytes have none
        if not isinstance(source, mmap.mmap):
            yield view
            continue
        touched[id(source)] = source
        # A slice at a time: one view can be most of a field's postings (hundreds of MB at 10M
        # records), all of it resident by the end of a single write.
        whole = memoryview(view).cast("B")
        for start in range(0, len(whole), CHECK_SLICE_BYTES):
            piece = whole[start:start + CHECK_SLICE_BYTES]
            yield piece
            mapped_bytes += len(piece)
            if mapped_bytes >= CHECK_SLICE_BYTES:
                for mapping in touched.values():
                    _drop_mapped_pages(mapping)
                touched = {id(source): source}
                mapped_bytes = 0
    for mapping in touched.values():
        _drop_mapped_pages(mapping)
    yield from rest


def _drop_mapped_pages(mapping: mmap.mmap) -> None:
    """Let go of ``mapping``'s resident pages when it maps a file (read-only: a later read faults
    them back in from the page cache, unchanged); an anonymous mapping is left alone."""
    drop_file_pages([mapping])


def write_snapshot(fs: FileSystem, path: str, state: dict[str, Any], placements: dict[int, int] | None = None) -> int:
    """Replace the snapshot at ``path`` with ``state``, durably; returns the file's size.
    ``placements``: filled with the file offset of each large binary value, by ``id(value)``
    (a caller can then keep views of the file instead of its own copies).

    On any I/O failure the previous snapshot is left in place, the temporary file is removed
    (best effort) and :class:`StorageError` is raised.
    """
    temporary = path + ".tmp"
    body = {"length": 0, "crc": 0}

    def chunks() -> Iterator[Buffer]:
        # A zeroed header first: a file cut short anywhere has no valid magic, and the real
        # header (which needs the body's length and CRC) is patched in once the body is written.
        yield bytes(SNAPSHOT_HEADER.size)
        for number, chunk in enumerate(encode_with_blobs(state, placements)):
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
    if placements is not None:
        for key in placements:
            placements[key] += SNAPSHOT_HEADER.size + BLOB_REGION_OFFSET
    return SNAPSHOT_HEADER.size + body["length"]


def read_snapshot(fs: FileSystem, path: str) -> Any:
    """The state stored at ``path``, after checking magic, version, length and CRC.

    In the blob layout the large binary values come back as read-only memoryviews of the mapped
    file (which stays mapped while any of them is alive; snapshots are replaced by rename, never
    modified in place), so nothing large is copied.

    Raises ``FileNotFoundError`` when there is no file, :class:`CorruptionError` naming the file
    and offset when it is damaged, :class:`StorageError` when it cannot be read.
    """
    try:
        data = fs.map_file(path)
        try:
            return _decode(path, data)
        finally:
            _release(data)
    except (FileNotFoundError, CorruptionError):
        raise
    except OSError as error:
        raise StorageError(f"{path}: the snapshot could not be read ({error.strerror or error})") from error


def _release(data: Buffer | mmap.mmap) -> None:
    """Unmap ``data`` now if nothing refers to it (an older layout, or a damaged file); otherwise
    the views handed out keep it mapped until they are gone."""
    if isinstance(data, mmap.mmap):
        try:
            data.close()
        except BufferError:
            pass


def _checksum(data: Buffer | mmap.mmap, start: int) -> int:
    """CRC-32 of ``data[start:]``, slice by slice, dropping each slice's pages from this mapping
    once read (they stay in the page cache): only what queries touch later becomes resident."""
    checksum = 0
    with memoryview(data) as whole:
        for offset in range(start, len(whole), CHECK_SLICE_BYTES):
            end = min(offset + CHECK_SLICE_BYTES, len(whole))
            with whole[offset:end] as part:
                checksum = zlib.crc32(part, checksum)
            if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
                aligned = offset - offset % mmap.PAGESIZE
                data.madvise(mmap.MADV_DONTNEED, aligned, end - aligned)
    return checksum


def _decode(path: str, data: Buffer | mmap.mmap) -> Any:
    if len(data) < SNAPSHOT_HEADER.size:
        raise CorruptionError(f"{path}: offset 0: snapshot header is cut short ({len(data)} of {SNAPSHOT_HEADER.size} bytes)")
    magic, length, checksum = SNAPSHOT_HEADER.unpack_from(data, 0)
    if magic not in READABLE_SNAPSHOT_MAGICS:
        readable = describe_version_mismatch(magic, SNAPSHOT_MAGIC, "snapshot", f"1, 2 and {SNAPSHOT_VERSION}")
        raise CorruptionError(f"{path}: offset 0: {readable}")
    if any(data[20:SNAPSHOT_HEADER.size]):
        raise CorruptionError(f"{path}: offset 20: snapshot header's reserved bytes are not zero")
    body_length = len(data) - SNAPSHOT_HEADER.size
    if body_length != length:
        where = SNAPSHOT_HEADER.size + min(body_length, length)
        raise CorruptionError(
            f"{path}: offset {where}: snapshot body is {body_length} bytes, its header says {length} "
            "(file cut short or extended)"
        )
    if _checksum(data, SNAPSHOT_HEADER.size) != checksum:
        raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body fails its checksum")
    whole = memoryview(data)
    body = whole[SNAPSHOT_HEADER.size:]
    rest = body
    hook: Any = msgpack.ExtType
    if body[:len(BLOB_MAGIC)] == BLOB_MAGIC:
        (region_length,) = struct.unpack_from("<Q", body, len(BLOB_MAGIC))
        region_start = BLOB_REGION_OFFSET
        region = body[region_start:region_start + region_length].toreadonly()
        rest = body[region_start + region_length:]

        def hook(code: int, reference: bytes) -> Any:
            if code != BLOB_EXT:
                return msgpack.ExtType(code, reference)
            offset, size = BLOB_REFERENCE.unpack(reference)
            if offset + size > region_length:
                raise ValueError(f"a blob reference ({offset}, {size}) lies outside the blob region")
            return region[offset:offset + size]
    # Decoding creates millions of objects and none of them can be garbage yet: without this
    # the cyclic collector would walk the growing state again and again.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return msgpack.unpackb(rest, raw=False, strict_map_key=False, ext_hook=hook)
    except Exception as error:
        raise CorruptionError(f"{path}: offset {SNAPSHOT_HEADER.size}: snapshot body does not decode ({error})") from error
    finally:
        if collecting:
            gc.enable()
        rest.release()
        body.release()
        whole.release()
