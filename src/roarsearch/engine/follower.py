"""A read-only :class:`Engine` that follows a data directory another process writes.

Owns: :class:`FollowerEngine`, the engine of the service's reading workers (``serve --workers N``,
docs/service.md). It opens the directory without its lock, loads every collection from its
snapshot and log, and, in :meth:`FollowerEngine.catch_up`, applies the batches the writer has
published on the :class:`~roarsearch.storage.follow.CommitBoard` since — so a worker that catches
up before it answers sees every write the writer acknowledged before the request arrived.

Invariants: it never writes (its write methods raise; the service forwards writes to the writer);
a batch is applied whole under the collection's write lock, as in the writer, so a search sees it
wholly or not at all; a dropped collection (the board's drop count changed) makes it reload every
collection from disk, so a collection dropped and created again under the same name is never
mixed with its old records.
"""

from __future__ import annotations

import os
import threading
from typing import Any, NoReturn

from roarsearch.engine.collection import Collection
from roarsearch.engine.engine import Engine
from roarsearch.errors import StorageError
from roarsearch.index.state import index_from_state
from roarsearch.query.settings import settings_from_dict
from roarsearch.storage.follow import CommitBoard, LogFollower, collection_directory
from roarsearch.storage.fs import FileSystem

#: Loads of one collection tried before giving up (a load races only with a concurrent reset).
LOAD_ATTEMPTS = 3


class FollowerEngine(Engine):
    """``FollowerEngine(path, board)``: the collections of ``path`` as of the board's last commit."""

    def __init__(self, path: str | os.PathLike[str], board: CommitBoard, *, filesystem: FileSystem | None = None) -> None:
        super().__init__()  # in memory: no directory lock, no store (nothing is written from here)
        self.path = self.data_path = os.path.abspath(os.fspath(path))
        self.board = board
        self._fs = filesystem or FileSystem()
        self._followers: dict[str, LogFollower] = {}
        self._applied_version = -1
        self._drops: int | None = None
        self._catching_up = threading.Lock()
        self.catch_up()

    def stale(self) -> bool:
        """Whether the writer published a commit this engine has not applied (one 8-byte read)."""
        return self.board.version() != self._applied_version

    def catch_up(self) -> int:
        """Apply everything published so far; returns the board version now applied."""
        with self._catching_up:
            version, committed, drops = self.board.read()
            if version == self._applied_version:
                return version
            if drops != self._drops:  # a drop: start again from disk (see the module's invariants)
                with self._collections_lock:
                    self._collections.clear()
                self._followers.clear()
                self._drops = drops
            with self._collections_lock:
                gone = [name for name in self._collections if name not in committed]
                for name in gone:
                    del self._collections[name]
            for name in gone:
                self._followers.pop(name, None)
            for name, seq in committed.items():
                follower = self._followers.get(name)
                batches = None if follower is None else follower.tail(seq)
                if batches is None:
                    self._load(name, seq)
                    continue
                collection = self._collections[name]
                for _seq, payload in batches:
                    with collection.lock.writing():
                        collection.apply(payload)
            self._applied_version = version
            return version

    def _load(self, name: str, seq: int) -> None:
        """(Re)load collection ``name`` from its snapshot and log, up to batch ``seq``."""
        for _attempt in range(LOAD_ATTEMPTS):
            follower = LogFollower(self._fs, collection_directory(self.data_path, name))
            state, settings, batches = follower.load(seq)
            if follower.applied >= seq:
                break
        else:
            raise StorageError(f"collection {name!r}: batch {seq} is acknowledged but in neither its snapshot nor its log")
        collection = Collection(name, index_from_state(state) if state is not None else None, settings_from_dict(settings))
        for _seq, payload in batches:
            collection.apply(payload)
        self._followers[name] = follower
        with self._collections_lock:
            self._collections[name] = collection

    # ------------------------------------------------------------------ writes belong to the writer

    def _read_only(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise RuntimeError("a FollowerEngine is read-only: writes go to the process that owns the data directory")

    add_records = _read_only
    delete_records = _read_only
    update_settings = _read_only
    drop_collection = _read_only
