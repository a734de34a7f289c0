"""A durable collection on disk (snapshot + write-ahead log) and the data directory holding them.

Owns: the per-collection pair snapshot + log — open (the snapshot's state and the batches logged
after it), log a batch, take a snapshot and reset the log, verify checksums — and the data
directory: its ``FORMAT`` marker, its ``LOCK``, one folder per collection, consistent backups.
The engine decides what to log and when to snapshot; this module only moves bytes. Layout and
byte formats: :mod:`roarsearch.storage.format`. Callers: ``roarsearch.engine.engine.Engine``
(``DataDirectoryStore``) and ``roarsearch.engine.collection.Collection`` (``CollectionStore``).

Every file names its format version (``FORMAT``'s second line; the byte after the magic of
``wal.rlog`` and ``snapshot.rsnap``; the snapshot body's ``"format"`` key).

Invariants:

- The snapshot's ``last_seq`` is the sequence number of the last log record it includes. Records
  numbered at most ``last_seq`` are skipped on replay, so a crash between the snapshot's rename and
  the log's reset never applies a batch twice; the log is reset only after the new snapshot's
  rename is durable, so a batch is never lost either.
- Writers are serialised by the caller (one writer per collection at a time).
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import Any

from roarsearch.buffers import Buffer, JoinedBuffers
from roarsearch.errors import BadRequestError, CorruptionError, StorageError
from roarsearch.storage.format import DIRECTORY_FORMAT, DIRECTORY_FORMAT_PREFIX, FORMAT_VERSION
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.lock import LOCK_FILE, DirectoryLock
from roarsearch.storage.snapshot import read_snapshot, write_snapshot
from roarsearch.storage.spill import SPILL_FILE, SpillFile
from roarsearch.storage.wal import WriteAheadLog

#: A snapshot is due (and the log is reset) once the log holds this many bytes ...
log = logging.getLogger(__name__)

SNAPSHOT_LOG_BYTES = int(os.environ.get("ROARSEARCH_SNAPSHOT_LOG_BYTES", 64 * 1024 * 1024))
#: ... or this many batches not yet in the snapshot. (The environment variables are for tests.)
SNAPSHOT_LOG_RECORDS = int(os.environ.get("ROARSEARCH_SNAPSHOT_LOG_RECORDS", 1000))
#: A snapshot rewrites the whole index, so the byte threshold grows with it: the log may hold as
#: many bytes as the last snapshot has times this before the next one. Each snapshot then costs
#: about what the batches since the last one cost to log, and a build of N records writes
#: O(N) snapshot bytes in all (a fixed threshold wrote O(N²): 1M text-heavy records, 11 ever
#: larger snapshots). Twice, because the log holds records raw and the snapshot compressed
#: (about half: 1M package records log 650 MB, snapshot 340 MB): replay after a crash then
#: reads at most about as many records as the snapshot holds. (At 1.0, a 1M build took five
#: snapshots before close() instead of three, 7% of its time.)
SNAPSHOT_GROWTH = 2.0

SNAPSHOT_FILE = "snapshot.rsnap"
WAL_FILE = "wal.rlog"
FORMAT_FILE = "FORMAT"
COLLECTIONS_DIR = "collections"
#: A dropped collection's folder is renamed to this prefix (hidden: never listed) before deletion.
DROPPED_PREFIX = ".dropped-"


class CollectionStore:
    """One collection's files: ``open()``, then ``log()`` each batch, ``snapshot()`` when due."""

    def __init__(self, fs: FileSystem, directory: str) -> None:
        self.fs = fs
        self.directory = directory
        self.snapshot_path = os.path.join(directory, SNAPSHOT_FILE)
        self.wal = WriteAheadLog(fs, os.path.join(directory, WAL_FILE))
        #: Sequence number of the last batch the snapshot on disk includes (0: no snapshot).
        self.last_snapshot_seq = 0
        #: Bytes of the snapshot on disk (0: none), which sets the log's byte threshold.
        self.snapshot_bytes = 0
        #: Stored records added since the snapshot, outside memory (see ``storage.spill``).
        self.spill = SpillFile(os.path.join(directory, SPILL_FILE))

    def open(self) -> tuple[Any | None, Iterator[tuple[int, Any]]]:
        """The snapshot's index state (None when there is none) and ``(seq, payload)`` of the batches after it.

        Creates the collection's folder and an empty log when they do not exist. Raises
        :class:`CorruptionError` naming file and offset when a file is damaged.
        """
        if not self.fs.isdir(self.directory):
            try:
                self.fs.makedirs(self.directory)
                self.fs.fsync_dir(os.path.dirname(self.directory))
            except OSError as error:
                raise StorageError(f"{self.directory}: the collection folder could not be created ({error.strerror or error})") from error
        for leftover in (self.snapshot_path + ".tmp", self.wal.path + ".tmp"):
            if self.fs.exists(leftover):  # an interrupted snapshot or reset: never read, just removed
                self.fs.remove(leftover)
        state = None
        self.last_snapshot_seq = 0
        self.snapshot_bytes = 0
        if self.fs.exists(self.snapshot_path):
            self.snapshot_bytes = self.fs.size(self.snapshot_path)
            body = read_snapshot(self.fs, self.snapshot_path)
            if not (isinstance(body, dict) and isinstance(body.get("last_seq"), int) and "index" in body):
                raise CorruptionError(f"{self.snapshot_path}: offset 24: snapshot body lacks last_seq or index")
            if body.get("format") != FORMAT_VERSION:
                raise CorruptionError(
                    f"{self.snapshot_path}: offset 24: snapshot body of format {body.get('format')!r}; "
                    f"this roarsearch reads format version {FORMAT_VERSION}"
                )
            self.last_snapshot_seq, state = body["last_seq"], body["index"]
        return state, self.wal.open(self.last_snapshot_seq)

    def log(self, payload: Any, packed: tuple[str, list[bytes]] | None = None) -> int:
        """Append ``payload`` durably (fsynced) and return its sequence number; see :meth:`WriteAheadLog.append`."""
        return self.wal.append(payload, packed)

    def should_snapshot(self, overdue_only: bool = False) -> bool:
        """Whether the log has grown enough for a snapshot; ``overdue_only``: enough twice over (a
        snapshot put off meanwhile, see ``Collection._write_locked``, is taken then regardless)."""
        factor = 2 if overdue_only else 1
        byte_threshold = max(SNAPSHOT_LOG_BYTES, int(self.snapshot_bytes * SNAPSHOT_GROWTH)) * factor
        return self.wal.size_bytes >= byte_threshold or self.wal.record_count >= SNAPSHOT_LOG_RECORDS * factor

    def snapshot(self, index_state: Any, views_of: tuple[Buffer | JoinedBuffers, ...] = ()) -> list[memoryview | None] | None:
        """Write ``index_state`` (which must include every logged batch) as the snapshot, then reset the log.

        ``views_of``: binary values of the state to get back as read-only views of the new file
        (as if it had been reopened), in that order, each None if it was too small to be written
        apart (it stays inline in the msgpack); None when the file could not be mapped (the
        snapshot itself is written: the caller keeps its own copies).
        Raises :class:`StorageError` when the disk refuses; the batches stay safe in the log either way.
        """
        last_seq = self.wal.next_seq - 1
        placements: dict[int, int] | None = {} if views_of else None
        self.snapshot_bytes = write_snapshot(self.fs, self.snapshot_path,
                                             {"format": FORMAT_VERSION, "last_seq": last_seq, "index": index_state},
                                             placements)
        self.last_snapshot_seq = last_seq
        self.wal.reset()
        if placements is None:
            return None
        try:
            with memoryview(self.fs.map_file(self.snapshot_path)) as whole:
                return [whole[placements[id(value)]:placements[id(value)] + _byte_size(value)].toreadonly()
                        if id(value) in placements else None for value in views_of]
        except (OSError, KeyError, ValueError) as error:
            log.warning("%s: the new snapshot could not be mapped (%s); its stored records stay in memory",
                        self.snapshot_path, error)
            return None

    def verify(self) -> list[str]:
        """Problems found re-reading the snapshot and every log record from disk (empty: all checksums hold)."""
        problems = []
        if self.wal.truncated_tail is not None:
            offset, size = self.wal.truncated_tail
            problems.append(
                f"{self.wal.path}: offset {offset}: {size} bytes of an unfinished write were cut off at open "
                "(a crash during a write; the batch had not been acknowledged)"
            )
        try:
            if self.fs.exists(self.snapshot_path):
                read_snapshot(self.fs, self.snapshot_path)
            for _payload in self.wal.replay(self.last_snapshot_seq):
                pass
        except (CorruptionError, StorageError) as error:
            problems.append(error.data)
        return problems

    def close(self) -> None:
        """Nothing stays open between calls; present so that callers can treat every store alike."""


def _byte_size(value: Buffer | JoinedBuffers) -> int:
    return value.size if isinstance(value, JoinedBuffers) else memoryview(value).nbytes


class DataDirectoryStore:
    """The data directory: ``FORMAT`` marker, ``LOCK``, one folder per collection.

    Opening takes the lock (:class:`~roarsearch.errors.DirectoryLockedError` if another engine,
    in any process, holds it) and creates the directory when it does not exist. A non-empty
    directory that is not a roarsearch data directory is refused rather than written into.
    """

    def __init__(self, path: str | os.PathLike[str], fs: FileSystem | None = None) -> None:
        self.fs = fs or FileSystem()
        self.path = os.path.abspath(os.fspath(path))
        self.collections_path = os.path.join(self.path, COLLECTIONS_DIR)
        try:
            self.fs.makedirs(self.path)
        except OSError as error:
            raise StorageError(f"{self.path}: the data directory could not be created ({error.strerror or error})") from error
        self.lock = DirectoryLock(self.path)
        self.lock.acquire()
        try:
            self._check_or_create()
            self._remove_dropped()
        except BaseException:
            self.lock.release()
            raise

    def _check_or_create(self) -> None:
        marker = os.path.join(self.path, FORMAT_FILE)
        if self.fs.exists(marker):
            content = self.fs.read(marker)
            if not content.startswith(DIRECTORY_FORMAT_PREFIX):
                raise CorruptionError(f"{marker}: offset 0: not a roarsearch data directory marker")
            version = content[len(DIRECTORY_FORMAT_PREFIX):].strip()
            if content != DIRECTORY_FORMAT:
                raise CorruptionError(
                    f"{marker}: offset {len(DIRECTORY_FORMAT_PREFIX)}: data directory of format version "
                    f"{version.decode('ascii', 'replace')!r}; this roarsearch reads format version {FORMAT_VERSION}"
                )
        else:
            strangers = [name for name in self.fs.listdir(self.path)
                         if name not in (LOCK_FILE, COLLECTIONS_DIR, FORMAT_FILE + ".tmp")]
            hint = _one_level_off(self.fs, self.path, strangers)
            if hint:
                raise BadRequestError(f"path: {self.path!r} is not a roarsearch data directory: {hint}", field="path")
            if strangers:
                raise BadRequestError(
                    f"path: {self.path!r} is not a roarsearch data directory and not empty (it holds "
                    f"{strangers[0]!r}); refusing to write into it", field="path",
                )
            try:
                self.fs.write_new(marker + ".tmp", [DIRECTORY_FORMAT])
                self.fs.fsync(marker + ".tmp")
                self.fs.replace(marker + ".tmp", marker)
                self.fs.fsync_dir(self.path)
            except OSError as error:
                raise StorageError(f"{marker}: the data directory could not be initialised ({error.strerror or error})") from error
        if not self.fs.isdir(self.collections_path):
            try:
                self.fs.makedirs(self.collections_path)
                self.fs.fsync_dir(self.path)
            except OSError as error:
                raise StorageError(f"{self.collections_path}: could not be created ({error.strerror or error})") from error

    def drop_collection(self, name: str) -> None:
        """Remove collection ``name``'s folder durably: one fsynced rename to a hidden name (after
        which nothing lists or opens it, so a crash never brings back part of it), then delete."""
        folder = self.collection(name).directory
        if not self.fs.isdir(folder):
            return
        hidden = os.path.join(self.collections_path, f"{DROPPED_PREFIX}{name}-{uuid.uuid4().hex[:12]}")
        try:
            self.fs.replace(folder, hidden)
            self.fs.fsync_dir(self.collections_path)
        except OSError as error:
            raise StorageError(f"{folder}: the collection could not be dropped ({error.strerror or error})") from error
        shutil.rmtree(hidden, ignore_errors=True)

    def _remove_dropped(self) -> None:
        """Finish drops that a crash interrupted (their folders are already hidden)."""
        for name in self.fs.listdir(self.collections_path):
            if name.startswith(DROPPED_PREFIX):
                shutil.rmtree(os.path.join(self.collections_path, name), ignore_errors=True)

    def collection_names(self) -> list[str]:
        """Names of the collections on disk, sorted."""
        return [name for name in self.fs.listdir(self.collections_path)
                if not name.startswith(".") and self.fs.isdir(os.path.join(self.collections_path, name))]

    def collection(self, name: str) -> CollectionStore:
        """The store of collection ``name`` (not opened yet: call its ``open()``)."""
        if not name or name in (".", "..") or "/" in name or "\0" in name or name.startswith("."):
            raise ValueError(f"collection name {name!r} cannot be a folder name")
        return CollectionStore(self.fs, os.path.join(self.collections_path, name))

    def close(self) -> None:
        """Release the lock (idempotent). Snapshots are the engine's to take before this."""
        self.lock.release()


#: The name the engine imports.
DataDirectory = DataDirectoryStore


def _one_level_off(fs: FileSystem, path: str, names: list[str]) -> str | None:
    """What ``path`` looks like when it is next to a data directory rather than one (None: neither)."""
    apps = sorted(name for name in names if fs.exists(os.path.join(path, name, FORMAT_FILE)))
    if apps:  # what `roarsearch import --data DIR` makes: DIR/<app>/FORMAT
        return (f"it looks like a roarsearch root of applications (it holds {', '.join(repr(a) for a in apps)}); "
                f"open {os.path.join(path, apps[0])!r}")
    for parent in (os.path.dirname(path), os.path.dirname(os.path.dirname(path))):
        if fs.exists(os.path.join(parent, FORMAT_FILE)):  # DATA/collections or DATA/collections/NAME
            return f"it is inside the data directory {parent!r}; open that one"
    return None


def backup_data_directory(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> list[str]:
    """Copy a data directory — even one an engine has open and is writing — into a consistent backup.

    Per collection the log is copied *before* the snapshot. Whatever snapshot is copied then
    includes everything up to the copied log's start, or more: a snapshot taken between the two
    copies includes every record of the copied log, whose records are then skipped on open. (The
    other order can lose the batches of a snapshot-and-reset that happens between the copies.) A
    log copied in the middle of an append ends in an incomplete record, cut off at open like any
    torn tail. Returns the collections copied.

    ``target`` must not exist. The copy is made in a temporary folder beside it and renamed to
    ``target`` only once complete, so a failure leaves nothing behind. Raises
    :class:`BadRequestError` when ``source`` is not a data directory (with a hint when it is one
    level off) or ``target`` exists, :class:`StorageError` when a copy fails.
    """
    source, target = os.path.abspath(os.fspath(source)), os.path.abspath(os.fspath(target))
    if not os.path.isfile(os.path.join(source, FORMAT_FILE)):
        names = os.listdir(source) if os.path.isdir(source) else []
        why = _one_level_off(FileSystem(), source, names) or ("it does not exist" if not os.path.exists(source)
                                                             else "it has no FORMAT marker")
        raise BadRequestError(f"source: {source!r} is not a roarsearch data directory: {why}; nothing was copied",
                              field="source")
    if os.path.lexists(target):
        raise BadRequestError(f"target: {target!r} already exists; a backup goes into a new directory", field="target")
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        raise BadRequestError(f"target: the folder {parent!r} does not exist", field="target")
    partial = os.path.join(parent, f".{os.path.basename(target)}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)  # a leftover of an earlier attempt by this pid
    try:
        copied = _copy_in_safe_order(source, partial)
        os.rename(partial, target)
    except OSError as error:
        shutil.rmtree(partial, ignore_errors=True)
        raise StorageError(f"backup of {source!r} to {target!r} failed, nothing was left behind: "
                           f"{error.strerror or error} ({error.filename or ''})") from error
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return copied


def _copy_in_safe_order(source: str, target: str) -> list[str]:
    os.makedirs(os.path.join(target, COLLECTIONS_DIR))
    shutil.copyfile(os.path.join(source, FORMAT_FILE), os.path.join(target, FORMAT_FILE))
    copied = []
    collections = os.path.join(source, COLLECTIONS_DIR)
    for name in sorted(os.listdir(collections)):
        folder = os.path.join(collections, name)
        if name.startswith(".") or not os.path.isdir(folder):
            continue
        os.makedirs(os.path.join(target, COLLECTIONS_DIR, name))
        for file_name in (WAL_FILE, SNAPSHOT_FILE):  # this order: see backup_data_directory
            try:
                shutil.copyfile(os.path.join(folder, file_name), os.path.join(target, COLLECTIONS_DIR, name, file_name))
            except FileNotFoundError:
                pass  # a collection created mid-copy, or one never snapshotted
        copied.append(name)
    return copied
