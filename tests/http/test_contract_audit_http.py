"""This module tests the following properties (contract §5 "The HTTP service", §6 ``serve``, §8
"Records and collections" over HTTP), against a real server on 127.0.0.1:

- a record path segment that is a canonical integer names the integer id when one exists, else
  the STRING id (``/records/7`` finds ``"7"`` when there is no integer 7); a segment that is not
  canonical (``09``, ``+9``, ``9.0``) or beyond 64 bits names only the string id;
- ``GET .../records`` pages 1000 records when no ``count`` is given, the last page has ``next``
  null; a ``count`` over 1000, 0, negative or not an integer is a 400, and so is a ``count`` of
  non-ASCII digits such as a superscript two (never a 500);
- multi-search takes exactly 100 searches; a search that is not an object fails alone, in place;
- facet value search is typo tolerant (a transposed letter still finds the value), counts only
  the records the rest of the body selects (query and filter), and returns at most
  ``textFacetQuery.count`` values;
- the fields the service's clients send by default are accepted when empty (``highlightFields``
  ``[]``, ``textFacetQuery`` null or ``{}``, ``geo`` null), ``geo`` works, and a non-empty
  ``textFacetQuery`` on the search route is a 400 that says where it belongs;
- the application chosen by ``Host`` applies to every route (records, collections, multi-search,
  facet value search), not only search and add;
- ``serve --data DIR`` serves a directory that ``Engine(DIR)`` wrote as it is (the default
  application, no ``DIR/default`` made); ``--search-key`` may be repeated (each key searches and
  gets 403 on writes); with no ``--max-body-bytes`` the body limit of the add route is 100 MiB (a
  declared 104,857,601-byte body is a 413 naming the limit 104857600, a small one is read).
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from roarsearch import Engine
from tests.http.conftest import ADMIN, SEARCH, Server, start_server, stop_server

SECOND_SEARCH = "second-search-key-for-tests"


def test_record_path_segment_names_integer_then_string(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        records = [{"id": "7", "kind": "string 7"}, {"id": 8, "kind": "int 8"}, {"id": "8", "kind": "string 8"},
                   {"id": 9, "kind": "int 9"}, {"id": "+9", "kind": "string +9"},
                   {"id": -5, "kind": "int -5"}, {"id": "9223372036854775808", "kind": "string 2**63"}]
        assert admin.post("/v2/collections/auditids/records", json=records).status_code == 201

        def kind(segment: str) -> object:
            response = reader.get(f"/v2/collections/auditids/records/{segment}")
            return response.json()["kind"] if response.status_code == 200 else response.status_code

        assert kind("7") == "string 7"  # no integer 7: the string id
        assert kind("8") == "int 8"  # both exist: the integer id
        assert kind("9") == "int 9"
        assert kind("-5") == "int -5"
        assert kind("09") == 404  # not canonical: only the string "09", which does not exist
        assert kind("9.0") == 404
        assert kind("%2B9") == "string +9"
        assert kind("9223372036854775808") == "string 2**63"  # past int64: the string id


def test_record_pages_default_to_1000(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        assert admin.post("/v2/collections/auditpages/records",
                          json=[{"id": i} for i in range(1001)]).status_code == 201
        first = reader.get("/v2/collections/auditpages/records").json()
        assert [r["id"] for r in first["records"]] == list(range(1000)) and first["next"] is not None
        last = reader.get("/v2/collections/auditpages/records", params={"after": first["next"]}).json()
        assert last == {"records": [{"id": 1000}], "next": None}
        for count in ("1001", "0", "-1", "1e3"):
            refused = reader.get("/v2/collections/auditpages/records", params={"count": count})
            assert refused.status_code == 400 and refused.json()["status"] == 400, (count, refused.text)


def test_record_page_count_of_non_ascii_digits_is_a_400(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        assert admin.post("/v2/collections/auditcount/records", json={"id": 1}).status_code == 201
        refused = reader.get("/v2/collections/auditcount/records", params={"count": "\u00b2"})
        assert refused.status_code == 400 and refused.json()["status"] == 400, refused.text


def test_multi_search_takes_100_and_a_non_object_fails_alone(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        admin.post("/v2/collections/auditmulti/records", json=[{"id": i, "n": i} for i in range(4)])
        searches = [{"collection": "auditmulti", "filter": f"n = {i % 4}"} for i in range(100)]
        answer = reader.post("/v2/multi-search", json={"searches": searches})
        assert answer.status_code == 200
        assert [[r["id"] for r in one["results"]] for one in answer.json()["results"]] == [[i % 4] for i in range(100)]
        mixed = reader.post("/v2/multi-search", json={"searches": [searches[1], "oops", None, searches[2]]})
        assert mixed.status_code == 200
        results = mixed.json()["results"]
        assert [r["id"] for r in results[0]["results"]] == [1] and [r["id"] for r in results[3]["results"]] == [2]
        assert results[1]["status"] == 400 and results[2]["status"] == 400 and set(results[1]) == {"status", "data"}


def test_facet_value_search_is_typo_tolerant_and_counts_what_the_body_selects(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        admin.post("/v2/collections/auditfacets/records", json=[
            {"id": 1, "title": "phone", "brand": "Samsung", "price": 900},
            {"id": 2, "title": "phone", "brand": "Samsung", "price": 300},
            {"id": 3, "title": "phone", "brand": "Sanyo", "price": 100},
            {"id": 4, "title": "television", "brand": "Samsung", "price": 50},
            {"id": 5, "title": "phone", "brand": "Apple", "price": 1000}])

        def values(body: dict[str, object]) -> object:
            response = reader.post("/v2/collections/auditfacets/facet/brand/query", json=body)
            assert response.status_code == 200, response.text
            return response.json()["values"]

        assert values({"textFacetQuery": {"query": "samsnug"}}) == [{"value": "Samsung", "count": 3}]  # a typo
        assert values({"textFacetQuery": {"query": "sa"}}) == [{"value": "Samsung", "count": 3},
                                                               {"value": "Sanyo", "count": 1}]
        assert values({"query": "phone", "textFacetQuery": {"query": "sa"}}) == [
            {"value": "Samsung", "count": 2}, {"value": "Sanyo", "count": 1}]
        assert values({"filter": "price >= 300", "textFacetQuery": {"query": "sa"}}) == [
            {"value": "Samsung", "count": 2}]
        assert values({"textFacetQuery": {"query": "sa", "count": 1}}) == [{"value": "Samsung", "count": 3}]


def test_default_client_fields_are_accepted_and_text_facet_query_refused_on_search(server: Server) -> None:
    with server.client(ADMIN) as admin, server.client(SEARCH) as reader:
        admin.post("/v2/collections/auditdefaults/records",
                   json=[{"id": 1, "name": "Louvre", "_geo": {"lat": 48.8606, "lng": 2.3376}},
                         {"id": 2, "name": "Louvre Lens", "_geo": {"lat": 50.4317, "lng": 2.8044}}])
        for extra in ({"highlightFields": []}, {"textFacetQuery": None}, {"textFacetQuery": {}}, {"geo": None}):
            response = reader.post("/v2", json={"collection": "auditdefaults", **extra})
            assert response.status_code == 200 and response.json()["totalHits"] == 2, (extra, response.text)
        near = reader.post("/v2", json={"collection": "auditdefaults", "query": "louvre",
                                        "geo": {"around": {"lat": 48.86, "lng": 2.34, "radius": 10_000}}})
        assert [r["id"] for r in near.json()["results"]] == [1] and isinstance(near.json()["results"][0]["_geoDistance"], int)
        refused = reader.post("/v2", json={"collection": "auditdefaults", "textFacetQuery": {"query": "lo"}})
        assert refused.status_code == 400
        assert "facet value search route" in refused.json()["data"] and refused.json()["data"].startswith("textFacetQuery")


def test_host_selects_the_application_on_every_route(server: Server) -> None:
    with server.client(ADMIN, host="blog-fast.example.com") as blog, server.client(ADMIN, host="shop.example.com") as shop:
        assert blog.post("/v2/collections/auditblogonly/records", json={"id": 1, "tag": "news"}).status_code == 201
        assert blog.get("/v2/collections/auditblogonly/records/1").status_code == 200
        assert shop.get("/v2/collections/auditblogonly/records/1").status_code == 404
        assert shop.get("/v2/collections/auditblogonly/records").status_code == 404
        assert blog.get("/v2/collections/auditblogonly").json()["records"] == 1
        assert shop.get("/v2/collections/auditblogonly").status_code == 404
        assert {"collection": "auditblogonly", "records": 1} in blog.get("/v2/collections").json()
        assert all(entry["collection"] != "auditblogonly" for entry in shop.get("/v2/collections").json())
        body = {"searches": [{"collection": "auditblogonly"}]}
        assert blog.post("/v2/multi-search", json=body).json()["results"][0]["totalHits"] == 1
        assert shop.post("/v2/multi-search", json=body).json()["results"][0]["status"] == 404
        facet = {"textFacetQuery": {"query": "ne"}}
        assert blog.post("/v2/collections/auditblogonly/facet/tag/query", json=facet).json() == {
            "values": [{"value": "news", "count": 1}]}
        assert shop.post("/v2/collections/auditblogonly/facet/tag/query", json=facet).status_code == 404


@pytest.fixture(scope="module")
def library_made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server with default options on a directory the library wrote, with a second search key."""
    directory = tmp_path_factory.mktemp("library-made") / "engine"
    with Engine(str(directory)) as engine:
        engine.add_records("people", [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Alan"}])
    running = start_server(directory, "--search-key", SECOND_SEARCH)
    yield running
    assert stop_server(running) == 0


def test_serves_a_library_directory_as_it_is(library_made: Server) -> None:
    with library_made.client(ADMIN, host="whatever.example.com") as admin:
        assert admin.post("/v2", json={"collection": "people", "query": "ada"}).json()["totalHits"] == 1
        assert admin.post("/v2/collections/people/records", json={"id": 3, "name": "Grace"}).status_code == 201
        assert admin.get("/v2/collections").json() == [{"collection": "people", "records": 3}]
    assert not (library_made.data / "default").exists()
    assert (library_made.data / "collections" / "people").is_dir()


def test_search_key_may_be_repeated(library_made: Server) -> None:
    for key in (SEARCH, SECOND_SEARCH):
        with library_made.client(key) as reader:
            assert reader.post("/v2", json={"collection": "people"}).status_code == 200
            refused = reader.post("/v2/collections/people/records", json={"id": 9})
            assert refused.status_code == 403 and refused.json()["status"] == 403
    with library_made.client(SECOND_SEARCH + "x") as wrong:
        assert wrong.post("/v2", json={"collection": "people"}).status_code == 401


def test_default_body_limit_is_100_mib(library_made: Server) -> None:
    address = urlsplit(library_made.url)
    for declared, status in ((100 * 1024 * 1024 + 1, 413), (64, 400)):
        connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=30)
        try:
            connection.putrequest("POST", "/v2/collections/people/records")
            connection.putheader("Authorization", f"Bearer {ADMIN}")
            connection.putheader("Content-Type", "application/json")
            connection.putheader("Content-Length", str(declared))
            connection.endheaders()
            if declared == 64:
                connection.send(b"{" + b" " * 63)  # malformed but within the limit: a 400, not a 413
            response = connection.getresponse()
            body = response.read().decode()
        finally:
            connection.close()
        assert response.status == status, body
        if status == 413:
            assert "the limit is 104857600 bytes" in body and f"{declared} bytes" in body

