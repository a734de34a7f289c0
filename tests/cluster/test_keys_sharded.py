"""This module tests the following properties of stored keys and tenant tokens on a sharded server
(``roarsearch serve --shards 2``):

- a stored key is scoped to its actions and collections, and refused from the request after its
  revocation;
- a tenant token's rule holds across the shards: searches count, facet and group only the records
  it lets through, a record outside it is a 404 by id, and paging walks only the visible records.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from roarsearch.keys import mint_token
from tests.http.conftest import start_server, stop_server

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]


def test_keys_and_tokens_on_shards(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", "--shards", "2")
    try:
        records = [{"id": i, "tenant": i % 2, "title": f"star {['wars', 'trek'][i % 3 % 2]}", "brand": ["a", "b", "c"][i % 3]}
                   for i in range(40)]
        mine = [record for record in records if record["tenant"] == 1]
        with server.client() as admin:
            assert admin.post("/v2/collections/films/records", json=records).status_code == 201
            key = admin.post("/v2/keys", json={"actions": ["search", "records.read"], "collections": ["films"]}).json()
        with server.client(key["key"]) as client:
            assert client.post("/v2", json={"collection": "films", "count": 0}).json()["totalHits"] == 40
            assert client.post("/v2/collections/films/records", json=[{"id": 99}]).status_code == 403
            assert client.post("/v2", json={"collection": "other"}).status_code == 403
        token = mint_token(key["uid"], key["key"], {"films": {"filter": "tenant = 1"}})
        with server.client(token) as client:
            answer = client.post("/v2", json={"collection": "films", "query": "star", "filter": "tenant = 0 OR id < 100",
                                              "textFacets": ["brand"], "groupBy": "brand", "count": 10}).json()
            assert answer["totalHits"] == len(mine)
            counts = {value["value"]: value["count"] for value in answer["textFacets"][0]["values"]}
            assert counts == {brand: sum(1 for r in mine if r["brand"] == brand) for brand in ("a", "b", "c")}
            assert sum(group["totalHits"] for group in answer["results"]) == len(mine)
            assert client.get("/v2/collections/films/records/1").status_code == 200
            assert client.get("/v2/collections/films/records/2").status_code == 404
            walked, after = [], None
            while True:
                page = client.get("/v2/collections/films/records",
                                  params={"count": 7, **({"after": after} if after else {})}).json()
                walked += [record["id"] for record in page["records"]]
                after = page["next"]
                if after is None:
                    break
            assert walked == [record["id"] for record in mine]
        with server.client() as admin:
            assert admin.delete(f"/v2/keys/{key['uid']}").status_code == 200
        for credential in (key["key"], token):
            with server.client(credential) as client:
                assert client.post("/v2", json={"collection": "films"}).status_code == 401
    finally:
        assert stop_server(server) == 0
