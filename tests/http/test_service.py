"""This module tests the following properties, against a real server on 127.0.0.1 over HTTP:

- every route answers as contract §5 says: search, add (201), delete by ids / filter / clear /
  isClear, facet value search (search keys included), health, openapi.json, the page at ``/``;
- keys: no key, another scheme or a wrong key is 401 (with ``WWW-Authenticate``), a search-only key
  writing is 403, an admin key does everything;
- every failure is ``{status, data}`` with the same HTTP status: malformed JSON, NaN, deep nesting,
  non-UTF-8, wrong content type, wrong types, unknown fields, bodies over the limit whether declared
  or streamed (413), unknown routes (404), wrong methods (405 with ``Allow``), refused CORS preflight;
- the application is chosen by the first label of Host (a trailing -fast removed), else the default;
- CORS preflight is answered for allowed origins.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx

from roarsearch.server.app import STATIC_DIR
from tests.http.conftest import ADMIN, SEARCH, Server

JSON = {"Content-Type": "application/json"}


def test_health_openapi_and_page_need_no_key(server: Server) -> None:
    with server.client(None) as anonymous:
        assert anonymous.get("/health").json() == {"status": "ok", "apps": ["shop", "blog"]}
        assert anonymous.head("/health").status_code == 200
        document = anonymous.get("/openapi.json").json()
        assert document["openapi"] == "3.1.0" and "/v2" in document["paths"]
        page = anonymous.get("/")
    if os.path.isfile(os.path.join(STATIC_DIR, "index.html")):
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    else:
        assert page.json() == {"status": 404, "data": "no route GET /"}


def test_add_search_delete_round_trip(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as searcher:
        response = admin.post("/v2/collections/people/records", json=[
            {"id": 1, "fName": "Ada", "lName": "Lovelace", "field": "math", "born": 1815},
            {"id": 2, "fName": "Alan", "lName": "Turing", "field": "cs", "born": 1912},
            {"id": 3, "fName": "Grace", "lName": "Hopper", "field": "cs", "born": 1906}])
        assert (response.status_code, response.json()) == (201, {"status": 201})
        assert response.headers["content-type"] == "application/json"
        assert admin.post("/v2/collections/people/records", json={"id": 4, "fName": "Edsger"}).status_code == 201
        body = {"collection": "people", "query": "ada lovlace", "textFacets": ["field"]}
        found = searcher.post("/v2", json=body).json()
        assert found["query"] == body and found["totalHits"] == 1 and found["results"][0]["id"] == 1
        assert found["textFacets"] == [{"field": "field", "values": [{"value": "math", "count": 1}]}]
        assert admin.post("/v2", json=body).json()["totalHits"] == 1  # admin keys search too
        facets = searcher.post("/v2/collections/people/facet/field/query",
                               json={"textFacetQuery": {"query": "c", "count": 5}})
        assert (facets.status_code, facets.json()) == (200, {"values": [{"value": "cs", "count": 2}]})
        deleted = admin.request("DELETE", "/v2/collections/people/records", json=[4, 99])
        assert deleted.json() == [{"status": 200, "id": 4}, {"status": 404, "id": 99}]
        deleted = admin.request("DELETE", "/v2/collections/people/records", json={"filter": "born > 1900"})
        assert deleted.json() == [{"status": 200, "deleted": 2}]
        assert admin.delete("/v2/collections/people/records", params={"isClear": "true"}).json() == [
            {"status": 200, "deleted": 1}]
        admin.post("/v2/collections/people/records", json={"id": 5, "fName": "Barbara"})
        assert admin.delete("/v2/collections/people/records", params={"clear": "1"}).json() == [
            {"status": 200, "deleted": 1}]
        assert searcher.post("/v2", json={"collection": "people"}).json()["totalHits"] == 0


def test_keys(server: Server) -> None:
    with server.client(None) as anonymous, server.client("wrong") as wrong, server.client(SEARCH) as searcher:
        response = anonymous.post("/v2", json={"collection": "x"})
        assert (response.status_code, response.json()) == (
            401, {"status": 401, "data": "missing Authorization header: send 'Authorization: Bearer <key>'"})
        assert response.headers["www-authenticate"] == "Bearer"
        response = wrong.post("/v2", json={"collection": "x"})
        assert (response.status_code, response.json()) == (401, {"status": 401, "data": "invalid API key"})
        response = anonymous.post("/v2", json={"collection": "x"}, headers={"Authorization": f"Basic {ADMIN}"})
        assert response.json() == {"status": 401, "data": "Authorization header must be 'Bearer <key>'"}
        forbidden = {"status": 403, "data": "this key may only search; writes need an admin key"}
        response = searcher.post("/v2/collections/c/records", json={"id": 1})
        assert (response.status_code, response.json()) == (403, forbidden)
        response = searcher.delete("/v2/collections/c/records", params={"clear": "true"})
        assert (response.status_code, response.json()) == (403, forbidden)
        # keys are checked before the body is read: no key and a bad body is still a 401
        assert anonymous.post("/v2", content=b"{bad", headers=JSON).status_code == 401


def _chunks(size: int) -> Iterator[bytes]:
    for _ in range(size // 10_000):
        yield b" " * 10_000


def test_errors_are_error_objects(server: Server) -> None:
    with server.client(ADMIN) as admin:
        admin.post("/v2/collections/people/records", json={"id": 1, "fName": "Ada"})
        cases = [
            (admin.post("/v2", content=b"{bad", headers=JSON), 400,
             "request body: malformed JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
            (admin.post("/v2", content=b'{"collection":"people","skip":NaN}', headers=JSON), 400,
             "request body: NaN is not JSON"),
            (admin.post("/v2", content=b"[" * 100_000, headers=JSON), 400, "request body: JSON nested too deeply"),
            (admin.post("/v2", content=b'{"query":"\xff"}', headers=JSON), 400,
             "request body: not UTF-8 (invalid start byte at byte 10)"),
            (admin.post("/v2", content=b'{"collection":"c"}', headers={"Content-Type": "text/plain"}), 400,
             "Content-Type must be application/json, got 'text/plain'"),
            (admin.post("/v2", content=b"", headers=JSON), 400, "request body: a JSON body is required"),
            (admin.post("/v2", json={"collection": "people", "count": "ten"}), 400, "count: must be an integer"),
            (admin.post("/v2", json={"collection": "people", "qurey": "x"}), 400, "did you mean 'query'"),
            (admin.post("/v2", json=["not", "an", "object"]), 400, "must be a JSON object"),
            (admin.post("/v2", json={"collection": "nobody"}), 404, "collection 'nobody' not found"),
            (admin.post("/v2", json={"collection": "people", "filter": "a >"}), 400, "position 3"),
            (admin.post("/v2/collections/c/records", json=[{"id": 1}, {"name": "no id"}]), 400, "records[1].id"),
            (admin.post("/v2/collections/c/records", json=[]), 400, "records"),
            (admin.post("/v2/collections/nobody/facet/x/query", json={"textFacetQuery": {"query": "a"}}), 404,
             "collection 'nobody' not found"),
            (admin.post("/v2", content=b"x" * 300_000, headers=JSON), 413,
             "request body is 300000 bytes; the limit is 200000 bytes"),
            (admin.post("/v2/collections/c/records", content=_chunks(300_000), headers=JSON), 413,
             "request body is over the limit of 200000 bytes"),
            (admin.get("/v2/nothing"), 404, "no route GET /v2/nothing"),
            (admin.post("/nothing", json={}), 404, "no route POST /nothing"),
            (admin.put("/v2"), 405, "method PUT is not allowed on /v2; allowed: POST"),
            (admin.get("/v2"), 405, "method GET is not allowed on /v2; allowed: POST"),
            (admin.options("/v2"), 405, "method OPTIONS is not allowed on /v2; allowed: POST"),
            (admin.post("/health"), 405, "method POST is not allowed on /health; allowed: GET, HEAD"),
            (admin.put("/v2/collections/c/records"), 405, "allowed: DELETE, GET, HEAD, POST"),
            (admin.delete("/v2/collections/c/records", params={"clear": "maybe"}), 400,
             "clear: must be true or false, got 'maybe'"),
            (admin.delete("/v2/collections/c/records"), 400, ""),  # no selector: nothing deleted by accident
            (admin.request("DELETE", "/v2/collections/c/records", json={"oops": 1}), 400, "oops: unknown field"),
            (admin.request("DELETE", "/v2/collections/c/records", json="1"), 400, "must be a JSON array of ids"),
        ]
        for response, status, fragment in cases:
            body = response.json()
            assert response.status_code == status == body["status"], (status, body)
            assert set(body) == {"status", "data"} and isinstance(body["data"], str) and body["data"], body
            assert fragment in body["data"], body
            assert "Traceback" not in body["data"]
        assert admin.put("/v2").headers["allow"] == "POST"
        assert admin.post("/v2", json={"collection": "people", "query": "ada"}).json()["totalHits"] == 1


def test_application_from_host_header(server: Server) -> None:
    with server.client(ADMIN, host="blog-fast.example.com") as blog, \
            server.client(ADMIN, host="shop.example.com:8080") as shop, \
            server.client(ADMIN, host="unknown.example.com") as default:
        assert blog.post("/v2/collections/posts/records", json={"id": 1, "title": "hello"}).status_code == 201
        assert blog.post("/v2", json={"collection": "posts"}).json()["totalHits"] == 1
        assert shop.post("/v2", json={"collection": "posts"}).status_code == 404
        assert default.post("/v2", json={"collection": "posts"}).status_code == 404  # default app is "shop"
        assert default.post("/v2/collections/goods/records", json={"id": 1}).status_code == 201
        assert shop.post("/v2", json={"collection": "goods"}).json()["totalHits"] == 1
    assert (server.data / "blog" / "collections" / "posts").is_dir()
    assert (server.data / "shop" / "collections" / "goods").is_dir()


def test_cors_preflight(server: Server) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type"}
    response = httpx.options(f"{server.url}/v2", headers={"Origin": "https://shop.example.com", **preflight})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "https://shop.example.com"
    assert "authorization" in response.headers["access-control-allow-headers"].lower()
    refused = httpx.options(f"{server.url}/v2", headers={"Origin": "https://evil.example.com", **preflight})
    assert (refused.status_code, refused.json()) == (400, {"status": 400, "data": "Disallowed CORS origin"})
    with server.client(SEARCH) as searcher:
        response = searcher.post("/v2", json={"collection": "nobody"}, headers={"Origin": "https://blog.example.com"})
    assert response.headers["access-control-allow-origin"] == "https://blog.example.com"
