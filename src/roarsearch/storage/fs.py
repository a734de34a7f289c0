"""The only module that touches the filesystem, and a fault-injecting stand-in for tests.

Owns: every file operation the storage layer makes — read (or map), append, stream a new file, patch
bytes in place, fsync, atomic replace, directory fsync, truncate, remove — behind
:class:`FileSystem`. Nothing else in roarsearch opens a data file, so :class:`FaultyFileSystem`
can stand in for it and

- fail the Nth operation (or the Nth of one kind) with ``ENOSPC`` or ``EIO``, leaving a partial
  write behind as a real full disk does — SQLite's I/O-error loop;
- "lose power" at the Nth operation (:class:`SimulatedCrash`) and then, in :meth:`crash`, keep,
  drop, tear or garble every byte written since its file's last fsync and undo, from a random
  point on, every create/rename/remove not yet made durable by a directory fsync — the idea of
  SQLite's crash simulator and Lucene's ``MockDirectoryWrapper``.

Invariants the callers rely on: ``write_new``, ``append`` and ``write_at`` do not fsync (durability
is always an explicit ``fsync``); ``truncate`` fsyncs, because it is only used to repair a log.
Callers: :mod:`~roarsearch.storage.wal`, :mod:`~roarsearch.storage.snapshot`,
:mod:`~roarsearch.storage.store`; the engine only passes an instance through.
"""

from __future__ import annotations

import errno
import mmap
import os
import random
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from roarsearch.memory import kept_mapping

#: Operation kinds :class:`FaultyFileSystem` counts (reads are never failed).
MUTATIONS = ("append", "write_new", "write_at", "fsync", "fsync_dir", "replace", "truncate", "remove", "makedirs")


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """``os.write`` until every byte is written (a write may be short)."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        view = view[written:]


class FileSystem:
    """Plain POSIX file operations, by path (no handles to leak or to share between threads)."""

    def read(self, path: str) -> bytes:
        """The whole file in one read (one allocation; callers slice it with memoryviews)."""
        with open(path, "rb", buffering=0) as handle:
            return handle.read()

    @contextmanager
    def read_mapped(self, path: str) -> Iterator[bytes | mmap.mmap]:
        """The whole file as a read-only buffer, mapped rather than copied, for the ``with`` block.

        The pages belong to the page cache, not to this process's heap, so decoding a 500 MB
        snapshot does not hold the file *and* the decoded state in private memory. Every view
        taken of the buffer must be released before the block ends. Safe because snapshot files
        are never modified in place, only replaced by rename.
        """
        with open(path, "rb", buffering=0) as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                yield b""
                return
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                yield mapped
            finally:
                mapped.close()

    def map_file(self, path: str) -> bytes | mmap.mmap:
        """The whole file as a read-only mapping that lives as long as references to it (views
        included): snapshots hand out views of their large arrays. Safe because snapshot files are
        never modified in place, only replaced by rename (a replaced file stays mapped). Unmapped
        by :func:`roarsearch.memory.unmap_unused` once nothing refers to it."""
        with open(path, "rb", buffering=0) as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return b""
            return kept_mapping(mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ), of_file=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    def read_from(self, path: str, offset: int) -> tuple[int, bytes]:
        """``(inode, bytes from offset to the end)`` of one open file: the inode tells a reader
        following a log whether a reset replaced the file since it last read it."""
        with open(path, "rb", buffering=0) as handle:
            inode = os.fstat(handle.fileno()).st_ino
            handle.seek(offset)
            return inode, handle.read()

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def append(self, path: str, data: bytes) -> None:
        """Append ``data`` to ``path`` (created if missing); not fsynced."""
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)

    def write_new(self, path: str, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        """Create or truncate ``path`` and write ``chunks`` one after the other; not fsynced.

        ``chunks`` may be a generator: each chunk is written before the next is asked for, so a
        large file streams through without being assembled in memory.
        """
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for chunk in chunks:
                _write_all(fd, chunk)
        finally:
            os.close(fd)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        """Overwrite ``len(data)`` bytes of an existing file at ``offset``; not fsynced."""
        fd = os.open(path, os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, offset)
                view, offset = view[written:], offset + written
        finally:
            os.close(fd)

    def fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        """Make the names in directory ``path`` (creations, renames, removals) durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, source: str, target: str) -> None:
        """Atomically rename ``source`` over ``target`` (durable after ``fsync_dir``)."""
        os.replace(source, target)

    def truncate(self, path: str, length: int) -> None:
        """Cut ``path`` to ``length`` bytes and fsync it."""
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, length)
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        """Remove ``path`` if it exists (durable after ``fsync_dir``)."""
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


class SimulatedCrash(BaseException):
    """The power went out (raised by :class:`FaultyFileSystem` at ``crash_at``).

    A ``BaseException`` so that no ``except OSError``/``except Exception`` in the code under test
    can "handle" a power cut and carry on writing.
    """


def _read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _put(path: str, content: bytes | None) -> None:
    """Set ``path`` to ``content`` (None: remove it), bypassing all bookkeeping."""
    if content is None:
        if os.path.exists(path):
            os.remove(path)
        return
    if not os.path.isdir(os.path.dirname(path)):  # its folder's creation was itself undone
        return
    with open(path, "wb") as handle:
        handle.write(content)


@dataclass
class FaultyFileSystem(FileSystem):
    """A :class:`FileSystem` that fails on command and can lose whatever was not made durable.

    Every mutating operation is numbered from 1 in ``operations`` (and per kind in ``counts``).

    - ``fail_at=N`` makes the Nth operation raise ``OSError(fail_errno)`` — counted among all
      operations, or among those of kind ``fail_kind`` when it is set. A failing ``append``,
      ``write_new`` or ``write_at`` first writes half of its bytes, as a full disk does. With
      ``sticky=True`` every later operation fails too (the disk stays full).
    - ``crash_at=N`` makes the Nth operation write a part of its bytes and raise
      :class:`SimulatedCrash`; every later operation raises it again. Then call
      :meth:`crash` to turn the files into what a power cut would leave.
    - :meth:`crash` may also be called at any moment (for example after a failpoint fired).

    The model: a file's bytes are durable once it is fsynced (or truncated, which fsyncs);
    a directory's entries (created files and folders, renames, removals) are durable once that
    directory is fsynced; a power cut keeps a random prefix of each directory's pending entry
    changes, in order, as a journaling filesystem does.
    """

    fail_at: int | None = None
    fail_errno: int = errno.ENOSPC
    fail_kind: str | None = None
    sticky: bool = False
    crash_at: int | None = None
    operations: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    #: path → content at its last fsync (None: the file did not exist then), for files written since.
    durable: dict[str, bytes | None] = field(default_factory=dict)
    #: directory → its entry changes since its last fsync, oldest first.
    pending_entries: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    _failing: bool = False
    _crashed: bool = False

    # ------------------------------------------------------------------ fault decisions

    def _tick(self, kind: str) -> str | None:
        """Count an operation; return "fail" or "crash" if it must not succeed."""
        if self._crashed:
            raise SimulatedCrash(f"{kind} after the power cut")
        self.operations += 1
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self.crash_at is not None and self.operations >= self.crash_at:
            self._crashed = True
            return "crash"
        number = self.operations if self.fail_kind is None else (self.counts[kind] if kind == self.fail_kind else None)
        if self._failing or (self.fail_at is not None and number == self.fail_at):
            self._failing = self.sticky
            return "fail"
        return None

    def _raise(self, outcome: str, kind: str, path: str) -> None:
        if outcome == "crash":
            raise SimulatedCrash(f"power cut during {kind} of {path}")
        raise OSError(self.fail_errno, f"injected {os.strerror(self.fail_errno)} on {kind}", path)

    def _before_data_change(self, path: str) -> None:
        """Remember ``path``'s durable content before its first unsynced change."""
        if path not in self.durable:
            self.durable[path] = _read_or_none(path)
        if not os.path.exists(path):
            self._entry_change(path, ("create", path))

    def _entry_change(self, path: str, change: tuple[Any, ...]) -> None:
        self.pending_entries.setdefault(os.path.dirname(path), []).append(change)

    # ------------------------------------------------------------------ operations

    def append(self, path: str, data: bytes) -> None:
        outcome = self._tick("append")
        self._before_data_change(path)
        if outcome is not None:
            super().append(path, data[: len(data) // 2])
            self._raise(outcome, "append", path)
        super().append(path, data)

    def write_new(self, path: str, chunks: Iterable[bytes | bytearray | memoryview]) -> None:
        outcome = self._tick("write_new")
        self._before_data_change(path)
        if outcome is not None:
            whole = b"".join(bytes(chunk) for chunk in chunks)
            super().write_new(path, [whole[: len(whole) // 2]])
            self._raise(outcome, "write_new", path)
        super().write_new(path, chunks)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        outcome = self._tick("write_at")
        self._before_data_change(path)
        if outcome is not None:
            super().write_at(path, offset, data[: len(data) // 2])
            self._raise(outcome, "write_at", path)
        super().write_at(path, offset, data)

    def fsync(self, path: str) -> None:
        outcome = self._tick("fsync")
        if outcome is not None:
            self._raise(outcome, "fsync", path)
        super().fsync(path)
        self.durable.pop(path, None)

    def fsync_dir(self, path: str) -> None:
        outcome = self._tick("fsync_dir")
        if outcome is not None:
            self._raise(outcome, "fsync_dir", path)
        super().fsync_dir(path)
        self.pending_entries.pop(path, None)

    def replace(self, source: str, target: str) -> None:
        outcome = self._tick("replace")
        if outcome is not None:
            self._raise(outcome, "replace", target)
        # What the old target would come back as: its durable content, not its unsynced bytes.
        previous = self.durable.pop(target) if target in self.durable else _read_or_none(target)
        super().replace(source, target)
        if source in self.durable:
            self.durable[target] = self.durable.pop(source)
        self._entry_change(target, ("replace", source, target, previous))

    def truncate(self, path: str, length: int) -> None:
        outcome = self._tick("truncate")
        if outcome is not None:
            self._raise(outcome, "truncate", path)
        super().truncate(path, length)
        self.durable.pop(path, None)

    def remove(self, path: str) -> None:
        outcome = self._tick("remove")
        if outcome is not None:
            self._raise(outcome, "remove", path)
        if os.path.exists(path):
            previous = self.durable.pop(path) if path in self.durable else _read_or_none(path)
            super().remove(path)
            self._entry_change(path, ("remove", path, previous))

    def makedirs(self, path: str) -> None:
        missing = []
        probe = os.path.abspath(path)
        while not os.path.exists(probe):
            missing.append(probe)
            probe = os.path.dirname(probe)
        if not missing:
            return
        outcome = self._tick("makedirs")
        if outcome is not None:
            self._raise(outcome, "makedirs", path)
        super().makedirs(path)
        for created in reversed(missing):
            self._entry_change(created, ("mkdir", created))

    # ------------------------------------------------------------------ the power cut

    def crash(self, seed: int) -> None:
        """Leave the files as a power cut at this moment could: seeded, so a failure replays."""
        rng = random.Random(seed)
        for path, before in sorted(self.durable.items()):
            current = _read_or_none(path)
            if current is None:
                continue
            _put(path, _lose_unsynced(rng, before or b"", current))
        for _directory, changes in sorted(self.pending_entries.items()):
            kept = rng.randint(0, len(changes))
            for change in reversed(changes[kept:]):
                _undo_entry_change(change)
        self.durable.clear()
        self.pending_entries.clear()
        self._crashed = False
        self.crash_at = None


def _lose_unsynced(rng: random.Random, before: bytes, current: bytes) -> bytes:
    """What is left of a file whose durable content is ``before`` and whose cache holds ``current``."""
    fate = rng.choice(["keep", "drop", "tear", "garble"])
    appended = current.startswith(before)
    start = len(before) if appended else 0  # where the unsynced bytes begin
    if fate == "keep" or len(current) == start:
        return current
    if fate == "drop":
        return before
    if fate == "tear":
        return current[: rng.randint(start, len(current) - 1)]
    garbled = bytearray(current)
    for _ in range(rng.randint(1, 8)):
        garbled[rng.randrange(start, len(current))] = rng.getrandbits(8)
    return bytes(garbled)


def _undo_entry_change(change: tuple[Any, ...]) -> None:
    kind = change[0]
    if kind == "create":
        _put(change[1], None)
    elif kind == "mkdir":
        shutil.rmtree(change[1], ignore_errors=True)
    elif kind == "replace":
        _kind, source, target, previous = change
        _put(source, _read_or_none(target))
        _put(target, previous)
    elif kind == "remove":
        _put(change[1], change[2])
