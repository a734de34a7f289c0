"""Following a collection's files from another process: read-only, incrementally, never writing.

Owns: :class:`LogFollower` (one collection's snapshot and write-ahead log read without the
directory lock, then the records appended since, by byte offset) and :class:`CommitBoard` (a small
shared file in which the one writing process publishes, per collection, the sequence number of
the last batch it acknowledged). Callers: :class:`~roarsearch.engine.follower.FollowerEngine` and
the multi-worker service (``server/workers.py``).

Invariants:
- nothing here creates, truncates or locks a data file: the writer owns the directory;
- a follower applies a record only when its sequence number is at most the published commit
  (a record written but not yet fsynced, or cut back after a failed fsync, is never seen);
- loading reads the log *before* the snapshot (as ``backup_data_directory`` copies them): a
  snapshot read later includes everything up to that log's start, so no batch falls between;
- a log replaced by a reset (a new inode) is read from its start; when a record the follower
  lacks is no longer in any log (it went into a snapshot), :meth:`LogFollower.tail` says so and
  the caller reloads from the snapshot;
- a torn or half-appended tail is simply not read yet: reading stops at the first record that is
  incomplete or fails its checksum, and resumes there.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from collections.abc import Mapping
from typing import Any

import msgpack

from roarsearch.errors import CorruptionError
from roarsearch.storage.format import FORMAT_VERSION, WAL_MAGIC, read_wal_record
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.snapshot import read_snapshot
from roarsearch.storage.store import COLLECTIONS_DIR, SNAPSHOT_FILE, WAL_FILE

#: A batch and its sequence number.
Batch = tuple[int, Any]


class LogFollower:
    """One collection's files as seen by a reader: :meth:`load` once, then :meth:`tail` as it grows."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.directory = directory
        self.wal_path = os.path.join(directory, WAL_FILE)
        self.snapshot_path = os.path.join(directory, SNAPSHOT_FILE)
        #: Sequence number of the last batch handed out (by the snapshot or the log).
        self.applied = 0
        self._inode: int | None = None
        self._offset = len(WAL_MAGIC)

    def load(self, upto: int) -> tuple[Any | None, Any | None, list[Batch]]:
        """``(index state, settings, batches)``: the snapshot's state (None without one) and the
        logged batches after it up to sequence ``upto``."""
        inode, data = self._read_log(0)  # the log first: see the module's invariants
        state = settings = None
        self.applied = 0
        if self.fs.exists(self.snapshot_path):
            body = read_snapshot(self.fs, self.snapshot_path)
            if not (isinstance(body, dict) and isinstance(body.get("last_seq"), int) and "index" in body):
                raise CorruptionError(f"{self.snapshot_path}: offset 24: snapshot body lacks last_seq or index")
            if body.get("format") != FORMAT_VERSION:
                raise CorruptionError(f"{self.snapshot_path}: snapshot of format {body.get('format')!r}; "
                                      f"this roarsearch reads format version {FORMAT_VERSION}")
            self.applied, state = body["last_seq"], body["index"]
            settings = state.get("settings") if isinstance(state, dict) else None
        self._inode, self._offset = inode, len(WAL_MAGIC)
        batches = self._records(data, upto) if data is not None else []
        return state, settings, batches

    def tail(self, upto: int) -> list[Batch] | None:
        """The logged batches after :attr:`applied` up to ``upto``; None when some of them are only
        in the snapshot now (the log was reset past them): then :meth:`load` again."""
        if self.applied >= upto:
            return []
        inode, data = self._read_log(self._offset)
        if inode != self._inode:  # a reset replaced the log: read the new one from its start
            inode, data = self._read_log(0)
            self._inode, self._offset = inode, len(WAL_MAGIC)
        batches = self._records(data, upto) if data is not None else []
        return batches if self.applied >= upto else None

    def _read_log(self, offset: int) -> tuple[int | None, bytes | None]:
        """(inode, bytes from ``offset``) of the log, or (None, None) when there is none yet.
        Offset 0 means the whole file, whose header is checked."""
        try:
            inode, data = self.fs.read_from(self.wal_path, offset)
        except FileNotFoundError:
            return None, None
        if offset == 0:
            if len(data) < len(WAL_MAGIC):
                return inode, None  # being created
            if data[:len(WAL_MAGIC)] != WAL_MAGIC:
                raise CorruptionError(f"{self.wal_path}: offset 0: not a roarsearch write-ahead log of this version")
            data = data[len(WAL_MAGIC):]
        return inode, data

    def _records(self, data: bytes, upto: int) -> list[Batch]:
        """Decode the intact records of ``data`` (which starts at :attr:`_offset`) up to ``upto``,
        advancing the offset past each record read and :attr:`applied` past each new one."""
        batches: list[Batch] = []
        view = memoryview(data)
        position = 0
        while True:
            record = read_wal_record(view, position)
            if record is None or record.seq > upto:
                break  # a tail being written or torn, or a batch not acknowledged yet
            if record.seq > self.applied:
                if record.seq != self.applied + 1:
                    break  # a gap: the batches between are in a snapshot now; tail() reports it
                try:
                    payload = msgpack.unpackb(view[record.body_start:record.end], raw=False, strict_map_key=False)
                except Exception as error:
                    raise CorruptionError(f"{self.wal_path}: offset {self._offset + record.body_start}: "
                                          f"write-ahead log payload does not decode ({error})") from error
                batches.append((record.seq, payload))
                self.applied = record.seq
            position = record.end
        self._offset += position
        view.release()
        return batches


def collection_directory(data_path: str, name: str) -> str:
    return os.path.join(data_path, COLLECTIONS_DIR, name)


# ---------------------------------------------------------------------- the commit board

#: The board's header: a change counter (odd while the writer is rewriting the body) and the body's length.
BOARD_HEADER = struct.Struct("<QI")
BOARD_BYTES = 4 * 1024 * 1024


def map_shared_file(path: str, size: int, *, create: bool = False) -> mmap.mmap:
    """``size`` bytes of ``path`` mapped shared between processes (made zeroed first if ``create``)."""
    if create:
        with open(path, "wb") as handle:
            handle.truncate(size)
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


class CommitBoard:
    """A shared file mapped by every worker: the writer publishes ``{"collections": {name: seq},
    "logged": {name: seq}, "drops": n}`` after each write and before acknowledging it (and, with
    ``logged`` only moved, as soon as a batch is durable in the log, so that readers apply it while
    the writer does); readers compare :meth:`version` (one 8-byte read) with what they have
    applied, and read the body only when it changed.

    A seqlock: the writer makes the counter odd, rewrites the body, makes it even; a reader retries
    until it reads the same even counter before and after the body. Not a data file: it lives in
    the service's run folder and is rebuilt by the writer when it starts.
    """

    def __init__(self, path: str, *, create: bool = False) -> None:
        self.path = path
        self._map = map_shared_file(path, BOARD_BYTES, create=create)
        self._lock = threading.Lock()

    def version(self) -> int:
        """Changes published so far (even: the body is complete)."""
        counter: int = BOARD_HEADER.unpack_from(self._map, 0)[0]
        return counter

    def publish(self, collections: Mapping[str, int], drops: int, logged: Mapping[str, int] | None = None) -> int:
        """``collections``: each collection's last acknowledged batch; ``logged``: its last batch
        durable in the log, perhaps not acknowledged yet (readers may apply it early; default:
        the acknowledged ones). Returns the version published."""
        body = msgpack.packb({"collections": dict(collections), "drops": drops,
                              "logged": dict(collections if logged is None else logged)}, use_bin_type=True)
        if BOARD_HEADER.size + len(body) > BOARD_BYTES:
            raise ValueError("too many collections for the commit board")
        with self._lock:  # one writer process, several writing threads
            counter = self.version()
            counter += counter % 2  # a writer that died mid-publish left it odd
            struct.pack_into("<Q", self._map, 0, counter + 1)
            self._map[BOARD_HEADER.size:BOARD_HEADER.size + len(body)] = body
            struct.pack_into("<I", self._map, 8, len(body))
            struct.pack_into("<Q", self._map, 0, counter + 2)
        return counter + 2

    def read(self) -> tuple[int, dict[str, int], int]:
        """``(version, {collection: committed seq}, drops)``; version 0: nothing published yet."""
        version, committed, _logged, drops = self.read_all()
        return version, committed, drops

    def read_all(self) -> tuple[int, dict[str, int], dict[str, int], int]:
        """``(version, {collection: committed seq}, {collection: logged seq}, drops)``."""
        while True:
            before, length = BOARD_HEADER.unpack_from(self._map, 0)
            if before % 2:
                os.sched_yield()
                continue
            if before == 0:
                return 0, {}, {}, 0
            body = self._map[BOARD_HEADER.size:BOARD_HEADER.size + length]
            if BOARD_HEADER.unpack_from(self._map, 0)[0] != before:
                continue
            try:
                decoded = msgpack.unpackb(body, raw=False)
            except Exception:  # torn by a concurrent publish; the counter check above is racy by a hair
                continue
            committed = dict(decoded["collections"])
            return before, committed, dict(decoded.get("logged", committed)), int(decoded["drops"])

    def close(self) -> None:
        self._map.close()
