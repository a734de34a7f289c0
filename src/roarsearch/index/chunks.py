"""Chunks: the tokens of a run of batches of one field, grouped by term.

Owns: :class:`Chunk`, a positional inverted index in compressed-sparse-row form — the distinct
term ids (sorted), the offset where each term's tokens start, and two token columns, docs
(uint32, ascending within a term) and positions (uint16 while they fit, else uint32) — with
the lookups every reader starts from (a term's token range, several terms' spans), and what a
snapshot saves of it (:class:`PackedTokens`: the columns in blocks, :mod:`roarsearch.index.blocks`,
and each term's doc set ready to read, :mod:`roarsearch.index.docsets`). A chunk never changes once
made: adds make new chunks, merges (:mod:`roarsearch.index.merges`) replace several by one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from roarsearch.buffers import Buffer
from roarsearch.index.bitmaps import array_from_bitmap
from roarsearch.index.blocks import LazyColumn, block_starts, gather_index, pack_column
from roarsearch.index.docsets import BUILD_SLAB_TOKENS, DocSets, DocSetsBuilder, term_slabs
from roarsearch.scratch import ScratchSpace

#: Positions are kept as uint16 in chunks whose positions all fit.
_NARROW_LIMIT = 1 << 16


_EMPTY_U32 = np.empty(0, dtype=np.uint32)


#: Term ranges a chunk remembers (:meth:`Chunk.range_of`): ~0.2 MB at most per chunk.
REMEMBERED_RANGES = 1024


#: A raw chunk of at least this many tokens is kept in a scratch file (:meth:`Chunk.spilled`).
SPILL_MIN_TOKENS = 1 << 16


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


def _narrow_positions(positions: np.ndarray) -> np.ndarray:
    if positions.size and int(positions.max()) >= _NARROW_LIMIT:
        return positions.astype(np.uint32, copy=False)
    return positions.astype(np.uint16)


def _packed_column(column: np.ndarray | LazyColumn, delta: bool, starts: np.ndarray) -> tuple[Buffer, np.ndarray]:
    if isinstance(column, LazyColumn):
        return column.data, column.ends.astype(np.uint64)
    return pack_column(column, delta, starts)


class Chunk:
    """Tokens of a run of batches, grouped by term: term ``terms[i]`` owns tokens
    ``starts[i]:starts[i + 1]`` of ``docs`` and ``positions`` (docs ascending within a term)."""

    __slots__ = ("terms", "starts", "_docs", "_positions", "packed", "doc_sets", "_ranges", "_few", "end_doc")

    def __init__(self, terms: np.ndarray, starts: np.ndarray, docs: np.ndarray | LazyColumn,
                 positions: np.ndarray | LazyColumn, packed: PackedTokens | None = None, end_doc: int = -1,
                 doc_sets: DocSets | None = None) -> None:
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
        #: Every term's doc set, ready to read (:mod:`roarsearch.index.docsets`): written by the big
        #: merge that made the chunk, or when a snapshot first saves it (and loaded with it); None
        #: until then (a small recent chunk: its terms' docs are gathered from its tokens).
        self.doc_sets = doc_sets
        #: Token ranges of terms looked up lately (a chunk never changes; see :meth:`range_of`).
        self._ranges: dict[int, tuple[int, int]] = {}
        #: The tokens of rare terms looked up lately, as lists (see :meth:`few_tokens`).
        self._few: dict[int, tuple[list[int], list[int]]] = {}

    @classmethod
    def from_packed(cls, terms: np.ndarray, starts: np.ndarray, packed: PackedTokens,
                    doc_sets: DocSets | None = None) -> Chunk:
        return cls(terms, starts,
                   LazyColumn(packed.docs, packed.doc_ends, packed.tokens, np.uint32, True, packed.block_starts),
                   LazyColumn(packed.positions, packed.position_ends, packed.tokens, packed.position_type, False,
                              packed.block_starts),
                   packed, doc_sets=doc_sets)

    def read_saved(self, packed: PackedTokens, doc_sets: Buffer | None) -> None:
        """Read the token columns from ``packed`` and the doc sets from ``doc_sets`` (when not None)
        from now on: the same bytes as this chunk's own, as a snapshot saved them, but views of its
        file (see ``state.adopt_saved_chunks``). Columns kept raw become lazy ones over ``packed``;
        a lazy column keeps the blocks it inflated. Swapping a buffer is one attribute store: a
        reader holding the old one reads the same bytes."""
        docs, positions = self._docs, self._positions
        if isinstance(docs, LazyColumn):
            docs.data = packed.docs
        else:
            self._docs = LazyColumn(packed.docs, packed.doc_ends, packed.tokens, np.uint32, True, packed.block_starts)
        if isinstance(positions, LazyColumn):
            positions.data = packed.positions
        else:
            self._positions = LazyColumn(packed.positions, packed.position_ends, packed.tokens, packed.position_type,
                                         False, packed.block_starts)
        self.packed = packed
        if doc_sets is not None and self.doc_sets is not None:
            self.doc_sets.data = doc_sets

    def ready_doc_sets(self) -> DocSets:
        """Every term's doc set, written now if the chunk has none yet (then kept: a chunk never
        changes). A packed docs column is read slab by slab, not kept inflated."""
        found = self.doc_sets
        if found is None:
            builder = DocSetsBuilder()
            starts = self.starts
            for first, last in term_slabs(starts, BUILD_SLAB_TOKENS):
                lo, hi = int(starts[first]), int(starts[last])
                builder.append(starts[first:last + 1] - lo, self.read_docs(lo, hi))
            found = self.doc_sets = builder.finish()
        return found

    def slot_of(self, term: int) -> int:
        """Where ``term`` is in ``terms`` (-1 when absent)."""
        terms = self.terms
        slot = int(terms.searchsorted(np.uint32(term)))
        return slot if slot < terms.size and int(terms[slot]) == term else -1

    def slots_of(self, term_ids: np.ndarray) -> list[int]:
        """Where those of ``term_ids`` held here are in ``terms``."""
        terms = self.terms
        if not terms.size:
            return []
        slot = np.searchsorted(terms, term_ids)
        np.minimum(slot, terms.size - 1, out=slot)
        held: list[int] = slot[terms[slot] == term_ids].tolist()
        return held

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

    def column_buffers(self) -> list[Buffer | np.ndarray]:
        """What its token columns are read from: a lazy column's compressed bytes, a raw column's
        array (either may be a view of a mapped file: a snapshot, a scratch file)."""
        return [column.data if isinstance(column, LazyColumn) else column for column in (self._docs, self._positions)]

    def spilled(self, scratch: ScratchSpace) -> Chunk:
        """This chunk with its raw token columns moved to a scratch file (:mod:`roarsearch.scratch`)
        and read through a mapping of it; itself when the scratch space is memory, the columns are
        not raw, or the chunk is too small to be worth a file. Between two snapshots of a bulk load,
        each batch's raw chunks (6 bytes a token) waited in memory for a merge or the next snapshot:
        at 10M records, most of the load's peak."""
        docs, positions = self._docs, self._positions
        if (scratch.directory is None or not isinstance(docs, np.ndarray) or not isinstance(positions, np.ndarray)
                or docs.size < SPILL_MIN_TOKENS):
            return self
        docs, positions = np.ascontiguousarray(docs), np.ascontiguousarray(positions)
        out = scratch.buffer()
        out.append(docs.data)
        out.append(positions.data)
        data = np.frombuffer(out.finish(), dtype=np.uint8)
        return Chunk(self.terms, self.starts, data[:docs.nbytes].view(docs.dtype),
                     data[docs.nbytes:].view(positions.dtype), end_doc=self.end_doc, doc_sets=self.doc_sets)

    @property
    def position_type(self) -> type:
        return self._positions.dtype.type

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
    def from_sorted(cls, sorted_terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> Chunk:
        """A chunk from one term id per token (term-sorted)."""
        if not sorted_terms.size:
            return cls(_EMPTY_U32, np.zeros(1, dtype=np.int64), _EMPTY_U32, np.empty(0, dtype=np.uint16))
        boundaries = np.flatnonzero(sorted_terms[1:] != sorted_terms[:-1]) + 1
        starts = np.concatenate(([0], boundaries, [sorted_terms.size])).astype(np.int64)
        return cls(sorted_terms[starts[:-1]].astype(np.uint32), starts, docs.astype(np.uint32, copy=False),
                   _narrow_positions(positions), end_doc=int(docs.max()) + 1)

    @classmethod
    def from_groups(cls, term_ids: np.ndarray, counts: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> Chunk:
        """A chunk from tokens grouped by term: ``counts[i]`` tokens of ``term_ids[i]`` (distinct,
        in any order) after those of the terms before it. The groups are put in term order (no
        sort of the tokens: one of the distinct terms, then one gather)."""
        if not (term_ids[1:] > term_ids[:-1]).all():
            order = np.argsort(term_ids)
            ends = np.cumsum(counts)
            index = gather_index((ends - counts)[order], ends[order])
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

    def token_docs(self, term: int, start: int, end: int) -> np.ndarray:
        """The doc of each of tokens ``start:end``, all of ``term``'s. When the term's doc set is
        ready and holds as many docs as the term has tokens (no doc holds it twice: most rare
        terms), they are its doc set's docs, and no block of the docs column is inflated for them
        (ranking reads then only the positions' block)."""
        doc_sets = self.doc_sets
        if doc_sets is not None:
            docs = self._docs
            if isinstance(docs, LazyColumn) and docs.missing:
                slot = self.slot_of(term)
                if slot >= 0:
                    held = doc_sets.bitmap(slot)
                    if len(held) == end - start:
                        return array_from_bitmap(held)
        return self.docs_in(start, end)[start:end]

    def few_tokens(self, term: int, start: int, end: int) -> tuple[list[int], list[int]]:
        """The docs and positions of the term owning tokens ``start:end`` (at most
        :data:`_LIST_READ_TOKENS` of them), as lists. Remembered like :meth:`range_of`'s ranges
        (a chunk never changes): a rare word's proximity reads them on every search, and four
        numpy calls (two slices, two ``tolist``) cost it more than walking them."""
        found = self._few.get(term)
        if found is not None:
            return found
        found = (self.token_docs(term, start, end).tolist(), self.positions_in(start, end)[start:end].tolist())
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
