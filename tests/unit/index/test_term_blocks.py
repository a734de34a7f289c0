"""This module tests the following properties:

- a chunk's token columns are cut into blocks that follow its terms (``block_starts``): a term of
  fewer than ``SMALL_BLOCK_VALUES`` tokens lies in one block of fewer than twice that many values,
  a bigger term starts a block and the block after it, and no block exceeds ``PACK_BLOCK_VALUES``;
- columns packed in such blocks read back exactly through every read path (``cover``,
  ``cover_all``, ``read``, ``whole``), and a read inflates only the blocks it reaches;
- a saved index keeps its blocks: a first-seen rare word inflates one small block per column, not
  ``PACK_BLOCK_VALUES`` values;
- an index state of version 4 (token columns in blocks of one fixed size, no block starts) still
  loads and answers as the current layout does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch.index import blocks as blocks_module
from roarsearch.index.blocks import PACK_BLOCK_VALUES, SMALL_BLOCK_VALUES, LazyColumn, block_starts, pack_column, unpack_column
from roarsearch.index.index import Index
from roarsearch.index.positions import FewDocs
from roarsearch.index.state import index_from_state, index_to_state

_term_sizes = st.lists(st.one_of(st.integers(1, 40), st.integers(1, 3 * SMALL_BLOCK_VALUES),
                                 st.integers(PACK_BLOCK_VALUES - 2, 3 * PACK_BLOCK_VALUES)),
                       min_size=1, max_size=60)


def _term_starts(sizes: list[int]) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)


@settings(max_examples=150, deadline=None)
@given(_term_sizes)
def test_blocks_follow_terms(sizes: list[int]) -> None:
    term_starts = _term_starts(sizes)
    total = int(term_starts[-1])
    starts = block_starts(term_starts)
    assert starts[0] == 0 and (np.diff(starts) > 0).all() and starts[-1] < total
    ends = np.append(starts[1:], total)
    assert (ends - starts).max() <= PACK_BLOCK_VALUES
    block_of = np.searchsorted(starts, term_starts[:-1], side="right") - 1
    for term, size in enumerate(sizes):
        first, end = int(term_starts[term]), int(term_starts[term + 1])
        block = int(block_of[term])
        if size < SMALL_BLOCK_VALUES:
            assert end <= ends[block], "a small term is cut"
            assert ends[block] - starts[block] < 2 * SMALL_BLOCK_VALUES
        else:
            assert starts[block] == first, "a big term shares its first block"
            assert end == total or end in set(starts.tolist()), "a big term shares its last block"


def test_no_tokens_no_blocks() -> None:
    assert block_starts(np.zeros(1, dtype=np.int64)).size == 0


@settings(max_examples=40, deadline=None)
@given(_term_sizes, st.integers(0, 2**31), st.booleans())
def test_columns_in_term_blocks_read_back(sizes: list[int], seed: int, delta: bool) -> None:
    term_starts = _term_starts(sizes)
    total = int(term_starts[-1])
    rng = np.random.default_rng(seed)
    dtype = np.uint32 if delta else np.uint16
    values = rng.integers(0, np.iinfo(dtype).max, total, endpoint=True).astype(dtype)
    starts = block_starts(term_starts)
    data, ends = pack_column(values, delta, starts)
    assert ends.size == starts.size
    assert unpack_column(data, ends, total, dtype, delta, starts).tolist() == values.tolist()
    column = LazyColumn(data, ends, total, dtype, delta, starts)
    # A read of one term inflates exactly the blocks its tokens lie in (never the whole column).
    term = int(rng.integers(0, len(sizes)))
    lo, hi = int(term_starts[term]), int(term_starts[term + 1])
    reached = set(range(int(np.searchsorted(starts, lo, side="right")) - 1,
                        int(np.searchsorted(starts, hi - 1, side="right"))))
    readable = column.cover(lo, hi)
    if total > 16 * PACK_BLOCK_VALUES:
        assert set(np.flatnonzero(column.ready).tolist()) == reached
    else:  # a small column inflates whole on its first read
        assert column.missing == 0
    assert readable[lo:hi].tolist() == values[lo:hi].tolist()
    picks = rng.integers(0, len(sizes), 3)
    lows, highs = term_starts[picks], term_starts[picks + 1]
    fresh = LazyColumn(data, ends, total, dtype, delta, starts)
    readable = fresh.cover_all(lows, highs)
    for low, high in zip(lows.tolist(), highs.tolist()):
        assert readable[low:high].tolist() == values[low:high].tolist()
    other = LazyColumn(data, ends, total, dtype, delta, starts)
    a, b = sorted(rng.integers(0, total + 1, 2).tolist())
    assert other.read(a, b).tolist() == values[a:b].tolist() and other.missing == starts.size
    assert other.whole().tolist() == values.tolist()


def test_block_starts_that_do_not_cut_the_column_are_refused() -> None:
    values = np.arange(100, dtype=np.uint32)
    data, ends = pack_column(values, True, np.asarray([0, 40], dtype=np.int64))
    for wrong in ([0], [0, 100], [10, 40], [0, 40, 60], [40, 0]):
        try:
            LazyColumn(data, ends, 100, np.uint32, True, np.asarray(wrong, dtype=np.int64))
        except ValueError as error:
            assert "block starts" in str(error)
        else:
            raise AssertionError(f"{wrong} accepted")


def _rare_word_index() -> Index:
    """Titles over a vocabulary of ~60,000 words, a few common: more tokens than a few big blocks."""
    index = Index()
    rng = np.random.default_rng(5)
    common = ["the", "of", "and", "star", "river"]
    records = []
    for record_id in range(12_000):
        words = [f"w{int(word)}" for word in rng.integers(0, 60_000, 4)] + list(rng.choice(common, 3))
        if record_id in (5_000, 9_000):
            words.append("zzrare")
        records.append({"id": record_id, "title": " ".join(words)})
    for start in range(0, len(records), 4_000):
        index.add_records(records[start:start + 4_000])
    return index


def test_a_rare_word_inflates_a_small_block_of_a_saved_index(monkeypatch: pytest.MonkeyPatch) -> None:
    index = _rare_word_index()
    monkeypatch.setattr(blocks_module, "WHOLE_COLUMN_VALUES", 1)  # block by block, however few
    loaded = index_from_state(index_to_state(index))
    postings = loaded.postings["title"]
    assert sum(chunk.size for chunk in postings._chunks) > 4 * PACK_BLOCK_VALUES
    rare = loaded.lexicon.id_of("zzrare")
    assert rare is not None
    docs = sorted(postings.bitmap([rare]))
    assert docs == sorted(index.postings["title"].bitmap([rare]))

    def inflated(column: str) -> int:
        return sum(int(np.diff(np.append(getattr(chunk, column).starts, chunk.size))[getattr(chunk, column).ready].sum())
                   for chunk in postings._chunks if isinstance(getattr(chunk, column), LazyColumn))

    assert inflated("_docs") == inflated("_positions") == 0  # its docs come from the saved doc sets
    # Its positions (what ranking reads) inflate a small block per chunk holding it; its docs
    # (one token per doc) still come from its doc set.
    expected = index.postings["title"].positions_in([rare], FewDocs(docs))
    assert postings.positions_in([rare], FewDocs(docs)) == expected and expected
    assert 0 < inflated("_positions") < 2 * SMALL_BLOCK_VALUES * len(postings._chunks)
    assert inflated("_docs") == 0


def _as_version_4(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` with its token columns in blocks of ``PACK_BLOCK_VALUES`` and no block starts, as
    index state version 4 saved them."""
    for saved in state["postings"].values():
        for chunk in saved["chunks"]:
            position_type = np.uint16 if chunk["position_bytes"] == 2 else np.uint32
            tokens = chunk["tokens"]
            starts = np.frombuffer(chunk.pop("block_starts"), dtype=np.uint64).astype(np.int64)
            del chunk["doc_sets"], chunk["doc_set_offsets"]  # version 4 saved no doc sets
            for column, ends_key, dtype, delta in (("packed_docs", "doc_ends", np.uint32, True),
                                                   ("packed_positions", "position_ends", position_type, False)):
                values = unpack_column(chunk[column], np.frombuffer(chunk[ends_key], dtype=np.uint64), tokens,
                                       dtype, delta, starts)
                data, ends = pack_column(values, delta)
                chunk[column], chunk[ends_key] = data, ends.tobytes()
    return {**state, "version": 4}


def test_version_4_state_still_loads() -> None:
    index = _rare_word_index()
    old = _as_version_4(index_to_state(index))
    loaded = index_from_state(old)
    postings, expected = loaded.postings["title"], index.postings["title"]
    for word in ("zzrare", "star", "the", "river"):
        term = loaded.lexicon.id_of(word)
        assert term is not None
        assert sorted(postings.bitmap([term])) == sorted(expected.bitmap([term]))
    assert [chunk.size for chunk in postings._chunks] == [chunk.size for chunk in expected._chunks]
    assert all(np.array_equal(a, b) for a, b in zip(postings.csr_arrays(), expected.csr_arrays()))
