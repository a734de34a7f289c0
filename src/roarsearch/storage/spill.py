"""The stored records of batches added since the last snapshot, kept in a scratch file instead of
this process's memory.

Owns: ``records.spill`` in a collection's folder. Each add batch's compressed record parts are
appended to it (no fsync: the write-ahead log is what makes a batch durable) and read back
through a read-only mapping, so they live in the page cache, which the kernel can drop, and are
resident only while something reads them. Between two snapshots of a bulk load they were up to
a fifth of the process's peak memory. The next snapshot copies them and the collection then
reads them from the snapshot (``Collection.take_snapshot``), after which the file starts anew.

Invariants:
- the file is never read after a restart: a leftover one is removed when the collection opens;
- starting anew unlinks the file and creates another, so mappings still held by a reader stay
  valid (their pages live until the last one is unmapped);
- it is only an economy: when the disk refuses a write, parts stay in memory from then on.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os

from roarsearch.memory import kept_mapping

log = logging.getLogger("roarsearch")

SPILL_FILE = "records.spill"
_pwrite = os.pwrite  # (a seam for tests of a full disk)


class SpillFile:
    """Append-only scratch file of compressed record parts, read back through mappings."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._size = 0
        self._failed = False
        self.remove_leftover()

    def remove_leftover(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)

    def keep(self, parts: list[bytes]) -> list[bytes | memoryview]:
        """``parts``, each now a read-only view of its copy in the file (or ``parts`` themselves,
        when the file cannot take them)."""
        if self._failed or not parts:
            return list(parts)
        data = b"".join(parts)
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
                self._size = 0
            offset = self._size
            written = 0
            while written < len(data):
                written += _pwrite(self._fd, memoryview(data)[written:], offset + written)
            # Mappings start on page boundaries: the next batch starts on the next one.
            self._size = offset + -(-len(data) // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
            region = kept_mapping(mmap.mmap(self._fd, len(data), prot=mmap.PROT_READ, offset=offset), of_file=True)
        except (OSError, ValueError, AttributeError) as error:  # AttributeError: no PROT_READ (Windows)
            log.warning("%s: cannot keep stored records there (%s); they stay in memory", self.path, error)
            self._failed = True
            self.close()
            return list(parts)
        view = memoryview(region)
        kept: list[bytes | memoryview] = []
        position = 0
        for part in parts:
            kept.append(view[position:position + len(part)])
            position += len(part)
        return kept

    def restart(self) -> None:
        """Begin a new, empty file (the parts kept so far are no longer read from here)."""
        self.close()
        self.remove_leftover()

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
