"""A read-only :class:`Engine` that follows a data directory another process writes.

Owns: :class:`FollowerEngine`, the engine of the service's reading workers (``serve --workers N``,
docs/service.md). It opens the directory without its lock, loads every collection from its
snapshot and log, and, in :meth:`FollowerEngine.catch_up`, applies the batches the writer has
published on the :class:`~roarsearch.storage.follow.CommitBoard` since — so a worker that catches
up before it answers sees every write the writer acknowledged before the request arrived.

Invariants: it never writes (its write methods raise; the service forwards writes to the writer);
a batch is committed whole under the collection's write lock, as in the writer, so a search sees it
wholly or not at all (it is prepared before, without the lock, while searches go on); a batch the
writer announced as logged but has not acknowledged yet is applied too, in the background, but a
read waits only for acknowledged ones (:meth:`FollowerEngine.stale`); a dropped collection (the board's drop count changed) makes it reload every
collection from disk, so a collection dropped and created again under the same name is never
mixed with its old records.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from roarsearch.engine.collection import Collection
from roarsearch.engine.engine import Engine
from roarsearch.errors import CorruptionError, StorageError
from roarsearch.index.state import index_from_state
from roarsearch.memory import unmap_unused_soon
from roarsearch.query.settings import settings_from_dict
from roarsearch.storage.follow import CommitBoard, LogFollower, collection_directory
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.shared_analysis import SharedAnalyses
from roarsearch.storage.snapshot import read_snapshot
from roarsearch.storage.store import COLLECTIONS_DIR, CollectionStore

#: A board's sequence number meaning "every batch the collection's files hold" (:class:`FilesBoard`).
EVERY_BATCH = -1
LAST_SEQ = 2**63 - 1
#: Loads of one collection tried before giving up (a load races only with a concurrent reset).
LOAD_ATTEMPTS = 3
#: Seconds to wait for the board to announce a drop whose files are already gone.
DROP_WAIT_S = 10.0


class _BoardMoved(Exception):
    """The files no longer hold what the board read promised: a newer board explains it."""


class FollowerEngine(Engine):
    """``FollowerEngine(path, board)``: the collections of ``path`` as of the board's last commit."""

    def __init__(self, path: str | os.PathLike[str], board: CommitBoard | FilesBoard, *, filesystem: FileSystem | None = None,
                 on_applied: Callable[[int], None] | None = None, shared_analyses: SharedAnalyses | None = None) -> None:
        super().__init__()  # in memory: no directory lock, no store (nothing is written from here)
        self.path = self.data_path = os.path.abspath(os.fspath(path))
        self.board = board
        self._fs = filesystem or FileSystem()
        self._followers: dict[str, LogFollower] = {}
        self._applied_version = -1
        #: Per collection, the sequence number of the last batch applied (searches see it).
        self._applied_seqs: dict[str, int] = {}
        self._drops: int | None = None
        self._catching_up = threading.Lock()
        #: Called with the board version just applied, after every catch-up (the server tells the
        #: writer, which waits for its readers before it answers a write).
        self.on_applied = on_applied
        #: Where the writer files each add batch's analysis (read instead of analysing again).
        self.shared_analyses = shared_analyses
        self.catch_up()

    def behind(self) -> bool:
        """Whether the board changed since this engine last caught up (one 8-byte read)."""
        return self.board.version() != self._applied_version

    def stale(self) -> bool:
        """Whether the writer acknowledged a write this engine has not applied: then a read must
        :meth:`catch_up` first. Batches only logged (announced early, being applied meanwhile,
        not acknowledged yet) do not make it stale, so reads go on while they are applied."""
        if self.board.version() == self._applied_version:
            return False
        _version, committed, _logged, drops = self.board.read_all()
        if drops != self._drops:
            return True
        applied = self._applied_seqs
        return any(seq > applied.get(name, -1) for name, seq in committed.items()) or not applied.keys() <= committed.keys()

    def catch_up(self) -> int:
        """Apply everything published so far; returns the board version now applied."""
        with self._catching_up:
            while True:
                try:
                    version = self._catch_up()
                except _BoardMoved:  # the files changed under a board already replaced: read it again
                    continue
                if self.on_applied is not None:
                    self.on_applied(version)
                return version

    def _catch_up(self) -> int:
        # Everything durable is applied, acknowledged or not: batches announced as soon as they
        # are logged are applied while the writer applies them (see ``stale``).
        version, _committed, durable, drops = self.board.read_all()
        if version == self._applied_version:
            return version
        if drops != self._drops:
            # A drop: every collection is loaded again from disk into a new map, swapped in whole,
            # so that searches of the other collections go on meanwhile (see the module's invariants).
            followers: dict[str, LogFollower] = {}
            collections = {name: self._load(name, seq, version, followers) for name, seq in durable.items()}
            with self._collections_lock:
                self._collections.clear()
                self._collections.update(collections)
            self._followers, self._drops = followers, drops
            self._applied_seqs = {name: follower.applied for name, follower in followers.items()}
        else:
            with self._collections_lock:
                for name in [name for name in self._collections if name not in durable]:
                    del self._collections[name]
                    self._followers.pop(name, None)
                    self._applied_seqs.pop(name, None)
            for name, seq in durable.items():
                follower = self._followers.get(name)
                batches = None if follower is None else follower.tail(seq)
                if batches is None:
                    loaded = self._load(name, seq, version, self._followers)
                    with self._collections_lock:
                        self._collections[name] = loaded
                    self._applied_seqs[name] = self._followers[name].applied
                    continue
                assert follower is not None
                collection = self._collections[name]
                for batch_seq, payload in batches:
                    collection.apply_concurrently(payload)  # each batch whole, as the writer applies it
                    self._applied_seqs[name] = batch_seq
                self._applied_seqs[name] = follower.applied
        unmap_unused_soon()  # mappings of what was replaced, once searches reading it are done
        self._applied_version = version
        return version

    def _load(self, name: str, seq: int, version: int, followers: dict[str, LogFollower]) -> Collection:
        """Collection ``name`` read from its snapshot and log up to batch ``seq`` (of board ``version``;
        :data:`EVERY_BATCH`: as far as its files hold); its log follower goes into ``followers``."""
        for _attempt in range(LOAD_ATTEMPTS):
            follower = LogFollower(self._fs, collection_directory(self.data_path, name))
            state, settings, batches = follower.load(LAST_SEQ if seq == EVERY_BATCH else seq)
            if seq == EVERY_BATCH or follower.applied >= seq:
                break
        else:
            # Being dropped: the writer moves the folder away before it publishes the drop, so
            # the board is about to move; only if it does not is the batch really missing.
            deadline = time.monotonic() + DROP_WAIT_S
            while time.monotonic() < deadline:
                if self.board.version() != version:
                    raise _BoardMoved
                time.sleep(0.002)
            raise StorageError(f"collection {name!r}: batch {seq} is acknowledged but in neither its snapshot nor its log")
        collection = Collection(name, index_from_state(state) if state is not None else None, settings_from_dict(settings))
        collection.shared_analyses = self.shared_analyses
        for _seq, payload in batches:
            collection.apply(payload)
        collection.settle_when_idle_if_unsettled()
        followers[name] = follower
        return collection

    # ------------------------------------------------------------------ writes belong to the writer

    def _read_only(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise RuntimeError("a FollowerEngine is read-only: writes go to the process that owns the data directory")

    add_records = _read_only
    delete_records = _read_only
    update_settings = _read_only
    drop_collection = _read_only


class FilesBoard:
    """A commit board for a directory whose writer publishes none to this process (``roarsearch
    search``, ``export`` or ``check`` beside ``roarsearch serve``): every collection folder on disk,
    read as far as its files hold. A write the writer has logged but not acknowledged yet may be
    seen; a torn tail being appended is not."""

    def __init__(self, path: str, fs: FileSystem) -> None:
        self.collections = os.path.join(path, COLLECTIONS_DIR)
        self.fs = fs

    def version(self) -> int:
        return 2

    def read_all(self) -> tuple[int, dict[str, int], dict[str, int], int]:
        names = [name for name in sorted(self.fs.listdir(self.collections)) if not name.startswith(".")
                 and self.fs.isdir(os.path.join(self.collections, name))] if self.fs.isdir(self.collections) else []
        every = dict.fromkeys(names, EVERY_BATCH)
        return 2, every, every, 0


class DirectoryReader(FollowerEngine):
    """``DirectoryReader(path)``: a read-only engine over a data directory another engine holds
    (its lock is not taken): the collections as their snapshots and logs hold them when opened.
    ``check()`` also re-reads every file's checksums, as the owning engine's does."""

    def __init__(self, path: str | os.PathLike[str], *, filesystem: FileSystem | None = None) -> None:
        fs = filesystem or FileSystem()
        super().__init__(path, FilesBoard(os.path.abspath(os.fspath(path)), fs), filesystem=fs)

    def _verify_files(self, name: str, collection: Collection) -> list[str]:
        """Read-only: the snapshot's checksum and those of the log's records after it, as the
        owner's check does. The owner may snapshot and reset the log meanwhile (a new log, which
        then starts after the snapshot read): such a race is read again, not reported."""
        store = CollectionStore(self._fs, collection_directory(self.data_path, name))
        problems: list[str] = []
        for _attempt in range(LOAD_ATTEMPTS):
            log_before = _inode(store.wal.path)
            problems = []
            try:
                if self._fs.exists(store.snapshot_path):
                    body = read_snapshot(self._fs, store.snapshot_path)
                    store.last_snapshot_seq = body["last_seq"] if isinstance(body, dict) else 0
                for _payload in store.wal.replay(store.last_snapshot_seq):
                    pass
            except (CorruptionError, StorageError) as error:
                problems.append(error.data)
            if not problems or _inode(store.wal.path) == log_before:
                break
        return problems


def _inode(path: str) -> int | None:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None
