"""Per-term doc sets of a postings chunk, saved as ready-to-read roaring bitmaps.

Owns: the query-ready form of a chunk's postings. A chunk keeps each token's doc and position
grouped by term (:mod:`roarsearch.index.postings`); what a query asks first of a term is the set
of docs holding it, and building that bitmap from the term's tokens (inflate its blocks, drop
repeated docs, add them to a bitmap) is most of a first-seen query's time on a large collection.
So when a chunk is packed — by a merge of many tokens or when a snapshot saves it — every term's
doc set is written once in CRoaring's portable serialisation, all terms of the chunk in one
buffer with the byte offset where each starts (:class:`DocSets`); a query then deserialises a
term's bitmap from that buffer (a copy of its containers, microseconds for 100,000 docs)
instead of building it.

The builder is vectorised: one pass of numpy calls over the chunk's tokens writes every term's
serialised bitmap at once (no Python per term or per doc). The layout is the portable format
without run containers (cookie 12346): per bitmap a 32-bit cookie and container count, then each
container's 16-bit key and cardinality - 1, then each container's 32-bit byte offset from the
bitmap's start, then the containers — an array of sorted 16-bit values when it holds at most
4,096 docs, else a 65,536-bit set (8 KiB) — exactly as CRoaring decides when it reads them back.
"""

from __future__ import annotations

import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.buffers import Buffer
from roarsearch.scratch import ScratchBuffer

#: CRoaring's cookie of a portable bitmap without run containers (offsets always present).
_NO_RUN_COOKIE = 12346
#: Containers of more docs than this are bitsets, the others sorted arrays (CRoaring's rule).
_ARRAY_MAX = 4096
_BITSET_BYTES = 8192
#: Tokens handled per builder step: its temporary arrays (some 60 bytes a token) stay near 60 MB.
BUILD_SLAB_TOKENS = 1 << 20


class DocSets:
    """Every term's doc set of one chunk: term slot ``i`` (its place in the chunk's sorted term
    ids) owns ``data[offsets[i]:offsets[i + 1]]``, a portable roaring bitmap."""

    __slots__ = ("data", "offsets", "_bounds")

    def __init__(self, data: Buffer, offsets: np.ndarray) -> None:
        self.data = data
        self.offsets = offsets.astype(np.int64, copy=False)
        #: The offsets as Python ints: one term's lookup reads two list items, not numpy scalars.
        self._bounds: list[int] = self.offsets.tolist()
        if self._bounds and (self._bounds[0] != 0 or self._bounds[-1] != len(memoryview(data))):
            raise ValueError(f"a chunk's doc sets end at byte {self._bounds[-1]} of {len(memoryview(data))}")

    @property
    def terms(self) -> int:
        return len(self._bounds) - 1

    def bitmap(self, slot: int) -> FrozenBitMap:
        """The docs of the term in ``slot`` (a new bitmap, frozen: shared by the callers that cache it)."""
        bounds = self._bounds
        return FrozenBitMap.deserialize(memoryview(self.data)[bounds[slot]:bounds[slot + 1]])  # type: ignore[arg-type]

    def union(self, slots: list[int]) -> AbstractBitMap:
        """The docs of any of the terms in ``slots``."""
        if len(slots) == 1:
            return self.bitmap(slots[0])
        view = memoryview(self.data)
        bounds = self._bounds
        parts = [BitMap.deserialize(view[bounds[slot]:bounds[slot + 1]]) for slot in slots]  # type: ignore[arg-type]
        return BitMap.union(*parts)

    @property
    def nbytes(self) -> int:
        return self._bounds[-1]


def term_slabs(starts: np.ndarray, tokens: int) -> list[tuple[int, int]]:
    """Runs of whole terms (``first``, ``last``: terms ``first:last``) of about ``tokens`` tokens
    each (a bigger term alone), for a chunk whose term ``i`` owns tokens ``starts[i]:starts[i + 1]``."""
    terms = starts.size - 1
    runs: list[tuple[int, int]] = []
    first = 0
    while first < terms:
        # The last term starting before the slab's end closes it (at least one term per slab).
        last = int(np.searchsorted(starts, int(starts[first]) + tokens, side="right")) - 1
        last = min(max(first + 1, last), terms)
        runs.append((first, last))
        first = last
    return runs


class DocSetsBuilder:
    """Doc sets written slab by slab of whole terms, in term order, into one buffer (``out``: a
    scratch file in a durable collection's background merge, else memory), each slab's bytes let
    go once appended."""

    __slots__ = ("out", "sizes")

    def __init__(self, out: ScratchBuffer | None = None) -> None:
        self.out = out if out is not None else ScratchBuffer(None)
        self.sizes: list[np.ndarray] = []

    def append(self, starts: np.ndarray, docs: np.ndarray) -> None:
        """The next terms: term ``i`` owns ``docs[starts[i]:starts[i + 1]]`` (``starts`` from 0)."""
        data, term_bytes = _build_slab(starts.astype(np.int64, copy=False), np.asarray(docs, dtype=np.uint32))
        self.out.append(data.data)
        self.sizes.append(term_bytes)

    def finish(self) -> DocSets:
        """The doc sets written so far, in one buffer."""
        sizes = np.concatenate(self.sizes) if self.sizes else np.zeros(0, dtype=np.int64)
        self.sizes = []
        offsets = np.zeros(sizes.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        return DocSets(self.out.finish(), offsets)


def build_doc_sets(starts: np.ndarray, docs: np.ndarray) -> DocSets:
    """The doc sets of a chunk whose term ``i`` owns tokens ``starts[i]:starts[i + 1]`` of
    ``docs`` (ascending within a term, repeats allowed), built in slabs of about
    :data:`BUILD_SLAB_TOKENS` tokens."""
    builder = DocSetsBuilder()
    for first, last in term_slabs(starts, BUILD_SLAB_TOKENS):
        lo, hi = int(starts[first]), int(starts[last])
        builder.append(starts[first:last + 1] - lo, docs[lo:hi])
    return builder.finish()


def _build_slab(starts: np.ndarray, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The serialised bitmaps of the terms of one slab (``starts`` from 0): their bytes, one
    after the other, and each term's byte count."""
    terms = starts.size - 1
    term_of = np.repeat(np.arange(terms, dtype=np.int64), np.diff(starts))
    # One pair per distinct (term, doc): within a term docs ascend, so repeats are neighbours.
    keep = np.ones(docs.size, dtype=bool)
    if docs.size > 1:
        np.not_equal(docs[1:], docs[:-1], out=keep[1:])
        keep[starts[1:-1]] = True  # each term's first token, whatever the previous term's last doc
    pair_term = term_of[keep]
    pair_doc = docs[keep]
    pairs = pair_doc.size
    key = (pair_doc >> 16).astype(np.int64)
    low = (pair_doc & 0xFFFF).astype(np.uint16)
    # Containers: runs of pairs with one term and one high half.
    opens = np.ones(pairs, dtype=bool)
    if pairs > 1:
        np.not_equal(key[1:], key[:-1], out=opens[1:])
        opens[1:] |= pair_term[1:] != pair_term[:-1]
    container_first = np.flatnonzero(opens)
    containers = container_first.size
    container_size = np.diff(np.append(container_first, pairs))
    container_term = pair_term[container_first]
    dense = container_size > _ARRAY_MAX
    container_bytes = np.where(dense, _BITSET_BYTES, 2 * container_size)
    per_term = np.bincount(container_term, minlength=terms)
    header = 8 + 8 * per_term
    payload = np.bincount(container_term, weights=container_bytes, minlength=terms).astype(np.int64)
    term_bytes = header + payload
    term_start = np.zeros(terms + 1, dtype=np.int64)
    np.cumsum(term_bytes, out=term_start[1:])
    out = np.zeros(int(term_start[-1]), dtype=np.uint8)
    words = out.view("<u2")
    base = term_start[:-1] // 2  # every bitmap's size is even: all 16-bit fields are aligned
    words[base] = _NO_RUN_COOKIE
    words[base + 2] = per_term & 0xFFFF
    words[base + 3] = per_term >> 16
    if not containers:
        return out, term_bytes
    first_container_of_term = np.cumsum(per_term) - per_term
    ordinal = np.arange(containers, dtype=np.int64) - first_container_of_term[container_term]
    container_base = base[container_term]
    words[container_base + 4 + 2 * ordinal] = key[container_first]
    words[container_base + 5 + 2 * ordinal] = container_size - 1
    bytes_before = np.cumsum(container_bytes) - container_bytes
    within = header[container_term] + bytes_before - bytes_before[first_container_of_term[container_term]]
    offset_at = container_base + 4 + 2 * per_term[container_term] + 2 * ordinal
    words[offset_at] = within & 0xFFFF
    words[offset_at + 1] = within >> 16
    data_start = term_start[container_term] + within  # the container's first byte in ``out``
    pair_container = np.cumsum(opens) - 1
    in_array = ~dense[pair_container]
    if in_array.any():
        chosen = np.flatnonzero(in_array)
        owner = pair_container[chosen]
        rank = chosen - container_first[owner]
        words[data_start[owner] // 2 + rank] = low[chosen]
    if dense.any():
        chosen = np.flatnonzero(~in_array)
        owner = pair_container[chosen]
        values = low[chosen]
        byte_at = data_start[owner] + (values >> 3)
        bits = (np.uint8(1) << (values & 7).astype(np.uint8)).astype(np.uint8)
        # Ascending bytes (values ascend within a container): each byte's distinct bits summed is their OR.
        runs = np.flatnonzero(np.concatenate(([True], byte_at[1:] != byte_at[:-1])))
        out[byte_at[runs]] = np.add.reduceat(bits, runs)
    return out, term_bytes
