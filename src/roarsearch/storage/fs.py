"""The only module that touches the filesystem, and a fault-injecting stand-in for tests.

Owns: every file operation the storage layer makes — append, read, fsync, atomic replace,
directory fsync, truncate — behind :class:`FileSystem`, so that :class:`FaultyFileSystem` can fail
the Nth operation with ENOSPC or EIO (SQLite's I/O-error loop) and can simulate a power cut by
dropping or tearing whatever was written since each file's last fsync (the idea of Lucene's
MockDirectoryWrapper and SQLite's crash simulator).
"""

from __future__ import annotations

import errno
import os
import random
from dataclasses import dataclass, field


class FileSystem:
    """Plain POSIX file operations."""

    def read(self, path: str) -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    def size(self, path: str) -> int:
        return os.path.getsize(path)

    def append(self, path: str, data: bytes) -> None:
        with open(path, "ab") as handle:
            handle.write(data)
            handle.flush()

    def write_new(self, path: str, chunks: list[bytes]) -> None:
        """Create or overwrite ``path`` with ``chunks`` and fsync it."""
        with open(path, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())

    def fsync(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def replace(self, source: str, target: str) -> None:
        os.replace(source, target)

    def truncate(self, path: str, length: int) -> None:
        with open(path, "r+b") as handle:
            handle.truncate(length)
            handle.flush()
            os.fsync(handle.fileno())

    def remove(self, path: str) -> None:
        if os.path.exists(path):
            os.remove(path)


@dataclass
class FaultyFileSystem(FileSystem):
    """A :class:`FileSystem` that fails on command and can lose unsynced writes.

    ``fail_at``: the 1-based number of the mutating operation (append, write_new, fsync, replace,
    truncate, fsync_dir) that raises ``OSError(fail_errno)``; operations are counted in
    ``operations``. ``crash(seed)`` then models a power cut: for each file, bytes appended since
    its last fsync are kept, dropped, torn (a prefix kept) or garbled, at random.
    """

    fail_at: int | None = None
    fail_errno: int = errno.ENOSPC
    operations: int = 0
    unsynced: dict[str, int] = field(default_factory=dict)  # path → durable length

    def _tick(self, name: str) -> None:
        self.operations += 1
        if self.fail_at is not None and self.operations == self.fail_at:
            raise OSError(self.fail_errno, f"injected {os.strerror(self.fail_errno)} on {name}")

    def append(self, path: str, data: bytes) -> None:
        self._tick("append")
        if path not in self.unsynced:
            self.unsynced[path] = os.path.getsize(path) if os.path.exists(path) else 0
        super().append(path, data)

    def write_new(self, path: str, chunks: list[bytes]) -> None:
        self._tick("write_new")
        super().write_new(path, chunks)
        self.unsynced.pop(path, None)

    def fsync(self, path: str) -> None:
        self._tick("fsync")
        super().fsync(path)
        self.unsynced.pop(path, None)

    def fsync_dir(self, path: str) -> None:
        self._tick("fsync_dir")
        super().fsync_dir(path)

    def replace(self, source: str, target: str) -> None:
        self._tick("replace")
        super().replace(source, target)

    def truncate(self, path: str, length: int) -> None:
        self._tick("truncate")
        super().truncate(path, length)
        self.unsynced.pop(path, None)

    def crash(self, seed: int) -> None:
        """Lose, tear or garble what was appended after each file's last fsync."""
        rng = random.Random(seed)
        for path, durable in self.unsynced.items():
            if not os.path.exists(path):
                continue
            size = os.path.getsize(path)
            fate = rng.choice(["keep", "drop", "tear", "garble"])
            if fate == "drop":
                os.truncate(path, durable)
            elif fate == "tear" and size > durable:
                os.truncate(path, rng.randint(durable, size - 1))
            elif fate == "garble" and size > durable:
                with open(path, "r+b") as handle:
                    offset = rng.randint(durable, size - 1)
                    handle.seek(offset)
                    handle.write(bytes(rng.getrandbits(8) for _ in range(min(8, size - offset))))
        self.unsynced.clear()
