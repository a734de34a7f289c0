"""Inverted postings and token positions, per field.

Owns: (field, term id) → ``BitMap`` of doc ids, and for each field the positions of every token
(for proximity ranking and match checks), kept in numpy arrays rather than per-doc objects.

Postings are append-only: a batch ORs its doc ids into each term's bitmap (one pyroaring call per
distinct term of the batch, never one per record). Docs retired by deletes or upserts stay in the
bitmaps; every reader intersects with the alive docs or a universe derived from them.

Positions: for each field, tokens are stored flat in doc id order — ``docs``, ``terms``,
``positions`` (uint32) — in chunks appended per batch and concatenated lazily; a dense per-doc
``start``/``end`` pair locates a doc's tokens so that gathering the tokens of N candidate docs costs
O(their tokens), not O(the field).
"""

from __future__ import annotations

import numpy as np
from pyroaring import BitMap

from roarsearch.index.bitmaps import EMPTY, GrowableArray, bitmap_from_array, union_all


class FieldPostings:
    """The postings and token positions of one field."""

    __slots__ = ("terms", "_chunks", "_flat", "_start", "_end", "_token_count", "docs")

    def __init__(self) -> None:
        self.terms: dict[int, BitMap] = {}
        self.docs = BitMap()  # docs having at least one token in this field
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._start = GrowableArray(np.int64, 0)
        self._end = GrowableArray(np.int64, 0)
        self._token_count = 0

    def add(self, docs: np.ndarray, terms: np.ndarray, positions: np.ndarray) -> None:
        """Add tokens given in doc order (``docs`` non-decreasing, all docs new to this field)."""
        if docs.size == 0:
            return
        # Postings: group by term with one stable sort, then one bitmap update per distinct term.
        order = np.argsort(terms, kind="stable")
        sorted_terms = terms[order]
        sorted_docs = docs[order]
        boundaries = np.flatnonzero(np.diff(sorted_terms)) + 1
        starts = np.concatenate(([0], boundaries))
        ends = np.concatenate((boundaries, [sorted_terms.size]))
        postings = self.terms
        for term, lo, hi in zip(sorted_terms[starts].tolist(), starts.tolist(), ends.tolist()):
            bitmap = bitmap_from_array(sorted_docs[lo:hi])
            existing = postings.get(term)
            if existing is None:
                postings[term] = bitmap
            else:
                existing |= bitmap
        self.docs |= bitmap_from_array(docs)
        # Positions: per-doc token ranges into the flat arrays.
        unique_docs, first_index, counts = np.unique(docs, return_index=True, return_counts=True)
        top = int(unique_docs[-1]) + 1
        self._start.ensure(top)
        self._end.ensure(top)
        self._start.data[unique_docs] = first_index + self._token_count
        self._end.data[unique_docs] = first_index + counts + self._token_count
        self._token_count += docs.size
        self._chunks.append((docs.astype(np.uint32), terms.astype(np.uint32), positions.astype(np.uint32)))
        self._flat = None

    def bitmap(self, term_ids: list[int]) -> BitMap:
        """Docs containing any of ``term_ids`` in this field."""
        postings = self.terms
        found = [postings[term] for term in term_ids if term in postings]
        if not found:
            return EMPTY
        return union_all(found)

    def flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(docs, terms, positions) of every token of the field, concatenated once per write."""
        if self._flat is None:
            if len(self._chunks) == 1:
                self._flat = self._chunks[0]
            else:
                self._flat = tuple(np.concatenate(parts) for parts in zip(*self._chunks))  # type: ignore[assignment]
                self._chunks = [self._flat]  # type: ignore[list-item]
        return self._flat  # type: ignore[return-value]

    def tokens_of(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(docs, terms, positions) of the tokens of ``docs`` (sorted doc ids), vectorised."""
        flat_docs, flat_terms, flat_positions = self.flat()
        docs = docs[docs < self._start.data.size]
        starts = self._start.data[docs]
        lengths = self._end.data[docs] - starts
        keep = lengths > 0
        starts, lengths = starts[keep], lengths[keep]
        if starts.size == 0:
            empty = np.empty(0, dtype=np.uint32)
            return empty, empty, empty
        # Indices start_i .. start_i + length_i - 1 for every doc, without a Python loop.
        total = int(lengths.sum())
        offsets = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
        index = np.arange(total, dtype=np.int64) + offsets
        return flat_docs[index], flat_terms[index], flat_positions[index]

    def state_parts(self) -> tuple[dict[int, BitMap], tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return self.terms, self.flat()
