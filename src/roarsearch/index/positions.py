"""Token positions read for ranking: proximity needs where query words sit in the candidates.

Owns: reading the positions of a few terms in some docs across a field's chunks, at a cost that
follows the docs and terms asked, not the field: :func:`occurrences` (every occurrence in docs
of a dense mask), :func:`occurrences_in` (binary searches of the docs inside each term's
doc-sorted slice, or the whole slice of a rare term), and :func:`positions_in` (per-doc lists for
the handful of matches of a rare multi-word query, in plain Python where numpy calls would cost
more than the positions they move). Positions are read only for the records being ranked.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from roarsearch.index.blocks import gather_index
from roarsearch.index.chunks import _EMPTY_U32, Chunk

#: ``occurrences_in`` binary-searches the docs in each term's slice for at most this many terms...
_SEARCHED_TERMS = 16


#: ...when docs × terms × this is below the terms' occurrences (a binary search costs a few steps).
_SEARCH_COST = 16


_LAST_DOC = (1 << 32) - 1


#: ``positions_in`` reads the positions spanning its docs' tokens of a term as one list when they
#: are at most this many per doc (a value of a list costs ~8 ns, a doc's own numpy slice ~130 ns:
#: five docs spread over a common term's 1,500 tokens read whole took 19 us, per doc 2).
_SPAN_READ_PER_DOC = 16


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


def occurrences(chunks: list[Chunk], term_ids: np.ndarray, doc_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(docs, positions) of every occurrence of ``term_ids`` (sorted, unique) in docs where
    ``doc_mask[doc]`` is true — cost follows the occurrences of those terms, not the field.
    Positions are uint32."""
    found_docs: list[np.ndarray] = []
    found_positions: list[np.ndarray] = []
    for chunk in chunks:
        spans = chunk.spans(term_ids)
        if spans is None:
            continue
        lo, hi = spans
        if lo.size == 1:  # one term: its tokens are one slice
            start, end = int(lo[0]), int(hi[0])
            chunk_docs = chunk.docs_in(start, end)[start:end]
            chunk_positions = chunk.positions_in(start, end)[start:end]
        else:
            index = gather_index(lo, hi)
            chunk_docs = chunk.docs_in_all(lo, hi)[index]
            chunk_positions = chunk.positions_in_all(lo, hi)[index]
        inside = chunk_docs < doc_mask.size
        inside[inside] = doc_mask[chunk_docs[inside]]
        found_docs.append(chunk_docs[inside])
        found_positions.append(chunk_positions[inside].astype(np.uint32))
    if not found_docs:
        return _EMPTY_U32, _EMPTY_U32
    return np.concatenate(found_docs), np.concatenate(found_positions)


def positions_in(chunks: list[Chunk], term_ids: list[int], docs: FewDocs) -> dict[int, list[int]]:
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
    chunks = chunks
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
            term_docs = chunk.token_docs(term, start, end)
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


def occurrences_in(chunks: list[Chunk], term_ids: np.ndarray, docs: np.ndarray,
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
    for chunk in chunks:
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
            index = gather_index(starts[hit], ends[hit])
            found_docs.append(chunk_docs[index])
            found_positions.append(positions[index])
            continue
        dense = mask.dense()
        if lo.size == 1:  # one term: its tokens are one slice, no index to build
            gathered, gathered_positions = chunk_docs[first:last], positions[first:last]
        else:
            index = gather_index(lo, hi)
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
