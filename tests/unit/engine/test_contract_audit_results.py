"""This module tests the following properties (contract §3–§4, search response and fine points):

- ``totalHits`` counts every match, not capped by ``count``, ``skip`` or any internal limit;
- word dropping looks for records that hold the words AND pass ``filter`` and every facet
  filter: a record holding every word but filtered out does not stop the dropping; a facet
  counts over the words the request kept (dropping is decided once, with every filter);
- ``numericFacetFilters``: any range within a field, all fields together;
- a result's ``_rank`` depends only on the record and the request, never on which other records
  match or on the page asked (a record alone in its typo bucket still has its proximity measured),
  on the few-docs path and on the bucket-sort path alike;
- with ``groupBy``, groups come in the order of their best-ranked record (not value or id order),
  records inside a group keep the overall order, and the null group is placed like any other;
- a record whose ``groupBy`` field is an array is grouped by its first element, also when the
  array mixes numbers with strings or booleans.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.ranking import bucket_sort


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


def test_total_hits_is_not_capped() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": i, "t": "word" if i % 2 else "other", "n": i} for i in range(2500)])
    assert engine.search({"collection": "c", "count": 3})["totalHits"] == 2500
    assert engine.search({"collection": "c", "count": 0, "query": "word"})["totalHits"] == 1250
    response = engine.search({"collection": "c", "query": "word", "filter": "n >= 100", "skip": 1000, "count": 1000})
    assert response["totalHits"] == 1200
    assert len(response["results"]) == 200


@pytest.fixture(scope="module")
def shop() -> Engine:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "t": "red lamp", "cat": "a", "p": 5, "w": 1},
        {"id": 2, "t": "red", "cat": "b", "p": 50, "w": 2},
        {"id": 3, "t": "red chair", "cat": "b", "p": 7, "w": 9},
    ])
    return engine


@pytest.mark.parametrize("selection", [
    {"filter": "cat = b"},
    {"textFacetFilters": {"cat": ["b"]}},
    {"numericFacetFilters": {"p": ["[6,)"]}},
])
def test_word_dropping_looks_only_at_records_passing_the_filters(shop: Engine, selection: dict[str, Any]) -> None:
    assert ids(shop.search({"collection": "c", "query": "red lamp"})) == [1]  # nothing dropped
    # Record 1 holds both words but is filtered out: "lamp" is dropped, the others match "red".
    response = shop.search({"collection": "c", "query": "red lamp", **selection})
    assert sorted(ids(response)) == [2, 3]
    assert response["totalHits"] == 2


def test_a_facet_counts_over_the_words_the_request_kept(shop: Engine) -> None:
    # "lamp" is dropped (record 1 is filtered out); the cat facet leaves its own filter out and
    # counts records holding "red" alone, not only record 1 (which alone holds both words).
    response = shop.search({"collection": "c", "query": "red lamp", "textFacetFilters": {"cat": ["b"]},
                            "textFacets": ["cat"], "numericFacets": {"p": ["[0,100]"]}})
    assert sorted(ids(response)) == [2, 3]
    assert {value["value"]: value["count"] for value in response["textFacets"][0]["values"]} == {"a": 1, "b": 2}
    assert response["numericFacets"][0]["stats"]["count"] == 2


def test_numeric_facet_filters_any_range_within_a_field_all_fields_together(shop: Engine) -> None:
    def select(filters: dict[str, list[str]]) -> list[Any]:
        return ids(shop.search({"collection": "c", "numericFacetFilters": filters}))

    assert select({"p": ["[0,6]", "[40,60]"]}) == [1, 2]
    assert select({"p": ["[0,10]"], "w": ["[5,)"]}) == [3]
    assert select({"p": ["[0,6]", "[40,60]"], "w": ["[2,2]"]}) == [2]
    assert select({"p": ["[0,10]"], "w": ["[100,)"]}) == []


@pytest.mark.parametrize("path", ["few docs", "all costs", "bucket sort"])
def test_rank_depends_only_on_the_record_and_the_request(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "t": "quick brown fox", "k": 1},
        {"id": 2, "t": "quikc x y z brown", "k": 1},  # one typo, words far apart
        {"id": 3, "t": "quick x brown", "k": 1},
        {"id": 4, "t": "brown quick", "k": 1},
        {"id": 5, "t": "quikc brown", "k": 1},        # one typo, words adjacent
    ])
    if path == "all costs":  # every candidate scored with arrays, not the few-docs lists
        monkeypatch.setattr(bucket_sort, "FEW_DOCS", -1)
    elif path == "bucket sort":  # a custom ranking (a tie here) walks rule buckets, lone docs placed early
        engine.update_settings("c", {"customRanking": ["k"]})
    body = {"collection": "c", "query": "quick brown "}
    everything = {r["id"]: r["_rank"] for r in engine.search(body)["results"]}
    assert set(everything) == {1, 2, 3, 4, 5}
    for record_id, rank in everything.items():
        alone = engine.search({**body, "filter": f"id = {record_id}"})["results"]
        assert [(r["id"], r["_rank"]) for r in alone] == [(record_id, rank)]
    for skip in range(5):
        (result,) = engine.search({**body, "skip": skip, "count": 1})["results"]
        assert result["_rank"] == everything[result["id"]]
    # Alone in its typo bucket, record 2 still has its proximity measured: below record 5.
    without_5 = engine.search({**body, "filter": "id != 5"})["results"]
    assert {r["id"]: r["_rank"] for r in without_5} == {k: v for k, v in everything.items() if k != 5}
    assert everything[2] < everything[5]


def test_groups_come_in_the_order_of_their_best_record() -> None:
    engine = Engine()
    values = {1: "a", 2: "c", 3: None, 4: "a", 5: "b"}
    engine.add_records("c", [
        {"id": 1, "t": "shade x x lamp", "g": "a"},   # worst: far apart, reversed
        {"id": 2, "t": "lamp shade", "g": "c"},
        {"id": 3, "t": "lamp x shade"},                # no "g": the null group
        {"id": 4, "t": "lamp shade", "g": "a"},
        {"id": 5, "t": "lamp x x shade", "g": "b"},
    ])
    overall = ids(engine.search({"collection": "c", "query": "lamp shade "}))
    assert overall == [2, 4, 3, 5, 1]
    body = {"collection": "c", "query": "lamp shade ", "groupBy": "g", "groupLimit": 10}
    response = engine.search(body)
    groups = [(group["value"], [r["id"] for r in group["results"]]) for group in response["results"]]
    assert groups == [("c", [2]), ("a", [4, 1]), (None, [3]), ("b", [5])]
    assert response["totalHits"] == 5
    assert [group["totalHits"] for group in response["results"]] == [1, 2, 1, 1]
    # Under an explicit sort the best record changes, and so does the group order.
    by_id = engine.search({**body, "sort": ["-id"]})["results"]
    assert [(group["value"], [r["id"] for r in group["results"]]) for group in by_id] == [
        ("b", [5]), ("a", [4, 1]), (None, [3]), ("c", [2])]
    assert all(values[r["id"]] == group["value"] for group in response["results"] for r in group["results"])


def test_an_array_of_one_kind_is_grouped_by_its_first_element() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "g": ["b", "a"]}, {"id": 2, "g": [2, 1]}, {"id": 3, "g": ["a"]},
                             {"id": 4, "g": [1, 2]}, {"id": 5, "g": "b"}])
    groups = engine.search({"collection": "c", "groupBy": "g"})["results"]
    assert [(group["value"], [r["id"] for r in group["results"]]) for group in groups] == [
        ("b", [1, 5]), (2, [2]), ("a", [3]), (1, [4])]


def test_an_array_mixing_kinds_is_grouped_by_its_first_element() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "g": [3, "a"]}, {"id": 2, "g": [5, True]}, {"id": 3, "g": "a"}])
    groups = engine.search({"collection": "c", "groupBy": "g"})["results"]
    assert [(group["value"], [r["id"] for r in group["results"]]) for group in groups] == [
        (3, [1]), (5, [2]), ("a", [3])]
