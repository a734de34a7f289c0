"""This module tests the following properties of the settings, records, collections and
multi-search routes (contract §7–§8), against a real server on 127.0.0.1 over HTTP:

- settings: GET (search key) and PUT (admin key; the search key gets 403), all or nothing (a bad
  key is a 400 naming it and changes nothing), applied from the next search, kept across a server
  restart;
- records: one by id (the integer-vs-string segment rule, 404 when absent), pages in id order
  with a cursor, bad count/cursor/unknown parameter 400s;
- collections: list with counts, details with fields and settings, DELETE (admin only) removing
  records and settings; unknown collections are 404;
- multi-search: answers in order with a failing search in the middle as its Error object; a body
  that is not ``{"searches": [...]}`` or holds over 100 searches is a 400;
- every new route refuses a request without a key (401) and names its methods on a 405.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.http.conftest import SEARCH, Server, start_server, stop_server

JSON = {"Content-Type": "application/json"}
RECORDS = [{"id": 1, "name": "Paris", "population": 2100000}, {"id": 2, "name": "Paris Texas", "population": 25000},
           {"id": "1", "name": "One as a string"}, {"id": "b", "name": "New York City", "population": 8000000}]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Server:
    data = tmp_path_factory.mktemp("routes") / "data"
    server = start_server(data)
    with server.client() as admin:
        assert admin.post("/v2/collections/places/records", json=RECORDS).status_code == 201
    yield server
    assert stop_server(server) == 0


def test_settings_routes_and_keys(live: Server) -> None:
    with live.client() as admin, live.client(SEARCH) as reader, live.client(None) as anonymous:
        assert reader.get("/v2/collections/places/settings").json()["customRanking"] == []
        refused = reader.put("/v2/collections/places/settings", json={"customRanking": ["-population"]})
        assert refused.status_code == 403 and refused.json()["status"] == 403
        assert anonymous.get("/v2/collections/places/settings").status_code == 401
        bad = admin.put("/v2/collections/places/settings", json={"stopWords": ["the"], "synonym": {}})
        assert bad.status_code == 400 and bad.json()["data"].startswith("synonym: unknown setting")
        assert reader.get("/v2/collections/places/settings").json()["stopWords"] == []  # nothing changed
        put = admin.put("/v2/collections/places/settings",
                        json={"customRanking": ["-population"], "synonyms": {"nyc": ["new york"]}})
        assert put.status_code == 200 and put.json()["synonyms"] == {"nyc": ["new york"]}
        search = reader.post("/v2", json={"collection": "places", "query": "paris "}).json()
        assert [r["id"] for r in search["results"]] == [1, 2]
        assert [r["id"] for r in reader.post("/v2", json={"collection": "places", "query": "nyc"}).json()["results"]] == ["b"]
        assert admin.get("/v2/collections/nobody/settings").status_code == 404
        created = admin.put("/v2/collections/fresh/settings", json={"stopWords": ["a"]})
        assert created.status_code == 200
        assert {"collection": "fresh", "records": 0} in reader.get("/v2/collections").json()


def test_records_routes(live: Server) -> None:
    with live.client(SEARCH) as reader, live.client(None) as anonymous:
        assert reader.get("/v2/collections/places/records/1").json()["name"] == "Paris"  # the integer id
        assert reader.get("/v2/collections/places/records/b").json()["name"] == "New York City"
        missing = reader.get("/v2/collections/places/records/77")
        assert missing.status_code == 404 and missing.json()["status"] == 404
        assert reader.get("/v2/collections/nobody/records/1").status_code == 404
        assert anonymous.get("/v2/collections/places/records/1").status_code == 401
        seen, after = [], None
        while True:
            params = {"count": "1"} if after is None else {"count": "1", "after": after}
            page = reader.get("/v2/collections/places/records", params=params)
            assert page.status_code == 200
            seen.extend(record["id"] for record in page.json()["records"])
            after = page.json()["next"]
            if after is None:
                break
        assert seen == [1, 2, "1", "b"]
        for params in ({"count": "0"}, {"count": "ten"}, {"after": "%%"}, {"limit": "3"}):
            answer = reader.get("/v2/collections/places/records", params=params)
            assert answer.status_code == 400 and answer.json()["status"] == 400, params


def test_collections_routes(live: Server) -> None:
    with live.client() as admin, live.client(SEARCH) as reader:
        assert admin.post("/v2/collections/doomed/records", json=[{"id": 1, "tag": "x", "n": 3}]).status_code == 201
        listed = reader.get("/v2/collections").json()
        assert {"collection": "places", "records": 4} in listed and {"collection": "doomed", "records": 1} in listed
        info = reader.get("/v2/collections/doomed").json()
        assert info["records"] == 1 and info["settings"]["searchFields"] == ["*"]
        assert {"field": "n", "kinds": ["number"], "records": 1} in info["fields"]
        assert reader.get("/v2/collections/nobody").status_code == 404
        assert reader.delete("/v2/collections/doomed").status_code == 403
        dropped = admin.delete("/v2/collections/doomed")
        assert dropped.status_code == 200 and dropped.json() == {"status": 200}
        assert admin.delete("/v2/collections/doomed").status_code == 404
        assert reader.post("/v2", json={"collection": "doomed"}).status_code == 404
        assert all(entry["collection"] != "doomed" for entry in reader.get("/v2/collections").json())


def test_multi_search_route(live: Server) -> None:
    with live.client(SEARCH) as reader, live.client(None) as anonymous:
        body = {"searches": [{"collection": "places", "query": "paris "}, {"collection": "places", "count": -1},
                             {"collection": "nobody"}, {"collection": "places", "query": "nyc"}]}
        answer = reader.post("/v2/multi-search", json=body)
        assert answer.status_code == 200
        results = answer.json()["results"]
        assert [r["id"] for r in results[0]["results"]] == [1, 2]
        assert results[1] == {"status": 400, "data": "count: must be between 0 and 1000, got -1"}
        assert results[2] == {"status": 404, "data": "collection 'nobody' not found"}
        assert [r["id"] for r in results[3]["results"]] == ["b"]
        for bad in ([], {"searches": {}}, {"searches": [], "x": 1}, {"searches": [{"collection": "places"}] * 101}):
            refused = reader.post("/v2/multi-search", json=bad)
            assert refused.status_code == 400 and refused.json()["status"] == 400, bad
        assert anonymous.post("/v2/multi-search", json=body).status_code == 401
        wrong = reader.get("/v2/multi-search")
        assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"


def test_settings_survive_a_restart(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        with server.client() as admin:
            admin.post("/v2/collections/c/records", json=RECORDS)
            admin.put("/v2/collections/c/settings", json={"stopWords": ["texas"], "customRanking": ["-population"]})
    finally:
        assert stop_server(server) == 0
    server = start_server(tmp_path / "data")
    try:
        with server.client(SEARCH) as reader:
            assert reader.get("/v2/collections/c/settings").json()["stopWords"] == ["texas"]
            assert reader.get("/v2/collections/c").json()["records"] == 4
    finally:
        assert stop_server(server) == 0
