"""This module tests the following properties:

- ``group_results`` forms the groups a brute-force model forms over the candidates, in any final
  order (here a random score): groups ordered by their best-ranked record, records inside a group
  in the overall order, ``skip`` counting groups, ``group_count`` groups of at most ``group_limit``
  records, exact totals; records lacking the field in the null group, an array in its first
  element's group, whatever the kinds it mixes; strings and numbers of one value never merge
  (``"1"`` and ``1`` are two groups);
- when one record opens several groups, strings/booleans come first in the order the column first
  saw them (value id), then numbers ascending;
- finding the first groups does not rank every candidate when the best records cover them.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.facets.groups import group_results
from roarsearch.index.columns import FieldColumns
from roarsearch.index.index import Index
from roarsearch.schema import first_leaf, iter_leaves

SCALAR = st.one_of(st.sampled_from(["a", "b", "B", "c", "1"]), st.booleans(), st.sampled_from([1, 2, 2.5]))
RECORDS = st.lists(st.fixed_dictionaries({"id": st.integers(0, 30)}, optional={
    "g": st.one_of(SCALAR, st.lists(SCALAR, max_size=3), st.none())}), min_size=1, max_size=30)


def ranker(score: dict[int, float], calls: list[tuple[int, int, int]]):
    """rank_docs over a fixed score (ties by doc), recording (size of docs, skip, count) per call."""
    def rank_docs(docs: BitMap, skip: int, count: int) -> list[int]:
        calls.append((len(docs), skip, count))
        return sorted(docs, key=lambda doc: (score[doc], doc))[skip:skip + count]
    return rank_docs


def group_key(record: dict[str, Any], field: str) -> tuple[str, Any]:
    """Contract §4: an array's first element (whatever its kind, in an array mixing strings,
    booleans and numbers), the value itself otherwise, and the null group when the record lacks
    the field."""
    values = [value for path, _, value in iter_leaves(record) if path == field]
    if not values:
        return ("null", None)
    if isinstance(values[0], (str, bool)):
        return ("v", values[0])
    return ("n", float(values[0]))


def first_values(index: Index):
    """The ``first_value`` argument of ``group_results`` for field "g" of ``index``."""
    return lambda doc: first_leaf(index.docs.record(doc), "g")


def group_value(key: tuple[str, Any]) -> Any:
    if key[0] == "n":
        return int(key[1]) if key[1].is_integer() else key[1]
    return key[1]


def model(index: Index, columns: FieldColumns | None, candidates: BitMap, score: dict[int, float],
          skip: int, group_count: int, group_limit: int) -> list[tuple[Any, int, list[int]]]:
    groups: dict[tuple[str, Any], list[int]] = {}
    for doc in sorted(candidates, key=lambda doc: (score[doc], doc)):
        key = group_key(index.docs.record(doc), "g")
        groups.setdefault((key[0], type(key[1]).__name__, key[1]), []).append(doc)
    return [(group_value((kind, value)), len(docs), docs[:group_limit])
            for (kind, _, value), docs in list(groups.items())[skip:skip + group_count]]


@given(batches=st.lists(RECORDS, min_size=1, max_size=2), deleted=st.lists(st.integers(0, 30), max_size=4),
       seed=st.integers(0, 1000), pick=st.data(), skip=st.integers(0, 4), group_count=st.integers(0, 5),
       group_limit=st.integers(1, 4))
def test_groups_match_model(batches, deleted, seed, pick, skip, group_count, group_limit) -> None:
    index = Index()
    for batch in batches:
        index.add_records(batch)
    index.delete_ids(deleted)
    alive = sorted(index.alive)
    candidates = BitMap(pick.draw(st.lists(st.sampled_from(alive), unique=True)) if alive else [])
    generator = random.Random(seed)
    score = {doc: generator.choice([0.0, 0.5, 1.0, generator.random()]) for doc in alive}
    columns = index.field_columns("g")
    got = group_results(columns, candidates, ranker(score, []), skip, group_count, group_limit, first_values(index))
    assert got == model(index, columns, candidates, score, skip, group_count, group_limit)


def test_groups_found_without_ranking_every_candidate() -> None:
    index = Index()
    index.add_records([{"id": i, "g": f"v{i % 50}"} for i in range(20_000)])
    candidates = index.alive
    score = {doc: float(doc) for doc in candidates}
    calls: list[tuple[int, int, int]] = []
    groups = group_results(index.field_columns("g"), candidates, ranker(score, calls), 0, 10, 2, first_values(index))
    assert [value for value, _, _ in groups] == [f"v{i}" for i in range(10)]
    assert all(total == 400 for _, total, _ in groups)
    assert groups[3][2] == [3, 53]
    walked = sum(count for size, _, count in calls if size == len(candidates))
    assert walked < 1_000  # a short walk over the best records, not the 20,000 candidates


def test_groups_whose_best_records_rank_late_are_still_ordered() -> None:
    # 300 groups, every group's best record deep in the order: the walk gives up and the groups
    # are placed by ranking their best records against each other.
    index = Index()
    index.add_records([{"id": i, "g": i % 300} for i in range(3_000)] + [{"id": 10_000 + i} for i in range(20_000)])
    # Records without the field rank first; then the grouped ones, doc 2999 (group 299) best.
    score = {doc: (-1e9 if doc >= 3_000 else float(-doc)) for doc in index.alive}
    groups = group_results(index.field_columns("g"), index.alive, ranker(score, []), 290, 20, 1, first_values(index))
    # The records lacking the field form the null group, first (they rank best).
    assert groups == [(value, 10, [2_700 + value]) for value in range(10, -1, -1)]


def test_no_groups() -> None:
    index = Index()
    index.add_records([{"id": 1, "g": "a"}, {"id": 2}])
    columns = index.field_columns("g")
    rank_docs = ranker({doc: 0.0 for doc in index.alive}, [])
    first = first_values(index)
    assert group_results(None, index.alive, rank_docs, 0, 5, 3, first) == [(None, 2, [0, 1])]
    assert group_results(columns, BitMap(), rank_docs, 0, 5, 3, first) == []
    assert group_results(columns, index.alive, rank_docs, 2, 5, 3, first) == []
    assert group_results(columns, index.alive, rank_docs, 0, 0, 3, first) == []
    assert group_results(columns, index.alive, rank_docs, 0, 5, 3, first) == [("a", 1, [0]), (None, 1, [1])]


@pytest.mark.parametrize("skip", [0, 1, 3, 6])
@pytest.mark.parametrize("group_limit", [1, 2, 5])
def test_groups_left_open_by_the_walk_are_finished_in_one_ranked_pass(skip: int, group_limit: int) -> None:
    # 4,000 records of one value rank first; five rare values (3 records each, the last one
    # ranked between them) and a short shown group come far after the walk's pages.
    index = Index()
    records = [{"id": i, "g": "common"} for i in range(4_000)]
    records += [{"id": 10_000 + i, "g": f"rare{i % 5}"} for i in range(15)]
    records += [{"id": 20_000, "g": "short"}, {"id": 20_001, "g": "short"}]
    index.add_records(records)
    generator = random.Random(skip * 10 + group_limit)
    score = {doc: (float(doc) if doc < 4_000 else 1e6 + generator.random()) for doc in index.alive}
    score[4_015] = 0.5  # one "short" record among the best: the group is met early, filled late
    columns = index.field_columns("g")
    calls: list[tuple[int, int, int]] = []
    got = group_results(columns, index.alive, ranker(score, calls), skip, 7, group_limit, first_values(index))
    assert got == model(index, columns, BitMap(index.alive), score, skip, 7, group_limit)
    assert any(15 <= size <= 17 for size, _, _ in calls)  # the one pass over the groups left open
    assert not any(size <= 3 for size, _, _ in calls)  # no group ranked apart
