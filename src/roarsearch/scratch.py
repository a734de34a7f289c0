"""Big buffers a background merge writes, kept in a scratch file rather than this process's memory.

Owns: :class:`ScratchSpace` (where a collection's scratch files go: its folder, or nowhere for a
collection in memory) and :class:`ScratchBuffer` (one buffer appended part by part as it is made,
then read back through a read-only mapping). A big merge's output — a chunk's packed token columns
and doc sets — is written this way in a durable collection: it waits in the page cache, which the
kernel can drop, until the next snapshot copies it, and only what queries read of it is resident,
as for a reopened collection's snapshot. Held in memory, the final merge of a 10M-record load
(every field's chunks into one) held each field's whole output at once: 2.3 GB above the load.

Invariants:
- a scratch file has no name (``O_TMPFILE``, else unlinked as soon as it is made): a crash leaves
  nothing behind, and its blocks are freed when its last mapping is unmapped;
- it is only an economy: where the disk refuses a write, the buffer is kept in memory instead.
- Below ``index`` and ``storage`` (which do not import each other), as ``buffers`` is.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import tempfile

from roarsearch.buffers import Buffer
from roarsearch.memory import kept_mapping, release_free_memory

log = logging.getLogger("roarsearch")

_pwrite = os.pwrite  # (a seam for tests of a full disk)

#: Joining parts in memory hands the freed pages back after each this many bytes: otherwise the
#: parts and the joined buffer are both resident at its end.
TRIM_COPIED_BYTES = 8 << 20


class ScratchSpace:
    """Where scratch buffers go: a folder (a durable collection's), or None (kept in memory).
    One object shared by a collection's index and every field's postings, so setting ``directory``
    once (when the collection gets its store) reaches them all."""

    __slots__ = ("directory",)

    def __init__(self, directory: str | None = None) -> None:
        self.directory = directory

    def buffer(self) -> ScratchBuffer:
        return ScratchBuffer(self.directory)


def _open_nameless(directory: str) -> int:
    """A new file in ``directory`` without a name (``O_TMPFILE``; else made and unlinked at once)."""
    flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
    if hasattr(os, "O_TMPFILE"):
        with contextlib.suppress(OSError):  # a filesystem without it: the portable way below
            return os.open(directory, flags | os.O_TMPFILE, 0o600)
    descriptor, path = tempfile.mkstemp(dir=directory, prefix=".scratch-")
    os.unlink(path)
    return descriptor


class ScratchBuffer:
    """One buffer written part after part (each part may be let go once appended), read back
    whole by :meth:`finish`: a read-only mapping of its scratch file, or the parts joined in
    memory when there is no folder or the disk refused."""

    __slots__ = ("_directory", "_fd", "_size", "_parts")

    def __init__(self, directory: str | None) -> None:
        self._directory = directory
        self._fd: int | None = None
        self._size = 0
        #: Parts kept in memory (no folder, or a write failed: the file's bytes are read back here).
        self._parts: list[Buffer] | None = None if directory is not None else []

    def append(self, part: Buffer) -> None:
        if not len(part):
            return
        if self._parts is not None:
            self._parts.append(part)
            return
        try:
            if self._fd is None:
                assert self._directory is not None
                self._fd = _open_nameless(self._directory)
            view = memoryview(part).cast("B")
            written = 0
            while written < len(view):
                written += _pwrite(self._fd, view[written:], self._size + written)
            self._size += written
        except OSError as error:
            log.warning("%s: cannot write a merge's output there (%s); it stays in memory", self._directory, error)
            self._parts = self._read_back()
            self._parts.append(part)

    def _read_back(self) -> list[Buffer]:
        """What the file holds so far, in memory (a write failed), and the file closed."""
        fd, self._fd = self._fd, None
        if fd is None:
            return []
        try:
            return [os.pread(fd, self._size, 0)] if self._size else []
        finally:
            os.close(fd)

    def finish(self) -> Buffer:
        """The buffer: every part appended, back to back."""
        if self._parts is not None:
            return _joined(self._parts)
        fd, self._fd = self._fd, None
        if fd is None:
            return b""
        try:
            return memoryview(kept_mapping(mmap.mmap(fd, self._size, prot=mmap.PROT_READ), of_file=True))
        except (OSError, ValueError, AttributeError) as error:  # AttributeError: no PROT_READ (Windows)
            log.warning("%s: cannot map a merge's output (%s); it is read into memory", self._directory, error)
            return os.pread(fd, self._size, 0)
        finally:
            os.close(fd)  # the mapping keeps the file


def _joined(parts: list[Buffer]) -> Buffer:
    """``parts`` copied into one untouched anonymous mapping, each let go once copied and the freed
    pages handed back as the copy goes (joining them held every part and the whole buffer at once)."""
    if len(parts) == 1:
        return memoryview(parts.pop()).cast("B")
    size = sum(len(part) for part in parts)
    if not size:
        return b""
    joined = memoryview(kept_mapping(mmap.mmap(-1, size)))
    parts.reverse()  # popped oldest first
    offset = released = 0
    while parts:
        part = memoryview(parts.pop()).cast("B")
        joined[offset:offset + len(part)] = part
        offset += len(part)
        del part
        if offset - released >= TRIM_COPIED_BYTES:
            release_free_memory()
            released = offset
    return joined
