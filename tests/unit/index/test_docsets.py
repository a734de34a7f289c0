"""Doc sets written by numpy in CRoaring's portable format read back as the bitmaps of the terms' docs."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.index import docsets as docsets_module
from roarsearch.index.docsets import DocSets, build_doc_sets, term_slabs

# Doc ids near container edges (65,536) and in dense runs, so that array and bitset containers,
# several containers per term and terms sharing a doc with their neighbour all occur.
_docs = st.one_of(st.integers(0, 200), st.integers(65_000, 140_000), st.integers(0, (1 << 32) - 1))
_term = st.one_of(st.lists(_docs, min_size=1, max_size=40),
                  st.builds(lambda start, step, count: list(range(start, start + step * count, step)),
                            st.integers(0, 1 << 20), st.integers(1, 3), st.integers(4_000, 9_000)))


def _chunk(terms: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A chunk's term starts and token docs: each term's docs ascending, repeats kept (a doc
    holding a word twice has two tokens)."""
    runs = [np.sort(np.asarray(docs + docs[: len(docs) // 3], dtype=np.uint64)).astype(np.uint32) for docs in terms]
    starts = np.zeros(len(runs) + 1, dtype=np.int64)
    np.cumsum([run.size for run in runs], out=starts[1:])
    return starts, np.concatenate(runs)


@settings(max_examples=150, deadline=None)
@given(terms=st.lists(_term, min_size=1, max_size=12), slab=st.sampled_from([1, 7, 5_000, 1 << 22]))
def test_each_terms_doc_set_reads_back_as_its_docs(terms: list[list[int]], slab: int) -> None:
    starts, docs = _chunk(terms)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(docsets_module, "BUILD_SLAB_TOKENS", slab)
        sets = build_doc_sets(starts, docs)
    assert sets.terms == len(terms)
    for slot, term_docs in enumerate(terms):
        assert sets.bitmap(slot) == BitMap(term_docs)
        # What pyroaring writes of the same set is the same bytes (no run containers to differ by).
        written = bytes(memoryview(sets.data)[sets.offsets[slot]:sets.offsets[slot + 1]])
        plain = BitMap(term_docs, optimize=False)
        assert written == plain.serialize()
    some = list(range(0, len(terms), 2))
    assert sets.union(some) == BitMap.union(*[BitMap(terms[slot]) for slot in some])


def test_a_reloaded_buffer_reads_the_same_and_bad_offsets_are_refused() -> None:
    starts, docs = _chunk([[1, 2, 3], [70_000, 70_001], [5]])
    sets = build_doc_sets(starts, docs)
    again = DocSets(bytes(sets.data), sets.offsets.astype(np.uint64))
    assert [list(again.bitmap(slot)) for slot in range(3)] == [[1, 2, 3], [70_000, 70_001], [5]]
    with pytest.raises(ValueError, match="doc sets end at byte"):
        DocSets(bytes(sets.data)[:-2], sets.offsets)


def test_term_slabs_cover_every_term_once() -> None:
    starts = np.asarray([0, 5, 6, 40, 41, 42, 100], dtype=np.int64)
    for size in (1, 3, 10, 1_000):
        runs = term_slabs(starts, size)
        assert runs[0][0] == 0 and runs[-1][1] == 6
        assert all(last > first for first, last in runs)
        assert all(earlier[1] == later[0] for earlier, later in pairwise(runs))
