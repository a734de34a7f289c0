"""This module tests the following properties (contract §4 "Field names in a request", "Fine points"):

- a field that no record holds changes the answer exactly as the contract says: in ``filter``
  ``=``/``>``/``IN``/``EXISTS`` match nothing while ``!=`` and ``NOT`` match every record; in
  ``sort`` every record lacks it (the order is the one without that key); with ``groupBy`` every
  record falls in one group whose ``value`` is ``null``; in ``searchFields`` it adds nothing (only
  absent fields: a non-empty query matches nothing, an empty one still browses); text and numeric
  facets on it have no values;
- a JSON ``null`` is no value: the record lacks the field (``EXISTS``, ``!=``, facets, stats,
  ``groupBy``, ``sort`` and ``warnings`` all treat it so);
- ``field != v`` is exactly ``NOT field = v`` on arrays and missing fields;
- ``id`` is a field like any other: ``filter`` (``id = 5``, ``id IN [1, "a"]``, ranges) and
  ``sort`` (both directions) accept it.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import Engine

RECORDS: list[dict[str, Any]] = [
    {"id": 1, "t": "red lamp", "p": 5, "tags": ["a", "b"]},
    {"id": 2, "t": "blue lamp lamp", "p": 10, "tags": ["b"]},
    {"id": 3, "t": "green lamp shade", "p": 7},
    {"id": "a", "t": "lamp", "tags": []},
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    engine.add_records("c", RECORDS)
    return engine


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


def search(engine: Engine, **body: Any) -> dict[str, Any]:
    return engine.search({"collection": "c", "count": 100, **body})


@pytest.mark.parametrize(("expression", "expected"), [
    ("zz = 1", []), ("zz > 0", []), ("zz IN [1, x]", []), ("zz EXISTS", []), ('zz = "lamp"', []),
    ("zz != 1", [1, 2, 3, "a"]), ("NOT zz = 1", [1, 2, 3, "a"]), ("NOT zz EXISTS", [1, 2, 3, "a"]),
    ("zz != 1 AND p > 6", [2, 3]),
])
def test_an_absent_field_in_a_filter(engine: Engine, expression: str, expected: list[Any]) -> None:
    response = search(engine, filter=expression)
    assert ids(response) == expected
    assert response["totalHits"] == len(expected)
    assert response["warnings"] == ["filter: no record has the field 'zz'"]


def test_an_absent_sort_key_leaves_the_order_of_the_other_keys(engine: Engine) -> None:
    for query in ("", "lamp", "lamp sha"):
        plain = ids(search(engine, query=query))
        assert ids(search(engine, query=query, sort=["zz"])) == plain
        assert ids(search(engine, query=query, sort=["-zz"])) == plain
    assert ids(search(engine, sort=["zz", "-p"])) == ids(search(engine, sort=["-p"])) == [2, 3, 1, "a"]


def test_an_absent_group_by_field_puts_every_record_in_the_null_group(engine: Engine) -> None:
    response = search(engine, query="lamp", groupBy="zz", groupLimit=10)
    assert [(group["value"], group["totalHits"]) for group in response["results"]] == [(None, 4)]
    assert [result["id"] for result in response["results"][0]["results"]] == ids(search(engine, query="lamp"))


def test_absent_search_fields_add_nothing(engine: Engine) -> None:
    assert search(engine, query="lamp", searchFields=["zz"])["totalHits"] == 0
    assert search(engine, query="lamp", searchFields=["zz", "yy"])["totalHits"] == 0
    assert search(engine, query="", searchFields=["zz"])["totalHits"] == 4  # empty query: still browse
    for query in ("lamp", "lamp sha", "lamp blue"):
        with_absent = search(engine, query=query, searchFields=["zz", "t", "yy"])
        alone = search(engine, query=query, searchFields=["t"])
        assert (ids(with_absent), with_absent["totalHits"]) == (ids(alone), alone["totalHits"])


def test_facets_on_an_absent_field_have_no_values(engine: Engine) -> None:
    response = search(engine, textFacets=["zz"], numericFacets={"zz": ["[0,10]"]})
    assert response["textFacets"] == [{"field": "zz", "values": []}]
    assert response["numericFacets"] == [{"field": "zz", "stats": {"min": None, "max": None, "avg": None, "count": 0},
                                          "ranges": [{"range": "[0,10]", "count": 0}]}]
    assert response["totalHits"] == 4


def test_not_equal_is_exactly_not_equal_on_arrays_and_missing_fields(engine: Engine) -> None:
    for value in ("a", "b", "zzz", "5"):
        expected = ids(search(engine, filter=f"NOT tags = {value}"))
        assert ids(search(engine, filter=f"tags != {value}")) == expected
    # Record 1 holds "a" and "b": "tags != a" excludes it although "b" differs from "a".
    assert ids(search(engine, filter="tags != a")) == [2, 3, "a"]
    assert ids(search(engine, filter="p != 5")) == [2, 3, "a"]  # "a" lacks p


def test_a_json_null_is_no_value() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "q": None, "p": 3}, {"id": 2, "q": None}, {"id": 3, "q": 4, "p": None},
                             {"id": 4, "q": [None, 6]}])
    assert ids(search(engine, filter="q EXISTS")) == [3, 4]
    assert ids(search(engine, filter="q != 4")) == [1, 2, 4]
    assert ids(search(engine, filter="p EXISTS")) == [1]
    assert ids(search(engine, sort=["-q"])) == [4, 3, 1, 2]
    assert ids(search(engine, sort=["q"])) == [3, 4, 1, 2]
    response = search(engine, textFacets=["q"], numericFacets={"q": []}, groupBy="q")
    assert response["textFacets"] == [{"field": "q", "values": [{"value": 4, "count": 1}, {"value": 6, "count": 1}]}]
    assert response["numericFacets"][0]["stats"] == {"min": 4, "max": 6, "avg": 5.0, "count": 2}
    assert [(group["value"], group["totalHits"]) for group in response["results"]] == [(None, 2), (4, 1), (6, 1)]
    assert "warnings" not in response


def test_a_field_only_null_values_hold_is_held_by_none() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "q": None, "name": "x"}, {"id": 2, "q": [None]}])
    response = search(engine, fields=["q"])
    assert response["warnings"] == ["fields: no record has the field 'q'"]
    assert search(engine, filter="q != 1")["totalHits"] == 2
    assert search(engine, filter="q = 1 OR q EXISTS")["totalHits"] == 0


def test_id_in_filter_and_sort(engine: Engine) -> None:
    assert ids(search(engine, filter="id = 2")) == [2]
    assert ids(search(engine, filter='id = "a"')) == ["a"]
    assert ids(search(engine, filter='id IN [1, "a", 99]')) == [1, "a"]
    assert ids(search(engine, filter="id != 1")) == [2, 3, "a"]
    assert ids(search(engine, filter="id >= 2")) == [2, 3]
    assert ids(search(engine, sort=["-id"])) == ["a", 3, 2, 1]
    assert ids(search(engine, sort=["id:desc"])) == ["a", 3, 2, 1]
    # With a query, an explicit id sort comes before relevance ("blue lamp lamp" would rank otherwise).
    assert ids(search(engine, query="lamp", sort=["-id"])) == ["a", 3, 2, 1]
    assert "warnings" not in search(engine, filter="id = 2", sort=["id"])
