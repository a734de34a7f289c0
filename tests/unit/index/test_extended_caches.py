"""Structures kept across writes are extended by what each write adds, never rebuilt nor stale.

- a field's union of many terms (typo expansions, prefixes), and a term's cached bitmap, cover the
  chunks added since they were made (extended when next read, not by the add), through inline and
  background merges and a reload, and equal brute force;
- a numeric column's value order and its value-sorted runs (a big one and a small one of the
  latest pairs), extended with each write's pairs, equal a stable sort of all the pairs, and the
  ranges and sorted walks read from them equal brute force;
- a value column's value view, per-value bitmaps, equality and range bitmaps equal fresh ones;
- the index cache extends only what was made from the same source, and rebuilds for a new one.
"""

from __future__ import annotations

import gc
import operator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch import Engine
from roarsearch.index import chunks as chunks_module
from roarsearch.index import columns as columns_module
from roarsearch.index import postings as postings_module
from roarsearch.index.cache import IndexCache
from roarsearch.index.columns import NumericColumn, ValueColumn, values_in_range
from roarsearch.index.geo import GeoColumn
from roarsearch.index.index import Index
from roarsearch.index.lexicon import Lexicon
from roarsearch.index.postings import FieldPostings
from roarsearch.index.state import index_from_state, index_to_state
from roarsearch.query import plan
from roarsearch.ranking import sort as sort_module

BATCHES = st.lists(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 40)), min_size=1, max_size=30),
                   min_size=1, max_size=8)


def _add(postings: FieldPostings, model: dict[int, set[int]], first_doc: int, tokens: list[tuple[int, int]]) -> int:
    """Tokens ``(doc offset, term)`` of new docs from ``first_doc`` on; returns the next doc."""
    docs = np.array([first_doc + offset for offset, _ in sorted(tokens)], dtype=np.uint32)
    terms = np.array([term for _, term in sorted(tokens)], dtype=np.uint32)
    postings.add(docs, terms, np.zeros(docs.size, dtype=np.uint32))
    for doc, term in zip(docs.tolist(), terms.tolist()):
        model.setdefault(term, set()).add(doc)
    return first_doc + 4


@settings(max_examples=80, deadline=None)
@given(batches=BATCHES, queries=st.lists(st.sets(st.integers(0, 45), min_size=1, max_size=30), min_size=1, max_size=5),
       merge_every=st.sampled_from([0, 2, 3]))
def test_term_bitmaps_and_unions_stay_exact_across_adds_and_merges(batches: list[list[tuple[int, int]]],
                                                                   queries: list[set[int]], merge_every: int) -> None:
    # One term: its cached bitmap; a few: their cached bitmaps joined; many: a kept union.
    postings = FieldPostings()
    model: dict[int, set[int]] = {}
    next_doc = 0
    for number, tokens in enumerate(batches):
        next_doc = _add(postings, model, next_doc, tokens)
        if merge_every and number % merge_every == 0:
            postings.settle()  # every chunk into one, in the background
            postings.wait_for_merges()
        for query in queries:  # asked after every add: made once, then extended
            expected = set().union(*(model.get(term, set()) for term in query))
            assert set(postings.bitmap(sorted(query))) == expected
    assert {term: set(bitmap) for term, bitmap in postings.all_terms().items()} == \
        {term: docs for term, docs in model.items() if docs}


def test_an_add_leaves_cached_term_bitmaps_to_their_next_read() -> None:
    postings = FieldPostings()
    model: dict[int, set[int]] = {}
    next_doc = _add(postings, model, 0, [(offset, term) for offset in range(4) for term in range(5)])
    cached = postings.bitmap([2])
    next_doc = _add(postings, model, next_doc, [(0, 2), (1, 7)])
    assert postings.terms[2][1] is cached  # the add copied nothing
    extended = postings.bitmap([2])
    assert set(extended) == model[2] and set(cached) == {0, 1, 2, 3}  # the shared one unchanged
    assert postings.bitmap([2]) is extended  # nothing added since: the kept bitmap itself


def test_a_union_gathers_only_the_chunks_added_since() -> None:
    postings = FieldPostings()
    model: dict[int, set[int]] = {}
    next_doc = 0
    for _ in range(2):  # two chunks: the third (below) merges nothing inline
        next_doc = _add(postings, model, next_doc, [(offset, term) for offset in range(4) for term in range(12)])
    query = list(range(12))
    first = postings.bitmap(query)
    assert postings.bitmap(query) is first  # nothing added: the kept union itself
    old_chunks = list(postings._chunks)
    read: list[int] = []
    original = chunks_module.Chunk.ranges

    def counting(chunk: chunks_module.Chunk, term_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        read.append(id(chunk))
        return original(chunk, term_ids)

    interpreted = postings_module.__file__.endswith(".py")  # a compiled class's methods stay as built
    if interpreted:
        chunks_module.Chunk.ranges = counting  # type: ignore[method-assign]
    try:
        next_doc = _add(postings, model, next_doc, [(0, 3), (2, 30)])
        extended = postings.bitmap(query)
    finally:
        chunks_module.Chunk.ranges = original  # type: ignore[method-assign]
    assert len(postings._chunks) == 3 and all(map(operator.is_, postings._chunks[:2], old_chunks))
    assert set(extended) == set(first) | {next_doc - 4}
    if interpreted:
        assert read == [id(postings._chunks[2])]  # only the new chunk was read


def test_a_reloaded_field_extends_its_unions() -> None:
    index = Index()
    index.add_records([{"id": i, "t": " ".join(f"w{(i + k) % 20}" for k in range(3))} for i in range(40)])
    loaded = index_from_state(index_to_state(index))
    postings = loaded.postings["t"]
    ids = [term for term in (loaded.lexicon.id_of(f"w{k}") for k in range(10)) if term is not None]
    assert len(ids) == 10
    before = postings.bitmap(ids)
    assert all(chunk.end_doc == loaded.docs.next_doc for chunk in postings._chunks)  # loaded: an upper bound
    loaded.add_records([{"id": 100, "t": "w1 w15"}, {"id": 101, "t": "w19"}])
    after = postings.bitmap(ids)
    new_doc = loaded.docs.doc_of(100)
    assert new_doc is not None
    assert set(after) == set(before) | {new_doc}
    assert set(postings.bitmap(ids)) == set(after)


@settings(max_examples=120, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.5, 1.0, 2.0, 3.0, -1.0, 7.0])),
                                 min_size=1, max_size=12), min_size=1, max_size=8),
       look_every=st.integers(1, 3), share=st.sampled_from([0.0, 1 / 32, 0.5, 4.0]),
       bounds=st.tuples(st.sampled_from([None, -1.0, 0.5, 2.0, 2.5]), st.booleans(),
                        st.sampled_from([None, 0.5, 2.0, 3.0, 7.0]), st.booleans()))
def test_numeric_value_runs_extended_with_each_write_equal_a_stable_sort(
        batches: list[list[tuple[int, float]]], look_every: int, share: float,
        bounds: tuple[float | None, bool, float | None, bool]) -> None:
    # ``share`` 0 merges every write into the big run, 4.0 keeps every write in the small one.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(columns_module, "RECENT_RUN_SHARE", share)
        _check_numeric_value_runs(batches, look_every, bounds)


def _check_numeric_value_runs(batches: list[list[tuple[int, float]]], look_every: int,
                              bounds: tuple[float | None, bool, float | None, bool]) -> None:
    column = NumericColumn()
    next_doc = 0
    for number, pairs in enumerate(batches):
        pairs = sorted(pairs, key=lambda pair: pair[0])
        column.add(np.array([next_doc + offset for offset, _ in pairs], dtype=np.uint32),
                   np.array([value for _, value in pairs]))
        next_doc += 4
        if number % look_every == 0:  # runs made at some writes, extended at later ones
            if number % 2:
                column.sort_order()
            else:
                column.value_runs()
    docs, values = column.pairs()
    order = np.argsort(values, kind="stable")
    assert np.array_equal(column.sort_order(), order)
    runs = column.value_runs()
    assert runs.count == values.size
    pairs_in_runs = []
    for run_values, run_docs in runs.runs():
        assert bool((run_values[1:] >= run_values[:-1]).all())
        pairs_in_runs += zip(run_values.tolist(), run_docs.tolist())
    assert sorted(pairs_in_runs) == sorted(zip(values.tolist(), docs.tolist()))
    for descending in (False, True):  # the sorted walk reads both runs as one value order
        walked = [(value, doc) for chunk_values, chunk_docs in sort_module._value_order_chunks(runs.runs(), descending, 2)
                  for value, doc in zip(chunk_values.tolist(), chunk_docs.tolist())]
        walked_values = [value for value, _doc in walked]
        assert walked_values == sorted(walked_values, reverse=descending)
        assert sorted(walked) == sorted(pairs_in_runs)
    low, low_inclusive, high, high_inclusive = bounds
    inside = values_in_range(values, low, low_inclusive, high, high_inclusive)
    assert set(column.range(low, low_inclusive, high, high_inclusive)) == set(docs[inside].tolist())


@settings(max_examples=80, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", "A", "c", "d", "é"])),
                                 min_size=1, max_size=12), min_size=1, max_size=6),
       look_every=st.integers(1, 3))
def test_value_views_merged_with_each_write_equal_fresh_ones(batches: list[list[tuple[int, str]]], look_every: int) -> None:
    column = ValueColumn()
    fresh = ValueColumn()
    next_doc = 0
    for number, pairs in enumerate(batches):
        pairs = sorted(pairs, key=lambda pair: pair[0])
        docs = np.array([next_doc + offset for offset, _ in pairs], dtype=np.uint32)
        keys = [value for _, value in pairs]
        column.add(docs, column.intern_many(keys))
        fresh.add(docs, fresh.intern_many(keys))
        next_doc += 4
        if number % look_every == 0:
            column.value_docs(0)  # the views made now, extended by later writes
            column.sort_ranks()
    made = column._value_view()
    expected = ValueColumn._value_view(fresh)
    for got, want in zip(made, expected):
        assert np.array_equal(got, want)
    size = fresh.first.data.size
    for got, want in zip(column.sort_ranks(), fresh.sort_ranks()):
        assert np.array_equal(got[:size], want) and (got[size:] == -1).all()


def test_index_cache_extends_only_from_the_same_source() -> None:
    cache = IndexCache()

    class Source:
        pass

    source = Source()
    calls: list[object] = []
    build = lambda: "built"  # noqa: E731
    extend = lambda value, size: calls.append(size) or f"{value}+{size}"  # noqa: E731
    assert cache.get_or_extend("n", "k", source, 1, build, extend) == "built"
    assert cache.get_or_extend("n", "k", source, 1, build, extend) == "built"
    assert cache.get_or_extend("n", "k", source, 3, build, extend) == "built+1" and calls == [1]
    replacement = Source()
    assert cache.get_or_extend("n", "k", replacement, 3, build, extend) == "built"  # another source: built
    del source
    gc.collect()
    assert cache.extended("n", "k", replacement, 4, extend) == "built+3"


@pytest.mark.parametrize("reload", [False, True])
def test_index_equality_range_and_facet_structures_follow_adds(reload: bool) -> None:
    index = Index()
    index.add_records([{"id": i, "cat": ["red", "Blue", "green"][i % 3], "n": i % 10} for i in range(60)])
    if reload:
        index = index_from_state(index_to_state(index))

    def ids(bitmap: object) -> set[int]:
        return {index.docs.record_ids[doc] for doc in bitmap & index.alive}  # type: ignore[operator]

    for step in range(4):
        expected_red = {i for i in range(60 + 10 * step) if (i < 60 and i % 3 == 0) or (i >= 60 and i % 4 == 0)}
        assert ids(index.equal_text("cat", "RED")) == expected_red
        expected_range = {i for i in range(60 + 10 * step) if 3 <= (i % 10 if i < 60 else i % 7) < 6}
        assert ids(index.number_range("n", 3, True, 6, False)) == expected_range
        index.number_range("n", 3, True, 6, False)  # the second time: kept (then extended)
        first = 60 + 10 * step
        index.add_records([{"id": i, "cat": "red" if i % 4 == 0 else "blue", "n": i % 7} for i in range(first, first + 10)])


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from([-45.0, 0.0, 10.5, 48.85, 48.86, 89.9]),
                                           st.sampled_from([-179.0, -0.1, 2.35, 2.36, 120.0])),
                                 min_size=1, max_size=10), min_size=1, max_size=5),
       look_every=st.integers(1, 3), replace=st.booleans())
def test_geo_views_extended_by_each_write_equal_fresh_ones(batches: list[list[tuple[float, float]]], look_every: int,
                                                           replace: bool) -> None:
    column = GeoColumn()
    points: dict[int, tuple[float, float]] = {}
    next_doc = 0
    for number, batch in enumerate(batches):
        docs = np.arange(next_doc, next_doc + len(batch), dtype=np.uint32)
        if replace and number == len(batches) - 1 and next_doc:
            docs[0] = 0  # a point replaced: the views are made again
        column.add(docs, np.array([lat for lat, _ in batch]), np.array([lng for _, lng in batch]))
        points.update(zip(docs.tolist(), batch))
        next_doc += len(batch)
        if number % look_every == 0:
            column.within_circle(48.85, 2.35, 5_000)  # the views made now, extended later
    fresh = GeoColumn()
    ordered = sorted(points)
    fresh.add(np.array(ordered, dtype=np.uint32), np.array([points[doc][0] for doc in ordered]),
              np.array([points[doc][1] for doc in ordered]))
    for got, want in zip(column.pairs(), fresh.pairs()):
        assert np.array_equal(got, want)
    view, expected = column._spatial(), fresh._spatial()
    for name in ("key", "docs", "lat", "lng", "x", "y", "z"):
        assert np.array_equal(getattr(view, name), getattr(expected, name)), name
    assert set(column.within_circle(48.85, 2.35, 5_000)) == {doc for doc, (lat, lng) in points.items()
                                                            if abs(lat - 48.85) < 0.05 and abs(lng - 2.35) < 0.05}


SPELLINGS = st.text(alphabet="abcdeéo", min_size=1, max_size=9)


@settings(max_examples=150, deadline=None)
@given(terms=st.lists(SPELLINGS, min_size=1, max_size=40, unique=True), split=st.integers(0, 40),
       word=SPELLINGS, budget=st.integers(0, 2), is_prefix=st.booleans())
def test_an_expansion_extended_by_new_terms_equals_one_made_anew(terms: list[str], split: int, word: str, budget: int,
                                                                 is_prefix: bool) -> None:
    split = min(split, len(terms))
    whole = Lexicon.from_terms(terms)
    before = plan._expand(Lexicon.from_terms(terms[:split]), word, budget, is_prefix)
    extended = plan._merged(before, plan._expand(whole, word, budget, is_prefix, split))
    anew = plan._expand(whole, word, budget, is_prefix)
    assert set(extended) == set(anew)
    if budget == plan.allowed_typos(word, budget):  # the default 4/8 rules: the same order too
        assert extended == anew


def test_typo_matches_follow_the_vocabulary_across_writes() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "t": "galaxy"}, {"id": 2, "t": "river"}])

    def hits(query: str) -> list[int]:
        return sorted(hit["id"] for hit in engine.search({"collection": "c", "query": query, "fields": ["id"]})["results"])

    assert hits("galaxi ") == [1]  # the expansion made (and kept) now
    engine.add_records("c", [{"id": 3, "t": "galaxo"}, {"id": 4, "t": "rover"}])  # new terms one typo away
    assert hits("galaxi ") == [1, 3]
    engine.add_records("c", [{"id": 5, "t": "galaxi"}])  # the word itself, new
    assert hits("galaxi ") == [1, 3, 5]
    engine.delete_records("c", [3])
    assert hits("galaxi ") == [1, 5]
