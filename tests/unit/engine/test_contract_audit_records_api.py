"""This module tests the following properties (contract §8 "Records and collections"), through the
library:

- ``page_records`` pages 1000 records by default, and the page that holds the last record has
  ``next`` null (no extra empty page), also when that page is exactly full;
- ``get_records`` tells an integer id from the string of its digits, and repeats nothing it was
  not asked twice for;
- ``multi_search`` takes exactly 100 searches (101 is a 400 naming the bound), also in the
  ``{"searches": [...]}`` form; a search that is not even an object is answered in place by its
  400 Error object and never fails the others; each answer is the same as the search alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine


def test_page_records_defaults_to_1000_and_ends_with_null() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": i} for i in range(1001)])
    first = engine.page_records("c")
    assert [r["id"] for r in first["records"]] == list(range(1000)) and first["next"] is not None
    last = engine.page_records("c", after=first["next"])
    assert last == {"records": [{"id": 1000}], "next": None}
    exact = engine.page_records("c", count=1000, after=engine.page_records("c", count=1)["next"])
    assert len(exact["records"]) == 1000 and exact["next"] is None  # exactly full, and the end
    with pytest.raises(BadRequestError):
        engine.page_records("c", count=1001)


def test_get_records_tells_integers_from_strings() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 7, "kind": "int"}, {"id": "8", "kind": "str"}])
    assert engine.get_records("c", ["7", 8]) == []
    assert engine.get_records("c", [7, "8"]) == [{"id": 7, "kind": "int"}, {"id": "8", "kind": "str"}]
    assert engine.get_records("c", ["8", 7, 9]) == [{"id": "8", "kind": "str"}, {"id": 7, "kind": "int"}]


def search_ids(answer: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in answer["results"]]


def test_multi_search_bound_is_100_inclusive() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": i, "n": i} for i in range(5)])
    searches = [{"collection": "c", "filter": f"n = {i % 5}"} for i in range(100)]
    answers = engine.multi_search(searches)
    assert [search_ids(answer) for answer in answers] == [[i % 5] for i in range(100)]
    assert len(engine.multi_search({"searches": searches})) == 100
    with pytest.raises(BadRequestError) as caught:
        engine.multi_search(searches + [{"collection": "c"}])
    assert "100" in caught.value.data and "101" in caught.value.data


def test_a_search_that_is_not_an_object_fails_alone() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "t": "alpha"}, {"id": 2, "t": "beta"}])
    searches: list[Any] = [{"collection": "c", "query": "beta"}, "oops", None, 5, [],
                           {"collection": "c", "query": "alpha"}]
    answers = engine.multi_search(searches)
    assert len(answers) == len(searches)
    assert answers[0] == engine.search(searches[0]) | {"responseTime": answers[0]["responseTime"]}
    for answer in answers[1:5]:
        assert set(answer) == {"status", "data"} and answer["status"] == 400, answer
    assert search_ids(answers[5]) == [1]
