"""Token columns compressed in blocks, and read block by block.

Owns: the packed form of a chunk's two token columns (each token's doc and position, see
:mod:`roarsearch.index.chunks`), as a snapshot saves them and as big merges keep them in memory.
A column is cut into independent blocks that follow its terms (:func:`block_starts`: a big
term's own blocks of at most :data:`PACK_BLOCK_VALUES` tokens, small terms sharing blocks of
about :data:`SMALL_BLOCK_VALUES`): docs as differences from the previous token's doc (wrapping,
so one ``cumsum`` restores them: within a term they are small gaps), positions as they are, each
block byte-shuffled (every value's lowest byte first, …: the high bytes are nearly all zero) and
zstd-compressed (level 2, :mod:`roarsearch.index.codec`; older snapshots' zlib blocks still
read) — about a quarter of the raw bytes. A loaded column (:class:`LazyColumn`) keeps the
compressed blocks (views of the mapped snapshot) and inflates a block the first time a read
reaches it, so opening inflates nothing and memory follows what queries read.
"""

from __future__ import annotations

import mmap
import threading
from itertools import pairwise

import numpy as np

from roarsearch.buffers import Buffer
from roarsearch.index import codec
from roarsearch.index.bitmaps import sorted_unique
from roarsearch.memory import kept_mapping

#: Saved token columns are compressed in independent blocks, so that a query inflates only the
#: blocks holding the terms it reads. A chunk's blocks follow its terms (:func:`block_starts`): a
#: term of at least :data:`SMALL_BLOCK_VALUES` tokens has blocks of its own, of at most this many
#: values (16,384 inflate in ~0.1 ms; 65,536 took 0.36 ms, for 6-10% less disk)...
PACK_BLOCK_VALUES = 1 << 14


#: ... and the smaller terms between them share blocks of about this many values (2,048-4,095): a
#: first-seen rare word inflates ~2,000 values per chunk and column instead of 16,384 (writing
#: 2 fresh pages instead of 16, at ~4 us each on this machine), for ~5% more bytes of token
#: columns (1,024 read no faster, in twice the blocks).
SMALL_BLOCK_VALUES = 1 << 11


#: The block size of snapshots written before 16,384 (still read).
LEGACY_PACK_BLOCK_VALUES = 1 << 16


#: zstd level 2 on byte-shuffled blocks: zlib level 1's ratio for a fifth of its CPU.
PACK_LEVEL = 2


def _shuffle(values: np.ndarray) -> bytes:
    """The bytes of ``values``, every value's lowest byte first, then every second byte, …"""
    return values.view(np.uint8).reshape(-1, values.dtype.itemsize).T.tobytes()


#: Each byte plane's shift for :func:`_unshuffle`'s one-pass path (4-byte values).
_PLANE_SHIFTS_U32 = (np.arange(4, dtype=np.uint32) * np.uint32(8)).reshape(4, 1)


def _unshuffle(raw: bytes, target: np.ndarray) -> None:
    """Write into ``target`` (unsigned) the values :func:`_shuffle` turned into ``raw``."""
    width, size = target.dtype.itemsize, target.size
    if width == 4:
        # Four planes widened, shifted and or-ed in three calls: a third less than plane by
        # plane on a small block (4.7 against 7.2 us for 1,024 values), no slower on a large one.
        planes = np.frombuffer(raw, dtype=np.uint8).reshape(4, size).astype(np.uint32)
        planes <<= _PLANE_SHIFTS_U32
        np.bitwise_or.reduce(planes, axis=0, out=target)
        return
    planes = np.frombuffer(raw, dtype=np.uint8)
    target[...] = planes[:size]
    for plane in range(1, width):  # shift-or over contiguous planes: faster than a strided transpose
        target |= planes[plane * size:(plane + 1) * size].astype(target.dtype) << (8 * plane)


def block_starts(term_starts: np.ndarray) -> np.ndarray:
    """Where the blocks of a chunk's token columns start (int64 token offsets, the first 0), given
    where each of its terms' tokens start (``term_starts``: ascending, one past the last term's
    end last). A term of at least :data:`SMALL_BLOCK_VALUES` tokens starts a block and the block
    after it ends, and is cut every :data:`PACK_BLOCK_VALUES` values; the smaller terms between
    are cut at the first term boundary from each multiple of SMALL_BLOCK_VALUES on, so a small
    term lies in one block of fewer than 2 × SMALL_BLOCK_VALUES values."""
    total = int(term_starts[-1]) if term_starts.size else 0
    if not total:
        return np.zeros(0, dtype=np.int64)
    term_starts = term_starts.astype(np.int64, copy=False)
    big = np.diff(term_starts) >= SMALL_BLOCK_VALUES
    after_multiples = term_starts[np.searchsorted(term_starts, np.arange(SMALL_BLOCK_VALUES, total, SMALL_BLOCK_VALUES))]
    starts = sorted_unique(np.concatenate((np.zeros(1, dtype=np.int64), term_starts[:-1][big],
                                           term_starts[1:][big], after_multiples)))
    starts = starts[:np.searchsorted(starts, total)]  # no block starts at the end
    lengths = np.diff(starts, append=total)
    long = lengths > PACK_BLOCK_VALUES
    if long.any():  # a big term's run, cut every PACK_BLOCK_VALUES from its start
        pieces = (lengths[long] - 1) // PACK_BLOCK_VALUES
        within = gather_index(np.ones(pieces.size, dtype=np.int64), pieces + 1) * PACK_BLOCK_VALUES
        starts = np.sort(np.concatenate((starts, np.repeat(starts[long], pieces) + within)))
    return starts


def fixed_block_starts(count: int, blocks: int) -> np.ndarray:
    """The block starts of a column of ``count`` values saved in ``blocks`` blocks of
    :data:`PACK_BLOCK_VALUES` values (:func:`pack_column` without starts; token columns of
    snapshots written before blocks followed terms), or of the larger blocks of older snapshots
    (the block count tells which: they never agree for more than one block's values)."""
    size = next((size for size in (PACK_BLOCK_VALUES, LEGACY_PACK_BLOCK_VALUES) if -(-count // size) == blocks), 0)
    if not size:
        raise ValueError(f"a saved token column has {blocks} blocks, {count} values need "
                         f"{-(-count // PACK_BLOCK_VALUES)}")
    return np.arange(0, count, size, dtype=np.int64)


def pack_column(values: np.ndarray, delta: bool, starts: np.ndarray | None = None) -> tuple[bytes, np.ndarray]:
    """``values`` (any numeric type; unsigned with ``delta``) compressed in blocks starting at
    ``starts`` (the first 0; None: every :data:`PACK_BLOCK_VALUES` values), each byte-shuffled and
    compressed on its own (``index.codec``); with ``delta``, each value's difference from the
    previous one in its block (modulo the type's range) is stored instead. Returns the blocks
    back to back and the byte offset where each ends."""
    if starts is None:
        starts = np.arange(0, values.size, PACK_BLOCK_VALUES, dtype=np.int64)
    if delta and values.size:
        # The whole column's differences in one call (wrapping), each block's first value as is.
        deltas = np.diff(values, prepend=values.dtype.type(0))
        deltas[starts] = values[starts]
        values = deltas
    parts = [codec.compress(_shuffle(values[start:end]), PACK_LEVEL)
             for start, end in pairwise(starts.tolist() + [values.size])]
    ends = np.cumsum(np.fromiter(map(len, parts), dtype=np.uint64, count=len(parts)), dtype=np.uint64)
    return b"".join(parts), ends


#: A loaded column of at most this many values is inflated whole on its first read (a few
#: milliseconds), so that reads of it skip the per-block bookkeeping from then on.
WHOLE_COLUMN_VALUES = 16 * PACK_BLOCK_VALUES


#: Arrays of at least this many bytes that are filled block by block come from their own
#: anonymous mapping (see :func:`untouched_array`).
SMALL_PAGES_BYTES = 1 << 22


def untouched_array(count: int, dtype: type) -> np.ndarray:
    """An uninitialised array whose memory the kernel supplies in 4 KiB pages on first write.

    numpy advises huge pages for arrays of 4 MiB and more; a lazily inflated column touches them
    one block at a time, and the first write into each 2 MiB huge page made the kernel find (and
    compact memory for) a whole huge page: 5–10 ms stalls inside a first-seen query, for a block
    that inflates in 0.1 ms. An anonymous mapping of its own gets ordinary pages, unmapped once
    the array is gone (by :func:`roarsearch.memory.unmap_unused`, not inside whatever dropped it).
    """
    size = count * np.dtype(dtype).itemsize
    if size < SMALL_PAGES_BYTES:
        return np.empty(count, dtype=dtype)
    return np.frombuffer(kept_mapping(mmap.mmap(-1, size)), dtype=dtype, count=count)


class LazyColumn:
    """A saved token column, inflated block by block as reads reach it: ``values`` is allocated
    whole on the first inflated block, and its pages stay untouched (not resident) until a block
    is written into them."""

    __slots__ = ("_values", "dtype", "count", "ready", "_ready", "missing", "data", "ends", "delta", "starts",
                 "_bounds", "_whole", "_lock")

    def __init__(self, data: Buffer, ends: np.ndarray, count: int, dtype: type, delta: bool,
                 starts: np.ndarray | None = None) -> None:
        """``starts``: where each block starts (token offsets); None for a column of fixed-size
        blocks (:func:`fixed_block_starts`)."""
        blocks = ends.size
        if starts is None:
            starts = fixed_block_starts(count, blocks)
        starts = starts.astype(np.int64, copy=False)
        if starts.size != blocks or (blocks and (int(starts[0]) != 0 or int(starts[-1]) >= count
                                                 or not (starts[1:] > starts[:-1]).all())):
            raise ValueError(f"a saved token column's {starts.size} block starts do not cut {count} "
                             f"values into its {blocks} blocks")
        #: Where each block starts, and then where the last one ends.
        self.starts = starts
        self._bounds: list[int] = starts.tolist() + [count]
        self.dtype = np.dtype(dtype)
        self.count = count
        #: Allocated on the first block inflated (see :attr:`values`).
        self._values: np.ndarray | None = None
        #: Which blocks are inflated: one byte each, read one at a time from ``_ready`` (a
        #: bytearray indexes without a numpy scalar) and many at once through ``ready``, its view.
        self._ready = bytearray(blocks)
        self.ready = np.frombuffer(self._ready, dtype=bool) if blocks else np.zeros(0, dtype=bool)
        self._whole = count <= WHOLE_COLUMN_VALUES
        self.missing = blocks  # blocks not inflated yet: 0 makes every read a plain array access
        self.data = data
        self.ends = ends.astype(np.int64)
        self.delta = delta
        self._lock = threading.Lock()

    @property
    def values(self) -> np.ndarray:
        """The column, allocated whole on first use but inflated only where blocks are ready. A
        column no read has reached costs nothing: a load's chunks, handed over to the snapshot,
        are many such (small ones would come from the heap, whose pages are resident)."""
        values = self._values
        if values is None:
            with self._lock:
                values = self._values
                if values is None:
                    values = self._values = untouched_array(self.count, self.dtype.type)
        return values

    def _blocks_of(self, lo: int, hi: int) -> range:
        """The blocks holding values ``lo:hi`` (``hi > lo``): a binary search for the first, then
        forward to the one holding ``hi - 1`` (most often the same block)."""
        bounds = self._bounds
        first = _last_at_most(bounds, lo)
        last = first + 1
        while bounds[last] < hi:
            last += 1
        return range(first, last)

    def _inflate_into(self, block: int, target: np.ndarray) -> None:
        """Inflate ``block`` into ``target`` (its length)."""
        byte_start = int(self.ends[block - 1]) if block else 0
        raw = codec.decompress(self.data[byte_start:int(self.ends[block])])
        if len(raw) != target.nbytes:
            raise ValueError(f"a saved token block inflates to {len(raw)} bytes, not {target.nbytes}")
        _unshuffle(raw, target.view(f"u{target.itemsize}"))  # floats and signed: their bits
        if self.delta:
            np.cumsum(target, dtype=target.dtype, out=target)

    def _inflate(self, block: int) -> None:
        values = self.values  # (allocated under the lock taken below: not inside it)
        with self._lock:  # readers wanting the same block wait for it rather than inflate it twice
            if self._ready[block]:
                return
            self._inflate_into(block, values[self._bounds[block]:self._bounds[block + 1]])
            self._ready[block] = 1
            self.missing -= 1

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Values ``lo:hi``, inflating the blocks not inflated yet into a temporary array rather
        than into ``values`` (a merge reads each token once: keeping them would undo the packing)."""
        if not self.missing:
            return self.values[lo:hi]
        if hi <= lo:
            return np.empty(0, dtype=self.dtype)
        blocks = self._blocks_of(lo, hi)
        bounds = self._bounds
        base = bounds[blocks.start]
        out = np.empty(bounds[blocks.stop] - base, dtype=self.dtype)
        for block in blocks:
            start, end = bounds[block], bounds[block + 1]
            target = out[start - base:end - base]
            if self._ready[block]:
                target[...] = self.values[start:end]
            else:
                self._inflate_into(block, target)
        return out[lo - base:hi - base]

    def cover(self, lo: int, hi: int) -> np.ndarray:
        """``values``, with at least tokens ``lo:hi`` inflated."""
        if not self.missing:
            return self.values
        if self._whole:
            return self.whole()
        if hi > lo:
            ready = self._ready
            for block in self._blocks_of(lo, hi):
                if not ready[block]:
                    self._inflate(block)
        return self.values

    def cover_all(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """``values``, with at least tokens ``lo[i]:hi[i]`` inflated for every i."""
        if not self.missing:
            return self.values
        if self._whole:
            return self.whole()
        present = hi > lo
        first = np.searchsorted(self.starts, lo[present], side="right") - 1
        last = np.searchsorted(self.starts, hi[present] - 1, side="right")
        blocks = sorted_unique(gather_index(first, last))
        for block in blocks[~self.ready[blocks]].tolist():
            self._inflate(block)
        return self.values

    def whole(self) -> np.ndarray:
        if self.missing:
            for block in np.flatnonzero(~self.ready).tolist():
                self._inflate(block)
        return self.values


def _last_at_most(bounds: list[int], value: int) -> int:
    """The last index of ascending ``bounds`` (the first at most ``value``) holding at most
    ``value``. Written out rather than ``bisect``: compiled, it compares machine integers, where
    bisect compares int objects (block lookups took under half the instructions, callgrind)."""
    lo, hi = 0, len(bounds)
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if bounds[middle] <= value:
            lo = middle
        else:
            hi = middle
    return lo


def unpack_column(data: Buffer, ends: np.ndarray, count: int, dtype: type, delta: bool,
                  starts: np.ndarray | None = None) -> np.ndarray:
    """The ``count`` values :func:`pack_column` compressed into ``data`` (blocks ending at ``ends``,
    starting at ``starts``: None for blocks of :data:`PACK_BLOCK_VALUES`)."""
    return LazyColumn(data, ends, count, dtype, delta, starts).whole()


def gather_index(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Offsets ``lo[0]:hi[0]``, ``lo[1]:hi[1]``, … as one array."""
    lengths = hi - lo
    total = int(lengths.sum())
    index: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
    return index
