"""The write-ahead log: one CRC-checked, length-prefixed msgpack record per write batch.

Owns: appending a batch durably (write, fsync — the acknowledgement), replaying the log on open
(cutting off a torn tail, refusing corruption), and resetting it after a snapshot. Format in
:mod:`roarsearch.storage.format`. A failed append (disk full, I/O error) truncates the file back to
its previous length and raises :class:`StorageError`; if even that fails, the log refuses further
appends until the engine is reopened, so no later batch can land behind a half-written one.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any

import msgpack

from roarsearch.errors import CorruptionError, StorageError
from roarsearch.storage import failpoints
from roarsearch.storage.format import WAL_MAGIC, WAL_RECORD_HEADER, crc32
from roarsearch.storage.fs import FileSystem


def _record_at(data: bytes, offset: int) -> tuple[int, int, int] | None:
    """(seq, body start, end) of an intact record at ``offset``, else None."""
    header_end = offset + WAL_RECORD_HEADER.size
    if header_end > len(data):
        return None
    length, seq, header_checksum, body_checksum = WAL_RECORD_HEADER.unpack_from(data, offset)
    if crc32(data[offset:offset + 12]) != header_checksum:
        return None
    end = header_end + length
    if end > len(data) or crc32(data[header_end:end]) != body_checksum:
        return None
    return seq, header_end, end


def _valid_record_follows(data: bytes, offset: int, seq: int) -> bool:
    """Whether an intact record numbered ``seq`` starts anywhere after ``offset``."""
    pattern = struct.pack("<Q", seq)
    position = data.find(pattern, offset + 4)
    while position != -1:
        if _record_at(data, position - 4) is not None:
            return True
        position = data.find(pattern, position + 1)
    return False


class WriteAheadLog:
    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path
        self.next_seq = 1
        self.records = 0
        self.size = 0
        self._broken: str | None = None
        #: (offset, bytes) of a damaged or incomplete tail cut off at open, reported by check().
        self.truncated_tail: tuple[int, int] | None = None

    def open(self, after_seq: int) -> Iterator[tuple[int, Any]]:
        """Validate the log and yield ``(seq, payload)`` of records after ``after_seq``.

        Must be fully consumed before appending.
        """
        if not self.fs.exists(self.path):
            self.fs.write_new(self.path, [WAL_MAGIC])
            self.fs.fsync_dir(os.path.dirname(self.path))
            self.size = len(WAL_MAGIC)
            self.next_seq = after_seq + 1
            return
        data = self.fs.read(self.path)
        if len(data) < len(WAL_MAGIC):
            # A log cut short while being created holds no batch: start it again.
            self.fs.write_new(self.path, [WAL_MAGIC])
            data = WAL_MAGIC
        if data[: len(WAL_MAGIC)] != WAL_MAGIC:
            raise CorruptionError(f"{self.path}: offset 0: not a roarsearch write-ahead log of format version 1")
        offset = len(WAL_MAGIC)
        last_seq = after_seq
        view = memoryview(data)
        while offset < len(data):
            record = _record_at(data, offset)
            if record is None:
                # A damaged record with a valid one after it is corruption in the middle of the log:
                # refuse. With nothing valid after it, it is the unacknowledged tail of a crash.
                if _valid_record_follows(data, offset, last_seq + 2):
                    raise CorruptionError(f"{self.path}: offset {offset}: write-ahead log record fails its checksum")
                self.truncated_tail = (offset, len(data) - offset)
                break
            seq, body_start, end = record
            if seq != last_seq + 1 and seq > after_seq:
                raise CorruptionError(f"{self.path}: offset {offset}: sequence {seq} follows {last_seq}")
            if seq > after_seq:
                yield seq, msgpack.unpackb(view[body_start:end], raw=False, strict_map_key=False)
                self.records += 1
            last_seq = max(last_seq, seq)
            offset = end
        if offset < len(data):
            self.fs.truncate(self.path, offset)
        self.size = offset
        self.next_seq = last_seq + 1

    def append(self, payload: Any) -> int:
        """Write ``payload`` as the next record and fsync it; returns its sequence number."""
        if self._broken is not None:
            raise StorageError(f"{self.path}: the log could not be repaired after an earlier failure "
                               f"({self._broken}); reopen the engine")
        body = msgpack.packb(payload, use_bin_type=True)
        seq = self.next_seq
        head = WAL_RECORD_HEADER.pack(len(body), seq, 0, 0)[:12]
        record = WAL_RECORD_HEADER.pack(len(body), seq, crc32(head), crc32(body)) + body
        try:
            self.fs.append(self.path, record)
            failpoints.hit("wal.after_append_before_fsync")
            self.fs.fsync(self.path)
        except OSError as error:
            try:
                self.fs.truncate(self.path, self.size)
            except OSError as repair_error:
                self._broken = str(repair_error)
            raise StorageError(f"{self.path}: the batch could not be made durable ({error.strerror or error}); "
                               "nothing was written") from error
        failpoints.hit("wal.after_fsync")
        self.size += len(record)
        self.records += 1
        self.next_seq = seq + 1
        return seq

    def reset(self) -> None:
        """Empty the log (after a snapshot that holds everything in it)."""
        self.fs.write_new(self.path + ".tmp", [WAL_MAGIC])
        self.fs.replace(self.path + ".tmp", self.path)
        self.fs.fsync_dir(os.path.dirname(self.path))
        self.size = len(WAL_MAGIC)
        self.records = 0
        failpoints.hit("wal.after_reset")
