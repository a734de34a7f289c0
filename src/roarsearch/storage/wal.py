"""The write-ahead log: one CRC-checked, length-prefixed msgpack record per write batch.

Owns: appending a batch durably (write, fsync — only then is it acknowledged), validating and
replaying the log on open (cutting off a torn tail, refusing corruption in the middle), and
resetting it after a snapshot. Byte layout: :mod:`roarsearch.storage.format`. Caller:
:class:`~roarsearch.storage.store.CollectionStore` (one log per collection; the caller serialises
appends — the log itself is not thread-safe).

Invariants:

- The file is always the header plus whole, intact records — except, after a crash, for one
  damaged or incomplete tail, which :meth:`WriteAheadLog.open` cuts off before anything is appended.
- Sequence numbers increase by exactly 1 from record to record and are never reused; a reset
  keeps counting, so records already in a snapshot can be recognised and skipped.
- A failed append (disk full, I/O error) truncates the file back to its previous length and
  raises :class:`~roarsearch.errors.StorageError`; if even that fails (or a reset's rename cannot
  be made durable), the log refuses every further append until it is reopened, so no batch can
  ever land behind a half-written one or in a file that a crash could swap away.

Failpoints: ``wal.after_append_before_fsync``, ``wal.after_fsync`` (durable, not yet
acknowledged), ``wal.after_reset``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import msgpack

from roarsearch.errors import CorruptionError, StorageError
from roarsearch.storage import failpoints
from roarsearch.storage.format import (
    MAX_WAL_PAYLOAD,
    WAL_MAGIC,
    WalRecord,
    describe_version_mismatch,
    find_wal_record,
    pack_wal_record,
    read_wal_record,
    wal_record_length,
)
from roarsearch.storage.fs import FileSystem

#: How many sequence numbers past a damaged record are looked for to tell corruption in the
#: middle of the log (intact records follow) from a torn tail (nothing intact follows).
LOOKAHEAD_RECORDS = 16


def _damage_is_followed(data: bytes, offset: int, expected_seq: int, after_seq: int) -> bool:
    """Whether an intact record lies beyond the damaged one at ``offset`` (then it is not a torn tail)."""
    length = wal_record_length(data, offset)
    if length is not None and read_wal_record(data, offset + length) is not None:
        return True  # the header survived: the next record is right behind the damaged body
    candidates = set(range(expected_seq + 1, expected_seq + 1 + LOOKAHEAD_RECORDS))
    if offset == len(WAL_MAGIC):  # the first record is damaged: the log may start anywhere up to after_seq + 1
        candidates |= set(range(2, 2 + LOOKAHEAD_RECORDS))
        candidates |= set(range(after_seq + 2, after_seq + 2 + LOOKAHEAD_RECORDS))
    return any(find_wal_record(data, offset + 1, seq) is not None for seq in sorted(candidates))


class _Scan:
    """The intact records of a log file and where its valid part ends."""

    def __init__(self, path: str, data: bytes, after_seq: int) -> None:
        self.records: list[WalRecord] = []
        offset = len(WAL_MAGIC)
        previous: int | None = None
        while offset < len(data):
            record = read_wal_record(data, offset)
            if record is None:
                expected = after_seq + 1 if previous is None else previous + 1
                if _damage_is_followed(data, offset, expected, after_seq):
                    raise CorruptionError(
                        f"{path}: offset {offset}: write-ahead log record fails its checksum and intact "
                        "records follow it (damage in the middle of the log; nothing was dropped)"
                    )
                break  # the unacknowledged tail of a write cut by a crash
            if previous is None and record.seq > after_seq + 1:
                raise CorruptionError(
                    f"{path}: offset {offset}: the log starts at sequence {record.seq} but the snapshot ends at "
                    f"{after_seq}: batches {after_seq + 1}..{record.seq - 1} are missing"
                )
            if previous is not None and record.seq != previous + 1:
                raise CorruptionError(f"{path}: offset {offset}: sequence {record.seq} follows {previous}")
            self.records.append(record)
            previous = record.seq
            offset = record.end
        self.valid_end = offset
        self.last_seq = previous


def _decode(path: str, data: bytes, records: list[WalRecord], after_seq: int) -> Iterator[tuple[int, Any]]:
    view = memoryview(data)
    for record in records:
        if record.seq <= after_seq:
            continue  # already in the snapshot (a crash came between its rename and the log reset)
        try:
            payload = msgpack.unpackb(view[record.body_start:record.end], raw=False, strict_map_key=False)
        except Exception as error:
            raise CorruptionError(
                f"{path}: offset {record.body_start}: write-ahead log payload does not decode ({error})"
            ) from error
        yield record.seq, payload


def _packed_body(payload: dict[str, Any], key: str, items: list[bytes]) -> bytes:
    """``msgpack.packb(payload)`` where ``payload[key]`` is a list whose items are given packed:
    a msgpack array is its header followed by its items' encodings, so they are joined as they are."""
    packer = msgpack.Packer(use_bin_type=True)
    parts = [packer.pack_map_header(len(payload))]
    for name, value in payload.items():
        parts.append(packer.pack(name))
        if name == key:
            parts.append(packer.pack_array_header(len(items)))
            parts.extend(items)
        else:
            parts.append(packer.pack(value))
    return b"".join(parts)


class WriteAheadLog:
    """``open()`` once (replaying what it returns), then ``append()`` batches; ``reset()`` after a snapshot."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs = fs
        self.path = path
        self.next_seq = 1
        #: Records in the file that the snapshot does not hold yet.
        self.record_count = 0
        self.size_bytes = 0
        #: (offset, bytes) of a damaged or incomplete tail cut off at open, reported by check().
        self.truncated_tail: tuple[int, int] | None = None
        self._opened = False
        self._broken: str | None = None

    @property
    def records(self) -> int:
        """Alias of :attr:`record_count` (the engine's ``close()`` reads this name)."""
        return self.record_count

    @property
    def size(self) -> int:
        """Alias of :attr:`size_bytes`."""
        return self.size_bytes

    def open(self, after_seq: int = 0) -> Iterator[tuple[int, Any]]:
        """Validate the log, cut off a torn tail, and return ``(seq, payload)`` of records after ``after_seq``.

        Validation, repair and the counters are done before this returns; payloads are decoded
        lazily as the iterator is consumed. Creates an empty log when there is none.
        """
        self.truncated_tail = None
        try:
            data = self.fs.read(self.path)
        except FileNotFoundError:
            data = None
        except OSError as error:
            raise StorageError(f"{self.path}: the write-ahead log could not be read ({error.strerror or error})") from error
        if data is None or (len(data) < len(WAL_MAGIC) and WAL_MAGIC.startswith(data)):
            # No log, or one cut short while being created: it held no batch.
            self._create()
            self.next_seq = after_seq + 1
            self.record_count = 0
            self._opened = True
            return iter(())
        if data[: len(WAL_MAGIC)] != WAL_MAGIC:
            raise CorruptionError(f"{self.path}: offset 0: {describe_version_mismatch(data[:8], WAL_MAGIC, 'write-ahead log')}")
        scan = _Scan(self.path, data, after_seq)
        if scan.valid_end < len(data):
            self.truncated_tail = (scan.valid_end, len(data) - scan.valid_end)
            try:
                self.fs.truncate(self.path, scan.valid_end)
            except OSError as error:
                raise StorageError(
                    f"{self.path}: the unfinished write at offset {scan.valid_end} could not be cut off "
                    f"({error.strerror or error})"
                ) from error
        self.size_bytes = scan.valid_end
        self.next_seq = max(after_seq, scan.last_seq or 0) + 1
        self.record_count = sum(1 for record in scan.records if record.seq > after_seq)
        self._opened = True
        self._broken = None
        return _decode(self.path, data, scan.records, after_seq)

    def replay(self, after_seq: int = 0) -> Iterator[Any]:
        """Payloads of the log's intact records after ``after_seq``, read-only (no repair, no create)."""
        try:
            data = self.fs.read(self.path)
        except FileNotFoundError:
            return
        if len(data) < len(WAL_MAGIC) and WAL_MAGIC.startswith(data):
            return
        if data[: len(WAL_MAGIC)] != WAL_MAGIC:
            raise CorruptionError(f"{self.path}: offset 0: {describe_version_mismatch(data[:8], WAL_MAGIC, 'write-ahead log')}")
        for _seq, payload in _decode(self.path, data, _Scan(self.path, data, after_seq).records, after_seq):
            yield payload

    def _create(self) -> None:
        temporary = self.path + ".tmp"
        try:
            self.fs.write_new(temporary, [WAL_MAGIC])
            self.fs.fsync(temporary)
            self.fs.replace(temporary, self.path)
            self.fs.fsync_dir(os.path.dirname(self.path) or ".")
        except OSError as error:
            raise StorageError(f"{self.path}: the write-ahead log could not be created ({error.strerror or error})") from error
        self.size_bytes = len(WAL_MAGIC)

    def append(self, payload: Any, packed: tuple[str, list[bytes]] | None = None) -> int:
        """Write ``payload`` as the next record and fsync it; returns its sequence number.

        ``packed``: (key, items) when the list ``payload[key]`` is already msgpack-encoded item by
        item (an add batch's records, which the doc store keeps in that form): the record is then
        assembled from those bytes rather than encoding the records a second time. The bytes
        written are the same either way.

        When this returns, the batch survives a crash. When it raises :class:`StorageError`,
        the file is as it was before the call.
        """
        if not self._opened:
            raise RuntimeError(f"{self.path}: open() the write-ahead log before appending")
        if self._broken is not None:
            raise StorageError(
                f"{self.path}: the write-ahead log could not be repaired after an earlier failure ({self._broken}); "
                "close and reopen the engine"
            )
        body = msgpack.packb(payload, use_bin_type=True) if packed is None else _packed_body(payload, *packed)
        if len(body) > MAX_WAL_PAYLOAD:
            raise StorageError(f"{self.path}: a batch of {len(body)} bytes is over the 4 GiB record limit; split it")
        seq = self.next_seq
        record = pack_wal_record(seq, body)
        try:
            self.fs.append(self.path, record)
            failpoints.hit("wal.after_append_before_fsync")
            self.fs.fsync(self.path)
        except OSError as error:
            try:
                self.fs.truncate(self.path, self.size_bytes)
            except OSError as repair_error:
                self._broken = f"cutting it back to {self.size_bytes} bytes failed: {repair_error.strerror or repair_error}"
                raise StorageError(
                    f"{self.path}: the batch could not be made durable ({error.strerror or error}) and the log could "
                    f"not be cut back ({repair_error.strerror or repair_error}): the batch was not applied, but may "
                    "reappear whole when the log is reopened; the log refuses writes until then"
                ) from error
            raise StorageError(
                f"{self.path}: the batch could not be made durable ({error.strerror or error}); nothing was written"
            ) from error
        failpoints.hit("wal.after_fsync")
        self.size_bytes += len(record)
        self.record_count += 1
        self.next_seq = seq + 1
        return seq

    def reset(self) -> None:
        """Replace the log with an empty one (after a snapshot that holds every record in it).

        Sequence numbers go on from where they were. On failure before the rename the old log is
        kept (its records are skipped on replay since the snapshot holds them); a failure after
        it leaves the log unusable until reopened, because the rename may not be durable.
        """
        temporary = self.path + ".tmp"
        try:
            self.fs.write_new(temporary, [WAL_MAGIC])
            self.fs.fsync(temporary)
            self.fs.replace(temporary, self.path)
        except OSError as error:
            try:
                self.fs.remove(temporary)
            except OSError:
                pass
            raise StorageError(f"{self.path}: the log could not be reset ({error.strerror or error}); it is unchanged") from error
        self.size_bytes = len(WAL_MAGIC)
        self.record_count = 0
        try:
            self.fs.fsync_dir(os.path.dirname(self.path) or ".")
        except OSError as error:
            self._broken = f"the reset's rename could not be made durable: {error.strerror or error}"
            raise StorageError(f"{self.path}: {self._broken}") from error
        failpoints.hit("wal.after_reset")
