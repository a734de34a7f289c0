"""This module tests the following properties, against a real server on 127.0.0.1:

- random and hostile bodies (random bytes, truncated JSON, invalid UTF-8, ``\\ud800`` escapes in keys
  and values, deep nesting, arrays at and past the bounds, wrong content types) on every route of
  ``ROUTES`` never get a 5xx, and every error is an Error object ``{"status", "data"}`` whose
  ``status`` is the HTTP status;
- no request hangs the server (each has a client timeout; ``/health`` still answers afterwards);
- a rejected destructive request (add, delete by ids, filter or clear, settings, drop) changes no
  record: a snapshot of every record taken by search is the same before and after; in particular a
  delete whose filter or ids hold a lone surrogate deletes nothing;
- the search bodies of ``tests/property/test_request_fuzz.py`` (fewer of them) answer 200 or 4xx.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from roarsearch.server.app import ROUTES
from tests.http.conftest import ADMIN, Server, start_server, stop_server
from tests.property.test_request_fuzz import RECORDS, request_bodies

TIMEOUT_S = 10
COLLECTION = "fuzz"
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own (destructive requests must not touch other tests' data), 2 MB body limit."""
    running = start_server(tmp_path_factory.mktemp("fuzz") / "data", "--max-body-bytes", "2000000")
    yield running
    assert stop_server(running) == 0


@pytest.fixture(scope="module")
def client(fuzz_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fuzz_server.url, headers={"Authorization": f"Bearer {ADMIN}"},
                      timeout=TIMEOUT_S) as http:
        reset(http)
        yield http


def reset(http: httpx.Client) -> None:
    http.delete(f"/v2/collections/{COLLECTION}/records", params={"clear": "true"})
    # The records carry a vector of the space the request fuzz declares (and may search).
    settings = http.put(f"/v2/collections/{COLLECTION}/settings", json={"vectors": {"v": {"dimensions": 3}}})
    assert settings.status_code == 200, settings.text
    assert http.post(f"/v2/collections/{COLLECTION}/records", json=RECORDS).status_code == 201


def snapshot(http: httpx.Client) -> list[dict[str, Any]]:
    response = http.post("/v2", json={"collection": COLLECTION, "count": 1000, "sort": ["id"]})
    assert response.status_code == 200, response.text
    return [dict(sorted(record.items())) for record in response.json()["results"]]


def check_answer(response: httpx.Response, what: str) -> None:
    """No 5xx; an error is exactly {status, data} with the HTTP status; any answer is JSON."""
    assert response.status_code < 500, f"{what}: {response.status_code} {response.text[:300]}"
    if response.request.method == "HEAD":
        return
    body = response.json()
    if response.status_code >= 400:
        assert isinstance(body, dict) and set(body) == {"status", "data"}, f"{what}: {body!r:.300}"
        assert body["status"] == response.status_code and isinstance(body["data"], str) and body["data"]


# ---------------------------------------------------------------- hostile bodies

def nested(depth: int) -> bytes:
    return b'{"collection": "fuzz", "fields": ' + b"[" * depth + b"]" * depth + b"}"


def hostile_bodies(seed: int = 12) -> list[tuple[str, bytes]]:
    """(name, raw body): the same list for every route."""
    rng = random.Random(seed)
    search = json.dumps({"collection": COLLECTION, "query": "ada", "filter": "n > 1", "textFacets": ["tags"]})
    bodies = [
        ("empty", b""),
        ("spaces", b"   \n"),
        ("null", b"null"),
        ("number", b"12"),
        ("string", b'"abc"'),
        ("array of junk", b'[1, "a", null, {}, []]'),
        ("NaN", b'{"collection": "fuzz", "count": NaN}'),
        ("Infinity", b'[Infinity]'),
        ("huge number", b'{"collection": "fuzz", "skip": 1' + b"0" * 4000 + b"}"),
        ("huge float", b'{"collection": "fuzz", "count": 1e400}'),
        ("invalid UTF-8", b'{"collection": "fuzz", "query": "\xff\xfe"}'),
        ("overlong UTF-8", b'{"collection": "fuzz", "query": "\xc0\xaf"}'),
        ("raw surrogate bytes", b'{"collection": "fuzz", "query": "\xed\xa0\x80"}'),
        ("BOM", b"\xef\xbb\xbf" + search.encode()),
        ("surrogate in a key", b'{"\\ud800": 1, "collection": "fuzz"}'),
        ("surrogate in a value", b'{"collection": "fuzz", "query": "\\ud800"}'),
        ("surrogate in a filter", b'{"filter": "title != \\"\\udfff\\""}'),
        ("surrogate in ids", b'["\\ud800", 1, "b"]'),
        ("surrogate in an ids object", b'{"ids": [1, "\\udbff"]}'),
        ("surrogate in a record", b'[{"id": 9, "title": "\\ud800"}]'),
        ("surrogate in a record key", b'[{"id": 9, "\\udc00": 1}]'),
        ("surrogate in facet filters", b'{"collection": "fuzz", "textFacetFilters": {"\\ud800": ["\\ud800"]}}'),
        ("surrogate in settings", b'{"stopWords": ["\\ud800"]}'),
        ("deep nesting 990", nested(990)),
        ("deep nesting 100k", nested(100_000)),
        ("deep nesting 300k (decoded in a thread)", nested(300_000)),
        ("deep objects", b'{"a":' * 5000 + b"1" + b"}" * 5000),
        ("array fields at the bound", json.dumps({"collection": COLLECTION, "searchFields": ["title"] * 1000,
                                                  "highlightFields": ["title"] * 1000, "query": "ada"}).encode()),
        ("array fields past the bound", json.dumps({"collection": COLLECTION, "fields": ["title"] * 1001}).encode()),
        ("facet filter values at the bound", json.dumps({"collection": COLLECTION, "textFacetFilters": {
            f"f{n}": [str(v) for v in range(1000)] for n in range(20)}}).encode()),
        ("facet filter values past the bound", json.dumps({"collection": COLLECTION,
                                                           "textFacetFilters": {"tags": ["x"] * 1001}}).encode()),
        ("facet filter fields past the bound", json.dumps({"collection": COLLECTION,
                                                           "textFacetFilters": {str(n): ["x"] for n in range(1001)}}).encode()),
        ("ids past any sense", json.dumps(list(range(100_000))).encode()),
        ("filter of 16 KiB + 1", json.dumps({"filter": "n = " + "9" * (16 * 1024)}).encode()),
        ("query past the bound", json.dumps({"collection": COLLECTION, "query": "ada " * 300}).encode()),
        ("multi-search junk", json.dumps({"searches": [None, 1, {"collection": COLLECTION, "count": -1}] * 40}).encode()),
        ("truncated search", search.encode()[: len(search) // 2]),
        ("truncated records", json.dumps(RECORDS).encode()[:-3]),
        ("trailing garbage", search.encode() + b"}}"),
        ("two documents", search.encode() + b" " + search.encode()),
    ]
    for number in range(12):
        bodies.append((f"random bytes {number}", rng.randbytes(rng.randint(1, 400))))
    for number in range(8):
        text = search.encode()
        cut = rng.randint(0, len(text))
        bodies.append((f"mutated {number}", text[:cut] + rng.randbytes(rng.randint(0, 4)) + text[cut + 1:]))
    return bodies


CONTENT_TYPES: list[str | None] = [None, "application/json", "application/json; charset=latin-1", "text/plain",
                                   "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                   "application/vnd.api+json", ""]

#: Every route with concrete path parameters; ``{collectionId}`` is the fuzzed collection.
DESTRUCTIVE = {("POST", "/v2/collections/{collectionId}/records"), ("DELETE", "/v2/collections/{collectionId}/records"),
               ("PUT", "/v2/collections/{collectionId}/settings"), ("DELETE", "/v2/collections/{collectionId}")}


def concrete(path: str, collection: str = COLLECTION) -> str:
    return (path.replace("{collectionId}", collection).replace("{facetName}", "tags").replace("{id}", "1"))


def routes() -> list[tuple[str, str]]:
    return [(method, path) for path, methods in ROUTES.items() for method in methods]


def send(http: httpx.Client, method: str, path: str, content: bytes, content_type: str | None,
         params: dict[str, str] | None = None) -> httpx.Response:
    headers = {} if content_type is None else {"Content-Type": content_type}
    try:
        return http.request(method, path, content=content, headers=headers, params=params)
    except httpx.TimeoutException:  # pragma: no cover - the failure this test exists for
        pytest.fail(f"{method} {path}: no answer within {TIMEOUT_S} s")


def guarded(http: httpx.Client, method: str, path: str, name: str, content: bytes, content_type: str | None,
            params: dict[str, str] | None = None) -> httpx.Response:
    """Send one request; when it is destructive and rejected, the records must be unchanged."""
    before = snapshot(http) if (method, path) in DESTRUCTIVE else None
    response = send(http, method, concrete(path), content, content_type, params)
    check_answer(response, f"{method} {path} [{name}] ({content_type})")
    if before is not None:
        if response.status_code >= 400:
            assert snapshot(http) == before, f"{method} {path} [{name}] was rejected but changed the records"
        else:
            reset(http)
    return response


@pytest.mark.parametrize(("method", "path"), routes())
def test_hostile_bodies_on_every_route(client: httpx.Client, method: str, path: str) -> None:
    for name, body in hostile_bodies():
        guarded(client, method, path, name, body, "application/json")
    for content_type in CONTENT_TYPES:
        guarded(client, method, path, "search body", json.dumps({"collection": COLLECTION}).encode(), content_type)
    assert client.get("/health").status_code == 200


def test_delete_holding_a_lone_surrogate_deletes_nothing(client: httpx.Client) -> None:
    reset(client)
    before = snapshot(client)
    path = f"/v2/collections/{COLLECTION}/records"
    for body in (b'{"filter": "title != \\"\\ud800\\""}', b'{"filter": "NOT \\udfff EXISTS"}',
                 b'{"filter": "id IN [1, \\"\\udbff\\"]"}', b'[1, "\\ud800"]', b'{"ids": ["b", "\\ud800"]}',
                 b'["\\ud800"]'):
        response = send(client, "DELETE", path, body, "application/json")
        check_answer(response, body.decode())
        assert response.status_code == 400, body
        assert "not valid Unicode" in response.json()["data"]
        assert snapshot(client) == before, body


def test_hostile_paths_and_query_strings(client: httpx.Client) -> None:
    before = snapshot(client)
    for collection in ("%ED%A0%80", "%FF", "a%20b", "x" * 65, "..", "%00"):
        for method, path in routes():
            if "{collectionId}" in path:
                guarded(client, method, path.replace("{collectionId}", collection), collection, b"[1]", None)
    for query in ("clear=maybe", "isClear=%ED%A0%80", "clear=false&isClear=0", "clear=%FF", "count=-1",
                  "count=" + "9" * 50, "after=%25%25", "after=%ED%A0%80", "%ED%A0%80=1", "clear"):
        for method in ("GET", "DELETE"):
            guarded(client, method, "/v2/collections/{collectionId}/records?" + query, query, b"", None)
    for record_id in ("%ED%A0%80", "9" * 40, "-0", "%00", "a%2Fb"):
        check_answer(client.get(f"/v2/collections/{COLLECTION}/records/{record_id}"), record_id)
    assert snapshot(client) == before


def test_a_body_past_the_limit_is_413_and_changes_nothing(client: httpx.Client) -> None:
    before = snapshot(client)
    response = send(client, "POST", f"/v2/collections/{COLLECTION}/records", b"[" + b"1," * 1_500_000 + b"1]",
                    "application/json")
    check_answer(response, "2 MB+ body")
    assert response.status_code == 413
    assert snapshot(client) == before


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=request_bodies())
def test_fuzzed_search_bodies_over_http(client: httpx.Client, body: Any) -> None:
    if isinstance(body, dict) and body.get("collection") == "c":
        body["collection"] = COLLECTION
    try:
        raw = json.dumps(body).encode()  # ensure_ascii: lone surrogates travel as \\ud800 escapes
    except ValueError:  # an integer past 4,300 digits: not sendable as JSON from Python
        return
    check_answer(send(client, "POST", "/v2", raw, "application/json"), raw.decode()[:200])
    facet_body = dict(body, textFacetQuery={"query": "a"}) if isinstance(body, dict) else body
    raw = json.dumps(facet_body).encode()
    check_answer(send(client, "POST", f"/v2/collections/{COLLECTION}/facet/tags/query", raw, "application/json"),
                 raw.decode()[:200])


def test_server_still_healthy_and_log_has_no_traceback(fuzz_server: Server, client: httpx.Client) -> None:
    assert client.get("/health").status_code == 200
    assert "Traceback" not in fuzz_server.output()

