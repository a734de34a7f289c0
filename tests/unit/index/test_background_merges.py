"""Big postings merges run in the background merge thread: while they run, readers see the chunks
being merged and adds keep appending; once they land, every term reads the same tokens as a model
kept without any chunking, and the chunks follow the tier rule again. A durable engine's close
waits for them and saves what they merged."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roarsearch.index.merges as merges_module
from roarsearch import Engine
from roarsearch.index.merges import MERGE_FACTOR, MERGE_RATIO
from roarsearch.index.postings import FieldPostings


def _batches(seed: int, count: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    generator = np.random.default_rng(seed)
    batches, first = [], 0
    for _ in range(count):
        size = int(generator.integers(1, 60))
        docs = np.repeat(np.arange(first, first + size, dtype=np.uint32), 4)
        terms = generator.integers(0, 12, docs.size).astype(np.uint32)
        positions = np.tile(np.arange(4, dtype=np.uint32), size)
        batches.append((docs, terms, positions))
        first += size + int(generator.integers(0, 3))
    return batches


def _tokens(postings: FieldPostings, term: int) -> list[tuple[int, int]]:
    mask = np.ones(1 << 16, dtype=bool)
    docs, positions = postings.occurrences(np.asarray([term], dtype=np.uint32), mask)
    return sorted(zip(docs.tolist(), positions.tolist()))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), count=st.integers(2, 40), threshold=st.sampled_from([8, 64, 512]))
def test_background_merges_keep_every_token(seed: int, count: int, threshold: int) -> None:
    original = merges_module.BACKGROUND_MERGE_TOKENS
    merges_module.BACKGROUND_MERGE_TOKENS = threshold  # nearly every merge goes to the thread
    try:
        postings = FieldPostings()
        expected: dict[int, list[tuple[int, int]]] = {}
        for docs, terms, positions in _batches(seed, count):
            postings.add(docs, terms, positions)
            for term, doc, position in zip(terms.tolist(), docs.tolist(), positions.tolist()):
                expected.setdefault(term, []).append((doc, position))
            term = int(terms[0])  # read while merges may be running: never a token lost or doubled
            assert _tokens(postings, term) == sorted(expected[term])
        postings.wait_for_merges()
    finally:
        merges_module.BACKGROUND_MERGE_TOKENS = original
    for term in range(12):
        assert _tokens(postings, term) == sorted(expected.get(term, []))
        assert sorted(postings.bitmap([term])) == sorted({doc for doc, _ in expected.get(term, [])})
    assert settled([chunk.size for chunk in postings._chunks])


def settled(sizes: list[int]) -> bool:
    """Whether the tier rule holds: no MERGE_FACTOR chunks in a row of which the oldest holds at
    most MERGE_RATIO times the newest's tokens (they would have been merged into one)."""
    return all(sizes[place] > MERGE_RATIO * sizes[place + MERGE_FACTOR - 1]
               for place in range(len(sizes) - MERGE_FACTOR + 1))


def test_a_merge_whose_chunks_were_replaced_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader's full merge replaces the chunks a background merge was reading: the background
    result is not swapped in (it would duplicate tokens)."""
    monkeypatch.setattr(merges_module, "BACKGROUND_MERGE_TOKENS", 8)
    postings = FieldPostings()
    expected: list[tuple[int, int]] = []
    # The merge gate held, the background merge picks its chunks and waits at the gate (a
    # module function replaced by the test would not be seen by the compiled module's calls).
    with merges_module.merges_held():
        for docs, terms, positions in _batches(7, 6):
            postings.add(docs, np.zeros_like(terms), positions)
            expected += list(zip(docs.tolist(), positions.tolist()))
        deadline = time.monotonic() + 10
        while not postings._busy and time.monotonic() < deadline:
            time.sleep(0.001)
        assert postings._busy, "no background merge picked its chunks"
        postings.csr_arrays()  # a full merge under the lock, while the background one waits
    postings.wait_for_merges()
    assert _tokens(postings, 0) == sorted(expected)


def test_close_waits_for_merges_and_saves_them(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(merges_module, "BACKGROUND_MERGE_TOKENS", 64)
    with Engine(str(tmp_path)) as engine:
        for first in range(0, 400, 20):
            engine.add_records("docs", [{"id": i, "text": f"alpha beta w{i % 7}"} for i in range(first, first + 20)])
    with Engine(str(tmp_path)) as engine:
        chunks = engine._collections["docs"].index.postings["text"]._chunks
        assert settled([chunk.size for chunk in chunks])
        found = engine.search({"collection": "docs", "query": "w3", "count": 100})
        assert sorted(hit["id"] for hit in found["results"]) == [i for i in range(400) if i % 7 == 3]
