"""A durable collection on disk: its snapshot and write-ahead log, and the data directory.

Owns: the per-collection pair snapshot + log (open → state and batches to replay; log a batch;
take a snapshot and reset the log) and the data directory (format marker, lock, one folder per
collection). The engine decides when to call what; this module only moves bytes. Layout and byte
formats: :mod:`roarsearch.storage.format`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from roarsearch.errors import CorruptionError
from roarsearch.storage.format import DIRECTORY_FORMAT
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.lock import DirectoryLock
from roarsearch.storage.snapshot import read_snapshot, write_snapshot
from roarsearch.storage.wal import WriteAheadLog

#: A snapshot is taken (and the log reset) once the log holds this many bytes or batches.
SNAPSHOT_LOG_BYTES = int(os.environ.get("ROARSEARCH_SNAPSHOT_LOG_BYTES", 64 * 1024 * 1024))
SNAPSHOT_LOG_RECORDS = int(os.environ.get("ROARSEARCH_SNAPSHOT_LOG_RECORDS", 1000))


class CollectionStore:
    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.directory = directory
        self.snapshot_path = os.path.join(directory, "snapshot.rsnap")
        self.wal = WriteAheadLog(fs, os.path.join(directory, "wal.rlog"))
        self.last_snapshot_seq = 0

    def open(self) -> tuple[dict[str, Any] | None, Iterator[tuple[int, Any]]]:
        """The snapshot's index state (or None) and the log's batches written after it."""
        self.fs.makedirs(self.directory)
        loaded = read_snapshot(self.fs, self.snapshot_path)
        state = None
        if loaded is not None:
            self.last_snapshot_seq, state = loaded
        return state, self.wal.open(self.last_snapshot_seq)

    def log(self, payload: Any) -> int:
        return self.wal.append(payload)

    def should_snapshot(self) -> bool:
        return self.wal.size >= SNAPSHOT_LOG_BYTES or self.wal.records >= SNAPSHOT_LOG_RECORDS

    def snapshot(self, index_state: dict[str, Any]) -> None:
        last_seq = self.wal.next_seq - 1
        write_snapshot(self.fs, self.snapshot_path, last_seq, index_state)
        self.last_snapshot_seq = last_seq
        self.wal.reset()

    def verify(self) -> list[str]:
        """Checksums of the snapshot and every log record, re-read from disk."""
        problems = []
        if self.wal.truncated_tail is not None:
            offset, size = self.wal.truncated_tail
            problems.append(f"{self.wal.path}: offset {offset}: {size} bytes of an unfinished write were cut off at open "
                            "(a crash during a write; the batch had not been acknowledged)")
        try:
            read_snapshot(self.fs, self.snapshot_path)
        except CorruptionError as error:
            problems.append(error.data)
        try:
            for _ in WriteAheadLog(self.fs, self.wal.path).open(self.last_snapshot_seq):
                pass
        except CorruptionError as error:
            problems.append(error.data)
        return problems


class DataDirectory:
    """The data directory: format marker, lock, and one folder per collection."""

    def __init__(self, path: str, fs: FileSystem | None = None) -> None:
        self.fs = fs or FileSystem()
        self.path = os.path.abspath(path)
        self.fs.makedirs(os.path.join(self.path, "collections"))
        self.lock = DirectoryLock(self.path)
        self.lock.acquire()
        marker = os.path.join(self.path, "FORMAT")
        try:
            if self.fs.exists(marker):
                if self.fs.read(marker) != DIRECTORY_FORMAT:
                    raise CorruptionError(f"{marker}: offset 0: not a roarsearch data directory of format version 1")
            else:
                self.fs.write_new(marker, [DIRECTORY_FORMAT])
                self.fs.fsync_dir(self.path)
        except BaseException:
            self.lock.release()
            raise

    def collection_names(self) -> list[str]:
        return [name for name in self.fs.listdir(os.path.join(self.path, "collections"))
                if os.path.isdir(os.path.join(self.path, "collections", name))]

    def collection(self, name: str) -> CollectionStore:
        return CollectionStore(self.fs, os.path.join(self.path, "collections", name))

    def close(self) -> None:
        self.lock.release()
