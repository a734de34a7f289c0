"""A field's postings: its chunks of tokens and the term doc sets queries read.

Owns: :class:`FieldPostings`, one per text field — the field's chunks in doc order
(:mod:`roarsearch.index.chunks`), merged in tiers (:mod:`roarsearch.index.merges`), and the
(field, term id) → ``AbstractBitMap`` doc sets every query starts from. Ingest cost is a few numpy
calls per batch: the batch's tokens come grouped by term and become one chunk; no per-term
object is made at write time. A term's doc set comes from each chunk: deserialised from the
chunk's ready doc sets (:mod:`roarsearch.index.docsets`) when the chunk has them — every chunk a
big merge wrote and every chunk a snapshot saved or loaded — or gathered from its tokens in the
small, recent chunks that have not been through either; it is kept (in ``terms``) until a write
adds docs to that term. A union of many terms (prefixes, wide typo expansions) is kept per field
and extended by later chunks, not rebuilt. Docs retired by deletes or upserts stay in the chunks;
every reader intersects with the alive docs or a universe derived from them. Positions are read
for ranking only (:mod:`roarsearch.index.positions`).
"""

from __future__ import annotations

import logging
import operator
import threading
from collections import OrderedDict
from concurrent.futures import Future

import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.index import positions as token_positions
from roarsearch.index.bitmaps import EMPTY, bitmap_from_array, sorted_unique, union_all
from roarsearch.index.blocks import gather_index
from roarsearch.index.chunks import _EMPTY_U32, Chunk, PackedTokens
from roarsearch.index.docsets import DocSets
from roarsearch.index.merges import (
    IN_MEMORY,
    PostingsPlan,
    due_merge,
    merge_chunks,
    merge_gate,
    run_in_background,
    with_chunk,
)
from roarsearch.index.positions import DocMask, FewDocs
from roarsearch.memory import unmap_unused_soon
from roarsearch.scratch import ScratchSpace

log = logging.getLogger("roarsearch")


#: Cached term bitmaps are dropped all at once beyond this many (a full set is only built by
#: ``all_terms``, for checks).
MAX_CACHED_TERMS = 65_536


#: Unions of more terms than this are built from one gather of their docs, not per-term bitmaps.
MAX_TERMS_PER_TERM_UNION = 8


#: Such unions kept per field (typo expansions and prefixes of recent queries), least recently
#: used first out.
CACHED_UNIONS = 256


class FieldPostings:
    """The postings and token positions of one field."""

    __slots__ = ("terms", "docs", "_chunks", "_lock", "_absent", "_merging", "_busy", "merges", "_settle",
                 "merge_limit", "_unions", "scratch")

    def __init__(self, scratch: ScratchSpace = IN_MEMORY) -> None:
        # Readers build term bitmaps and merge token chunks lazily, several at once.
        self._lock = threading.RLock()
        #: Term bitmaps read so far, each with the ``end_doc`` it covers: extended by the chunks
        #: added since when next read (as the unions below), not by every add. (At 10M records, a
        #: search box's common words cached this way made each 1,000-record add copy their
        #: multi-megabyte bitmaps, 50 ms per field, while searches waited for the commit.)
        self.terms: dict[int, tuple[int, AbstractBitMap]] = {}
        self.docs = BitMap()  # docs having at least one token in this field
        self._chunks: list[Chunk] = []
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
        #: Where a background merge writes its output (the collection's folder, when durable).
        self.scratch = scratch

    def add(self, docs: np.ndarray, terms: np.ndarray, positions: np.ndarray) -> None:
        """Add tokens given in doc order (``docs`` non-decreasing, all docs new to this field)."""
        if docs.size == 0:
            return
        # One stable sort by term groups the tokens; docs stay ascending within a term.
        order = np.argsort(terms, kind="stable")
        self.commit_add(self._plan(Chunk.from_sorted(terms[order], docs[order], positions[order])), docs)

    def plan_add(self, term_ids: np.ndarray, counts: np.ndarray, docs: np.ndarray,
                 positions: np.ndarray) -> PostingsPlan | None:
        """A batch's chunk and the merges it causes, computed without changing anything, so that a
        write does it while searches run; then :meth:`commit_add`. The tokens come grouped by term,
        as the analyzer groups them: ``counts`` tokens of each of ``term_ids`` (distinct, in any
        order), each term's tokens in doc order. None: no tokens."""
        if docs.size == 0:
            return None
        return self._plan(Chunk.from_groups(term_ids, counts, docs, positions))

    def _plan(self, chunk: Chunk) -> PostingsPlan:
        base, busy = self._chunks, self._busy
        chunk = chunk.spilled(self.scratch)
        return base, busy, chunk, with_chunk(base, chunk, busy, self.scratch)

    def _set_chunks(self, chunks: list[Chunk]) -> list[Chunk]:
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
                chunks = with_chunk(self._chunks, chunk, self._busy, self.scratch)
            self._absent = self._still_absent(chunk)
            self.docs |= bitmap_from_array(docs)
            self._set_chunks(chunks)  # replaced whole: a reader's list(...) stays consistent
            # What is still due after the inline merges is big, or waits for a running merge.
            if self._merging is None and due_merge(chunks, self.merge_limit) is not None:
                self._merging = run_in_background(self._merge_in_background)

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
                self._merging = run_in_background(self._merge_in_background)

    def resume_merges(self) -> None:
        """End a bulk load without :meth:`settle`: the merges it left waiting run now."""
        with self._lock:
            self.merge_limit = None
            if self._merging is None and due_merge(self._chunks) is not None:
                self._merging = run_in_background(self._merge_in_background)

    def _merge_in_background(self) -> None:
        """The merge thread's task: merge a run of chunks the tier rule makes due (every chunk,
        when asked to :meth:`settle`), then swap the result in for them (under the lock, only if
        those very chunks are still there), until none is due. Readers and adds go on meanwhile;
        an add appends after the chunks being read."""
        while True:
            with self._lock:
                chunks = self._chunks
                due = due_merge(chunks, self.merge_limit)
                if self._settle:
                    self._settle = False
                    due = (0, len(chunks)) if len(chunks) > 1 else due
                if due is None:
                    self._merging = None  # decided under the lock: the next add schedules anew
                    return
                run = chunks[due[0]:due[1]]
                self._busy = frozenset(map(id, run))
            try:
                with merge_gate:
                    merged = merge_chunks(run, self.scratch)
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

    def _still_absent(self, chunk: Chunk) -> set[int]:
        """The terms known absent that a new chunk does not hold (one binary search each)."""
        absent = self._absent
        if not absent:
            return set()
        known = np.fromiter(absent, dtype=np.uint32, count=len(absent))
        lo, hi = chunk.ranges(known)
        return set(known[hi == lo].tolist())

    def _docs_of(self, term_ids: np.ndarray, chunks: list[Chunk] | None = None, since: int = -1) -> AbstractBitMap:
        """Docs holding any of ``term_ids`` (sorted, distinct); ``since``: only docs from that one
        on (chunks wholly below it are not read). Each chunk with ready doc sets gives its terms'
        bitmaps as written; the tokens of the others are gathered into one bitmap."""
        found: list[AbstractBitMap] = []
        parts: list[np.ndarray] = []
        lone = int(term_ids[0]) if term_ids.size == 1 else -1
        for chunk in list(self._chunks) if chunks is None else chunks:
            if since >= 0 and chunk.end_doc <= since:  # unknown (-1): loaded, below every later doc
                continue
            doc_sets = chunk.doc_sets
            if doc_sets is not None:
                if lone >= 0:
                    slot = chunk.slot_of(lone)
                    if slot >= 0:
                        found.append(doc_sets.bitmap(slot))
                else:
                    slots = chunk.slots_of(term_ids)
                    if slots:
                        found.append(doc_sets.union(slots))
                continue
            if lone >= 0:
                start, end = chunk.range_of(lone)
                if end > start:
                    parts.append(chunk.docs_in(start, end)[start:end])
                continue
            lo, hi = chunk.ranges(term_ids)
            if int((hi - lo).sum()):
                parts.append(chunk.docs_in_all(lo, hi)[gather_index(lo, hi)])
        if parts:
            found.append(bitmap_from_array(parts[0] if len(parts) == 1 else np.concatenate(parts)))
        if not found:
            return EMPTY
        docs = found[0] if len(found) == 1 else union_all(found)
        if since > 0 and docs and docs.min() < since:
            docs = BitMap(docs)
            docs.remove_range(0, since)
        return docs

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
            added = self._docs_of(term_ids, chunks, found[0])
            docs = FrozenBitMap(found[1] | added) if added else found[1]
        else:
            gathered = self._docs_of(term_ids, chunks)
            docs = gathered if isinstance(gathered, FrozenBitMap) else FrozenBitMap(gathered) if gathered else EMPTY
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
        """A term's bitmap (built on first use, extended by the chunks added since on later ones);
        None when the term never occurred in this field."""
        chunks = self._chunks  # replaced whole by writers and merges: one consistent list
        end = chunks[-1].end_doc if chunks else 0
        found = self.terms.get(term)
        if found is not None and found[0] == end:
            return found[1]
        one = np.asarray([term], dtype=np.uint32)
        if found is not None and 0 <= found[0] < end:
            added = self._docs_of(one, chunks, found[0])
            bitmap = found[1] | added if added else found[1]
        else:
            if term in self._absent:
                return None
            absent = self._absent
            bitmap = self._docs_of(one, chunks)
            if not bitmap:
                absent.add(term)  # the set of the chunks just read (a concurrent add makes a new one)
                return None
        with self._lock:
            if len(self.terms) >= MAX_CACHED_TERMS:
                self.terms = {}
            self.terms[term] = (end, bitmap)
        return bitmap

    def all_terms(self) -> dict[int, AbstractBitMap]:
        """Every term's bitmap (checks): the cached ones themselves, so what a check sees (or
        changes) is what queries read."""
        with self._lock:
            chunk = self._merged()
            end = self._chunks[-1].end_doc if self._chunks else 0
            cache = self.terms
            for term, start, stop in zip(chunk.terms.tolist(), chunk.starts[:-1].tolist(), chunk.starts[1:].tolist()):
                found = cache.get(term)
                if found is None or found[0] != end:
                    cache[term] = (end, bitmap_from_array(chunk.docs[start:stop]))
            return {term: bitmap for term, (_end, bitmap) in cache.items()}

    def occurrences(self, term_ids: np.ndarray, doc_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """See :func:`roarsearch.index.positions.occurrences`."""
        return token_positions.occurrences(list(self._chunks), term_ids, doc_mask)

    def positions_in(self, term_ids: list[int], docs: FewDocs) -> dict[int, list[int]]:
        """See :func:`roarsearch.index.positions.positions_in`."""
        return token_positions.positions_in(list(self._chunks), term_ids, docs)

    def occurrences_in(self, term_ids: np.ndarray, docs: np.ndarray,
                       mask: DocMask | None = None, whole_up_to: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """See :func:`roarsearch.index.positions.occurrences_in`."""
        return token_positions.occurrences_in(list(self._chunks), term_ids, docs, mask, whole_up_to)

    def _merged(self) -> Chunk:
        """All tokens as one chunk (merging the chunks into one)."""
        with self._lock:
            if not self._chunks:
                return Chunk.from_sorted(_EMPTY_U32, _EMPTY_U32, _EMPTY_U32)
            if len(self._chunks) > 1:
                self._set_chunks([merge_chunks(self._chunks, self.scratch)])
            return self._chunks[0]

    def csr_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(distinct term ids, token count per term, docs, positions) of every token, term-sorted
        (merging the chunks); positions are uint16 or uint32."""
        chunk = self._merged()
        return chunk.terms, np.diff(chunk.starts).astype(np.uint32), chunk.docs, chunk.positions

    def packed_chunks(self) -> list[tuple[Chunk, np.ndarray, np.ndarray, PackedTokens, DocSets]]:
        """Each chunk with its distinct term ids, token count per term, compressed token columns
        and its terms' doc sets (written now for a chunk that has none yet, and kept)."""
        return [(chunk, chunk.terms, np.diff(chunk.starts).astype(np.uint32), chunk.pack(), chunk.ready_doc_sets())
                for chunk in list(self._chunks)]

    def load_packed_chunks(self, chunks: list[tuple[np.ndarray, np.ndarray, PackedTokens, DocSets | None]],
                           end_doc: int = -1) -> None:
        """Chunks saved by :meth:`packed_chunks`, in the same (doc) order; inflated on first read.
        ``end_doc``: above every doc they hold (the collection's next doc), if known. Doc sets
        None: a snapshot older than doc sets (the chunk's terms are gathered until it is saved again)."""
        loaded = []
        for terms, counts, packed, doc_sets in chunks:
            if packed.tokens:
                starts = np.zeros(terms.size + 1, dtype=np.int64)
                np.cumsum(counts, out=starts[1:])
                if doc_sets is not None and doc_sets.terms != terms.size:
                    raise ValueError(f"a saved chunk has doc sets for {doc_sets.terms} terms, not its {terms.size}")
                chunk = Chunk.from_packed(terms.astype(np.uint32, copy=False), starts, packed, doc_sets)
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
                loaded.append(Chunk(terms.astype(np.uint32, copy=False), starts, docs, positions, end_doc=end_doc))
        self._set_chunks(loaded)
        self._absent = set()
        self._unions = OrderedDict()

    def token_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(terms, docs, positions) of every token, term-sorted (merging the chunks); uint32 each."""
        chunk = self._merged()
        return chunk.token_terms(), chunk.docs, chunk.positions.astype(np.uint32)

    def load_token_arrays(self, terms: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> None:
        self._set_chunks([Chunk.from_sorted(terms, docs, positions)] if terms.size else [])
        self._absent = set()
        self._unions = OrderedDict()
