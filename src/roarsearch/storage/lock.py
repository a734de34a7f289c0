"""The data directory lock: one open engine per directory, in any process.

Owns: ``LOCK`` in the data directory, locked with ``fcntl.flock`` (released by the kernel if the
process dies) and holding the holder's pid, so that a second engine — in another process or in
this one — fails with a :class:`DirectoryLockedError` that names the holder.
"""

from __future__ import annotations

import fcntl
import os

from roarsearch.errors import DirectoryLockedError


class DirectoryLock:
    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, "LOCK")
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise DirectoryLockedError(
                f"data directory {os.path.dirname(self.path)!r} is in use by another open engine (pid {holder}); "
                "close it first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
