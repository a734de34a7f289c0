"""``FieldPostings.occurrences_in`` (binary search inside term slices) against the masked gather
of ``occurrences``, on both of its paths: few docs of common terms, and many docs; a chunk built
from tokens grouped by term equals one built from term-sorted tokens."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from roarsearch.index import chunks as chunks_module
from roarsearch.index import positions as positions_module
from roarsearch.index.chunks import Chunk
from roarsearch.index.positions import DocMask, FewDocs
from roarsearch.index.postings import FieldPostings


def _postings(seed: int, batches: int) -> FieldPostings:
    generator = np.random.default_rng(seed)
    postings = FieldPostings()
    first = 0
    for _ in range(batches):  # several chunks, as live writes leave them
        docs = np.repeat(np.arange(first, first + 300, dtype=np.uint32), 20)
        terms = generator.integers(0, 6, docs.size).astype(np.uint32)  # few terms: every one common
        positions = np.tile(np.arange(20, dtype=np.uint32), 300)
        postings.add(docs, terms, positions)
        first += 300
    return postings


def _sorted_pairs(docs: np.ndarray, positions: np.ndarray) -> list[tuple[int, int]]:
    return sorted(zip(docs.tolist(), positions.tolist()))


@pytest.mark.parametrize("batches", [1, 3])
@pytest.mark.parametrize("wanted", [1, 5, 40, 900])
def test_occurrences_in_matches_the_masked_gather(batches: int, wanted: int) -> None:
    postings = _postings(batches * 100 + wanted, batches)
    generator = np.random.default_rng(wanted)
    docs = np.unique(generator.integers(0, 300 * batches + 5, wanted)).astype(np.uint32)
    mask = np.zeros(int(docs[-1]) + 1, dtype=bool)
    mask[docs] = True
    for terms in ([0], [2, 3], [0, 1, 2, 3, 4, 5], [7], [5, 9]):
        term_ids = np.asarray(terms, dtype=np.uint32)
        expected = _sorted_pairs(*postings.occurrences(term_ids, mask))
        assert _sorted_pairs(*postings.occurrences_in(term_ids, docs)) == expected


def test_occurrences_in_of_no_docs_is_empty() -> None:
    found_docs, found_positions = _postings(1, 1).occurrences_in(np.asarray([0], np.uint32), np.empty(0, np.uint32))
    assert found_docs.size == 0 and found_positions.size == 0


@pytest.mark.parametrize("seed", range(12))
def test_occurrences_in_over_many_chunks_with_gaps(seed: int) -> None:
    """Each chunk is searched only for the candidates within the doc range its terms span there:
    batches of any size, with doc ids skipped between and inside them (retired docs, fields some
    records lack), merged or not, give the masked gather's answer."""
    generator = np.random.default_rng(seed)
    postings = FieldPostings()
    first = 0
    for _ in range(int(generator.integers(2, 12))):
        span = int(generator.integers(5, 800))
        chosen = np.sort(generator.choice(span, min(span, int(generator.integers(1, 200))), replace=False))
        docs = np.repeat((first + chosen).astype(np.uint32), 5)
        postings.add(docs, generator.integers(0, 8, docs.size).astype(np.uint32),
                     np.tile(np.arange(5, dtype=np.uint32), chosen.size))
        first += span + int(generator.integers(0, 50))
    docs = np.unique(generator.integers(0, first + 5, int(generator.integers(1, 400)))).astype(np.uint32)
    mask = np.zeros(int(docs[-1]) + 1, dtype=bool)
    mask[docs] = True
    for terms in ([0], [1, 6], [0, 1, 2, 3, 4, 5, 6, 7], [9]):
        term_ids = np.asarray(terms, dtype=np.uint32)
        assert _sorted_pairs(*postings.occurrences_in(term_ids, docs)) == _sorted_pairs(*postings.occurrences(term_ids, mask))


@given(tokens=st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.integers(0, 70_000)), max_size=60),
       ids=st.permutations(list(range(0, 130, 10))))
def test_a_chunk_from_term_groups_equals_one_from_term_sorted_tokens(tokens: list[tuple[int, int, int]],
                                                                     ids: list[int]) -> None:
    """Tokens grouped by term as the analyzer groups them (terms in first-appearance order, any
    ids) make the chunk that sorting the tokens by term id makes."""
    tokens.sort(key=lambda token: token[1])  # text order: docs ascend
    local = list(dict.fromkeys(term for term, _doc, _position in tokens))  # first appearance
    grouped = sorted(tokens, key=lambda token: local.index(token[0]))  # stable: text order in a term
    term_ids = np.asarray([ids[term] for term in local], dtype=np.int64)
    counts = np.asarray([sum(1 for token in tokens if token[0] == term) for term in local], dtype=np.int64)
    from_groups = Chunk.from_groups(term_ids, counts, np.asarray([doc for _t, doc, _p in grouped], dtype=np.uint32),
                                     np.asarray([position for _t, _d, position in grouped], dtype=np.int64))
    by_id = sorted(tokens, key=lambda token: ids[token[0]])
    from_sorted = Chunk.from_sorted(np.asarray([ids[term] for term, _d, _p in by_id], dtype=np.uint32),
                                     np.asarray([doc for _t, doc, _p in by_id], dtype=np.uint32),
                                     np.asarray([position for _t, _d, position in by_id], dtype=np.uint32))
    assert from_groups.terms.tolist() == from_sorted.terms.tolist()
    assert from_groups.starts.tolist() == from_sorted.starts.tolist()
    assert from_groups.docs.tolist() == from_sorted.docs.tolist()
    assert from_groups.positions.tolist() == from_sorted.positions.tolist()
    assert from_groups.positions.dtype == from_sorted.positions.dtype


@pytest.mark.parametrize("list_limit", [0, 1 << 20])
@pytest.mark.parametrize("span_limit", [0, 1 << 20])
@pytest.mark.parametrize("seed", range(6))
def test_positions_in_matches_the_masked_gather(seed: int, span_limit: int, list_limit: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Each doc's positions, read per doc or as one span of the term's tokens, or with the term's
    tokens read whole as lists (every path), are its tokens' positions in order, over several
    chunks and several terms."""
    monkeypatch.setattr(positions_module, "_SPAN_READ_PER_DOC", span_limit)
    monkeypatch.setattr(positions_module, "_LIST_READ_TOKENS", list_limit)
    postings = _postings(seed, 1 + seed % 3)
    generator = np.random.default_rng(seed)
    docs = np.unique(generator.integers(0, 300 * (1 + seed % 3) + 5, 1 + seed * 7)).astype(np.uint32)
    mask = np.zeros(int(docs[-1]) + 1, dtype=bool)
    mask[docs] = True
    for terms in ([0], [2, 3], [7], [1, 4, 9]):
        expected: dict[int, list[int]] = {}
        for doc, position in _sorted_pairs(*postings.occurrences(np.asarray(terms, dtype=np.uint32), mask)):
            expected.setdefault(doc, []).append(position)
        slot_of = {doc: slot for slot, doc in enumerate(docs.tolist())}
        found = postings.positions_in(terms, FewDocs(docs.tolist()))
        assert found == {slot_of[doc]: positions for doc, positions in expected.items()}
        # Asked again (a rare term's tokens now come from the chunk's memo), and for half the docs.
        assert postings.positions_in(terms, FewDocs(docs.tolist())) == found
        half = docs[::2].tolist()
        assert postings.positions_in(terms, FewDocs(half)) == {
            slot: expected[doc] for slot, doc in enumerate(half) if doc in expected}


@pytest.mark.parametrize("whole_up_to", [0, 50, 10_000])
def test_occurrences_in_may_read_a_rare_term_whole(whole_up_to: int) -> None:
    """With ``whole_up_to``, a lone term of at most that many tokens comes whole (other docs included);
    restricted to the docs asked for, the answer is the same."""
    postings = _postings(5, 2)
    docs = np.asarray([3, 17, 250, 301, 599], dtype=np.uint32)
    mask = np.zeros(600, dtype=bool)
    mask[docs] = True
    for terms in ([0], [1, 2], [9]):
        term_ids = np.asarray(terms, dtype=np.uint32)
        found_docs, found_positions = postings.occurrences_in(term_ids, docs, DocMask(docs), whole_up_to)
        mine = [(doc, position) for doc, position in _sorted_pairs(found_docs, found_positions) if doc in set(docs.tolist())]
        assert mine == _sorted_pairs(*postings.occurrences(term_ids, mask))
        term_tokens = postings.occurrences(term_ids, np.ones(600, dtype=bool))[0].size
        if len(terms) == 1 and term_tokens and term_tokens <= whole_up_to:
            assert found_docs.size == term_tokens  # read whole: every doc's tokens
        # A mask of more docs (shared with lookups of other docs): the tokens of those docs may come too.
        more = np.union1d(docs, np.arange(0, 600, 7)).astype(np.uint32)
        found = _sorted_pairs(*postings.occurrences_in(term_ids, docs, DocMask(more), whole_up_to))
        assert [(doc, position) for doc, position in found if doc in set(docs.tolist())] == mine
        assert {doc for doc, _position in found} <= set(more.tolist()) or term_tokens <= whole_up_to


@pytest.mark.parametrize("remembered", [2, 1024])
def test_a_chunk_remembers_term_ranges_correctly_and_boundedly(remembered: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``range_of`` answers from its remembered ranges as from the term array, present and absent
    terms alike, asked again and in any order, and never remembers more than its bound."""
    monkeypatch.setattr(chunks_module, "REMEMBERED_RANGES", remembered)
    generator = np.random.default_rng(3)
    term_ids = generator.integers(0, 40, 500).astype(np.uint32)
    order = np.argsort(term_ids, kind="stable")
    chunk = Chunk.from_sorted(term_ids[order], np.arange(500, dtype=np.uint32)[order],
                               np.zeros(500, dtype=np.uint32))
    expected = {term: (int(np.searchsorted(term_ids[order], term)), int(np.searchsorted(term_ids[order], term, side="right")))
                for term in range(45)}
    expected = {term: span if span[1] > span[0] else (0, 0) for term, span in expected.items()}
    for term in generator.integers(0, 45, 300).tolist():
        assert chunk.range_of(term) == expected[term]
        assert len(chunk._ranges) <= remembered


@pytest.mark.parametrize("list_limit", [0, 1 << 20])
def test_positions_in_reads_the_last_doc_id_a_uint32_holds(list_limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The doc after 2^32 - 1 wraps to 0 as a uint32: that doc's positions are still all read
    (searched for, and with the term's few tokens read whole)."""
    monkeypatch.setattr(positions_module, "_LIST_READ_TOKENS", list_limit)
    last = (1 << 32) - 1
    postings = FieldPostings()
    postings.add(np.asarray([5, 5, last, last, last], dtype=np.uint32), np.asarray([1, 1, 1, 1, 2], dtype=np.uint32),
                 np.asarray([0, 3, 1, 4, 2], dtype=np.uint32))
    assert postings.positions_in([1], FewDocs([5, last])) == {0: [0, 3], 1: [1, 4]}  # by slot
    assert postings.positions_in([1, 2], FewDocs([last])) == {0: [1, 2, 4]}
    assert postings.positions_in([2], FewDocs([5])) == {}
