"""Inverted postings and token positions, per field.

Owns: for each field, every token as (doc, position) pairs grouped by term — a positional
inverted index in compressed-sparse-row form: per chunk, the distinct term ids (sorted), the
offset where each term's tokens start, and two token columns, docs (uint32) and positions
(uint16 while they fit, else uint32) — plus the (field, term id) → ``AbstractBitMap`` postings
derived from them on demand.

Ingest cost is a few numpy calls per batch: the batch's tokens are sorted by term once (a
stable sort, so docs stay ascending within a term) and appended as one chunk. Chunks are merged
in tiers (the newest :data:`MERGE_FACTOR` into one whenever the oldest of them holds at most
:data:`MERGE_RATIO` times the newest's tokens, as tantivy's log merge policy does), so
there are O(log n) chunks and each token is rewritten a few times in all, not once per batch; a
merge is a scatter into place (terms of the later chunk go after those of the earlier one, as
chunks are in doc order), done in slabs so that its temporary index arrays stay small. No
per-term object is made at write time: a term's bitmap is built from its slices the first time
a query asks for it and kept (in ``terms``) until a write adds docs to that term; a union of
many terms (prefixes, wide typo expansions) is one gather and one bitmap build. Docs retired by
deletes or upserts stay in the token arrays; every reader intersects with the alive docs or a
universe derived from them.

Saved (:meth:`FieldPostings.packed_chunks`), each chunk's token columns are compressed in
blocks that follow its terms (:func:`block_starts`: a big term's own blocks of at most
:data:`PACK_BLOCK_VALUES` tokens, small terms sharing blocks of about
:data:`SMALL_BLOCK_VALUES`): docs as differences from the previous token's doc
(wrapping, so one ``cumsum`` restores them: within a term they are small gaps), positions as they
are, each block byte-shuffled (every value's lowest byte first, …: the high bytes are nearly all
zero) and zstd-compressed (level 2, ``index.codec``; older snapshots' zlib blocks still read) —
about a quarter of the raw bytes. A loaded chunk keeps the
compressed blocks (views of the mapped snapshot) and inflates a block the first time a query
reads a term inside it, so opening inflates nothing and memory follows what queries read;
saved again unchanged, a chunk writes its blocks back as they are.
"""

from __future__ import annotations

import logging
import mmap
import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from itertools import pairwise
from typing import NamedTuple

import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.index import codec
from roarsearch.index.bitmaps import EMPTY, bitmap_from_array, sorted_unique, union_all
from roarsearch.memory import kept_mapping, release_free_memory, unmap_unused_soon

log = logging.getLogger("roarsearch")

#: The newest :data:`MERGE_FACTOR` chunks are merged into one while the oldest of them holds at
#: most :data:`MERGE_RATIO` times the newest's tokens: chunk sizes then grow geometrically, by about
#: MERGE_FACTOR per tier (under MERGE_FACTOR chunks per tier, O(log n) tiers) and each token is
#: rewritten once per tier — log4 of the number of batches, half the rewrites of pairwise merging.
MERGE_FACTOR = 4
MERGE_RATIO = 2
#: A merge whose result holds at least this many tokens runs in the background merge thread (the
#: other core: its numpy scatters and block compression release the GIL) instead of inside the add that
#: made it due; smaller merges stay inline (a few milliseconds). Until it lands, readers see the
#: chunks it merges, unchanged.
BACKGROUND_MERGE_TOKENS = 1 << 20
#: During a bulk load, merges of more tokens than this wait for the load's end, which merges each
#: field into one chunk (or lets them run): a top-tier merge just before the end's would rewrite
#: the same tokens twice. The load's searches meanwhile read more chunks. Not lower: the lower
#: tiers left unmerged cost memory (2^22 added 100 MB to a 1M build's peak; 2^24 nothing).
BULK_LOAD_MERGE_TOKENS = 1 << 24
#: A merge scatters at most this many tokens per step (its temporary index array: 8 bytes each).
MERGE_SLAB_TOKENS = 1 << 22
#: A merge whose result holds at least this many tokens writes its docs compressed, as a snapshot
#: saves them (blocks inflated again as queries read them): the big chunks' docs then cost a
#: thirtieth of their raw bytes in memory while records are added; such a merge reads and writes
#: slabs of :data:`PACKED_SLAB_TOKENS` tokens, never a whole raw copy of its chunks' docs.
PACK_MERGED_TOKENS = 1 << 20
PACKED_SLAB_TOKENS = 1 << 20
#: ... and a merge of at least this many packs the positions too (see :func:`_merge_packed`): with
#: zstd, packing positions costs a sixth of what zlib did, and they are 60% of a raw chunk's bytes.
PACK_POSITIONS_TOKENS = 1 << 20
#: Slabs a merge hands to its packing thread before waiting for the oldest to be packed.
PACKS_IN_FLIGHT = 2
#: Joining a packed column's parts hands their freed pages back after each this many bytes.
TRIM_COPIED_BYTES = 8 << 20
#: Positions are kept as uint16 in chunks whose positions all fit.
_NARROW_LIMIT = 1 << 16

#: Cached term bitmaps are dropped all at once beyond this many (a full set is only built by
#: ``all_terms``, for checks).
MAX_CACHED_TERMS = 65_536
#: Unions of more terms than this are built from one gather of their docs, not per-term bitmaps.
MAX_TERMS_PER_TERM_UNION = 8
#: Such unions kept per field (typo expansions and prefixes of recent queries), least recently
#: used first out.
CACHED_UNIONS = 256
#: ``occurrences_in`` binary-searches the docs in each term's slice for at most this many terms...
_SEARCHED_TERMS = 16
#: ...when docs × terms × this is below the terms' occurrences (a binary search costs a few steps).
_SEARCH_COST = 16

_EMPTY_U32 = np.empty(0, dtype=np.uint32)
_LAST_DOC = (1 << 32) - 1
#: Term ranges a chunk remembers (:meth:`_Chunk.range_of`): ~0.2 MB at most per chunk.
REMEMBERED_RANGES = 1024
#: ``positions_in`` reads the positions spanning its docs' tokens of a term as one list when they
#: are at most this many per doc (a value of a list costs ~8 ns, a doc's own numpy slice ~130 ns:
#: five docs spread over a common term's 1,500 tokens read whole took 19 us, per doc 2).
_SPAN_READ_PER_DOC = 16

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

Buffer = bytes | bytearray | memoryview


class PackedTokens(NamedTuple):
    """A chunk's token columns as saved: ``tokens`` tokens, docs and positions compressed by
    :func:`pack_column` (docs as deltas) with the byte offset where each block ends; positions
    are uint16 or uint32. Both columns are cut into the same blocks, starting at the token
    offsets ``block_starts``."""

    tokens: int
    docs: Buffer
    doc_ends: np.ndarray
    positions: Buffer
    position_ends: np.ndarray
    position_type: type
    block_starts: np.ndarray


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
        within = _gather_index(np.ones(pieces.size, dtype=np.int64), pieces + 1) * PACK_BLOCK_VALUES
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
#: anonymous mapping (see :func:`_untouched_array`).
SMALL_PAGES_BYTES = 1 << 22


def _untouched_array(count: int, dtype: type) -> np.ndarray:
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
    whole but its pages stay untouched (not resident) until a block is written into them."""

    __slots__ = ("values", "ready", "_ready", "missing", "data", "ends", "delta", "starts", "_bounds", "_whole",
                 "_lock")

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
        self.values: np.ndarray = _untouched_array(count, dtype)
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
        with self._lock:  # readers wanting the same block wait for it rather than inflate it twice
            if self._ready[block]:
                return
            self._inflate_into(block, self.values[self._bounds[block]:self._bounds[block + 1]])
            self._ready[block] = 1
            self.missing -= 1

    def read(self, lo: int, hi: int) -> np.ndarray:
        """Values ``lo:hi``, inflating the blocks not inflated yet into a temporary array rather
        than into ``values`` (a merge reads each token once: keeping them would undo the packing)."""
        if not self.missing or hi <= lo:
            return self.values[lo:hi]
        blocks = self._blocks_of(lo, hi)
        bounds = self._bounds
        base = bounds[blocks.start]
        out = np.empty(bounds[blocks.stop] - base, dtype=self.values.dtype)
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
        blocks = sorted_unique(_gather_index(first, last))
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


def _narrow_positions(positions: np.ndarray) -> np.ndarray:
    if positions.size and int(positions.max()) >= _NARROW_LIMIT:
        return positions.astype(np.uint32, copy=False)
    return positions.astype(np.uint16)


def _packed_column(column: np.ndarray | LazyColumn, delta: bool, starts: np.ndarray) -> tuple[Buffer, np.ndarray]:
    if isinstance(column, LazyColumn):
        return column.data, column.ends.astype(np.uint64)
    return pack_column(column, delta, starts)


class _Chunk:
    """Tokens of a run of batches, grouped by term: term ``terms[i]`` owns tokens
    ``starts[i]:starts[i + 1]`` of ``docs`` and ``positions`` (docs ascending within a term)."""

    __slots__ = ("terms", "starts", "_docs", "_positions", "packed", "_ranges", "_few", "end_doc")

    def __init__(self, terms: np.ndarray, starts: np.ndarray, docs: np.ndarray | LazyColumn,
                 positions: np.ndarray | LazyColumn, packed: PackedTokens | None = None, end_doc: int = -1) -> None:
        self.terms = terms
        self.starts = starts
        #: Above every doc here (one past the last for a chunk built here; the collection's next
        #: doc when loaded from a snapshot), so every doc added later is at least this: what a
        #: cached union covers (see ``FieldPostings._union``). -1: unknown.
        self.end_doc = end_doc
        self._docs = docs
        self._positions = positions
        #: The token columns as loaded from a snapshot (None for chunks built since), saved again
        #: as they are; ``_docs`` and ``_positions`` are then :class:`LazyColumn` over them.
        self.packed = packed
        #: Token ranges of terms looked up lately (a chunk never changes; see :meth:`range_of`).
        self._ranges: dict[int, tuple[int, int]] = {}
        #: The tokens of rare terms looked up lately, as lists (see :meth:`few_tokens`).
        self._few: dict[int, tuple[list[int], list[int]]] = {}

    @classmethod
    def from_packed(cls, terms: np.ndarray, starts: np.ndarray, packed: PackedTokens) -> _Chunk:
        return cls(terms, starts,
                   LazyColumn(packed.docs, packed.doc_ends, packed.tokens, np.uint32, True, packed.block_starts),
                   LazyColumn(packed.positions, packed.position_ends, packed.tokens, packed.position_type, False,
                              packed.block_starts),
                   packed)

    @property
    def docs(self) -> np.ndarray:
        """Every token's doc (inflating them all, for a loaded chunk)."""
        docs = self._docs
        return docs.whole() if isinstance(docs, LazyColumn) else docs

    @property
    def positions(self) -> np.ndarray:
        positions = self._positions
        return positions.whole() if isinstance(positions, LazyColumn) else positions

    def docs_in(self, lo: int, hi: int) -> np.ndarray:
        """The docs column, tokens ``lo:hi`` at least readable."""
        docs = self._docs
        return docs.cover(lo, hi) if isinstance(docs, LazyColumn) else docs

    def positions_in(self, lo: int, hi: int) -> np.ndarray:
        positions = self._positions
        return positions.cover(lo, hi) if isinstance(positions, LazyColumn) else positions

    def docs_in_all(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """The docs column, tokens ``lo[i]:hi[i]`` readable for every i."""
        docs = self._docs
        return docs.cover_all(lo, hi) if isinstance(docs, LazyColumn) else docs

    def positions_in_all(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        positions = self._positions
        return positions.cover_all(lo, hi) if isinstance(positions, LazyColumn) else positions

    def read_docs(self, lo: int, hi: int) -> np.ndarray:
        """Docs of tokens ``lo:hi``, without keeping blocks inflated (see :meth:`LazyColumn.read`)."""
        docs = self._docs
        return docs.read(lo, hi) if isinstance(docs, LazyColumn) else docs[lo:hi]

    def read_positions(self, lo: int, hi: int) -> np.ndarray:
        positions = self._positions
        return positions.read(lo, hi) if isinstance(positions, LazyColumn) else positions[lo:hi]

    @property
    def position_type(self) -> type:
        positions = self._positions
        return positions.values.dtype.type if isinstance(positions, LazyColumn) else positions.dtype.type

    def pack(self) -> PackedTokens:
        """The token columns compressed (a column kept compressed is saved as it is)."""
        if self.packed is not None:
            return self.packed
        # Docs packed by a merge keep their blocks; the positions are cut into the same ones.
        starts = self._docs.starts if isinstance(self._docs, LazyColumn) else block_starts(self.starts)
        docs, doc_ends = _packed_column(self._docs, True, starts)
        positions, position_ends = _packed_column(self._positions, False, starts)
        return PackedTokens(self.size, docs, doc_ends, positions, position_ends, self.position_type, starts)

    @classmethod
    def from_sorted(cls, sorted_terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> _Chunk:
        """A chunk from one term id per token (term-sorted)."""
        if not sorted_terms.size:
            return cls(_EMPTY_U32, np.zeros(1, dtype=np.int64), _EMPTY_U32, np.empty(0, dtype=np.uint16))
        boundaries = np.flatnonzero(sorted_terms[1:] != sorted_terms[:-1]) + 1
        starts = np.concatenate(([0], boundaries, [sorted_terms.size])).astype(np.int64)
        return cls(sorted_terms[starts[:-1]].astype(np.uint32), starts, docs.astype(np.uint32, copy=False),
                   _narrow_positions(positions), end_doc=int(docs.max()) + 1)

    @classmethod
    def from_groups(cls, term_ids: np.ndarray, counts: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> _Chunk:
        """A chunk from tokens grouped by term: ``counts[i]`` tokens of ``term_ids[i]`` (distinct,
        in any order) after those of the terms before it. The groups are put in term order (no
        sort of the tokens: one of the distinct terms, then one gather)."""
        if not (term_ids[1:] > term_ids[:-1]).all():
            order = np.argsort(term_ids)
            ends = np.cumsum(counts)
            index = _gather_index((ends - counts)[order], ends[order])
            term_ids, counts, docs, positions = term_ids[order], counts[order], docs[index], positions[index]
        starts = np.zeros(counts.size + 1, dtype=np.int64)
        np.cumsum(counts, out=starts[1:])
        return cls(term_ids.astype(np.uint32), starts, docs.astype(np.uint32, copy=False), _narrow_positions(positions),
                   end_doc=int(docs.max()) + 1 if docs.size else 0)

    @property
    def size(self) -> int:
        return int(self.starts[-1])

    def ranges(self, term_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) token offsets of each of ``term_ids`` here (empty ranges for absent terms)."""
        terms = self.terms
        if not terms.size:
            empty = np.zeros(term_ids.size, dtype=np.int64)
            return empty, empty
        slot = np.searchsorted(terms, term_ids)
        np.minimum(slot, terms.size - 1, out=slot)
        lo = self.starts[slot]
        hi = self.starts[slot + 1]
        absent = terms[slot] != term_ids
        if absent.any():
            hi[absent] = lo[absent]
        return lo, hi

    def range_of(self, term: int) -> tuple[int, int]:
        """(start, end) token offsets of one term here ((0, 0) when absent). Remembered for the
        chunk's lifetime (up to :data:`REMEMBERED_RANGES` terms): proximity reads a query's
        terms' positions on every search, and the binary search over a big chunk's millions of
        terms cost it more than the positions (0.8 us each, most of it cache misses)."""
        found = self._ranges.get(term)
        if found is not None:
            return found
        terms = self.terms
        # A uint32 key: a Python int would make numpy cast the whole term array to int64 first.
        slot = int(terms.searchsorted(np.uint32(term)))
        found = (int(self.starts[slot]), int(self.starts[slot + 1])) if slot < terms.size and int(terms[slot]) == term else (0, 0)
        if len(self._ranges) >= REMEMBERED_RANGES:
            self._ranges = {}
        self._ranges[term] = found
        return found

    def few_tokens(self, term: int, start: int, end: int) -> tuple[list[int], list[int]]:
        """The docs and positions of the term owning tokens ``start:end`` (at most
        :data:`_LIST_READ_TOKENS` of them), as lists. Remembered like :meth:`range_of`'s ranges
        (a chunk never changes): a rare word's proximity reads them on every search, and four
        numpy calls (two slices, two ``tolist``) cost it more than walking them."""
        found = self._few.get(term)
        if found is not None:
            return found
        found = (self.docs_in(start, end)[start:end].tolist(), self.positions_in(start, end)[start:end].tolist())
        if len(self._few) >= REMEMBERED_RANGES:
            self._few = {}
        self._few[term] = found
        return found

    def spans(self, term_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """(start, end) token offsets of those of ``term_ids`` held here; None when none is. One
        term takes one scalar binary search (each numpy call on arrays costs microseconds)."""
        if term_ids.size == 1:
            start, end = self.range_of(int(term_ids[0]))
            return None if end == start else (np.asarray([start]), np.asarray([end]))
        lo, hi = self.ranges(term_ids)
        present = hi > lo
        if not present.any():
            return None
        return lo[present], hi[present]

    def token_terms(self) -> np.ndarray:
        """One term id per token."""
        terms: np.ndarray = np.repeat(self.terms, np.diff(self.starts))
        return terms


def doc_edges(docs: list[int]) -> np.ndarray:
    """``docs`` (sorted doc ids), then each plus one, as uint32: searched for (side left) in a
    term's docs, where each doc's tokens start and end, in one call. uint32 like the docs (other
    keys would make numpy convert the term's docs); the last uint32 doc's successor wraps to 0,
    which :meth:`FieldPostings.positions_in` mends."""
    return np.asarray(docs + [(doc + 1) & _LAST_DOC for doc in docs], dtype=np.uint32)


class FewDocs:
    """A few sorted doc ids that several :meth:`FieldPostings.positions_in` calls ask about, with
    their :func:`doc_edges` made on first need (only a term of more than :data:`_LIST_READ_TOKENS`
    tokens needs them: never, for most rare words, and making them costs a microsecond)."""

    __slots__ = ("ids", "_edges")

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        self._edges: np.ndarray | None = None

    def edges(self) -> np.ndarray:
        if self._edges is None:
            self._edges = doc_edges(self.ids)
        return self._edges


#: A term of at most this many tokens in a chunk is read whole as lists by
#: :meth:`FieldPostings.positions_in` and walked beside the docs asked for: cheaper than a search call.
_LIST_READ_TOKENS = 32


def _merge_few_tokens(term_docs: list[int], positions: list[int], docs: list[int],
                      found: dict[int, list[int]]) -> None:
    """Append to ``found`` (by slot in ``docs``) the positions of the tokens (``term_docs``,
    ``positions``: one term's, in doc order) in ``docs`` (sorted), one walk over both."""
    at, count = 0, len(docs)
    held_at = -1
    held: list[int] = []
    for token, doc in enumerate(term_docs):
        while at < count and docs[at] < doc:
            at += 1
        if at == count:
            return
        if docs[at] == doc:
            if at != held_at:  # a doc's tokens are consecutive: its list is looked up once
                held_at = at
                held = found.setdefault(at, [])
            held.append(positions[token])


class DocMask:
    """One set of sorted doc ids as a dense boolean mask (length ``docs[-1] + 1``), made on first
    need and shared by the lookups that need it (a mask as long as the largest doc id costs more
    than the lookups of a few rare terms)."""

    __slots__ = ("_docs", "_mask")

    def __init__(self, docs: np.ndarray) -> None:
        self._docs = docs
        self._mask: np.ndarray | None = None

    def dense(self) -> np.ndarray:
        if self._mask is None:
            docs = self._docs
            self._mask = np.zeros(int(docs[-1]) + 1, dtype=bool)
            self._mask[docs] = True
        return self._mask


def _gather_index(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Offsets ``lo[0]:hi[0]``, ``lo[1]:hi[1]``, … as one array."""
    lengths = hi - lo
    total = int(lengths.sum())
    index: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
    return index


def merge_chunks(chunks: list[_Chunk]) -> _Chunk:
    """One chunk holding the tokens of ``chunks`` (given in doc order): for each term, the tokens
    of the first chunk, then those of the second, … — which keeps docs ascending within a term."""
    # Each chunk's terms are sorted and distinct: a stable sort merges the runs (timsort, linear).
    terms = np.sort(np.concatenate([chunk.terms for chunk in chunks]), kind="stable")
    terms = terms[np.concatenate(([True], terms[1:] != terms[:-1]))] if terms.size else terms
    counts = np.zeros(terms.size, dtype=np.int64)
    slots = []
    for chunk in chunks:
        slot = np.searchsorted(terms, chunk.terms)
        slots.append(slot)
        counts[slot] += np.diff(chunk.starts)
    starts = np.zeros(terms.size + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    total = int(starts[-1])
    wide = any(chunk.position_type == np.uint32 for chunk in chunks)
    end_doc = max(chunk.end_doc for chunk in chunks)
    if total >= PACK_MERGED_TOKENS:
        merged = _merge_packed(chunks, terms.astype(np.uint32), starts, slots, np.uint32 if wide else np.uint16)
        merged.end_doc = end_doc
        return merged
    docs = np.empty(total, dtype=np.uint32)
    positions = np.empty(total, dtype=np.uint32 if wide else np.uint16)
    filled = starts[:-1].copy()  # where each term's next tokens go
    for chunk, slot in zip(chunks, slots):
        lengths = np.diff(chunk.starts)
        destination = filled[slot]
        filled[slot] += lengths
        # Slabs of whole terms, so that the index array below stays small.
        bounds = np.searchsorted(chunk.starts, np.arange(0, chunk.size, MERGE_SLAB_TOKENS), side="right") - 1
        bounds = sorted_unique(np.append(bounds, chunk.terms.size))
        for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            token_lo, token_hi = int(chunk.starts[first]), int(chunk.starts[last])
            if token_hi == token_lo:
                continue
            shift = destination[first:last] - chunk.starts[first:last]
            index = np.arange(token_lo, token_hi, dtype=np.int64) + np.repeat(shift, lengths[first:last])
            docs[index] = chunk.read_docs(token_lo, token_hi)
            positions[index] = chunk.read_positions(token_lo, token_hi)
    return _Chunk(terms.astype(np.uint32), starts, docs, positions, end_doc=end_doc)


class _BlockPacker:
    """Compresses a column slab by slab of whole terms, each in the blocks :func:`block_starts`
    gives its terms (the layout :func:`pack_column` gives the whole column, but for a cut at each
    slab's end), in ``pool``: compression releases the GIL, so the merge goes on scattering the
    next slab on the other core meanwhile."""

    def __init__(self, delta: bool, pool: ThreadPoolExecutor) -> None:
        self.delta = delta
        self.pool = pool
        self.parts: list[Future[tuple[bytes, np.ndarray]]] = []

    def append(self, values: np.ndarray, starts: np.ndarray) -> None:
        """Pack ``values``, one slab, in blocks starting at ``starts`` (offsets in the slab)."""
        if not values.size:
            return
        self.parts.append(self._pack(values, starts))
        if len(self.parts) > PACKS_IN_FLIGHT:  # the slabs queued for it wait raw: keep them few
            self.parts[-PACKS_IN_FLIGHT - 1].result()

    def _pack(self, values: np.ndarray, starts: np.ndarray) -> Future[tuple[bytes, np.ndarray]]:
        try:
            return self.pool.submit(pack_column, values, self.delta, starts)
        except RuntimeError:
            # The interpreter is exiting (a program that ends without closing its engine while a
            # background merge runs): the pool takes no new work, so the merge packs here.
            packed: Future[tuple[bytes, np.ndarray]] = Future()
            packed.set_result(pack_column(values, self.delta, starts))
            return packed

    def finish(self) -> tuple[Buffer, np.ndarray]:
        """The packed column: its blocks back to back and where each ends. The slabs' parts are
        copied into one untouched mapping and each let go as soon as it is copied — joining them
        held every part and the whole column at once (67 MB more at the end of a 45M-token merge)."""
        results = [part.result() for part in self.parts]
        self.parts = []
        data = _untouched_array(sum(len(block_data) for block_data, _ends in results), np.uint8)
        results.reverse()  # popped oldest first: each part's bytes go once copied
        ends: list[np.ndarray] = []
        offset = released = 0
        while results:
            block_data, block_ends = results.pop()
            data[offset:offset + len(block_data)] = np.frombuffer(block_data, dtype=np.uint8)
            ends.append(block_ends + np.uint64(offset))
            offset += len(block_data)
            del block_data, block_ends
            if offset - released >= TRIM_COPIED_BYTES:
                # The parts copied are freed into the heap, which keeps their pages: handed back
                # as the copy goes, or the column is resident twice at its end (61 MB of the peak
                # when a 1M build merges its descriptions into one chunk).
                release_free_memory()
                released = offset
        return data.data, np.concatenate(ends) if ends else np.empty(0, dtype=np.uint64)


def _merge_packed(chunks: list[_Chunk], terms: np.ndarray, starts: np.ndarray, slots: list[np.ndarray],
                  position_type: type) -> _Chunk:
    """:func:`merge_chunks` writing the result's docs compressed: slab by slab of whole output
    terms, each input's tokens of those terms (one contiguous range per input, as its terms are
    sorted) are read, scattered into place and the docs packed."""
    with ThreadPoolExecutor(1, thread_name_prefix="roarsearch-pack", initializer=_behind_searches) as pool:
        return _merge_packed_in(pool, chunks, terms, starts, slots, position_type)


def _merge_packed_in(pool: ThreadPoolExecutor, chunks: list[_Chunk], terms: np.ndarray, starts: np.ndarray,
                     slots: list[np.ndarray], position_type: type) -> _Chunk:
    docs_out = _BlockPacker(True, pool)
    total = int(starts[-1])
    # Positions compress to 0.4 of their bytes (docs shrink 30-fold); below PACK_POSITIONS_TOKENS
    # they stay raw.
    positions_out = _BlockPacker(False, pool) if total >= PACK_POSITIONS_TOKENS else None
    blocks: list[np.ndarray] = []  # where each slab's blocks start, in the chunk
    positions: np.ndarray = np.empty(0 if positions_out else total, dtype=position_type)
    bounds = np.searchsorted(starts, np.arange(0, total, PACKED_SLAB_TOKENS), side="right") - 1
    bounds = sorted_unique(np.append(bounds, terms.size))
    for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        slab_lo = int(starts[first])
        size = int(starts[last]) - slab_lo
        docs = np.empty(size, dtype=np.uint32)
        slab_positions = np.empty(size, dtype=position_type) if positions_out else positions[slab_lo:slab_lo + size]
        filled = starts[first:last] - slab_lo  # where each output term's next tokens go in the slab
        for chunk, slot in zip(chunks, slots):
            lo, hi = np.searchsorted(slot, (first, last)).tolist()
            if hi == lo:
                continue
            token_lo, token_hi = int(chunk.starts[lo]), int(chunk.starts[hi])
            lengths = np.diff(chunk.starts[lo:hi + 1])
            into = slot[lo:hi] - first
            shift = filled[into] - (chunk.starts[lo:hi] - token_lo)
            filled[into] += lengths
            index = np.arange(token_hi - token_lo, dtype=np.int64) + np.repeat(shift, lengths)
            docs[index] = chunk.read_docs(token_lo, token_hi)
            slab_positions[index] = chunk.read_positions(token_lo, token_hi)
        slab_blocks = block_starts(starts[first:last + 1] - slab_lo)
        blocks.append(slab_blocks + slab_lo)
        docs_out.append(docs, slab_blocks)
        if positions_out:
            positions_out.append(slab_positions, slab_blocks)
    doc_data, doc_ends = docs_out.finish()
    chunk_blocks = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
    if positions_out is None:
        return _Chunk(terms, starts, LazyColumn(doc_data, doc_ends, total, np.uint32, True, chunk_blocks), positions)
    position_data, position_ends = positions_out.finish()
    return _Chunk.from_packed(terms, starts, PackedTokens(total, doc_data, doc_ends, position_data, position_ends,
                                                          position_type, chunk_blocks))


#: What :meth:`FieldPostings.plan_add` returns: the chunks it planned against, the chunks a background
#: merge was reading then, the batch's chunk, the chunks after.
PostingsPlan = tuple[list[_Chunk], frozenset[int], _Chunk, list[_Chunk]]


def _with_chunk(chunks: list[_Chunk], chunk: _Chunk, busy: frozenset[int] = frozenset()) -> list[_Chunk]:
    """``chunks`` and then ``chunk``, the small tier merges done (see the module docstring);
    ``chunks`` is not changed. Merges reaching :data:`BACKGROUND_MERGE_TOKENS`, and merges of a
    chunk in ``busy`` (ids of chunks a background merge is reading), are left to
    :func:`_due_merge`."""
    merged = chunks + [chunk]
    while (len(merged) >= MERGE_FACTOR and merged[-MERGE_FACTOR].size <= MERGE_RATIO * merged[-1].size
           and sum(part.size for part in merged[-MERGE_FACTOR:]) < BACKGROUND_MERGE_TOKENS
           and not any(id(part) in busy for part in merged[-MERGE_FACTOR:])):
        merged[-MERGE_FACTOR:] = [merge_chunks(merged[-MERGE_FACTOR:])]
    return merged


def _due_merge(chunks: list[_Chunk], limit: int | None = None) -> tuple[int, int] | None:
    """The newest run of chunks (``chunks[lo:hi]``) that the tier rule would have merged into one
    had the chunks come one by one (the newest MERGE_FACTOR while the oldest of them holds at most
    :data:`MERGE_RATIO` times the newest's tokens, repeatedly); None when the tiers are settled.
    Background merges leave runs anywhere, not only at the end: adds append meanwhile.
    ``limit``: runs of more tokens than this are not due (a bulk load leaves them to its end)."""
    runs: list[list[int]] = []  # [first chunk, tokens] of each merged group, oldest first
    for place, chunk in enumerate(chunks):
        runs.append([place, chunk.size])
        while len(runs) >= MERGE_FACTOR and runs[-MERGE_FACTOR][1] <= MERGE_RATIO * runs[-1][1]:
            runs[-MERGE_FACTOR][1] += sum(size for _, size in runs[-MERGE_FACTOR + 1:])
            del runs[-MERGE_FACTOR + 1:]
    ends = [first for first, _ in runs[1:]] + [len(chunks)]
    for (first, tokens), end in zip(reversed(runs), reversed(ends)):
        if end - first > 1 and (limit is None or tokens <= limit):
            return first, end
    return None


_merge_pool: ThreadPoolExecutor | None = None
_merge_pool_lock = threading.Lock()
#: Held by each background merge while it merges, and by a snapshot while it saves: the two
#: never run at once, so their buffers never add up to one peak.
_merge_gate = threading.Lock()


@contextmanager
def merges_held() -> Iterator[None]:
    """No background merge runs inside this block (one running is waited for)."""
    with _merge_gate:
        yield


#: How far below searches the merge threads run (a nice value added to theirs, where the system
#: has per-thread priorities: Linux): a merge takes a core only when no search, in this process or
#: another worker, is ready to run on it.
MERGE_NICENESS = 10


def _behind_searches() -> None:
    """Lower the calling thread's CPU priority by :data:`MERGE_NICENESS` (a thread pool's
    initializer; nothing where threads have no priority of their own)."""
    try:
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + MERGE_NICENESS, 19))
    except (AttributeError, OSError):
        pass


def _background(task: Callable[[], None]) -> Future[None]:
    """Run ``task`` in the process's one merge thread (merges queue: one core for merging)."""
    global _merge_pool
    with _merge_pool_lock:
        if _merge_pool is None:
            _merge_pool = ThreadPoolExecutor(1, thread_name_prefix="roarsearch-merge", initializer=_behind_searches)
        return _merge_pool.submit(task)


class FieldPostings:
    """The postings and token positions of one field."""

    __slots__ = ("terms", "docs", "_chunks", "_lock", "_absent", "_merging", "_busy", "merges", "_settle",
                 "merge_limit", "_unions")

    def __init__(self) -> None:
        # Readers build term bitmaps and merge token chunks lazily, several at once.
        self._lock = threading.RLock()
        #: Term bitmaps built so far (a cache over the token chunks, kept current by ``add``).
        self.terms: dict[int, AbstractBitMap] = {}
        self.docs = BitMap()  # docs having at least one token in this field
        self._chunks: list[_Chunk] = []
        #: Terms looked up and found in no chunk (a query word absent from this field): not looked
        #: up again until an ``add`` brings them (it forgets those its chunk holds).
        self._absent: set[int] = set()
        #: Unions of many terms' docs (typo expansions, prefixes) by their sorted term ids, each
        #: with the ``end_doc`` it covers: extended by the chunks added since, not rebuilt.
        self._unions: OrderedDict[bytes, tuple[int, AbstractBitMap]] = OrderedDict()
        #: The background merge task while one is queued or running, and the ids of the chunks it
        #: is reading (inline merges leave those alone).
        self._merging: Future[None] | None = None
        self._busy: frozenset[int] = frozenset()
        #: Background merges landed so far (a saved state made before the last one is out of date).
        self.merges = 0
        #: Whether the background merge is to merge every chunk into one (:meth:`settle`).
        self._settle = False
        #: While a bulk load runs, merges of more tokens than this wait for its end
        #: (:meth:`settle` merges everything once, or :meth:`resume_merges` lets them run).
        self.merge_limit: int | None = None

    def add(self, docs: np.ndarray, terms: np.ndarray, positions: np.ndarray) -> None:
        """Add tokens given in doc order (``docs`` non-decreasing, all docs new to this field)."""
        if docs.size == 0:
            return
        # One stable sort by term groups the tokens; docs stay ascending within a term.
        order = np.argsort(terms, kind="stable")
        self.commit_add(self._plan(_Chunk.from_sorted(terms[order], docs[order], positions[order])), docs)

    def plan_add(self, term_ids: np.ndarray, counts: np.ndarray, docs: np.ndarray,
                 positions: np.ndarray) -> PostingsPlan | None:
        """A batch's chunk and the merges it causes, computed without changing anything, so that a
        write does it while searches run; then :meth:`commit_add`. The tokens come grouped by term,
        as the analyzer groups them: ``counts`` tokens of each of ``term_ids`` (distinct, in any
        order), each term's tokens in doc order. None: no tokens."""
        if docs.size == 0:
            return None
        return self._plan(_Chunk.from_groups(term_ids, counts, docs, positions))

    def _plan(self, chunk: _Chunk) -> PostingsPlan:
        base, busy = self._chunks, self._busy
        return base, busy, chunk, _with_chunk(base, chunk, busy)

    def _set_chunks(self, chunks: list[_Chunk]) -> list[_Chunk]:
        """Make ``chunks`` this field's chunks; returns the list they replace, released by the
        caller once ``_chunks`` names the new one. Compiled code releases an attribute's old value
        before it stores the new one: had that release freed the old chunks, a search in another
        thread (run while a release gives up the GIL) would have copied the list being freed."""
        replaced = self._chunks
        self._chunks = chunks
        if not {id(chunk) for chunk in replaced} <= {id(chunk) for chunk in chunks}:
            unmap_unused_soon()  # dropped chunks' column mappings, once their last readers are done
        return replaced

    def commit_add(self, plan: PostingsPlan, docs: np.ndarray) -> None:
        """Apply a :meth:`plan_add` (no other add in between)."""
        base, busy, chunk, chunks = plan
        with self._lock:
            if self._chunks is not base or self._busy is not busy:
                # A reader or the background merge changed the chunks meanwhile: merge again.
                chunks = _with_chunk(self._chunks, chunk, self._busy)
            self._absent = self._still_absent(chunk)
            if self.terms:
                self._update_cached(chunk)
            self.docs |= bitmap_from_array(docs)
            self._set_chunks(chunks)  # replaced whole: a reader's list(...) stays consistent
            # What is still due after the inline merges is big, or waits for a running merge.
            if self._merging is None and _due_merge(chunks, self.merge_limit) is not None:
                self._merging = _background(self._merge_in_background)

    def chunk_count(self) -> int:
        """How many chunks this field's postings are in."""
        return len(self._chunks)

    def settle(self) -> None:
        """Merge every chunk into one, in the background: after a bulk load, so that queries read
        one chunk per field (multi-word and typo queries look up each word's positions in each
        chunk: 15-40 % faster on one than on four). Adds and readers go on meanwhile, as for tier
        merges."""
        with self._lock:
            self.merge_limit = None
            if len(self._chunks) <= 1:
                return
            self._settle = True
            if self._merging is None:
                self._merging = _background(self._merge_in_background)

    def resume_merges(self) -> None:
        """End a bulk load without :meth:`settle`: the merges it left waiting run now."""
        with self._lock:
            self.merge_limit = None
            if self._merging is None and _due_merge(self._chunks) is not None:
                self._merging = _background(self._merge_in_background)

    def _merge_in_background(self) -> None:
        """The merge thread's task: merge a run of chunks the tier rule makes due (every chunk,
        when asked to :meth:`settle`), then swap the result in for them (under the lock, only if
        those very chunks are still there), until none is due. Readers and adds go on meanwhile;
        an add appends after the chunks being read."""
        while True:
            with self._lock:
                chunks = self._chunks
                due = _due_merge(chunks, self.merge_limit)
                if self._settle:
                    self._settle = False
                    due = (0, len(chunks)) if len(chunks) > 1 else due
                if due is None:
                    self._merging = None  # decided under the lock: the next add schedules anew
                    return
                run = chunks[due[0]:due[1]]
                self._busy = frozenset(map(id, run))
            try:
                with _merge_gate:
                    merged = merge_chunks(run)
            except Exception:  # MemoryError and the like: the chunks stay as they are, still correct
                log.exception("background postings merge failed")
                with self._lock:
                    self._busy = frozenset()
                    self._merging = None
                return
            with self._lock:
                self._busy = frozenset()
                current = self._chunks
                at = next((place for place, chunk in enumerate(current) if chunk is run[0]), -1)
                if at >= 0 and len(current) >= at + len(run) and all(map(operator.is_, current[at:at + len(run)], run)):
                    self._set_chunks(current[:at] + [merged] + current[at + len(run):])
                    self.merges += 1
                else:  # replaced meanwhile (a reload, a reader's full merge): nothing to swap
                    self._merging = None
                    return
            # The merged chunks go now, not when the next merge's locals replace these: they held
            # a big merge's inputs alive through the next one (80 MB of a 1M build's peak).
            del chunks, run, merged, current

    @property
    def merging(self) -> bool:
        """Whether a background merge is queued or running for this field."""
        return self._merging is not None

    def wait_for_merges(self) -> None:
        """Return once no background merge is queued or running for this field."""
        while True:
            with self._lock:
                pending = self._merging
            if pending is None:
                return
            pending.result()

    def _still_absent(self, chunk: _Chunk) -> set[int]:
        """The terms known absent that a new chunk does not hold (one binary search each)."""
        absent = self._absent
        if not absent:
            return set()
        known = np.fromiter(absent, dtype=np.uint32, count=len(absent))
        lo, hi = chunk.ranges(known)
        return set(known[hi == lo].tolist())

    def _update_cached(self, chunk: _Chunk) -> None:
        """Add a new chunk's docs to the cached bitmaps of its terms (or forget a large cache)."""
        if len(self.terms) > MAX_CACHED_TERMS:
            self.terms = {}
            return
        cached = np.fromiter(self.terms, dtype=np.uint32, count=len(self.terms))
        lo, hi = chunk.ranges(cached)
        hit = hi > lo
        for term, start, end in zip(cached[hit].tolist(), lo[hit].tolist(), hi[hit].tolist()):
            bitmap = self.terms[term]
            self.terms[term] = BitMap(bitmap) | bitmap_from_array(chunk.docs[start:end])

    def _gather_docs(self, term_ids: np.ndarray, chunks: list[_Chunk] | None = None, since: int = -1) -> np.ndarray:
        """Docs of every token of ``term_ids`` (sorted, unique), duplicates included, in any
        order; ``since``: only docs from that one on (chunks wholly below it are not read)."""
        parts: list[np.ndarray] = []
        for chunk in list(self._chunks) if chunks is None else chunks:
            if since >= 0 and chunk.end_doc <= since:  # unknown (-1): loaded, below every later doc
                continue
            if term_ids.size == 1:
                start, end = chunk.range_of(int(term_ids[0]))
                if end > start:
                    parts.append(chunk.docs_in(start, end)[start:end])
                continue
            lo, hi = chunk.ranges(term_ids)
            if int((hi - lo).sum()):
                parts.append(chunk.docs_in_all(lo, hi)[_gather_index(lo, hi)])
        if not parts:
            return _EMPTY_U32
        docs = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return docs[docs >= since] if since > 0 else docs

    def bitmap(self, term_ids: list[int]) -> AbstractBitMap:
        """Docs containing any of ``term_ids`` in this field (for one term, its cached bitmap itself:
        shared, never to be changed in place — writers replace cached bitmaps, they do not mutate them)."""
        if not term_ids:
            return EMPTY
        if len(term_ids) > MAX_TERMS_PER_TERM_UNION:
            return self._union(sorted_unique(np.asarray(term_ids, dtype=np.uint32)))
        found = [bitmap for bitmap in map(self._get, term_ids) if bitmap is not None]
        if not found:
            return EMPTY
        return found[0] if len(found) == 1 else union_all(found)

    def _union(self, term_ids: np.ndarray) -> AbstractBitMap:
        """Docs of any of ``term_ids`` (sorted, distinct), frozen and kept: a later call after
        adds gathers only the chunks holding docs added since (a writer's batch), not every chunk."""
        chunks = self._chunks  # replaced whole by writers and merges: one consistent list
        end = chunks[-1].end_doc if chunks else 0
        key = term_ids.tobytes()
        with self._lock:
            found = self._unions.get(key)
            if found is not None:
                self._unions.move_to_end(key)
        if found is not None and found[0] == end:
            return found[1]
        if found is not None and 0 <= found[0] < end:
            added = self._gather_docs(term_ids, chunks, found[0])
            docs = FrozenBitMap(found[1] | bitmap_from_array(added)) if added.size else found[1]
        else:
            gathered = self._gather_docs(term_ids, chunks)
            docs = FrozenBitMap(bitmap_from_array(gathered)) if gathered.size else EMPTY
        with self._lock:
            self._unions[key] = (end, docs)
            self._unions.move_to_end(key)
            while len(self._unions) > CACHED_UNIONS:
                self._unions.popitem(last=False)
        return docs

    def term_docs(self, term: int) -> AbstractBitMap:
        """One term's docs (shared: never changed in place)."""
        bitmap = self._get(term)
        return EMPTY if bitmap is None else bitmap

    def _get(self, term: int) -> AbstractBitMap | None:
        """A term's bitmap (built on first use); None when the term never occurred in this field."""
        bitmap = self.terms.get(term)
        if bitmap is not None:
            return bitmap
        if term in self._absent:
            return None
        absent = self._absent
        docs = self._gather_docs(np.asarray([term], dtype=np.uint32))
        if not docs.size:
            absent.add(term)  # the set of the chunks just read (a concurrent add makes a new one)
            return None
        bitmap = bitmap_from_array(docs)
        with self._lock:
            if len(self.terms) >= MAX_CACHED_TERMS:
                self.terms = {}
            self.terms[term] = bitmap
        return bitmap

    def all_terms(self) -> dict[int, AbstractBitMap]:
        """Every term's bitmap (checks); kept as the cache, so what a check sees is what queries read."""
        with self._lock:
            chunk = self._merged()
            cache = self.terms
            for term, start, end in zip(chunk.terms.tolist(), chunk.starts[:-1].tolist(), chunk.starts[1:].tolist()):
                if term not in cache:
                    cache[term] = bitmap_from_array(chunk.docs[start:end])
            return self.terms

    def occurrences(self, term_ids: np.ndarray, doc_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(docs, positions) of every occurrence of ``term_ids`` (sorted, unique) in docs where
        ``doc_mask[doc]`` is true — cost follows the occurrences of those terms, not the field.
        Positions are uint32."""
        found_docs: list[np.ndarray] = []
        found_positions: list[np.ndarray] = []
        for chunk in list(self._chunks):
            spans = chunk.spans(term_ids)
            if spans is None:
                continue
            lo, hi = spans
            if lo.size == 1:  # one term: its tokens are one slice
                start, end = int(lo[0]), int(hi[0])
                chunk_docs = chunk.docs_in(start, end)[start:end]
                chunk_positions = chunk.positions_in(start, end)[start:end]
            else:
                index = _gather_index(lo, hi)
                chunk_docs = chunk.docs_in_all(lo, hi)[index]
                chunk_positions = chunk.positions_in_all(lo, hi)[index]
            inside = chunk_docs < doc_mask.size
            inside[inside] = doc_mask[chunk_docs[inside]]
            found_docs.append(chunk_docs[inside])
            found_positions.append(chunk_positions[inside].astype(np.uint32))
        if not found_docs:
            return _EMPTY_U32, _EMPTY_U32
        return np.concatenate(found_docs), np.concatenate(found_positions)

    def positions_in(self, term_ids: list[int], docs: FewDocs) -> dict[int, list[int]]:
        """Positions of ``term_ids`` in each of a few ``docs`` holding them (ascending), by the
        doc's slot in ``docs.ids`` (slots are small numbers: doc ids as keys cost an int object
        each). One binary search call per term and chunk, the rest in plain Python: for the
        handful of matches of a rare multi-word query, where each numpy call costs more than the
        positions it would move."""
        found: dict[int, list[int]] = {}
        ids = docs.ids
        if not ids:
            return found
        count = len(ids)
        chunks = list(self._chunks)
        # One term in one chunk: each doc's positions are one run, in order, of one list.
        alone = len(chunks) == 1 and len(term_ids) == 1
        for chunk in chunks:
            for term in term_ids:
                start, end = chunk.range_of(term)
                if end == start:
                    continue
                if end - start <= _LIST_READ_TOKENS:
                    few_docs, few_positions = chunk.few_tokens(term, start, end)
                    _merge_few_tokens(few_docs, few_positions, ids, found)
                    if alone:
                        return found  # one term in one chunk: each doc's positions in order
                    continue
                term_docs = chunk.docs_in(start, end)[start:end]
                positions = chunk.positions_in(start, end)
                bounds = term_docs.searchsorted(docs.edges()).tolist()
                lows, highs = bounds[:count], bounds[count:]
                if ids[-1] == _LAST_DOC:  # its successor wrapped to 0: its tokens end the term's
                    highs[-1] = end - start
                # The docs' tokens lie in order within one span of the term's: read as one list
                # when it is short (a slice of a list costs a fraction of a numpy slice's tolist).
                base, top = lows[0], highs[-1]
                runs: Iterator[tuple[int, list[int]]]
                if top - base <= _SPAN_READ_PER_DOC * count:
                    span: list[int] = positions[start + base:start + top].tolist()
                    if alone:
                        return {slot: span[low - base:high - base]
                                for slot, (low, high) in enumerate(zip(lows, highs)) if high > low}
                    runs = ((slot, span[low - base:high - base])
                            for slot, (low, high) in enumerate(zip(lows, highs)) if high > low)
                else:
                    runs = ((slot, positions[start + low:start + high].tolist())
                            for slot, (low, high) in enumerate(zip(lows, highs)) if high > low)
                for slot, run in runs:
                    held = found.get(slot)
                    if held is None:
                        found[slot] = run
                    else:
                        held.extend(run)
        for held in found.values():  # several terms or chunks append out of order (sorting sorted runs is linear)
            held.sort()
        return found

    def occurrences_in(self, term_ids: np.ndarray, docs: np.ndarray,
                       mask: DocMask | None = None, whole_up_to: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(docs, positions) of every occurrence of ``term_ids`` (sorted, unique) in ``docs``
        (sorted, unique doc ids), in no particular order; positions as stored (uint16 or uint32).
        ``mask``: ``docs`` — or more docs, whose tokens may then come too — as a dense mask, when
        the caller shares one between lookups. ``whole_up_to``: a lone term with at most this many
        tokens in a chunk comes whole, other docs' tokens included — for a caller that drops those
        later at less cost than a lookup.

        A few docs holding common terms (a multi-word query's matches) are looked up by binary
        search inside each term's doc-sorted slice, so cost follows ``docs`` × terms rather than
        the terms' occurrences; many docs or many terms (a prefix) take one masked gather instead.
        """
        found_docs: list[np.ndarray] = []
        found_positions: list[np.ndarray] = []
        if docs.size == 0 or term_ids.size == 0:
            return _EMPTY_U32, _EMPTY_U32
        if mask is None:
            mask = DocMask(docs)
        for chunk in list(self._chunks):
            spans = chunk.spans(term_ids)
            if spans is None:
                continue
            lo, hi = spans
            if lo.size == 1:
                first, last = int(lo[0]), int(hi[0])
                total = last - first
                chunk_docs, positions = chunk.docs_in(first, last), chunk.positions_in(first, last)
                if total <= whole_up_to:
                    found_docs.append(chunk_docs[first:last])
                    found_positions.append(positions[first:last])
                    continue
                lowest, highest = chunk_docs[first], chunk_docs[last - 1]
            else:
                total = int((hi - lo).sum())
                chunk_docs, positions = chunk.docs_in_all(lo, hi), chunk.positions_in_all(lo, hi)
                lowest, highest = chunk_docs[lo].min(), chunk_docs[hi - 1].max()
            # A chunk holds the docs of a run of batches: only the candidates within the doc range
            # its terms span here are looked up in it (a multi-word query's matches spread over
            # every chunk; each chunk used to binary-search all of them).
            wanted = docs[int(docs.searchsorted(lowest)):int(docs.searchsorted(highest, side="right"))]
            if wanted.size == 0:
                continue
            if lo.size <= _SEARCHED_TERMS and wanted.size * lo.size * _SEARCH_COST < total:
                if lo.size == 1 and wanted.size == 1:
                    term_docs = chunk_docs[int(lo[0]):int(hi[0])]
                    start = int(lo[0]) + int(term_docs.searchsorted(wanted[0], side="left"))
                    end = int(lo[0]) + int(term_docs.searchsorted(wanted[0], side="right"))
                    if end > start:
                        found_docs.append(chunk_docs[start:end])
                        found_positions.append(positions[start:end])
                    continue
                starts_list, ends_list = [], []
                for start, end in zip(lo.tolist(), hi.tolist()):
                    term_docs = chunk_docs[start:end]
                    starts_list.append(np.searchsorted(term_docs, wanted, side="left") + start)
                    ends_list.append(np.searchsorted(term_docs, wanted, side="right") + start)
                starts = np.concatenate(starts_list) if len(starts_list) > 1 else starts_list[0]
                ends = np.concatenate(ends_list) if len(ends_list) > 1 else ends_list[0]
                hit = ends > starts
                if not hit.any():
                    continue
                index = _gather_index(starts[hit], ends[hit])
                found_docs.append(chunk_docs[index])
                found_positions.append(positions[index])
                continue
            dense = mask.dense()
            if lo.size == 1:  # one term: its tokens are one slice, no index to build
                gathered, gathered_positions = chunk_docs[first:last], positions[first:last]
            else:
                index = _gather_index(lo, hi)
                gathered, gathered_positions = chunk_docs[index], positions[index]
            inside = gathered < dense.size
            inside[inside] = dense[gathered[inside]]
            found_docs.append(gathered[inside])
            found_positions.append(gathered_positions[inside])
        if not found_docs:
            return _EMPTY_U32, _EMPTY_U32
        if len(found_docs) == 1:
            return found_docs[0], found_positions[0]
        return np.concatenate(found_docs), np.concatenate(found_positions)

    def _merged(self) -> _Chunk:
        """All tokens as one chunk (merging the chunks into one)."""
        with self._lock:
            if not self._chunks:
                return _Chunk.from_sorted(_EMPTY_U32, _EMPTY_U32, _EMPTY_U32)
            if len(self._chunks) > 1:
                self._set_chunks([merge_chunks(self._chunks)])
            return self._chunks[0]

    def csr_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(distinct term ids, token count per term, docs, positions) of every token, term-sorted
        (merging the chunks); positions are uint16 or uint32."""
        chunk = self._merged()
        return chunk.terms, np.diff(chunk.starts).astype(np.uint32), chunk.docs, chunk.positions

    def packed_chunks(self) -> list[tuple[np.ndarray, np.ndarray, PackedTokens]]:
        """Each chunk as (distinct term ids, token count per term, compressed token columns)."""
        return [(chunk.terms, np.diff(chunk.starts).astype(np.uint32), chunk.pack()) for chunk in list(self._chunks)]

    def load_packed_chunks(self, chunks: list[tuple[np.ndarray, np.ndarray, PackedTokens]], end_doc: int = -1) -> None:
        """Chunks saved by :meth:`packed_chunks`, in the same (doc) order; inflated on first read.
        ``end_doc``: above every doc they hold (the collection's next doc), if known."""
        loaded = []
        for terms, counts, packed in chunks:
            if packed.tokens:
                starts = np.zeros(terms.size + 1, dtype=np.int64)
                np.cumsum(counts, out=starts[1:])
                chunk = _Chunk.from_packed(terms.astype(np.uint32, copy=False), starts, packed)
                chunk.end_doc = end_doc
                loaded.append(chunk)
        self._set_chunks(loaded)
        self._absent = set()
        self._unions = OrderedDict()

    def load_chunk_arrays(self, chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
                          end_doc: int = -1) -> None:
        """Chunks saved raw (index state 2): per chunk (term ids, token count per term, docs,
        positions), in doc order; ``end_doc`` as for :meth:`load_packed_chunks`."""
        loaded = []
        for terms, counts, docs, positions in chunks:
            if docs.size:
                starts = np.zeros(terms.size + 1, dtype=np.int64)
                np.cumsum(counts, out=starts[1:])
                loaded.append(_Chunk(terms.astype(np.uint32, copy=False), starts, docs, positions, end_doc=end_doc))
        self._set_chunks(loaded)
        self._absent = set()
        self._unions = OrderedDict()

    def token_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(terms, docs, positions) of every token, term-sorted (merging the chunks); uint32 each."""
        chunk = self._merged()
        return chunk.token_terms(), chunk.docs, chunk.positions.astype(np.uint32)

    def load_token_arrays(self, terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> None:
        self._set_chunks([_Chunk.from_sorted(terms, docs, positions)] if terms.size else [])
        self._absent = set()
        self._unions = OrderedDict()
