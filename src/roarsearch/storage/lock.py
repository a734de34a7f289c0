"""The data directory lock: one open engine per directory, in any process.

Owns: ``LOCK`` in the data directory, locked with ``fcntl.flock`` and holding the holder's pid
(ASCII digits and a newline), so that a second engine — in another process or in this one —
fails with a :class:`~roarsearch.errors.DirectoryLockedError` (409) that names the holder.

Why ``flock`` and not ``fcntl.lockf``: an ``flock`` lock belongs to the open file description, so
a second ``open`` + ``flock`` in the *same* process conflicts too (POSIX record locks would let it
through and silently drop the first lock when the second descriptor closes). The kernel releases
the lock when the holder dies, so a crash never leaves a stale lock; the pid in the file is only
for the message. The lock file is never truncated by a process that fails to take the lock.
Caller: :class:`~roarsearch.storage.store.DataDirectoryStore`.
"""

from __future__ import annotations

import fcntl
import os
from types import TracebackType

from roarsearch.errors import DirectoryLockedError

LOCK_FILE = "LOCK"


class DirectoryLock:
    """``with DirectoryLock(path):`` — hold the lock of data directory ``path`` (which must exist)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.path = os.path.join(directory, LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            raise DirectoryLockedError(f"data directory {self.directory!r} is already locked by this engine")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise DirectoryLockedError(
                f"data directory {self.directory!r} is in use by another open engine (pid {holder}, "
                f"lock file {self.path!r}); close that engine first"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        # Write, then cut: a reader racing with us sees a pid (old or new), never an empty file.
        pid = f"{os.getpid()}\n".encode("ascii")
        os.pwrite(fd, pid, 0)
        os.ftruncate(fd, len(pid))
        self._fd = fd

    def release(self) -> None:
        """Release the lock (idempotent). The file stays: removing it would race with a new holder."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> DirectoryLock:
        self.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.release()
