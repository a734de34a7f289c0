"""This module tests the following properties (the base spec ``seed/service-spec.md`` and contract §1
"identical errors" / "same shapes as on the wire"), against a real server on 127.0.0.1:

- bearer authentication applies to every operation of spec §4, not only search: an add or a
  delete (by ids, filter or clear) without a key, with a wrong key or with another scheme is a
  401 Error object ``{"status": 401, "data": str}`` and changes no record;
- the search response (spec §2 SearchResponse) is ``application/json`` with exactly ``query``
  (object, the body as received), ``results`` (array), ``textFacets`` (array), ``numericFacets``
  (array, also when none was asked for), ``responseTime`` (integer) and ``totalHits`` (integer);
- ``skip`` omitted is ``skip`` 0 (spec §4.1 rule 1), and ``skip`` n leaves out the first n;
- every field of the spec's SearchRequestBody, given at once with the spec's types, is accepted
  and does what the spec says (fields, searchFields, filter, sort, skip, count, textFacets,
  facetCount, textFacetFilters, numericFacets, numericFacetFilters, groupBy, groupCount,
  typoTolerance, collection, query);
- the library and the service give identical answers (the same dicts, ``responseTime`` aside) and
  identical Error objects for the same bad requests (search, add and delete);
- the interface description carries version 1.0.0 and the ``bearerAuth`` HTTP bearer scheme on
  the search, add and delete operations.
"""

from __future__ import annotations

from typing import Any

import httpx

from roarsearch import Engine, SearchError
from tests.http.conftest import ADMIN, SEARCH, Server

PEOPLE: list[dict[str, Any]] = [
    {"id": 1, "fName": "Ada", "lName": "Lovelace", "field": "math", "born": 1815, "tags": ["analyst", "poet"]},
    {"id": 2, "fName": "Alan", "lName": "Turing", "field": "cs", "born": 1912, "tags": ["logician"]},
    {"id": 3, "fName": "Grace", "lName": "Hopper", "field": "cs", "born": 1906, "tags": ["admiral"]},
    {"id": 4, "fName": "Ada", "lName": "Yonath", "field": "chemistry", "born": 1939},
    {"id": 5, "fName": "Edsger", "lName": "Dijkstra", "field": "cs", "born": 1930, "tags": ["logician"]},
    {"id": 6, "fName": "Barbara", "lName": "Liskov", "field": "cs", "born": 1939},
]


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


def load(admin: httpx.Client, collection: str) -> None:
    response = admin.post(f"/v2/collections/{collection}/records", json=PEOPLE)
    assert response.status_code == 201, response.text


def every_record(admin: httpx.Client, collection: str) -> list[dict[str, Any]]:
    response = admin.get(f"/v2/collections/{collection}/records")
    assert response.status_code == 200, response.text
    return response.json()["records"]


def test_add_and_delete_need_valid_bearer_credentials(server: Server) -> None:
    with server.client(ADMIN) as admin:
        load(admin, "specauth")
        before = every_record(admin, "specauth")
    path = "/v2/collections/specauth/records"
    for key, header in ((None, None), ("wrong-key", None), (None, f"Basic {ADMIN}"), (None, "Bearer")):
        with server.client(key) as client:
            headers = {"Authorization": header} if header else {}
            attempts = [
                client.post(path, json={"id": 9, "fName": "Eve", "lName": "Intruder"}, headers=headers),
                client.post(path, json=[{"id": 1, "fName": "Changed"}], headers=headers),
                client.request("DELETE", path, json=[1, 2], headers=headers),
                client.request("DELETE", path, json={"filter": "born > 0"}, headers=headers),
                client.delete(path, params={"clear": "true"}, headers=headers),
            ]
        for response in attempts:
            body = response.json()
            assert response.status_code == 401, (key, header, response.request.method, response.text)
            assert set(body) == {"status", "data"} and body["status"] == 401, body
            assert isinstance(body["data"], str) and body["data"], body
    with server.client(ADMIN) as admin:
        assert every_record(admin, "specauth") == before


def test_search_response_shape(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        load(admin, "specshape")
        for body in ({"collection": "specshape"},
                     {"collection": "specshape", "query": "ada", "textFacets": ["field"],
                      "numericFacets": {"born": ["[1800,1900)", "[1900,2000]"]}}):
            response = reader.post("/v2", json=body)
            assert response.status_code == 200 and response.headers["content-type"] == "application/json"
            answer = response.json()
            assert set(answer) == {"query", "results", "textFacets", "numericFacets", "responseTime", "totalHits"}
            assert answer["query"] == body
            assert isinstance(answer["results"], list) and isinstance(answer["textFacets"], list)
            assert isinstance(answer["numericFacets"], list)
            assert type(answer["responseTime"]) is int and answer["responseTime"] >= 0
            assert type(answer["totalHits"]) is int
        assert answer["totalHits"] == 2 and ids(answer) == [1, 4]
        assert answer["numericFacets"][0]["field"] == "born"
        assert [r["count"] for r in answer["numericFacets"][0]["ranges"]] == [1, 1]
        empty = reader.post("/v2", json={"collection": "specshape"}).json()
        assert empty["textFacets"] == [] and empty["numericFacets"] == [] and empty["totalHits"] == len(PEOPLE)


def test_skip_defaults_to_zero(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        load(admin, "specskip")

        def page(**extra: Any) -> list[Any]:
            response = reader.post("/v2", json={"collection": "specskip", "sort": ["-born"], "count": 3, **extra})
            assert response.status_code == 200, response.text
            return ids(response.json())

        everything = ids(reader.post("/v2", json={"collection": "specskip", "sort": ["-born"]}).json())
        assert everything == [4, 6, 5, 2, 3, 1]
        assert page() == page(skip=0) == everything[:3]
        assert page(skip=2) == everything[2:5]


def test_every_spec_request_field_is_accepted_and_applied(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        load(admin, "specfields")
        body: dict[str, Any] = {
            "query": "ada lovlace",  # a typo, allowed by typoTolerance 1
            "fields": ["lName"],
            "textFacets": ["field"],
            "searchFields": ["fName", "lName"],
            "filter": "born < 1950",
            "sort": ["-born"],
            "skip": 0,
            "count": 10,
            "collection": "specfields",
            "facetCount": 1,
            "groupCount": 5,
            "typoTolerance": 1,
            "textFacetFilters": {"field": ["math", "chemistry"]},
            "numericFacets": {"born": ["[1800,1900)", "[1900,2000)"]},
            "numericFacetFilters": {"born": ["[1800,1950)"]},
            "groupBy": "field",
        }
        response = reader.post("/v2", json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["query"] == body and answer["totalHits"] == 1
        assert answer["results"] == [{"value": "math", "totalHits": 1,
                                      "results": [{"id": 1, "lName": "Lovelace", "_rank": answer["results"][0]
                                                   ["results"][0]["_rank"]}]}]
        # disjunctive: the field facet leaves its own filter out; facetCount 1 keeps the top value
        assert answer["textFacets"] == [{"field": "field", "values": [{"value": "math", "count": 1}]}]
        assert [r["count"] for r in answer["numericFacets"][0]["ranges"]] == [1, 0]

        def search(**changes: Any) -> dict[str, Any]:
            changed = {key: value for key, value in {**body, **changes}.items() if value is not None}
            result = reader.post("/v2", json=changed)
            assert result.status_code == 200, result.text
            return result.json()

        # "lovlace" needs a typo: it is dropped, and both Adas passing the filters match
        assert search(typoTolerance=0)["totalHits"] == 2
        assert ids(search(typoTolerance=0, query="lovlace", groupBy=None)) == []
        assert search(searchFields=["field"], groupBy=None)["totalHits"] == 0
        loose = dict(query="", textFacetFilters=None, numericFacetFilters=None, filter=None, groupBy=None)
        assert ids(search(**loose)) == [4, 6, 5, 2, 3, 1]
        assert ids(search(**loose, skip=1, count=2)) == [6, 5]
        assert ids(search(**loose, sort=["born"], count=2)) == [1, 3]
        assert search(**loose)["textFacets"] == [{"field": "field", "values": [{"value": "cs", "count": 4}]}]
        grouped = search(**{**loose, "groupBy": "field", "groupCount": 2})
        assert [group["value"] for group in grouped["results"]] == ["chemistry", "cs"]
        assert ids(search(**{**loose, "numericFacetFilters": {"born": ["[1900,1920]"]}})) == [2, 3]
        assert ids(search(**{**loose, "textFacetFilters": {"field": ["math", "chemistry"]}})) == [4, 1]
        assert ids(search(**{**loose, "filter": 'fName = "Ada"'})) == [4, 1]


def _library_twin(collection: str) -> Engine:
    engine = Engine()
    engine.add_records(collection, PEOPLE)
    return engine


def _library_error(call: Any) -> dict[str, Any]:
    try:
        call()
    except SearchError as error:
        return error.to_dict()
    raise AssertionError("the library accepted what it should refuse")


def test_library_and_service_answer_alike(server: Server) -> None:
    engine = _library_twin("spectwin")
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        admin.post("/v2/collections/spectwin/records", json=PEOPLE)
        bodies: list[dict[str, Any]] = [
            {"collection": "spectwin"},
            {"collection": "spectwin", "query": "ada lovlace", "textFacets": ["field", "tags"]},
            {"collection": "spectwin", "groupBy": "tags", "numericFacets": {"born": ["[1900,1950)"]},
             "highlightFields": ["fName"], "query": "a"},
            {"collection": "spectwin", "filter": "pirce > 3 AND born > 1900", "sort": ["-born"]},  # warnings
        ]
        for body in bodies:
            over_http = reader.post("/v2", json=body).json()
            in_process = engine.search(dict(body))
            over_http.pop("responseTime")
            in_process.pop("responseTime")
            assert over_http == in_process, body
        assert engine.delete_records("spectwin", ids=[6, 99]) == admin.request(
            "DELETE", "/v2/collections/spectwin/records", json=[6, 99]).json()
        assert engine.delete_records("spectwin", filter="born < 1850") == admin.request(
            "DELETE", "/v2/collections/spectwin/records", json={"filter": "born < 1850"}).json()
        assert engine.add_records("spectwin", {"id": 7, "fName": "Ken"}) == admin.post(
            "/v2/collections/spectwin/records", json={"id": 7, "fName": "Ken"}).json()


def test_library_and_service_give_identical_errors(server: Server) -> None:
    engine = _library_twin("specerrors")
    with server.client(ADMIN) as admin:
        admin.post("/v2/collections/specerrors/records", json=PEOPLE)
        searches: list[Any] = [
            {"collection": "nobody"},
            {"collection": "specerrors", "count": "ten"},
            {"collection": "specerrors", "count": 1001},
            {"collection": "specerrors", "qurey": "ada"},
            {"collection": "specerrors", "filter": "born >"},
            {"collection": "specerrors", "textFacets": "field"},
            {"collection": "specerrors", "numericFacets": {"born": ["[1,2"]}},
            {"collection": "specerrors", "typoTolerance": 3},
            {"collection": "specerrors", "sort": [5]},
            {"query": "no collection"},
            ["not", "an", "object"],
        ]
        for body in searches:
            response = admin.post("/v2", json=body)
            assert response.json() == _library_error(lambda body=body: engine.search(body)), body
            assert response.status_code == response.json()["status"]
        adds: list[Any] = [[{"id": 1}, {"fName": "no id"}], [], {"id": 1.5}, [{"id": True}], {"id": "x" * 513}]
        for records in adds:
            response = admin.post("/v2/collections/specerrors/records", json=records)
            assert response.json() == _library_error(lambda records=records: engine.add_records("specerrors", records))
        deletes: list[tuple[Any, Any]] = [
            ([], lambda: engine.delete_records("specerrors", ids=[])),
            ({"filter": "born >"}, lambda: engine.delete_records("specerrors", filter="born >")),
            ({"filter": ""}, lambda: engine.delete_records("specerrors", filter="")),
            ([1.5], lambda: engine.delete_records("specerrors", ids=[1.5])),
        ]
        for body, call in deletes:
            response = admin.request("DELETE", "/v2/collections/specerrors/records", json=body)
            assert response.json() == _library_error(call), body
        unknown = admin.request("DELETE", "/v2/collections/nobody/records", json=[1])
        assert unknown.json() == _library_error(lambda: engine.delete_records("nobody", ids=[1]))
        assert ids(admin.post("/v2", json={"collection": "specerrors", "count": 100}).json()) == [1, 2, 3, 4, 5, 6]


def test_interface_version_and_bearer_scheme(server: Server) -> None:
    with server.client(None) as anonymous:
        document = anonymous.get("/openapi.json").json()
    assert document["info"]["version"] == "1.0.0"
    assert document["components"]["securitySchemes"]["bearerAuth"] == {"type": "http", "scheme": "bearer"}
    operations = [document["paths"]["/v2"]["post"], document["paths"]["/v2/collections/{collectionId}/records"]["post"],
                  document["paths"]["/v2/collections/{collectionId}/records"]["delete"]]
    for operation in operations:
        assert operation.get("security", document.get("security")) == [{"bearerAuth": []}]
        assert "401" in operation["responses"]
