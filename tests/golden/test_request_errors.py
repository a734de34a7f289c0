"""This module tests the following properties:

- every validation rule of the search request, the add payload and delete answers with a 400 whose
  exact message names the field and the problem (snapshots below: a changed message is a
  deliberate, reviewed change);
- unknown fields suggest the nearest known one; an unknown collection is a 404.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine, NotFoundError, SearchError


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    engine.add_records("people", [{"id": 1, "fName": "Ada", "lName": "Lovelace", "age": 36}])
    return engine


SEARCH_ERRORS: list[tuple[Any, str]] = [
    ([], "request body: must be a JSON object, got array"),
    ({}, "collection: is required"),
    ({"collection": 5}, "collection: must be a string, got number"),
    ({"collection": "a b"}, "collection: must be 1 to 64 characters of letters, digits, '_' or '-', got 'a b'"),
    ({"collection": "people", "qurey": "x"}, "qurey: unknown request field; did you mean 'query'?"),
    ({"collection": "people", "zzzzzz": 1}, "zzzzzz: unknown request field"),
    ({"collection": "people", "query": 3}, "query: must be a string, got number"),
    ({"collection": "people", "count": 1001}, "count: must be between 0 and 1000, got 1001"),
    ({"collection": "people", "count": -1}, "count: must be between 0 and 1000, got -1"),
    ({"collection": "people", "count": "5"}, "count: must be an integer, got string"),
    ({"collection": "people", "count": True}, "count: must be an integer, got boolean"),
    # An unbounded groupCount echoed back in "query" could not even be serialised (10**5000).
    ({"collection": "people", "groupBy": "age", "groupCount": 10**5000},
     "groupCount: must be between -1 and 1000, got <a 16610-bit integer>"),
    ({"collection": "people", "groupBy": "age", "groupCount": 1001}, "groupCount: must be between -1 and 1000, got 1001"),
    ({"collection": "people", "skip": -3}, "skip: must be between 0 and 1000000, got -3"),
    ({"collection": "people", "skip": 1_000_001}, "skip: must be between 0 and 1000000, got 1000001"),
    ({"collection": "people", "query": "x" * 1025}, "query: must be at most 1024 characters, got 1025"),
    ({"collection": "people", "searchFields": ["a"] * 1001}, "searchFields: at most 1000 entries are allowed, got 1001"),
    ({"collection": "people", "highlightFields": ["a"] * 1001},
     "highlightFields: at most 1000 entries are allowed, got 1001"),
    ({"collection": "people", "textFacetFilters": {"a": ["x"] * 1001}},
     "textFacetFilters.a: at most 1000 values are allowed, got 1001"),
    ({"collection": "people", "numericFacetFilters": {"age": ["[0,1]"] * 1001}},
     "numericFacetFilters.age: at most 1000 intervals are allowed, got 1001"),
    ({"collection": "people", "numericFacetFilters": {"age": ["[" + "1" * 300 + ",)"]}},
     "numericFacetFilters.age[0]: an interval is at most 200 characters, got 303"),
    ({"collection": "people", "sort": "age"}, "sort: must be an array of strings, like ['age'], got a string"),
    ({"collection": "people", "textFacetFilters": {"a": "x"}},
     'textFacetFilters.a: must be an array of values, like {"a": [\'x\']}, got string'),
    ({"collection": "people", "query": "\ud800"}, "query: is not valid Unicode (a lone surrogate \\ud800 at character 0)"),
    ({"collection": "people", "query": "\u00e9\ud800"}, "query: is not valid Unicode (a lone surrogate \\ud800 at character 1)"),
    ({"collection": "people", "fields": ["id", "\ud800"]}, "fields[1]: is not valid Unicode (a lone surrogate \\ud800 at character 0)"),
    ({"collection": "people", "textFacetFilters": {"a\ud800": ["x"]}},
     "textFacetFilters: field name 'a\\ud800': is not valid Unicode (a lone surrogate \\ud800 at character 1)"),
    ({"collection": "people", "filter": 'a = "\udfff"'},
     "filter: is not valid Unicode (a lone surrogate \\udfff at character 5)"),
    ({"collection": "people", "typoTolerance": 3}, "typoTolerance: must be between 0 and 2, got 3"),
    ({"collection": "people", "fields": "fName"}, "fields: must be an array of strings, like ['fName'], got a string"),
    ({"collection": "people", "fields": [1]}, "fields[0]: must be a non-empty string, got number"),
    ({"collection": "people", "searchFields": {}}, "searchFields: must be an array of strings, got object"),
    ({"collection": "people", "sort": ["-age:desc"]},
     "sort[0]: expected 'field', '-field', 'field:asc' or 'field:desc', got '-age:desc'"),
    ({"collection": "people", "textFacetFilters": []}, "textFacetFilters: must be an object, got array"),
    ({"collection": "people", "textFacetFilters": {"a": [None]}},
     "textFacetFilters.a: values must be strings, numbers or booleans, got null"),
    ({"collection": "people", "numericFacets": {"age": "[0,1)"}},
     'numericFacets.age: must be an array of interval strings, like ["[0,100)"], got string'),
    ({"collection": "people", "numericFacetFilters": {"age": [5]}},
     'numericFacetFilters.age[0]: must be an interval string like "[0,100)", got number'),
    ({"collection": "people", "groupBy": 3}, "groupBy: must be a field name string, got number"),
    ({"collection": "people", "groupCount": -2}, "groupCount: must be between -1 and 1000, got -2"),
    ({"collection": "people", "groupLimit": 0}, "groupLimit: must be between 1 and 1000, got 0"),
    ({"collection": "people", "geo": {"lat": 1}}, "geo.lat: unknown field; expected 'around' or 'polygon'"),
    ({"collection": "people", "textFacetQuery": {"query": "a"}},
     "textFacetQuery: is only used by the facet value search route "
     "(POST /v2/collections/{collectionId}/facet/{facetName}/query)"),
    # Found by benchmarks/responsiveness.py: 1,000 fields × 1,000 values held the engine for seconds.
    ({"collection": "people", "textFacetFilters": {f"f{n}": ["x"] * 1000 for n in range(11)}},
     "textFacetFilters: at most 10000 values in all fields together are allowed, got 11000"),
    ({"collection": "people", "numericFacets": {f"f{n}": ["[0,1)"] * 1000 for n in range(11)}},
     "numericFacets: at most 10000 intervals in all fields together are allowed, got 11000"),
    ({"collection": "people", "numericFacetFilters": {f"f{n}": ["[0,1)"] * 1000 for n in range(11)}},
     "numericFacetFilters: at most 10000 intervals in all fields together are allowed, got 11000"),
    ({"collection": "people", "groupBy": "age", "count": 1000, "groupLimit": 11},
     "groupLimit: a grouped page holds at most 10000 results (groups × groupLimit), got 1000 × 11"),
    ({"collection": "people", "groupBy": "age", "groupCount": 1000, "groupLimit": 11},
     "groupLimit: a grouped page holds at most 10000 results (groups × groupLimit), got 1000 × 11"),
    # Found by tests/property/test_request_fuzz.py (each was an exception other than a SearchError):
    ({"collection": "people", "textFacetFilters": {"age": [10**400]}},
     "textFacetFilters.age: numbers must be finite, got an integer beyond 1.8e308"),
    ({"collection": "people", "count": 10**5000}, "count: must be between 0 and 1000, got <a 16610-bit integer>"),
    ({"collection": "people", "textFacetFilters": {"age": 10**5000}},
     'textFacetFilters.age: must be an array of values, like {"age": [<a 16610-bit integer>]}, got number'),
    ({"collection": "people", "textFacetFilters": {"age": {"x": [10**5000]}}},
     'textFacetFilters.age: must be an array of values, like {"age": [<an object holding a number too long to '
     'show>]}, got object'),
    ({"\ud800": 1, "collection": "people"},
     "request field name: is not valid Unicode (a lone surrogate \\ud800 at character 0)"),
]


@pytest.mark.parametrize(("body", "message"), SEARCH_ERRORS)
def test_search_validation_messages(engine: Engine, body: Any, message: str | None) -> None:
    if message is None:
        engine.search(body)
        return
    with pytest.raises(BadRequestError) as caught:
        engine.search(body)
    assert caught.value.status == 400
    assert caught.value.data == message
    assert caught.value.to_dict() == {"status": 400, "data": message}


def test_defaults_and_nulls_are_accepted(engine: Engine) -> None:
    body = {"collection": "people", "query": None, "fields": None, "sort": None, "groupBy": None,
            "highlightFields": [], "textFacetQuery": None, "geo": None, "skip": 0}
    assert engine.search(body)["totalHits"] == 1


#: Bodies that once raised an exception other than a SearchError (found by the request fuzz test);
#: each is a valid request whose answer is simply no match.
ONCE_500: list[dict[str, Any]] = [
    {"collection": "people", "filter": 'id = "' + "9" * 400 + '"'},  # OverflowError
    {"collection": "people", "filter": 'id = "\u00b2"'},  # "²".isdigit(), but int("²") is a ValueError
    {"collection": "people", "filter": "id IN [\u00b2]"},
    {"collection": "people", "textFacetFilters": {"id": ["\u00b2", "9" * 400]}},
]


@pytest.mark.parametrize("body", ONCE_500)
def test_once_500_now_answers(engine: Engine, body: dict[str, Any]) -> None:
    assert engine.search(body)["totalHits"] == 0


def test_facet_value_search_refuses_a_lone_surrogate_in_the_facet_name(engine: Engine) -> None:
    with pytest.raises(BadRequestError) as caught:
        engine.search_facet_values("people", "a\ud800", {"textFacetQuery": {"query": "x"}})
    assert caught.value.data == "facetName: is not valid Unicode (a lone surrogate \\ud800 at character 1)"


def test_a_field_named_twice_counts_once(engine: Engine) -> None:
    answer = engine.search({"collection": "people", "textFacets": ["lName", "fName", "lName"],
                            "fields": ["fName", "fName"], "highlightFields": ["fName", "nope", "fName"],
                            "query": "ada"})
    assert [facet["field"] for facet in answer["textFacets"]] == ["lName", "fName"]
    assert answer["results"][0] == {"id": 1, "fName": "Ada", "_rank": answer["results"][0]["_rank"],
                                    "_highlights": {"fName": "<em>Ada</em>"}}


def test_unknown_collection_is_404(engine: Engine) -> None:
    with pytest.raises(NotFoundError) as caught:
        engine.search({"collection": "nobody"})
    assert caught.value.to_dict() == {"status": 404, "data": "collection 'nobody' not found"}


ADD_ERRORS: list[tuple[Any, str]] = [
    ([], "records: must not be empty"),
    ("x", "records: must be a JSON object or an array of objects, got string"),
    ([{"id": 1}, 5], "records[1]: must be a JSON object, got number"),
    ([{"name": "x"}], "records[0].id: is required"),
    ([{"id": 1.5}], "records[0].id: must be an integer or a non-empty string, got number"),
    ([{"id": True}], "records[0].id: must be an integer or a non-empty string, got boolean"),
    ([{"id": ""}], "records[0].id: must not be an empty string"),
    ([{"id": "x" * 513}], "records[0].id: string ids are at most 512 bytes"),
    ([{"id": 2**63}], f"records[0].id: integer {2**63} is outside the signed 64-bit range"),
    ([{"id": 1, "n": float("nan")}], "records[0].n: numbers must be finite, got nan"),
    ([{"id": 1, "tags": ["a", {1, 2}]}], "records[0].tags[1]: unsupported value of type set"),
    ([{"id": 1, "a": {"": 1}}], "records[0].a: field names must be non-empty strings, got ''"),
]


@pytest.mark.parametrize(("records", "message"), ADD_ERRORS)
def test_add_validation_messages(records: Any, message: str) -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 99, "title": "kept"}])
    with pytest.raises(BadRequestError) as caught:
        engine.add_records("c", records)
    assert caught.value.data == message
    # All or nothing: the collection is exactly as before.
    assert engine.search({"collection": "c"})["totalHits"] == 1


def test_add_rejects_bad_collection_name() -> None:
    with pytest.raises(BadRequestError) as caught:
        Engine().add_records("no/slash", {"id": 1})
    assert caught.value.data == "collectionId: must be 1 to 64 characters of letters, digits, '_' or '-', got 'no/slash'"


DELETE_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({}, "delete: give record ids, a filter, or clear=true; nothing was deleted"),
    ({"ids": [1], "clear": True}, "delete: give only one of ids, filter or clear, got ids and clear"),
    ({"ids": []}, "ids: must not be empty"),
    ({"ids": "1"}, "ids: must be an array of record ids"),
    ({"ids": [1, None]}, "ids[1]: must be an integer or a non-empty string, got null"),
    ({"filter": "  "}, "filter: must not be empty (use clear=true to delete everything)"),
    # A lone surrogate matched nothing, so with != it deleted every record (the request fuzz test):
    ({"filter": 'id != "\ud800"'}, "filter: is not valid Unicode (a lone surrogate \\ud800 at character 7)"),
    ({"ids": [1, "\udfff"]}, "ids[1]: is not valid Unicode (a lone surrogate \\udfff at character 0)"),
]


@pytest.mark.parametrize(("arguments", "message"), DELETE_ERRORS)
def test_delete_validation_messages(arguments: dict[str, Any], message: str) -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1}])
    with pytest.raises(BadRequestError) as caught:
        engine.delete_records("c", **arguments)
    assert caught.value.data == message
    assert engine.search({"collection": "c"})["totalHits"] == 1


def test_errors_are_search_errors() -> None:
    assert issubclass(BadRequestError, SearchError) and issubclass(NotFoundError, SearchError)
