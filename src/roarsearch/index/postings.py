"""Inverted postings and token positions, per field.

Owns: for each field, every token as (doc, position) pairs grouped by term — a positional
inverted index in compressed-sparse-row form: per chunk, the distinct term ids (sorted), the
offset where each term's tokens start, and two token columns, docs (uint32) and positions
(uint16 while they fit, else uint32) — plus the (field, term id) → ``AbstractBitMap`` postings
derived from them on demand.

Ingest cost is a few numpy calls per batch: the batch's tokens are sorted by term once (a
stable sort, so docs stay ascending within a term) and appended as one chunk. Chunks are merged
in tiers (the newest two whenever the older is at most :data:`MERGE_RATIO` times the newer), so
there are O(log n) chunks and each token is rewritten a few times in all, not once per batch; a
merge is a scatter into place (terms of the later chunk go after those of the earlier one, as
chunks are in doc order), done in slabs so that its temporary index arrays stay small. No
per-term object is made at write time: a term's bitmap is built from its slices the first time
a query asks for it and kept (in ``terms``) until a write adds docs to that term; a union of
many terms (prefixes, wide typo expansions) is one gather and one bitmap build. Docs retired by
deletes or upserts stay in the token arrays; every reader intersects with the alive docs or a
universe derived from them.
"""

from __future__ import annotations

import threading

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import EMPTY, bitmap_from_array, union_all

#: The newest two chunks are merged while the older holds at most this many times the newer's
#: tokens: chunk sizes then grow geometrically (O(log n) chunks, each token rewritten a few times).
MERGE_RATIO = 2
#: A merge scatters at most this many tokens per step (its temporary index array: 8 bytes each).
MERGE_SLAB_TOKENS = 1 << 22
#: Positions are kept as uint16 in chunks whose positions all fit.
_NARROW_LIMIT = 1 << 16

#: Cached term bitmaps are dropped all at once beyond this many (a full set is only built by
#: ``all_terms``, for checks).
MAX_CACHED_TERMS = 65_536
#: Unions of more terms than this are built from one gather of their docs, not per-term bitmaps.
MAX_TERMS_PER_TERM_UNION = 8
#: ``occurrences_in`` binary-searches the docs in each term's slice for at most this many terms...
_SEARCHED_TERMS = 16
#: ...when docs × terms × this is below the terms' occurrences (a binary search costs a few steps).
_SEARCH_COST = 16

_EMPTY_U32 = np.empty(0, dtype=np.uint32)


def _narrow_positions(positions: np.ndarray) -> np.ndarray:
    if positions.size and int(positions.max()) >= _NARROW_LIMIT:
        return positions.astype(np.uint32, copy=False)
    return positions.astype(np.uint16)


class _Chunk:
    """Tokens of a run of batches, grouped by term: term ``terms[i]`` owns tokens
    ``starts[i]:starts[i + 1]`` of ``docs`` and ``positions`` (docs ascending within a term)."""

    __slots__ = ("terms", "starts", "docs", "positions")

    def __init__(self, terms: np.ndarray, starts: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> None:
        self.terms = terms
        self.starts = starts
        self.docs = docs
        self.positions = positions

    @classmethod
    def from_sorted(cls, sorted_terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> _Chunk:
        """A chunk from one term id per token (term-sorted)."""
        if not sorted_terms.size:
            return cls(_EMPTY_U32, np.zeros(1, dtype=np.int64), _EMPTY_U32, np.empty(0, dtype=np.uint16))
        boundaries = np.flatnonzero(sorted_terms[1:] != sorted_terms[:-1]) + 1
        starts = np.concatenate(([0], boundaries, [sorted_terms.size])).astype(np.int64)
        return cls(sorted_terms[starts[:-1]].astype(np.uint32), starts, docs.astype(np.uint32, copy=False),
                   _narrow_positions(positions))

    @property
    def size(self) -> int:
        return int(self.docs.size)

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
        """(start, end) token offsets of one term here ((0, 0) when absent)."""
        terms = self.terms
        slot = int(terms.searchsorted(term))
        if slot < terms.size and int(terms[slot]) == term:
            return int(self.starts[slot]), int(self.starts[slot + 1])
        return 0, 0

    def token_terms(self) -> np.ndarray:
        """One term id per token."""
        terms: np.ndarray = np.repeat(self.terms, np.diff(self.starts))
        return terms


def _gather_index(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Offsets ``lo[0]:hi[0]``, ``lo[1]:hi[1]``, … as one array."""
    lengths = hi - lo
    total = int(lengths.sum())
    index: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
    return index


def merge_chunks(chunks: list[_Chunk]) -> _Chunk:
    """One chunk holding the tokens of ``chunks`` (given in doc order): for each term, the tokens
    of the first chunk, then those of the second, … — which keeps docs ascending within a term."""
    terms = np.unique(np.concatenate([chunk.terms for chunk in chunks]))
    counts = np.zeros(terms.size, dtype=np.int64)
    slots = []
    for chunk in chunks:
        slot = np.searchsorted(terms, chunk.terms)
        slots.append(slot)
        counts[slot] += np.diff(chunk.starts)
    starts = np.zeros(terms.size + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    total = int(starts[-1])
    wide = any(chunk.positions.dtype == np.uint32 for chunk in chunks)
    docs = np.empty(total, dtype=np.uint32)
    positions = np.empty(total, dtype=np.uint32 if wide else np.uint16)
    filled = starts[:-1].copy()  # where each term's next tokens go
    for chunk, slot in zip(chunks, slots):
        lengths = np.diff(chunk.starts)
        destination = filled[slot]
        filled[slot] += lengths
        # Slabs of whole terms, so that the index array below stays small.
        bounds = np.searchsorted(chunk.starts, np.arange(0, chunk.size, MERGE_SLAB_TOKENS), side="right") - 1
        bounds = np.unique(np.append(bounds, chunk.terms.size))
        for first, last in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            token_lo, token_hi = int(chunk.starts[first]), int(chunk.starts[last])
            if token_hi == token_lo:
                continue
            shift = destination[first:last] - chunk.starts[first:last]
            index = np.arange(token_lo, token_hi, dtype=np.int64) + np.repeat(shift, lengths[first:last])
            docs[index] = chunk.docs[token_lo:token_hi]
            positions[index] = chunk.positions[token_lo:token_hi]
    return _Chunk(terms.astype(np.uint32), starts, docs, positions)


#: What :meth:`FieldPostings.plan_add` returns: the chunks it planned against, the batch's chunk, the chunks after.
PostingsPlan = tuple[list[_Chunk], _Chunk, list[_Chunk]]


def _with_chunk(chunks: list[_Chunk], chunk: _Chunk) -> list[_Chunk]:
    """``chunks`` and then ``chunk``, tiers merged (see the module docstring); ``chunks`` is not changed."""
    merged = chunks + [chunk]
    while len(merged) > 1 and merged[-2].size <= MERGE_RATIO * merged[-1].size:
        merged[-2:] = [merge_chunks(merged[-2:])]
    return merged


class FieldPostings:
    """The postings and token positions of one field."""

    __slots__ = ("terms", "docs", "_chunks", "_lock", "_absent")

    def __init__(self) -> None:
        # Readers build term bitmaps and merge token chunks lazily, several at once.
        self._lock = threading.RLock()
        #: Term bitmaps built so far (a cache over the token chunks, kept current by ``add``).
        self.terms: dict[int, AbstractBitMap] = {}
        self.docs = BitMap()  # docs having at least one token in this field
        self._chunks: list[_Chunk] = []
        #: Terms looked up and found in no chunk (a query word absent from this field): not looked
        #: up again until the next ``add``, which forgets them all.
        self._absent: set[int] = set()

    def add(self, docs: np.ndarray, terms: np.ndarray, positions: np.ndarray) -> None:
        """Add tokens given in doc order (``docs`` non-decreasing, all docs new to this field)."""
        plan = self.plan_add(docs, terms, positions)
        if plan is not None:
            self.commit_add(plan, docs)

    def plan_add(self, docs: np.ndarray, terms: np.ndarray,
                 positions: np.ndarray) -> PostingsPlan | None:
        """What :meth:`add` does (the batch's chunk, the merges it causes), computed without changing
        anything, so that a write does it while searches run; then :meth:`commit_add`. None: no tokens."""
        if docs.size == 0:
            return None
        # One stable sort by term groups the batch; docs stay ascending within a term.
        order = np.argsort(terms, kind="stable")
        chunk = _Chunk.from_sorted(terms[order], docs[order], positions[order])
        base = self._chunks
        return base, chunk, _with_chunk(base, chunk)

    def commit_add(self, plan: PostingsPlan, docs: np.ndarray) -> None:
        """Apply a :meth:`plan_add` (no other add in between)."""
        base, chunk, chunks = plan
        with self._lock:
            if self._chunks is not base:  # a reader merged the chunks meanwhile: merge again
                chunks = _with_chunk(self._chunks, chunk)
            self._absent = set()
            if self.terms:
                self._update_cached(chunk)
            self.docs |= bitmap_from_array(docs)
            self._chunks = chunks  # replaced whole: a reader's list(...) stays consistent

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

    def _gather_docs(self, term_ids: np.ndarray) -> np.ndarray:
        """Docs of every token of ``term_ids`` (sorted, unique), duplicates included."""
        parts: list[np.ndarray] = []
        for chunk in list(self._chunks):
            if term_ids.size == 1:
                start, end = chunk.range_of(int(term_ids[0]))
                if end > start:
                    parts.append(chunk.docs[start:end])
                continue
            lo, hi = chunk.ranges(term_ids)
            if int((hi - lo).sum()):
                parts.append(chunk.docs[_gather_index(lo, hi)])
        if not parts:
            return _EMPTY_U32
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def bitmap(self, term_ids: list[int]) -> AbstractBitMap:
        """Docs containing any of ``term_ids`` in this field."""
        if not term_ids:
            return EMPTY
        if len(term_ids) > MAX_TERMS_PER_TERM_UNION:
            docs = self._gather_docs(np.unique(np.asarray(term_ids, dtype=np.uint32)))
            return bitmap_from_array(docs) if docs.size else EMPTY
        found = [bitmap for bitmap in map(self._get, term_ids) if bitmap is not None]
        if not found:
            return EMPTY
        return union_all(found)

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
            if term_ids.size == 1:  # one term: its tokens are one slice
                start, end = chunk.range_of(int(term_ids[0]))
                if end == start:
                    continue
                chunk_docs = chunk.docs[start:end]
                chunk_positions = chunk.positions[start:end]
            else:
                lo, hi = chunk.ranges(term_ids)
                present = hi > lo
                if not present.any():
                    continue
                index = _gather_index(lo[present], hi[present])
                chunk_docs = chunk.docs[index]
                chunk_positions = chunk.positions[index]
            inside = chunk_docs < doc_mask.size
            inside[inside] = doc_mask[chunk_docs[inside]]
            found_docs.append(chunk_docs[inside])
            found_positions.append(chunk_positions[inside].astype(np.uint32))
        if not found_docs:
            return _EMPTY_U32, _EMPTY_U32
        return np.concatenate(found_docs), np.concatenate(found_positions)

    def occurrences_in(self, term_ids: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(docs, positions) of every occurrence of ``term_ids`` (sorted, unique) in ``docs``
        (sorted, unique doc ids), in no particular order; positions are uint32.

        A few docs holding common terms (a multi-word query's matches) are looked up by binary
        search inside each term's doc-sorted slice, so cost follows ``docs`` × terms rather than
        the terms' occurrences; many docs or many terms (a prefix) take one masked gather instead.
        """
        found_docs: list[np.ndarray] = []
        found_positions: list[np.ndarray] = []
        if docs.size == 0 or term_ids.size == 0:
            empty = np.empty(0, dtype=np.uint32)
            return empty, empty
        mask: np.ndarray | None = None
        for chunk in list(self._chunks):
            chunk_docs, positions = chunk.docs, chunk.positions
            if term_ids.size == 1:  # the common case, in scalar steps (each numpy call costs microseconds)
                first, last = chunk.range_of(int(term_ids[0]))
                if last == first:
                    continue
                lo, hi, total = np.asarray([first]), np.asarray([last]), last - first
            else:
                lo, hi = chunk.ranges(term_ids)
                present = hi > lo
                if not present.any():
                    continue
                lo, hi = lo[present], hi[present]
                total = int((hi - lo).sum())
            lengths = hi - lo
            if lo.size <= _SEARCHED_TERMS and docs.size * lo.size * _SEARCH_COST < total:
                if lo.size == 1 and docs.size == 1:
                    term_docs = chunk_docs[int(lo[0]):int(hi[0])]
                    start = int(lo[0]) + int(term_docs.searchsorted(docs[0], side="left"))
                    end = int(lo[0]) + int(term_docs.searchsorted(docs[0], side="right"))
                    if end > start:
                        found_docs.append(chunk_docs[start:end])
                        found_positions.append(positions[start:end])
                    continue
                starts_list, ends_list = [], []
                for start, end in zip(lo.tolist(), hi.tolist()):
                    term_docs = chunk_docs[start:end]
                    starts_list.append(np.searchsorted(term_docs, docs, side="left") + start)
                    ends_list.append(np.searchsorted(term_docs, docs, side="right") + start)
                starts = np.concatenate(starts_list) if len(starts_list) > 1 else starts_list[0]
                ends = np.concatenate(ends_list) if len(ends_list) > 1 else ends_list[0]
                spans = ends - starts
                hit = spans > 0
                starts, spans = starts[hit], spans[hit]
                count = int(spans.sum())
                if not count:
                    continue
                index = np.arange(count, dtype=np.int64) + np.repeat(starts - (np.cumsum(spans) - spans), spans)
                found_docs.append(chunk_docs[index])
                found_positions.append(positions[index])
                continue
            if mask is None:
                mask = np.zeros(int(docs[-1]) + 1, dtype=bool)
                mask[docs] = True
            index = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
            gathered = chunk_docs[index]
            inside = gathered < mask.size
            inside[inside] = mask[gathered[inside]]
            found_docs.append(gathered[inside])
            found_positions.append(positions[index][inside])
        if not found_docs:
            empty = np.empty(0, dtype=np.uint32)
            return empty, empty
        if len(found_docs) == 1:
            return found_docs[0], found_positions[0].astype(np.uint32, copy=False)
        return np.concatenate(found_docs), np.concatenate(found_positions).astype(np.uint32, copy=False)

    def _merged(self) -> _Chunk:
        """All tokens as one chunk (merging the chunks into one)."""
        with self._lock:
            if not self._chunks:
                return _Chunk.from_sorted(_EMPTY_U32, _EMPTY_U32, _EMPTY_U32)
            if len(self._chunks) > 1:
                self._chunks = [merge_chunks(self._chunks)]
            return self._chunks[0]

    def csr_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(distinct term ids, token count per term, docs, positions) of every token, term-sorted
        (merging the chunks); positions are uint16 or uint32."""
        chunk = self._merged()
        return chunk.terms, np.diff(chunk.starts).astype(np.uint32), chunk.docs, chunk.positions

    def chunk_arrays(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`csr_arrays` of each chunk as it is (saving them merges nothing)."""
        return [(chunk.terms, np.diff(chunk.starts).astype(np.uint32), chunk.docs, chunk.positions)
                for chunk in list(self._chunks)]

    def load_chunk_arrays(self, chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Chunks saved by :meth:`chunk_arrays`, in the same (doc) order."""
        loaded = []
        for terms, counts, docs, positions in chunks:
            if docs.size:
                starts = np.zeros(terms.size + 1, dtype=np.int64)
                np.cumsum(counts, out=starts[1:])
                loaded.append(_Chunk(terms.astype(np.uint32, copy=False), starts, docs, positions))
        self._chunks = loaded
        self._absent = set()

    def token_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(terms, docs, positions) of every token, term-sorted (merging the chunks); uint32 each."""
        chunk = self._merged()
        return chunk.token_terms(), chunk.docs, chunk.positions.astype(np.uint32)

    def load_token_arrays(self, terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> None:
        self._chunks = [_Chunk.from_sorted(terms, docs, positions)] if terms.size else []
        self._absent = set()
