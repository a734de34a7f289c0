"""Giving memory freed by big writes back to the system.

Owns: :func:`release_free_memory`. glibc's malloc keeps what a batch's temporary arrays freed (in
the heap of each thread that made them; the add pipeline runs three) for later allocations rather
than returning it, so resident memory grows with fragmentation well beyond what is live: after
200,000 package records, 443 MB resident of which ``malloc_trim`` gave back 97 MB. It hands whole
free pages back to the kernel. Without glibc (musl, macOS, Windows) this does nothing.

Also owns the mappings roarsearch makes (snapshot files, spilled records, lazily inflated token
columns): :func:`kept_mapping` keeps each referenced here, and :func:`unmap_unused` unmaps those
nothing else refers to any more, at points chosen for it. Left to itself, a mapping is unmapped
by whichever release drops its last view, and ``munmap`` runs with the GIL released: inside
compiled code that releases an attribute's old value *before* storing the new one (mypyc's
order), another thread then ran while the attribute still named the object being torn down,
and read freed memory (a settle of a field's chunks beside searches crashed the compiled build).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from collections.abc import Callable, Iterable


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own C library
    except (AttributeError, OSError, TypeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


_MALLOC_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Return the heap's free pages to the system (a few milliseconds; call after big writes)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _count_held_by_one_list() -> int:
    """``sys.getrefcount`` of an object referenced only by a list slot, read as the sweep reads it
    (the count of the call's own argument differs between Python versions)."""
    probe = [object()]
    return sys.getrefcount(probe[0])


class KeptMappings:
    """The mappings roarsearch made, each referenced here until nothing else refers to it."""

    #: How long after a swap of big structures the sweep runs: readers that held the old ones (one
    #: search each) are done by then, and writes in between share one sweep.
    SWEEP_DELAY_S = 0.5
    _ONLY_KEPT = _count_held_by_one_list()

    def __init__(self) -> None:
        self._mappings: list[mmap.mmap] = []
        #: ``id`` of each kept mapping of a file (read-only): its pages can be dropped and read again.
        self._of_files: set[int] = set()
        self._lock = threading.Lock()
        #: The delayed sweep while one is scheduled (one at a time, see :meth:`unmap_unused_soon`).
        self.timer: threading.Timer | None = None

    def __len__(self) -> int:
        with self._lock:
            return len(self._mappings)

    def keep(self, mapping: mmap.mmap, of_file: bool = False) -> mmap.mmap:
        with self._lock:
            self._mappings.append(mapping)
            if of_file:
                self._of_files.add(id(mapping))
        return mapping

    def of_file(self, mapping: mmap.mmap) -> bool:
        """Whether ``mapping`` is a kept read-only mapping of a file."""
        with self._lock:
            return id(mapping) in self._of_files

    def unmap_unused(self) -> int:
        with self._lock:
            kept = self._mappings
            # Indexing, not a loop variable: a variable would hold one more reference.
            unused_at = {index for index in range(len(kept)) if sys.getrefcount(kept[index]) <= self._ONLY_KEPT}
            if not unused_at:
                return 0
            unused = [kept[index] for index in unused_at]
            self._mappings = [kept[index] for index in range(len(kept)) if index not in unused_at]
            self._of_files.difference_update(map(id, unused))
        for mapping in unused:
            try:
                mapping.close()
            except BufferError:  # a view appeared meanwhile (cannot: nothing else referred to it)
                self.keep(mapping)
        return len(unused)

    def unmap_unused_soon(self) -> None:
        with self._lock:
            if self.timer is not None or not self._mappings:
                return
            timer = self.timer = threading.Timer(self.SWEEP_DELAY_S, self._delayed_sweep)
        timer.daemon = True
        timer.start()

    def _delayed_sweep(self) -> None:
        with self._lock:
            self.timer = None
        self.unmap_unused()


#: Every mapping roarsearch made and has not unmapped yet (one per process).
MAPPINGS = KeptMappings()


def kept_mapping(mapping: mmap.mmap, of_file: bool = False) -> mmap.mmap:
    """``mapping``, kept referenced until :func:`unmap_unused` finds it unused: dropping its last
    view then never unmaps it (nor releases the GIL) in the middle of someone else's code.
    ``of_file``: a read-only mapping of a file, whose pages :func:`drop_file_pages` may drop."""
    return MAPPINGS.keep(mapping, of_file)


def mapping_under(buffer: object) -> mmap.mmap | None:
    """The mapping ``buffer`` (a memoryview, or a numpy array over one) is a view of, if any."""
    for _depth in range(8):
        if isinstance(buffer, mmap.mmap):
            return buffer
        if isinstance(buffer, memoryview):
            buffer = buffer.obj
        else:
            buffer = getattr(buffer, "base", None)  # a numpy array's
            if buffer is None:
                return None
    return None


def drop_file_pages(buffers: Iterable[object]) -> None:
    """Let go of this process's resident pages of the file mappings that ``buffers`` (memoryviews,
    numpy arrays) are views of: a read faults them back in from the page cache, unchanged. For a pass that reads
    a big mapped file once (a merge of chunks saved in a snapshot): otherwise all it read stays
    resident, as if held in memory. Anonymous mappings are left alone (dropping their pages
    would zero them)."""
    seen: set[int] = set()
    for buffer in buffers:
        source = mapping_under(buffer)
        if source is not None and id(source) not in seen and MAPPINGS.of_file(source):
            seen.add(id(source))
            if hasattr(mmap, "MADV_DONTNEED") and not source.closed:
                source.madvise(mmap.MADV_DONTNEED)


def unmap_unused() -> int:
    """Unmap the kept mappings that nothing else refers to (no view, no array over them); the
    number unmapped. Costs one reference count read per kept mapping. Call it where no
    structure is half replaced: after a swap, not inside one."""
    return MAPPINGS.unmap_unused()


def unmap_unused_soon() -> None:
    """:func:`unmap_unused` ``KeptMappings.SWEEP_DELAY_S`` from now (one sweep however many ask
    meanwhile: a write costs no scan of the mappings): after a swap, the old structures go once
    their last reader is done with them."""
    MAPPINGS.unmap_unused_soon()
