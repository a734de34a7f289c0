"""Merging a field's chunks in tiers, inline or in the background merge thread.

Owns: the merge policy and the merge itself. The newest :data:`MERGE_FACTOR` chunks are merged
into one whenever the oldest of them holds at most :data:`MERGE_RATIO` times the newest's tokens
(as tantivy's log merge policy does), so there are O(log n) chunks and each token is rewritten a
few times in all, not once per batch. A merge is a scatter into place (terms of the later chunk
go after those of the earlier one, as chunks are in doc order), in slabs so that its temporary
index arrays stay small. Merges of :data:`BACKGROUND_MERGE_TOKENS` tokens or more run in the
process's one merge thread, at a lower CPU priority, while adds and searches go on; those of
:data:`PACK_MERGED_TOKENS` or more write their result packed (:mod:`roarsearch.index.blocks`)
with every term's doc set ready to read (:mod:`roarsearch.index.docsets`), so what queries read
next is prepared here, not on their first read.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

from roarsearch.buffers import Buffer
from roarsearch.index.bitmaps import sorted_unique
from roarsearch.index.blocks import LazyColumn, block_starts, pack_column
from roarsearch.index.chunks import Chunk, PackedTokens
from roarsearch.index.docsets import DocSetsBuilder
from roarsearch.memory import drop_file_pages
from roarsearch.scratch import ScratchBuffer, ScratchSpace

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


#: A merge drops its mapped inputs' pages from the process after reading each this many tokens.
DROP_READ_TOKENS = 1 << 24


#: Where a merge's output goes when its caller names no scratch folder: memory.
IN_MEMORY = ScratchSpace(None)


def merge_chunks(chunks: list[Chunk], scratch: ScratchSpace = IN_MEMORY) -> Chunk:
    """One chunk holding the tokens of ``chunks`` (given in doc order): for each term, the tokens
    of the first chunk, then those of the second, … — which keeps docs ascending within a term.
    A result big enough to be packed is written to ``scratch`` (see :mod:`roarsearch.scratch`)."""
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
        merged = _merge_packed(chunks, terms.astype(np.uint32), starts, slots, np.uint32 if wide else np.uint16, scratch)
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
    return Chunk(terms.astype(np.uint32), starts, docs, positions, end_doc=end_doc).spilled(scratch)


class _BlockPacker:
    """Compresses a column slab by slab of whole terms, each in the blocks :func:`block_starts`
    gives its terms (the layout :func:`pack_column` gives the whole column, but for a cut at each
    slab's end), in ``pool``: compression releases the GIL, so the merge goes on scattering the
    next slab on the other core meanwhile. Each packed slab is appended to ``out`` (a scratch
    file in a durable collection) as soon as it is ready, oldest first, and let go."""

    def __init__(self, delta: bool, pool: ThreadPoolExecutor, out: ScratchBuffer) -> None:
        self.delta = delta
        self.pool = pool
        self.out = out
        self.parts: deque[Future[tuple[bytes, np.ndarray]]] = deque()
        self.ends: list[np.ndarray] = []
        self.size = 0

    def append(self, values: np.ndarray, starts: np.ndarray) -> None:
        """Pack ``values``, one slab, in blocks starting at ``starts`` (offsets in the slab)."""
        if not values.size:
            return
        self.parts.append(self._pack(values, starts))
        while len(self.parts) > PACKS_IN_FLIGHT:  # the slabs queued for it wait raw: keep them few
            self._write_oldest()

    def _write_oldest(self) -> None:
        block_data, block_ends = self.parts.popleft().result()
        self.out.append(block_data)
        self.ends.append(block_ends + np.uint64(self.size))
        self.size += len(block_data)

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
        """The packed column: its blocks back to back and where each ends."""
        while self.parts:
            self._write_oldest()
        ends = np.concatenate(self.ends) if self.ends else np.empty(0, dtype=np.uint64)
        return self.out.finish(), ends


def _merge_packed(chunks: list[Chunk], terms: np.ndarray, starts: np.ndarray, slots: list[np.ndarray],
                  position_type: type, scratch: ScratchSpace) -> Chunk:
    """:func:`merge_chunks` writing the result's docs compressed: slab by slab of whole output
    terms, each input's tokens of those terms (one contiguous range per input, as its terms are
    sorted) are read, scattered into place and the docs packed."""
    with ThreadPoolExecutor(1, thread_name_prefix="roarsearch-pack", initializer=_behind_searches) as pool:
        return _merge_packed_in(pool, chunks, terms, starts, slots, position_type, scratch)


def _merge_packed_in(pool: ThreadPoolExecutor, chunks: list[Chunk], terms: np.ndarray, starts: np.ndarray,
                     slots: list[np.ndarray], position_type: type, scratch: ScratchSpace) -> Chunk:
    docs_out = _BlockPacker(True, pool, scratch.buffer())
    doc_sets = DocSetsBuilder(scratch.buffer())
    total = int(starts[-1])
    # Positions compress to 0.4 of their bytes (docs shrink 30-fold); below PACK_POSITIONS_TOKENS
    # they stay raw.
    positions_out = _BlockPacker(False, pool, scratch.buffer()) if total >= PACK_POSITIONS_TOKENS else None
    blocks: list[np.ndarray] = []  # where each slab's blocks start, in the chunk
    positions: np.ndarray = np.empty(0 if positions_out else total, dtype=position_type)
    bounds = np.searchsorted(starts, np.arange(0, total, PACKED_SLAB_TOKENS), side="right") - 1
    bounds = sorted_unique(np.append(bounds, terms.size))
    inputs = [buffer for chunk in chunks for buffer in chunk.column_buffers()]
    read_since_drop = 0
    for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        if read_since_drop >= DROP_READ_TOKENS:
            # What was read of inputs saved in a snapshot (or a scratch file) stays resident as
            # file pages, counted in the process's memory: at 10M records, every field's saved
            # chunks by the end of the load's final merge. Dropped as the merge goes.
            drop_file_pages(inputs)
            read_since_drop = 0
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
        read_since_drop += size
        slab_blocks = block_starts(starts[first:last + 1] - slab_lo)
        blocks.append(slab_blocks + slab_lo)
        docs_out.append(docs, slab_blocks)
        doc_sets.append(starts[first:last + 1] - slab_lo, docs)
        if positions_out:
            positions_out.append(slab_positions, slab_blocks)
    drop_file_pages(inputs)
    doc_data, doc_ends = docs_out.finish()
    chunk_blocks = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
    ready = doc_sets.finish()
    if positions_out is None:
        return Chunk(terms, starts, LazyColumn(doc_data, doc_ends, total, np.uint32, True, chunk_blocks), positions,
                     doc_sets=ready)
    position_data, position_ends = positions_out.finish()
    return Chunk.from_packed(terms, starts, PackedTokens(total, doc_data, doc_ends, position_data, position_ends,
                                                          position_type, chunk_blocks), ready)


#: What :meth:`FieldPostings.plan_add` returns: the chunks it planned against, the chunks a background
#: merge was reading then, the batch's chunk, the chunks after.
PostingsPlan = tuple[list[Chunk], frozenset[int], Chunk, list[Chunk]]


def with_chunk(chunks: list[Chunk], chunk: Chunk, busy: frozenset[int] = frozenset(),
               scratch: ScratchSpace = IN_MEMORY) -> list[Chunk]:
    """``chunks`` and then ``chunk``, the small tier merges done (see the module docstring);
    ``chunks`` is not changed. Merges reaching :data:`BACKGROUND_MERGE_TOKENS`, and merges of a
    chunk in ``busy`` (ids of chunks a background merge is reading), are left to
    :func:`due_merge`."""
    merged = chunks + [chunk]
    while (len(merged) >= MERGE_FACTOR and merged[-MERGE_FACTOR].size <= MERGE_RATIO * merged[-1].size
           and sum(part.size for part in merged[-MERGE_FACTOR:]) < BACKGROUND_MERGE_TOKENS
           and not any(id(part) in busy for part in merged[-MERGE_FACTOR:])):
        merged[-MERGE_FACTOR:] = [merge_chunks(merged[-MERGE_FACTOR:], scratch)]
    return merged


def due_merge(chunks: list[Chunk], limit: int | None = None) -> tuple[int, int] | None:
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
merge_gate = threading.Lock()


@contextmanager
def merges_held() -> Iterator[None]:
    """No background merge runs inside this block (one running is waited for)."""
    with merge_gate:
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


def run_in_background(task: Callable[[], None]) -> Future[None] | None:
    """Run ``task`` in the process's one merge thread (merges queue: one core for merging).

    None when the interpreter is exiting: thread pools then refuse new work, and a program that
    ends without closing its engine may still have a settle timer fire. The chunks stay as they
    are (they answer the same), where the refusal used to end that thread with a traceback."""
    global _merge_pool
    with _merge_pool_lock:
        if _merge_pool is None:
            _merge_pool = ThreadPoolExecutor(1, thread_name_prefix="roarsearch-merge", initializer=_behind_searches)
        try:
            return _merge_pool.submit(task)
        except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
            return None
