"""Inverted postings and token positions, per field.

Owns: for each field, every token as (term, doc, position) uint32 triples sorted by term (a
positional inverted index in three numpy arrays), and the (field, term id) → ``AbstractBitMap``
postings derived from them on demand.

Ingest cost is a few numpy calls per batch: the batch's tokens are sorted by term once (a
stable sort, so docs stay ascending within a term) and appended as one chunk; chunks are merged
when there are more than :data:`MAX_TOKEN_CHUNKS`, so that the occurrences of a query's terms are
a few binary searches and slices whatever the size of the field. No per-term object is made at
write time: a term's bitmap is built from its slices the first time a query asks for it and kept
(in ``terms``) until a write adds docs to that term; a union of many terms (prefixes, wide typo
expansions) is one gather and one bitmap build. Docs retired by deletes or upserts stay in the
token arrays; every reader intersects with the alive docs or a universe derived from them.
"""

from __future__ import annotations

import threading

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import EMPTY, bitmap_from_array, union_all

#: Term-sorted token chunks are merged into one when there are more than this many, so that a
#: lookup costs a few binary searches however many batches were written.
MAX_TOKEN_CHUNKS = 8


#: Cached term bitmaps are dropped all at once beyond this many (a full set is only built by
#: ``all_terms``, for checks).
MAX_CACHED_TERMS = 65_536
#: Unions of more terms than this are built from one gather of their docs, not per-term bitmaps.
MAX_TERMS_PER_TERM_UNION = 8
#: ``occurrences_in`` binary-searches the docs in each term's slice for at most this many terms...
_SEARCHED_TERMS = 16
#: ...when docs × terms × this is below the terms' occurrences (a binary search costs a few steps).
_SEARCH_COST = 16


class FieldPostings:
    """The postings and token positions of one field."""

    __slots__ = ("terms", "docs", "_chunks", "_lock", "_absent")

    def __init__(self) -> None:
        # Readers build term bitmaps and merge token chunks lazily, several at once.
        self._lock = threading.RLock()
        #: Term bitmaps built so far (a cache over the token chunks, kept current by ``add``).
        self.terms: dict[int, AbstractBitMap] = {}
        self.docs = BitMap()  # docs having at least one token in this field
        # Each chunk: (terms, docs, positions), sorted by term, then doc, then position.
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        #: Terms looked up and found in no chunk (a query word absent from this field): not looked
        #: up again until the next ``add``, which forgets them all.
        self._absent: set[int] = set()

    def add(self, docs: np.ndarray, terms: np.ndarray, positions: np.ndarray) -> None:
        """Add tokens given in doc order (``docs`` non-decreasing, all docs new to this field)."""
        if docs.size == 0:
            return
        # One stable sort by term groups the batch; docs stay ascending within a term.
        order = np.argsort(terms, kind="stable")
        sorted_terms = terms[order].astype(np.uint32)
        sorted_docs = docs[order].astype(np.uint32)
        sorted_positions = positions[order].astype(np.uint32)
        with self._lock:
            self._absent = set()
            if self.terms:
                self._update_cached(sorted_terms, sorted_docs)
            self.docs |= bitmap_from_array(docs)
            self._chunks.append((sorted_terms, sorted_docs, sorted_positions))
            if len(self._chunks) > MAX_TOKEN_CHUNKS:
                self._merge_chunks()

    def _update_cached(self, sorted_terms: np.ndarray, sorted_docs: np.ndarray) -> None:
        """Add a new chunk's docs to the cached bitmaps of its terms (or forget a large cache)."""
        if len(self.terms) > MAX_CACHED_TERMS:
            self.terms = {}
            return
        cached = np.fromiter(self.terms, dtype=np.uint32, count=len(self.terms))
        lo = np.searchsorted(sorted_terms, cached, side="left")
        hi = np.searchsorted(sorted_terms, cached, side="right")
        hit = hi > lo
        for term, start, end in zip(cached[hit].tolist(), lo[hit].tolist(), hi[hit].tolist()):
            bitmap = self.terms[term]
            self.terms[term] = BitMap(bitmap) | bitmap_from_array(sorted_docs[start:end])

    def _merge_chunks(self) -> None:
        terms, docs, positions = (np.concatenate(parts) for parts in zip(*self._chunks))
        # Chunks are in doc order, so a stable sort by term keeps docs ascending within a term.
        order = np.argsort(terms, kind="stable")
        self._chunks = [(terms[order], docs[order], positions[order])]

    def _gather_docs(self, term_ids: np.ndarray) -> np.ndarray:
        """Docs of every token of ``term_ids`` (sorted, unique), duplicates included."""
        parts: list[np.ndarray] = []
        for terms, docs, _positions in list(self._chunks):
            lo = np.searchsorted(terms, term_ids, side="left")
            hi = np.searchsorted(terms, term_ids, side="right")
            if term_ids.size == 1:
                if hi[0] > lo[0]:
                    parts.append(docs[int(lo[0]):int(hi[0])])
                continue
            lengths = hi - lo
            total = int(lengths.sum())
            if total:
                parts.append(docs[np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)])
        if not parts:
            return np.empty(0, dtype=np.uint32)
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
            terms, docs, _positions = self.token_arrays()
            if terms.size:
                starts = np.concatenate(([0], np.flatnonzero(np.diff(terms)) + 1))
                ends = np.concatenate((starts[1:], [terms.size]))
                cache = self.terms
                for term, start, end in zip(terms[starts].tolist(), starts.tolist(), ends.tolist()):
                    if term not in cache:
                        cache[term] = bitmap_from_array(docs[start:end])
            return self.terms

    def occurrences(self, term_ids: np.ndarray, doc_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(docs, positions) of every occurrence of ``term_ids`` (sorted, unique) in docs where
        ``doc_mask[doc]`` is true — cost follows the occurrences of those terms, not the field."""
        found_docs: list[np.ndarray] = []
        found_positions: list[np.ndarray] = []
        for terms, docs, positions in list(self._chunks):
            lo = np.searchsorted(terms, term_ids, side="left")
            hi = np.searchsorted(terms, term_ids, side="right")
            lengths = hi - lo
            present = lengths > 0
            if not present.any():
                continue
            lo, lengths = lo[present], lengths[present]
            total = int(lengths.sum())
            index = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
            chunk_docs = docs[index]
            inside = chunk_docs < doc_mask.size
            inside[inside] = doc_mask[chunk_docs[inside]]
            found_docs.append(chunk_docs[inside])
            found_positions.append(positions[index][inside])
        if not found_docs:
            empty = np.empty(0, dtype=np.uint32)
            return empty, empty
        return np.concatenate(found_docs), np.concatenate(found_positions)

    def occurrences_in(self, term_ids: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(docs, positions) of every occurrence of ``term_ids`` (sorted, unique) in ``docs``
        (sorted, unique doc ids), in no particular order.

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
        for terms, chunk_docs, positions in list(self._chunks):
            if term_ids.size == 1:  # the common case, in scalar steps (each numpy call costs microseconds)
                first = int(terms.searchsorted(term_ids[0], side="left"))
                last = int(terms.searchsorted(term_ids[0], side="right"))
                if last == first:
                    continue
                lo, hi, total = np.asarray([first]), np.asarray([last]), last - first
            else:
                lo = np.searchsorted(terms, term_ids, side="left")
                hi = np.searchsorted(terms, term_ids, side="right")
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
            return found_docs[0], found_positions[0]
        return np.concatenate(found_docs), np.concatenate(found_positions)

    def token_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(terms, docs, positions) of every token, term-sorted (merging the chunks)."""
        if not self._chunks:
            empty = np.empty(0, dtype=np.uint32)
            return empty, empty, empty
        with self._lock:
            if len(self._chunks) > 1:
                self._merge_chunks()
            return self._chunks[0]

    def load_token_arrays(self, terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> None:
        self._chunks = [(terms, docs, positions)] if terms.size else []
        self._absent = set()
