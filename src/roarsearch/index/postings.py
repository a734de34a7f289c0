"""Inverted postings and token positions, per field.

Owns: (field, term id) → ``AbstractBitMap`` of doc ids, and for each field the positions of every token
(for proximity ranking and match checks), kept in numpy arrays rather than per-doc objects.

Postings are append-only: a batch ORs its doc ids into each term's bitmap (one pyroaring call per
distinct term of the batch, never one per record). Docs retired by deletes or upserts stay in the
bitmaps; every reader intersects with the alive docs or a universe derived from them.

Positions: for each field, every token as (term, doc, position) uint32 triples sorted by term
(a positional inverted index in three numpy arrays), kept in a few chunks — one per batch, merged
when there are more than :data:`MAX_TOKEN_CHUNKS` — so that the occurrences of the query's terms
in the candidate docs are a few binary searches and slices, whatever the size of the field.
"""

from __future__ import annotations

import threading

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import EMPTY, bitmap_from_array, union_all

#: Term-sorted token chunks are merged into one when there are more than this many, so that a
#: lookup costs a few binary searches however many batches were written.
MAX_TOKEN_CHUNKS = 8


class FieldPostings:
    """The postings and token positions of one field."""

    __slots__ = ("terms", "docs", "_chunks", "_saved", "_lock")

    def __init__(self) -> None:
        # Readers deserialise saved bitmaps and merge token chunks lazily, several at once.
        self._lock = threading.RLock()
        #: Bitmaps in use. After a snapshot load most terms are still serialised in ``_saved`` and
        #: are deserialised the first time a query or a write touches them (opening stays fast).
        self.terms: dict[int, AbstractBitMap] = {}
        self._saved: tuple[np.ndarray, np.ndarray, np.ndarray, memoryview] | None = None
        self.docs = BitMap()  # docs having at least one token in this field
        # Each chunk: (terms, docs, positions), sorted by term, then doc, then position.
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, docs: np.ndarray, terms: np.ndarray, positions: np.ndarray) -> None:
        """Add tokens given in doc order (``docs`` non-decreasing, all docs new to this field)."""
        if docs.size == 0:
            return
        # One stable sort by term groups the batch; docs stay ascending within a term.
        order = np.argsort(terms, kind="stable")
        sorted_terms = terms[order].astype(np.uint32)
        sorted_docs = docs[order].astype(np.uint32)
        sorted_positions = positions[order].astype(np.uint32)
        boundaries = np.flatnonzero(np.diff(sorted_terms)) + 1
        starts = np.concatenate(([0], boundaries))
        ends = np.concatenate((boundaries, [sorted_terms.size]))
        postings = self.terms
        for term, lo, hi in zip(sorted_terms[starts].tolist(), starts.tolist(), ends.tolist()):
            bitmap = bitmap_from_array(sorted_docs[lo:hi])
            existing = postings.get(term)
            if existing is None and self._saved is not None:
                existing = self._load(term)
            if existing is None:
                postings[term] = bitmap
            else:
                existing |= bitmap
        self.docs |= bitmap_from_array(docs)
        self._chunks.append((sorted_terms, sorted_docs, sorted_positions))
        if len(self._chunks) > MAX_TOKEN_CHUNKS:
            self._merge_chunks()

    def _merge_chunks(self) -> None:
        terms, docs, positions = (np.concatenate(parts) for parts in zip(*self._chunks))
        # Chunks are in doc order, so a stable sort by term keeps docs ascending within a term.
        order = np.argsort(terms, kind="stable")
        self._chunks = [(terms[order], docs[order], positions[order])]

    def bitmap(self, term_ids: list[int]) -> AbstractBitMap:
        """Docs containing any of ``term_ids`` in this field."""
        postings = self.terms
        if self._saved is not None:
            missing = [term for term in term_ids if term not in postings]
            if missing:
                self._load_many(missing)
        found = [postings[term] for term in term_ids if term in postings]
        if not found:
            return EMPTY
        return union_all(found)

    def _load(self, term: int) -> AbstractBitMap | None:
        """Deserialise a saved term's bitmap (None when the term never occurred in this field)."""
        with self._lock:
            if self._saved is None or term in self.terms:  # another reader got here first
                return self.terms.get(term)
            term_ids, starts, ends, blob = self._saved
            position = int(np.searchsorted(term_ids, np.uint32(term)))  # a Python int would cast the whole array
            if position >= term_ids.size or int(term_ids[position]) != term:
                return None
            # pyroaring reads any buffer; its stubs say bytes (a copy here would cost the lazy load its point)
            bitmap = BitMap.deserialize(blob[int(starts[position]):int(ends[position])])  # type: ignore[arg-type]
            self.terms[term] = bitmap
            return bitmap

    def _load_many(self, wanted: list[int]) -> None:
        """Deserialise the saved bitmaps of ``wanted`` terms (one binary search for all of them)."""
        with self._lock:
            if self._saved is None:
                return
            term_ids, starts, ends, blob = self._saved
            if term_ids.size == 0:
                return
            query = np.asarray(wanted, dtype=np.uint32)
            positions = np.minimum(np.searchsorted(term_ids, query), term_ids.size - 1)
            hit = term_ids[positions] == query
            terms = self.terms
            for term, start, end in zip(query[hit].tolist(), starts[positions[hit]].tolist(), ends[positions[hit]].tolist()):
                if term not in terms:
                    terms[term] = BitMap.deserialize(blob[start:end])  # type: ignore[arg-type]  # any buffer works

    def load_saved(self, term_ids: np.ndarray, offsets: np.ndarray, blob: bytes) -> None:
        """Keep serialised bitmaps (bitmap i is ``blob[offsets[i]:offsets[i+1]]``) for first use."""
        starts, ends = offsets[:-1], offsets[1:]
        order = np.argsort(term_ids, kind="stable")  # older snapshots kept terms in insertion order
        self.terms = {}
        self._saved = (term_ids[order], starts[order], ends[order], memoryview(blob))

    def all_terms(self) -> dict[int, AbstractBitMap]:
        """Every term's bitmap, deserialising whatever is still saved (snapshots, checks)."""
        with self._lock:
            if self._saved is not None:
                term_ids, starts, ends, blob = self._saved
                terms = self.terms
                for term, start, end in zip(term_ids.tolist(), starts.tolist(), ends.tolist()):
                    if term not in terms:
                        terms[term] = BitMap.deserialize(blob[start:end])  # type: ignore[arg-type]  # any buffer works
                self._saved = None
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
