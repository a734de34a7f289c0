"""This module tests the following properties, against a real server on 127.0.0.1 over HTTP:

- every route answers as contract §5 says: search, add (201), delete by ids / filter / clear /
  isClear, facet value search, health, openapi.json (which lists exactly the routes served);
- keys: no key or a wrong one is 401, a search-only key writing is 403, an admin key does all;
- every failure is {status, data} with the same HTTP status: malformed JSON, wrong content type,
  wrong types, unknown fields, body over the limit (413), unknown routes (404), wrong methods (405);
- the application is chosen by the first label of Host (a trailing -fast removed), else the default;
- CORS preflight is answered;
- SIGTERM stops the server with exit status 0 and every acknowledged write is there after restart.
"""

from __future__ import annotations

import threading

import httpx

from tests.http.conftest import ADMIN, SEARCH, Server, free_port, start_server, stop_server


def test_health_and_openapi(server: Server) -> None:
    with server.client(None) as anonymous:
        assert anonymous.get("/health").json()["status"] == "ok"
        document = anonymous.get("/openapi.json").json()
    assert document["openapi"] == "3.1.0"
    served = {"/v2": {"post"}, "/v2/collections/{collectionId}/records": {"post", "delete"},
              "/v2/collections/{collectionId}/facet/{facetName}/query": {"post"},
              "/health": {"get"}, "/openapi.json": {"get"}}
    assert {path: {m for m in item if m != "parameters"} for path, item in document["paths"].items()} == served


def test_add_search_delete_round_trip(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as searcher:
        response = admin.post("/v2/collections/people/records", json=[
            {"id": 1, "fName": "Ada", "lName": "Lovelace", "field": "math", "born": 1815},
            {"id": 2, "fName": "Alan", "lName": "Turing", "field": "cs", "born": 1912},
            {"id": 3, "fName": "Grace", "lName": "Hopper", "field": "cs", "born": 1906}])
        assert (response.status_code, response.json()) == (201, {"status": 201})
        assert admin.post("/v2/collections/people/records", json={"id": 4, "fName": "Edsger"}).status_code == 201
        body = {"collection": "people", "query": "ada lovlace", "textFacets": ["field"]}
        found = searcher.post("/v2", json=body).json()
        assert found["query"] == body and found["totalHits"] == 1 and found["results"][0]["id"] == 1
        assert found["textFacets"] == [{"field": "field", "values": [{"value": "math", "count": 1}]}]
        facets = searcher.post("/v2/collections/people/facet/field/query",
                               json={"textFacetQuery": {"query": "c", "count": 5}}).json()
        assert facets == {"values": [{"value": "cs", "count": 2}]}
        deleted = admin.request("DELETE", "/v2/collections/people/records", json=[4, 99])
        assert deleted.json() == [{"status": 200, "id": 4}, {"status": 404, "id": 99}]
        deleted = admin.request("DELETE", "/v2/collections/people/records", json={"filter": "born > 1900"})
        assert deleted.json() == [{"status": 200, "deleted": 2}]
        assert admin.delete("/v2/collections/people/records", params={"isClear": "true"}).json() == [
            {"status": 200, "deleted": 1}]
        assert searcher.post("/v2", json={"collection": "people"}).json()["totalHits"] == 0


def test_keys(server: Server) -> None:
    with server.client(None) as anonymous, server.client("wrong") as wrong, server.client(SEARCH) as searcher:
        assert anonymous.post("/v2", json={"collection": "x"}).json() == {
            "status": 401, "data": "missing Authorization header: send 'Authorization: Bearer <key>'"}
        response = wrong.post("/v2", json={"collection": "x"})
        assert (response.status_code, response.json()) == (401, {"status": 401, "data": "invalid API key"})
        response = searcher.post("/v2/collections/c/records", json={"id": 1})
        assert response.status_code == 403 and response.json()["status"] == 403
        assert searcher.delete("/v2/collections/c/records", params={"clear": "true"}).status_code == 403


def test_errors_are_error_objects(server: Server) -> None:
    with server.client(ADMIN) as admin:
        cases = [
            (admin.post("/v2", content=b"{bad", headers={"Content-Type": "application/json"}), 400, "malformed JSON"),
            (admin.post("/v2", content=b'{"collection":"c"}', headers={"Content-Type": "text/plain"}), 400, "Content-Type"),
            (admin.post("/v2", json={"collection": "people", "count": "ten"}), 400, "count: must be an integer"),
            (admin.post("/v2", json={"collection": "people", "qurey": "x"}), 400, "did you mean 'query'"),
            (admin.post("/v2", json=["not", "an", "object"]), 400, "must be a JSON object"),
            (admin.post("/v2", json={"collection": "nobody"}), 404, "collection 'nobody' not found"),
            (admin.post("/v2", json={"collection": "people", "filter": "a >"}), 400, "position 3"),
            (admin.post("/v2/collections/c/records", json=[{"id": 1}, {"name": "no id"}]), 400, "records[1].id"),
            (admin.post("/v2", content=b"x" * 300_000, headers={"Content-Type": "application/json"}), 413, "limit"),
            (admin.get("/v2/nothing"), 404, "no route"),
            (admin.put("/v2"), 405, "not allowed"),
            (admin.delete("/v2/collections/c/records", params={"clear": "maybe"}), 400, "clear: must be true or false"),
            (admin.request("DELETE", "/v2/collections/c/records", json={"oops": 1}), 400, "oops: unknown field"),
        ]
        for response, status, fragment in cases:
            body = response.json()
            assert response.status_code == status == body["status"], (status, body)
            assert fragment in body["data"], body


def test_application_from_host_header(server: Server) -> None:
    with server.client(ADMIN, host="blog-fast.example.com") as blog, server.client(ADMIN, host="shop.example.com") as shop, \
            server.client(ADMIN, host="unknown.example.com") as default:
        assert blog.post("/v2/collections/posts/records", json={"id": 1, "title": "hello"}).status_code == 201
        assert blog.post("/v2", json={"collection": "posts"}).json()["totalHits"] == 1
        assert shop.post("/v2", json={"collection": "posts"}).status_code == 404
        assert default.post("/v2", json={"collection": "posts"}).status_code == 404  # default app is "shop"
    assert (server.data / "blog" / "collections" / "posts").is_dir()


def test_cors_preflight(server: Server) -> None:
    response = httpx.options(f"{server.url}/v2", headers={
        "Origin": "https://shop.example.com", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] in ("*", "https://shop.example.com")


def test_sigterm_during_import_keeps_acknowledged_batches(tmp_path) -> None:
    port = free_port()
    running = start_server(tmp_path, port)
    acknowledged: list[int] = []
    stop = threading.Event()

    def writer() -> None:
        with running.client(ADMIN) as admin:
            for batch in range(10_000):
                if stop.is_set():
                    return
                try:
                    response = admin.post("/v2/collections/c/records",
                                          json=[{"id": batch * 100 + i, "batch": batch} for i in range(50)])
                except httpx.HTTPError:
                    return
                if response.status_code != 201:
                    return
                acknowledged.append(batch)

    thread = threading.Thread(target=writer)
    thread.start()
    while len(acknowledged) < 20:
        threading.Event().wait(0.05)
    assert stop_server(running) == 0
    stop.set()
    thread.join(timeout=30)
    restarted = start_server(tmp_path, port)
    try:
        with restarted.client(ADMIN) as admin:
            total = admin.post("/v2", json={"collection": "c", "count": 0}).json()["totalHits"]
            assert total >= len(acknowledged) * 50
            assert total % 50 == 0  # whole batches only
            for batch in acknowledged[-3:]:
                response = admin.post("/v2", json={"collection": "c", "filter": f"batch = {batch}", "count": 0})
                assert response.json()["totalHits"] == 50
    finally:
        stop_server(restarted)
