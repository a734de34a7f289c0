"""This module tests the following properties, against a real server on 127.0.0.1 over HTTP:

- a collection's vector spaces are set and read through the settings routes;
- records with ``_vectors`` are added through the records route, and ``POST /v2`` and
  ``POST /v2/multi-search`` take the ``vector`` request (alone and hybrid) with the library's answers;
- bad vectors and bad vector requests are 400 Error objects naming the field;
- the OpenAPI document describes ``vector``, ``semanticRatio`` and the ``vectors`` setting.
"""

from __future__ import annotations

from roarsearch import Engine
from tests.http.conftest import SEARCH, Server

RECORDS = [{"id": 1, "title": "red shoes", "_vectors": {"v": [1.0, 0.0, 0.0]}},
           {"id": 2, "title": "blue shoes", "_vectors": {"v": [0.9, 0.1, 0.0]}},
           {"id": 3, "title": "red hat", "_vectors": {"v": [0.0, 1.0, 0.0]}},
           {"id": 4, "title": "green scarf"}]
SETTINGS = {"vectors": {"v": {"dimensions": 3, "metric": "cosine"}}}
SEARCHES = [
    {"collection": "vec", "vector": {"name": "v", "values": [1, 0, 0], "k": 2}},
    {"collection": "vec", "query": "red", "vector": {"name": "v", "values": [0, 1, 0], "k": 2, "exact": True},
     "semanticRatio": 0.7, "textFacets": ["title"]},
    {"collection": "vec", "vector": {"name": "v", "values": [1, 0, 0]}, "fields": ["id", "_vectors"], "filter": "id > 1"},
]


def test_vector_search_over_http_equals_the_library(server: Server) -> None:
    local = Engine()
    local.update_settings("vec", SETTINGS)
    local.add_records("vec", RECORDS)
    with server.client() as client:
        answer = client.put("/v2/collections/vec/settings", json=SETTINGS)
        assert answer.status_code == 200, answer.text
        assert answer.json()["vectors"] == {"v": {"dimensions": 3, "metric": "cosine"}}
        assert client.post("/v2/collections/vec/records", json=RECORDS).status_code == 201
    with server.client(SEARCH) as client:
        assert client.get("/v2/collections/vec/settings").json()["vectors"] == SETTINGS["vectors"]
        for body in SEARCHES:
            found = client.post("/v2", json=body)
            assert found.status_code == 200, found.text
            expected = local.search(body)
            got = found.json()
            for response in (got, expected):
                response.pop("responseTime")
            assert got == expected
        multi = client.post("/v2/multi-search", json={"searches": SEARCHES}).json()["results"]
        assert [[shown["id"] for shown in response["results"]] for response in multi] == \
            [[shown["id"] for shown in local.search(body)["results"]] for body in SEARCHES]


def test_bad_vectors_are_400_error_objects(server: Server) -> None:
    with server.client() as client:
        client.put("/v2/collections/vec2/settings", json=SETTINGS)
        answer = client.post("/v2/collections/vec2/records", json=[{"id": 1, "_vectors": {"v": [1, 2]}}])
        assert answer.status_code == 400
        assert answer.json() == {"status": 400, "data": "records[0]._vectors.v: must hold exactly 3 numbers, got 2"}
        answer = client.post("/v2", json={"collection": "vec2", "vector": {"name": "w", "values": [1, 2, 3]}})
        assert answer.json() == {"status": 400, "data": "vector.name: no vector space 'w' is declared in the "
                                                        "collection's settings (declared: v)"}
        answer = client.post("/v2", json={"collection": "vec2", "vector": {"name": "v", "values": [1, 2, 3], "k": 0}})
        assert answer.status_code == 400 and answer.json()["data"].startswith("vector.k:")
        answer = client.put("/v2/collections/vec2/settings", json={"vectors": {"v": {"dimensions": "3"}}})
        assert answer.status_code == 400 and answer.json()["data"].startswith("vectors.v.dimensions:")


def test_openapi_describes_vectors(server: Server) -> None:
    with server.client(None) as anonymous:
        schemas = anonymous.get("/openapi.json").json()["components"]["schemas"]
    assert {"vector", "semanticRatio"} <= set(schemas["SearchRequestBody"]["properties"])
    assert "vectors" in schemas["Settings"]["properties"]
