"""This module tests the following properties (contract §3 defaults, §3–§4 "Types and bounds"):

- defaults as the service's client sends them: ``count`` 30, ``facetCount`` 100 values per text
  facet, ``groupCount`` -1 (= ``count`` groups), ``groupLimit`` 3 results per group;
- every bound is inclusive: ``count`` 1000, ``skip`` 1,000,000, a ``query`` of 1,024 characters
  (counted in characters, not UTF-8 bytes), 1,000 entries in ``fields``, ``sort`` and
  ``textFacets``, a filter of exactly 16 KiB and one nested exactly 64 deep are all accepted;
- one past each bound is a 400 that names it: 1,001 entries in ``fields``, ``sort``,
  ``textFacets``; a filter over 16 KiB counted in UTF-8 bytes (not characters);
- a bare string where an array is expected (``textFacets``, ``searchFields``,
  ``highlightFields``, a ``numericFacetFilters`` value) is a 400 whose message shows the array form.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    records: list[dict[str, Any]] = [{"id": i, "v": f"v{i:03d}", "n": i, "t": "word"} for i in range(150)]
    records += [{"id": 1000 + i, "v": "v000", "n": 0, "t": "word"} for i in range(4)]  # v000: 5 records, n 0: 5
    engine.add_records("c", records)
    return engine


def search(engine: Engine, **body: Any) -> dict[str, Any]:
    return engine.search({"collection": "c", **body})


def test_count_defaults_to_30(engine: Engine) -> None:
    response = search(engine)
    assert [result["id"] for result in response["results"]] == list(range(30))
    assert response["totalHits"] == 154


def test_facet_count_defaults_to_100_values(engine: Engine) -> None:
    (facet,) = search(engine, count=0, textFacets=["v"])["textFacets"]
    assert len(facet["values"]) == 100
    assert facet["values"][0] == {"value": "v000", "count": 5}
    assert facet["values"][-1] == {"value": "v099", "count": 1}  # count desc, then value asc


def test_group_count_defaults_to_count_groups_and_group_limit_to_3(engine: Engine) -> None:
    response = search(engine, groupBy="n", count=7)
    assert [group["value"] for group in response["results"]] == list(range(7))
    assert response["results"][0]["totalHits"] == 5
    assert [result["id"] for result in response["results"][0]["results"]] == [0, 1000, 1001]  # groupLimit 3
    explicit = search(engine, groupBy="n", count=7, groupCount=-1)
    assert [group["value"] for group in explicit["results"]] == list(range(7))
    assert len(search(engine, groupBy="n", count=7, groupCount=2)["results"]) == 2


@pytest.mark.parametrize("body", [
    {"count": 1000},
    {"skip": 1_000_000},
    {"query": "é" * 1024},           # 2,048 bytes, 1,024 characters
    {"query": "w" * 1024},
    {"fields": ["t"] * 1000},
    {"sort": ["n"] * 1000},
    {"textFacets": ["v"] * 1000},
    {"filter": 'v = "' + "a" * (16384 - 6) + '"'},            # exactly 16,384 bytes
    {"filter": "(" * 64 + "n = 1" + ")" * 64},
    {"filter": "NOT " * 64 + "n = 1"},
])
def test_each_bound_is_inclusive(engine: Engine, body: dict[str, Any]) -> None:
    response = search(engine, **body)
    assert isinstance(response["totalHits"], int)


def test_the_bounds_select_what_they_say(engine: Engine) -> None:
    assert len(search(engine, count=1000)["results"]) == 154
    assert search(engine, skip=1_000_000)["results"] == []
    assert search(engine, skip=1_000_000)["totalHits"] == 154
    assert search(engine, filter="(" * 64 + "n = 1" + ")" * 64)["totalHits"] == 1


@pytest.mark.parametrize(("body", "message"), [
    ({"fields": ["t"] * 1001}, "fields: at most 1000 entries are allowed, got 1001"),
    ({"sort": ["n"] * 1001}, "sort: at most 1000 entries are allowed, got 1001"),
    ({"textFacets": ["v"] * 1001}, "textFacets: at most 1000 entries are allowed, got 1001"),
    # 9,000 characters, but 18,006 bytes: the limit is in bytes.
    ({"filter": 'v = "' + "é" * 9000 + '"'}, "filter: must be at most 16384 bytes (16 KiB)"),
    ({"filter": 'v = "' + "a" * (16385 - 6) + '"'}, "filter: must be at most 16384 bytes (16 KiB)"),
])
def test_one_past_each_bound_is_a_400_naming_it(engine: Engine, body: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        search(engine, **body)
    assert caught.value.status == 400
    assert caught.value.data == message


@pytest.mark.parametrize(("body", "message"), [
    ({"textFacets": "v"}, "textFacets: must be an array of strings, like ['v'], got a string"),
    ({"searchFields": "t"}, "searchFields: must be an array of strings, like ['t'], got a string"),
    ({"highlightFields": "t"}, "highlightFields: must be an array of strings, like ['t'], got a string"),
    ({"numericFacetFilters": {"n": "[0,1]"}},
     'numericFacetFilters.n: must be an array of interval strings, like ["[0,100)"], got string'),
])
def test_a_bare_string_for_an_array_is_a_400_showing_the_array_form(engine: Engine, body: dict[str, Any],
                                                                     message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        search(engine, **body)
    assert caught.value.data == message
