"""This module tests the following properties:

- ``count_text_facet`` equals a brute-force count over the raw records of the candidates, for
  strings, booleans, numbers (integral floats as ints), arrays (a repeated element counts once per
  record), missing fields, values replaced or deleted (retired docs never count) and any limit;
- the order is count descending, then numbers < booleans < strings, strings by folded text then raw;
- the three counting algorithms (one bitmap intersection per value for few values; otherwise
  gathering pairs for few candidates, mask + bincount for many) give the
  same answer: every example runs with each forced; the cached per-value bitmaps follow writes;
- limit 0, no candidates and an unknown field give [].
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.analysis.normalize import fold
from roarsearch.facets import text
from roarsearch.facets.text import count_text_facet
from roarsearch.index.index import Index
from roarsearch.schema import iter_leaves

WORDS = ["red", "Red", "réd", "blue", "Blue ", "green", "", "x" * 300]
SCALAR = st.one_of(st.sampled_from(WORDS), st.booleans(), st.integers(-3, 3), st.sampled_from([2.0, 2.5, -0.5, 1e20]))
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=4), st.none())
RECORDS = st.lists(st.fixed_dictionaries({"id": st.integers(0, 12)}, optional={"tag": VALUE, "other": SCALAR}),
                   min_size=1, max_size=25)


#: (PER_VALUE_LIMIT, PER_VALUE_LIMIT_MANY_CANDIDATES, GATHER_THRESHOLD, GATHER_RATIO):
#: intersection per value, then mask + bincount, then gather.
ALGORITHMS = [(1 << 30, 1 << 30, 0, 1), (0, 0, 0, 1), (0, 0, 1 << 30, 0)]
KNOBS = ("PER_VALUE_LIMIT", "PER_VALUE_LIMIT_MANY_CANDIDATES", "GATHER_THRESHOLD", "GATHER_RATIO")


@contextmanager
def algorithm(*settings: int) -> Iterator[None]:
    saved = [getattr(text, knob) for knob in KNOBS]
    for knob, value in zip(KNOBS, settings):
        setattr(text, knob, value)
    try:
        yield
    finally:
        for knob, value in zip(KNOBS, saved):
            setattr(text, knob, value)


def build(batches: list[list[dict[str, Any]]], deleted: list[int]) -> Index:
    index = Index()
    for batch in batches:
        index.add_records(batch)
    index.delete_ids(deleted)
    return index


def model(index: Index, candidates: BitMap, field: str, limit: int) -> list[dict[str, Any]]:
    """Brute force over the stored records of the candidates."""
    counts: dict[tuple[Any, ...], list[Any]] = {}
    for doc in candidates:
        distinct: dict[tuple[Any, ...], Any] = {}
        for path, _, value in iter_leaves(index.docs.record(doc)):
            if path != field:
                continue
            if isinstance(value, bool):
                key: tuple[Any, ...] = (1, str(value).lower(), str(value))
            elif isinstance(value, (int, float)):
                key = (0, float(value), "")
                value = int(value) if float(value).is_integer() and abs(value) < 2**53 else float(value)
            elif len(value) > 256:
                continue  # long strings are text, not facet values
            else:
                key = (2, fold(value), value)
            distinct[key] = value
        for key, value in distinct.items():
            counts.setdefault(key, [value, 0])[1] += 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1][1], item[0]))
    return [{"value": value, "count": count} for _, (value, count) in ordered[:limit]]


@given(batches=st.lists(RECORDS, min_size=1, max_size=3), deleted=st.lists(st.integers(0, 12), max_size=3),
       pick=st.data(), limit=st.integers(0, 12))
def test_counts_match_model(batches, deleted, pick, limit) -> None:
    index = build(batches, deleted)
    alive = sorted(index.alive)
    candidates = BitMap(pick.draw(st.lists(st.sampled_from(alive), unique=True)) if alive else [])
    expected = model(index, candidates, "tag", limit)
    for forced in ALGORITHMS:
        with algorithm(*forced):
            assert count_text_facet(index.field_columns("tag"), candidates, limit) == expected, forced


def test_order_mixed_types_and_folding() -> None:
    index = Index()
    index.add_records([
        {"id": 1, "tag": ["b", "B", "é", 3, True]},
        {"id": 2, "tag": ["E", "a", 3.0, False, "b"]},
        {"id": 3, "tag": [10, "a", "a", True]},
    ])
    facet = count_text_facet(index.field_columns("tag"), index.alive, 20)
    assert facet == [
        {"value": 3, "count": 2}, {"value": True, "count": 2}, {"value": "a", "count": 2}, {"value": "b", "count": 2},
        {"value": 10, "count": 1}, {"value": False, "count": 1}, {"value": "B", "count": 1},
        {"value": "E", "count": 1}, {"value": "é", "count": 1},
    ]


def test_empty_answers() -> None:
    index = Index()
    index.add_records([{"id": 1, "tag": "a"}])
    columns = index.field_columns("tag")
    assert count_text_facet(columns, index.alive, 0) == []
    assert count_text_facet(columns, BitMap(), 5) == []
    assert count_text_facet(None, index.alive, 5) == []
    assert count_text_facet(index.field_columns("missing"), index.alive, 5) == []


def test_large_candidate_sets_use_both_algorithms() -> None:
    # Above and below the threshold on the same data: same counts, and retired docs never count.
    records = [{"id": i, "tag": [f"v{i % 7}", f"w{i % 3}"], "n": i % 5} for i in range(30_000)]
    index = Index()
    index.add_records(records)
    index.delete_ids(list(range(0, len(records), 2)))
    columns = index.field_columns("tag")
    everything = count_text_facet(columns, index.alive, 100)
    assert {entry["value"]: entry["count"] for entry in everything} == {
        **{f"v{k}": sum(1 for i in range(1, len(records), 2) if i % 7 == k) for k in range(7)},
        **{f"w{k}": sum(1 for i in range(1, len(records), 2) if i % 3 == k) for k in range(3)},
    }
    small = BitMap(list(index.alive)[:100])
    for forced in ALGORITHMS:
        with algorithm(*forced):
            assert count_text_facet(columns, small, 100) == model(index, small, "tag", 100)
    index.add_records([{"id": 1, "tag": "v0"}, {"id": 10**6, "tag": "new"}])  # cached bitmaps follow writes
    columns = index.field_columns("tag")
    assert count_text_facet(columns, index.alive, 100) == model(index, index.alive, "tag", 100)
    numbers = count_text_facet(index.field_columns("n"), index.alive, 100)
    assert numbers == model(index, index.alive, "n", 100)
