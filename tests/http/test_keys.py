"""This module tests the following properties of stored keys and tenant tokens (contract §12),
against a real server (``roarsearch serve``, one worker, and ``--workers 2``):

- ``POST /v2/keys`` returns the secret once (``key``); listings and reads show only its prefix;
  ``PATCH`` renames, and refuses to change actions, collections or expiry; ``DELETE`` revokes, and
  the secret is a 401 from the next request on;
- a key may do its actions on the collections its patterns name: any other action is a 403 that
  names it, and any other collection a 403 that names the collection asked, the same whether it
  exists or not; ``GET /v2/collections`` lists only what the key sees; multi-search answers a
  search out of reach with its own 403 in place;
- an expired key is a 401; a key holding ``keys`` manages only keys within its own scope;
- the secrets are written nowhere: not in the data directory, not in the server's output;
- a tenant token (minted with ``roarsearch.keys.mint_token``) searches, counts, facets, groups and
  reads only the records its rule lets through; a record outside is a 404 like an absent one;
  a collection outside its rules is a 403; a token whose key is revoked, with a bad signature,
  another algorithm, a past ``exp``, or a key without ``search`` is a 401;
- keys survive a restart with the same admin key; with another admin key they are refused, and
  the server says so in its output;
- with ``--workers 2``, a key created on one worker works on the other at once, and a key revoked
  on one worker is refused by the other on the next request (tokens too).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from roarsearch.keys import mint_token
from tests.http.conftest import ADMIN, SEARCH, Server, start_server, stop_server

RECORDS = [{"id": i, "tenant": i % 3, "title": f"order {['red', 'blue', 'green'][i % 3]} widget {i}",
            "brand": ["acme", "zeta"][i % 2], "price": i * 10} for i in range(30)]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("keys") / "data"
    running = start_server(data, "--workers", "1")
    with running.client() as admin:
        assert admin.post("/v2/collections/orders/records", json=RECORDS).status_code == 201
        assert admin.post("/v2/collections/products/records", json=[{"id": 1, "name": "gizmo"}]).status_code == 201
        assert admin.post("/v2/collections/orders-archive/records", json=[{"id": 1, "tenant": 1}]).status_code == 201
    yield running
    assert stop_server(running) == 0


def create(client: httpx.Client, **body: Any) -> dict[str, Any]:
    answer = client.post("/v2/keys", json=body)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def test_create_list_read_rename_revoke(served: Server) -> None:
    with served.client() as admin:
        key = create(admin, actions=["search"], collections=["orders"], description="storefront", name="web")
        assert set(key) == {"uid", "name", "description", "key", "keyPrefix", "actions", "collections", "expiresAt",
                            "createdAt", "updatedAt"}
        assert len(key["key"]) == 64 and key["keyPrefix"] == key["key"][:8] and key["expiresAt"] is None
        listed = admin.get("/v2/keys").json()["results"]
        mine = [entry for entry in listed if entry["uid"] == key["uid"]]
        assert len(mine) == 1 and "key" not in mine[0] and mine[0]["keyPrefix"] == key["keyPrefix"]
        one = admin.get(f"/v2/keys/{key['uid']}")
        assert one.status_code == 200 and "key" not in one.json() and one.json()["name"] == "web"
        renamed = admin.patch(f"/v2/keys/{key['uid']}", json={"name": "shop", "description": None})
        assert renamed.status_code == 200 and renamed.json()["name"] == "shop" and renamed.json()["description"] is None
        refused = admin.patch(f"/v2/keys/{key['uid']}", json={"actions": ["*"]})
        assert refused.status_code == 400 and refused.json()["data"].startswith("actions: cannot be changed")
        with served.client(key["key"]) as client:
            assert client.post("/v2", json={"collection": "orders"}).status_code == 200
            assert admin.delete(f"/v2/keys/{key['uid']}").json() == {"status": 200, "uid": key["uid"]}
            gone = client.post("/v2", json={"collection": "orders"})
            assert gone.status_code == 401 and gone.json() == {"status": 401, "data": "invalid API key"}
        assert admin.get(f"/v2/keys/{key['uid']}").status_code == 404
        assert admin.delete(f"/v2/keys/{key['uid']}").status_code == 404


@pytest.mark.parametrize(("body", "message"), [
    ({}, "actions: required"),
    ({"actions": []}, "actions: must be a non-empty array"),
    ({"actions": ["search", "fly"]}, "actions[1]: unknown action 'fly'"),
    ({"actions": ["search"], "collections": ["a b"]}, "collections[0]: must be a collection id"),
    ({"actions": ["search"], "collections": "orders"}, "collections: must be a non-empty array"),
    ({"actions": ["search"], "expiresAt": "tomorrow"}, "expiresAt: not an ISO 8601 time"),
    ({"actions": ["search"], "expiresAt": "2001-01-01T00:00:00Z"}, "expiresAt: must be in the future"),
    ({"actions": ["search"], "key": "chosen"}, "key: unknown field"),
    ([], "request body: must be a JSON object"),
])
def test_bad_key_bodies_are_400(served: Server, body: Any, message: str) -> None:
    with served.client() as admin:
        answer = admin.post("/v2/keys", json=body)
    assert answer.status_code == 400 and answer.json()["data"].startswith(message), answer.text


def test_actions_and_collections(served: Server) -> None:
    with served.client() as admin:
        key = create(admin, actions=["search", "records.read", "collections.read"], collections=["orders*"])
    with served.client(key["key"]) as client:
        assert client.post("/v2", json={"collection": "orders", "count": 0}).json()["totalHits"] == 30
        assert client.get("/v2/collections/orders-archive/records/1").status_code == 200
        for collection in ("products", "nothere"):  # existing or not: the same answer
            answer = client.post("/v2", json={"collection": collection})
            assert answer.status_code == 403
            assert answer.json()["data"] == f"this key may not access collection '{collection}'"
            assert client.get(f"/v2/collections/{collection}/records/1").status_code == 403
        write = client.post("/v2/collections/orders/records", json=[{"id": 99}])
        assert write.status_code == 403 and write.json()["data"] == "this key lacks the action 'records.write'"
        settings = client.get("/v2/collections/orders/settings")
        assert settings.status_code == 403 and settings.json()["data"] == "this key lacks the action 'settings.read'"
        assert sorted(entry["collection"] for entry in client.get("/v2/collections").json()) == ["orders", "orders-archive"]
        multi = client.post("/v2/multi-search", json={"searches": [
            {"collection": "orders", "count": 0}, {"collection": "products"}]}).json()["results"]
        assert multi[0]["totalHits"] == 30
        assert multi[1] == {"status": 403, "data": "this key may not access collection 'products'"}
        facet = client.post("/v2/collections/products/facet/name/query", json={"textFacetQuery": {"query": "g"}})
        assert facet.status_code == 403
        assert client.get("/v2/keys").status_code == 403
    with served.client(SEARCH) as search_key:
        assert search_key.post("/v2/keys", json={"actions": ["search"]}).status_code == 403


def test_expired_key_is_401(served: Server) -> None:
    soon = (datetime.now(UTC) + timedelta(seconds=1.5)).isoformat()
    with served.client() as admin:
        key = create(admin, actions=["*"], expiresAt=soon)
    with served.client(key["key"]) as client:
        assert client.post("/v2", json={"collection": "orders", "count": 0}).status_code == 200
        time.sleep(2)
        answer = client.post("/v2", json={"collection": "orders", "count": 0})
        assert answer.status_code == 401 and answer.json()["data"] == "this API key has expired"


def test_a_key_manager_stays_within_its_scope(served: Server) -> None:
    with served.client() as admin:
        manager = create(admin, actions=["keys", "search"], collections=["orders*"])
        other = create(admin, actions=["search"], collections=["products"])
    with served.client(manager["key"]) as client:
        inside = client.post("/v2/keys", json={"actions": ["search"], "collections": ["orders"]})
        assert inside.status_code == 201
        wider = client.post("/v2/keys", json={"actions": ["search", "records.write"], "collections": ["orders"]})
        assert wider.status_code == 403
        elsewhere = client.post("/v2/keys", json={"actions": ["search"], "collections": ["*"]})
        assert elsewhere.status_code == 403
        uids = {entry["uid"] for entry in client.get("/v2/keys").json()["results"]}
        assert inside.json()["uid"] in uids and other["uid"] not in uids
        assert client.get(f"/v2/keys/{other['uid']}").status_code == 404
        assert client.delete(f"/v2/keys/{other['uid']}").status_code == 404
        assert client.delete(f"/v2/keys/{inside.json()['uid']}").status_code == 200


def test_secrets_are_written_nowhere(served: Server) -> None:
    with served.client() as admin:
        key = create(admin, actions=["search"])
        token = mint_token(key["uid"], key["key"], {"orders": {"filter": "tenant = 1"}})
    with served.client(token) as client:
        assert client.post("/v2", json={"collection": "orders", "count": 0}).status_code == 200
    secret = key["key"].encode()
    for path in served.data.rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes(), path
    assert key["key"] not in served.output()
    stored = json.loads((served.data / "keys.json").read_text())
    assert any(entry["uid"] == key["uid"] for entry in stored["keys"])


# ---------------------------------------------------------------------- tenant tokens

def forge(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    def part(value: Any) -> str:
        raw = value if isinstance(value, bytes) else json.dumps(value).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    return f"{part(header)}.{part(claims)}.{part(signature)}"


def test_tenant_token_sees_only_its_records(served: Server) -> None:
    with served.client() as admin:
        key = create(admin, actions=["search", "records.read"], collections=["orders*"])
    token = mint_token(key["uid"], key["key"], {"orders": {"filter": "tenant = 1"}, "orders-archive": None})
    mine = [record for record in RECORDS if record["tenant"] == 1]
    with served.client(token) as client:
        body = {"collection": "orders", "query": "widget", "filter": "tenant = 2 OR price >= 0",
                "textFacets": ["brand", "tenant"], "numericFacets": {"price": []}, "count": 100}
        answer = client.post("/v2", json=body).json()
        assert answer["query"] == body and "warnings" not in answer
        assert sorted(hit["id"] for hit in answer["results"]) == sorted(record["id"] for record in mine)
        assert answer["totalHits"] == len(mine)
        tenants = next(facet for facet in answer["textFacets"] if facet["field"] == "tenant")["values"]
        assert tenants == [{"value": 1, "count": len(mine)}] or tenants == [{"value": "1", "count": len(mine)}]
        stats = answer["numericFacets"][0]["stats"]
        assert stats["count"] == len(mine) and stats["max"] == max(record["price"] for record in mine)
        escaped = client.post("/v2", json={"collection": "orders", "filter": "id IN [0, 2, 3]"}).json()
        assert escaped["totalHits"] == 0
        facet_filtered = client.post("/v2", json={"collection": "orders", "textFacetFilters": {"tenant": ["2"]},
                                                  "numericFacetFilters": {"tenant": ["[2,2]"]}}).json()
        assert facet_filtered["totalHits"] == 0
        groups = client.post("/v2", json={"collection": "orders", "groupBy": "tenant", "count": 10}).json()
        assert [group["value"] for group in groups["results"]] == [1]
        values = client.post("/v2/collections/orders/facet/brand/query",
                             json={"textFacetQuery": {"query": "a"}}).json()["values"]
        assert values == [{"value": "acme", "count": sum(1 for record in mine if record["brand"] == "acme")}]
        assert client.get("/v2/collections/orders/records/1").status_code == 200
        hidden = client.get("/v2/collections/orders/records/2")
        absent = client.get("/v2/collections/orders/records/999")
        assert hidden.status_code == absent.status_code == 404
        assert hidden.json()["data"] == "record '2' not found in collection 'orders'"
        ids, after = [], None
        while True:
            page = client.get("/v2/collections/orders/records", params={"count": 3, **({"after": after} if after else {})}).json()
            ids += [record["id"] for record in page["records"]]
            after = page["next"]
            if after is None:
                break
        assert ids == [record["id"] for record in mine]
        multi = client.post("/v2/multi-search", json={"searches": [
            {"collection": "orders", "count": 0, "filter": "NOT tenant = 1"},
            {"collection": "orders-archive", "count": 0},
            {"collection": "products", "count": 0}]}).json()["results"]
        assert multi[0]["totalHits"] == 0 and multi[1]["totalHits"] == 1
        assert multi[2] == {"status": 403, "data": "this tenant token may not search collection 'products'"}
        outside = client.post("/v2", json={"collection": "orders-other"})
        assert outside.status_code == 403
        assert outside.json()["data"] == "this tenant token may not search collection 'orders-other'"
        for method, path in (("GET", "/v2/collections"), ("GET", "/v2/collections/orders/settings"),
                             ("POST", "/v2/collections/orders/records"), ("GET", "/v2/keys")):
            assert client.request(method, path, json=[{"id": 1}] if method == "POST" else None).status_code == 403
        bad_filter = client.post("/v2", json={"collection": "orders", "filter": "tenant = 1) OR (tenant = 2"})
        assert bad_filter.status_code == 400 and "position" in bad_filter.json()["data"]
        browser = client.post("/v2", json={"collection": "orders", "count": 0},  # the routed path, not the short one
                              headers={"Origin": "https://shop.example.com"})
        assert browser.status_code == 200 and browser.json()["totalHits"] == len(mine)
    with served.client(mint_token(key["uid"], key["key"], ["*"])) as client:  # the rules allow, the key does not
        answer = client.post("/v2", json={"collection": "products"})
        assert answer.status_code == 403 and answer.json()["data"] == "this key may not access collection 'products'"
        assert client.post("/v2", json={"collection": "orders", "count": 0}).json()["totalHits"] == len(RECORDS)


def test_refused_tokens_are_401(served: Server) -> None:
    with served.client() as admin:
        key = create(admin, actions=["search"])
        no_search = create(admin, actions=["records.read"])
        doomed = create(admin, actions=["search"])
    rules = {"orders": {"filter": "tenant = 1"}}
    good = mint_token(key["uid"], key["key"], rules)
    head, claims, _ = good.split(".")
    tokens = {
        "bad signature": mint_token(key["uid"], "f" * 64, rules),
        "alg none": forge({"alg": "none", "typ": "JWT"}, {"apiKeyUid": key["uid"], "searchRules": rules}),
        "HS512": forge({"alg": "HS512", "typ": "JWT"}, {"apiKeyUid": key["uid"], "searchRules": rules}, b"x" * 64),
        "expired": mint_token(key["uid"], key["key"], rules, expires_at=int(time.time()) - 5),
        "unknown key": mint_token("00000000-0000-4000-8000-000000000000", key["key"], rules),
        "key without search": mint_token(no_search["uid"], no_search["key"], rules),
        "truncated": good[:-5],
        "claims swapped": f"{head}.{forge({}, {'apiKeyUid': key['uid'], 'searchRules': ['*']}).split('.')[1]}.{good.split('.')[2]}",
        "not json": f"{head}.{base64.urlsafe_b64encode(b'nope').decode()}.{good.split('.')[2]}",
        "revoked key": mint_token(doomed["uid"], doomed["key"], rules),
    }
    assert claims  # the good token's claims decode (below it is accepted)
    with served.client() as admin:
        assert admin.delete(f"/v2/keys/{doomed['uid']}").status_code == 200
    with served.client(good) as client:
        assert client.post("/v2", json={"collection": "orders", "count": 0}).json()["totalHits"] == 10
    for name, token in tokens.items():
        with served.client(token) as client:
            answer = client.post("/v2", json={"collection": "orders"})
            assert answer.status_code == 401, (name, answer.text)
            assert answer.json()["data"].startswith("invalid tenant token"), (name, answer.text)
            assert answer.headers["www-authenticate"] == "Bearer"


# ---------------------------------------------------------------------- restarts and workers

def test_keys_survive_a_restart_and_not_an_admin_key_change(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    try:
        with server.client() as admin:
            key = create(admin, actions=["search"])
            assert admin.post("/v2/collections/c/records", json=[{"id": 1}]).status_code == 201
    finally:
        assert stop_server(server) == 0
    server = start_server(data)
    try:
        with server.client(key["key"]) as client:
            assert client.post("/v2", json={"collection": "c"}).status_code == 200
    finally:
        assert stop_server(server) == 0
    server = start_server(data, keys=False, env={"ROARSEARCH_API_KEY": "a-new-admin-key"})
    try:
        with server.client(key["key"]) as client:
            assert client.post("/v2", json={"collection": "c"}).status_code == 401
        assert "created under another master secret" in server.output()
        with server.client("a-new-admin-key") as admin:  # the key is still listed, to be revoked
            assert [entry["uid"] for entry in admin.get("/v2/keys").json()["results"]] == [key["uid"]]
    finally:
        assert stop_server(server) == 0


def pinned_clients(server: Server, key: str | None = ADMIN) -> dict[str, httpx.Client]:
    """A keep-alive client on each worker, found by opening connections until both answered."""
    found: dict[str, httpx.Client] = {}
    for _ in range(64):
        client = server.client(key)
        worker = client.get("/health").headers["x-roarsearch-worker"]
        if worker in found:
            client.close()
        else:
            found[worker] = client
        if len(found) == 2:
            return found
    raise AssertionError(f"only workers {sorted(found)} answered")


def test_revoked_on_one_worker_refused_by_the_other(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", "--workers", "2")
    try:
        clients = pinned_clients(server)
        try:
            assert clients["0"].post("/v2/collections/c/records", json=[{"id": 1, "tenant": 1}]).status_code == 201
            for creator, other in (("0", "1"), ("1", "0")):
                key = create(clients[creator], actions=["search"])
                token = mint_token(key["uid"], key["key"], {"c": {"filter": "tenant = 1"}})
                for credential in (key["key"], token):
                    headers = {"Authorization": f"Bearer {credential}"}
                    answer = clients[other].post("/v2", json={"collection": "c"}, headers=headers)
                    assert answer.status_code == 200 and answer.json()["totalHits"] == 1
                assert clients[creator].delete(f"/v2/keys/{key['uid']}").status_code == 200
                for credential in (key["key"], token):  # the very next request on the other worker
                    headers = {"Authorization": f"Bearer {credential}"}
                    answer = clients[other].post("/v2", json={"collection": "c"}, headers=headers)
                    assert answer.status_code == 401, answer.text
                    assert clients[other].headers["authorization"] == f"Bearer {ADMIN}"
        finally:
            for client in clients.values():
                client.close()
    finally:
        assert stop_server(server) == 0
