"""This module tests the following properties:

- ``roarsearch serve --shards 2`` serves a sharded data directory through the same HTTP API
  (add 201, search with facets, delete);
- a shard actor process killed (SIGKILL) is restarted from its directory: requests meanwhile get a
  503 Error object with ``Retry-After``, never a partial answer, and afterwards the whole answer;
- every other route answers as a single-engine server does (status and body, timings aside):
  settings (GET, PUT, a bad PUT), records by id (integer and string ids, 404), record pages
  walked to the end, collections and a collection's fields, multi-search with a bad search,
  geo searches (radius, ``_geoDistance`` sort and facet), vector and hybrid searches (settings
  declaring the space, records with ``_vectors``, facets, a facet filter, sort, groups, a bad
  vector), and a dropped collection.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-admin-key"


def _call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read()), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), {k.lower(): v for k, v in error.headers.items()}


def _shard_pids(session: int) -> list[int]:
    """Processes of the server's session that run a shard actor."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            command = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == session and b"ShardActor" in command:
            found.append(int(name))
    return found


def _start(data: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen([sys.executable, "-m", "roarsearch", "serve", "--data", str(data), "--port", "0",
                               "--api-key", KEY, *extra],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    assert "ready on" in line, line
    return server, line.split("ready on ")[1].split()[0]


def _stop(server: subprocess.Popen[str]) -> None:
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(60)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _untimed(item) for key, item in value.items() if key != "responseTime"}
    if isinstance(value, list):
        return [_untimed(item) for item in value]
    return value


def test_sharded_server_answers_every_route_like_one_engine(tmp_path: Path) -> None:
    sharded, sharded_base = _start(tmp_path / "sharded", "--shards", "2")
    try:
        single, single_base = _start(tmp_path / "single")
        try:
            points = [{"lat": 48.8566, "lng": 2.3522}, {"lat": 48.8606, "lng": 2.3376}, {"lat": 48.9, "lng": 2.4}]
            records: list[dict[str, Any]] = [
                {"id": i, "title": f"star {['wars', 'trek', 'quest'][i % 3]}", "pop": i % 4, "_geo": points[i % 3]}
                for i in range(25)]
            records += [{"id": str(i), "title": "galaxy star", "pop": 9} for i in range(3)] + [{"id": "zz", "x": True}]
            around = {"around": {"lat": 48.8566, "lng": 2.3522, "radius": 3000}}
            shop = [{"id": i, "title": ["red shoe", "blue boot", "red boot"][i % 3], "brand": ["acme", "zeta"][i % 2],
                     "price": i * 9 % 100, "_vectors": {"text": [i % 3 - 1, i % 2, 1]}} for i in range(30)]
            near = {"name": "text", "values": [1, 0, 1], "k": 8, "exact": True}
            calls: list[tuple[str, str, Any]] = [
                ("PUT", "/v2/collections/films/settings", {"customRanking": ["-pop"], "stopWords": ["the"]}),
                ("POST", "/v2/collections/films/records", records),
                ("PUT", "/v2/collections/films/settings", {"synonyms": {"trek": ["quest"]}, "searchFields": ["title"]}),
                ("PUT", "/v2/collections/films/settings", {"bogus": 1}),
                ("GET", "/v2/collections/films/settings", None),
                ("POST", "/v2", {"collection": "films", "query": "the star trek", "count": 40}),
                ("GET", "/v2/collections/films/records/1", None),
                ("GET", "/v2/collections/films/records/zz", None),
                ("GET", "/v2/collections/films/records/404", None),
                ("GET", "/v2/collections", None),
                ("GET", "/v2/collections/films", None),
                ("GET", "/v2/collections/nope", None),
                ("POST", "/v2/multi-search", {"searches": [
                    {"collection": "films", "query": "star", "sort": ["pop"], "count": 5},
                    {"collection": "films", "count": 5000}, {"collection": "nope"}]}),
                ("POST", "/v2", {"collection": "films", "geo": around, "sort": ["-_geoDistance"], "count": 40,
                                 "numericFacets": {"_geoDistance": ["[0,1500)", "[1500,3000]"]}}),
                ("POST", "/v2", {"collection": "films", "query": "star", "geo": {"around": {"lat": 48.9, "lng": 2.4}},
                                 "sort": ["_geoDistance", "-id"], "count": 40}),
                ("PUT", "/v2/collections/shop/settings", {"vectors": {"text": {"dimensions": 3, "metric": "cosine"}}}),
                ("POST", "/v2/collections/shop/records", shop),
                ("POST", "/v2", {"collection": "shop", "vector": {**near, "k": 6}, "textFacets": ["brand"],
                                 "fields": ["title", "_vectors"]}),
                ("POST", "/v2", {"collection": "shop", "query": "red", "vector": near, "semanticRatio": 0.3,
                                 "filter": "price < 80", "textFacets": ["brand"], "textFacetFilters": {"brand": ["acme"]},
                                 "sort": ["-price"], "skip": 1, "count": 4}),
                ("POST", "/v2/multi-search", {"searches": [
                    {"collection": "shop", "query": "boot", "vector": near, "groupBy": "brand", "groupLimit": 2},
                    {"collection": "shop", "vector": {"name": "image", "values": [1.0]}}]}),
                ("POST", "/v2/collections/shop/records", [{"id": 99, "_vectors": {"text": [1, 2]}}]),
            ]
            statuses = []
            for method, path, body in calls:
                mine, theirs = _call(sharded_base, method, path, body), _call(single_base, method, path, body)
                assert (mine[0], _untimed(mine[1])) == (theirs[0], _untimed(theirs[1])), (method, path)
                statuses.append(mine[0])
            assert statuses == [200, 201, 200, 400, 200, 200, 200, 200, 404, 200, 200, 404, 200, 200, 200,
                                200, 201, 200, 200, 200, 400], statuses
            for page in ("/v2/collections/films/records?count=4", "/v2/collections/films/records?count=1000"):
                while True:
                    mine, theirs = _call(sharded_base, "GET", page), _call(single_base, "GET", page)
                    assert mine[:2] == theirs[:2] and mine[0] == 200, page
                    if mine[1]["next"] is None:
                        break
                    page = page.split("&after=")[0] + "&after=" + mine[1]["next"]
            for method, path, body in [("DELETE", "/v2/collections/films", None), ("GET", "/v2/collections", None),
                                       ("POST", "/v2", {"collection": "films"}),
                                       ("DELETE", "/v2/collections/films", None)]:
                mine, theirs = _call(sharded_base, method, path, body), _call(single_base, method, path, body)
                assert (mine[0], _untimed(mine[1])) == (theirs[0], _untimed(theirs[1])), (method, path)
        finally:
            _stop(single)
    finally:
        _stop(sharded)


def test_serve_sharded_and_restart_a_dead_shard(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "roarsearch", "serve", "--data", str(tmp_path / "data"),
                               "--shards", "2", "--port", "0", "--api-key", KEY],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "ready on" in line, line
        base = line.split("ready on ")[1].split()[0]
        records = [{"id": i, "title": f"star {['wars', 'trek'][i % 2]}", "brand": ["acme", "zeta", "beta"][i % 3]}
                   for i in range(30)]
        assert _call(base, "POST", "/v2/collections/films/records", records)[0] == 201
        query = {"collection": "films", "query": "star wars", "textFacets": ["brand"], "count": 5}
        status, whole, _ = _call(base, "POST", "/v2", query)
        assert status == 200 and whole["totalHits"] == 15
        pids = _shard_pids(server.pid)
        assert len(pids) == 2, pids
        os.kill(pids[0], signal.SIGKILL)
        statuses = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, body, headers = _call(base, "POST", "/v2", query)
            statuses.append(status)
            if status == 200:
                body.pop("responseTime"), whole.pop("responseTime", None)
                assert body == whole  # never a partial answer
                if 503 in statuses:
                    break
            else:
                assert status == 503 and body["status"] == 503 and headers.get("retry-after") == "1", (status, body)
            time.sleep(0.05)
        assert 503 in statuses and statuses[-1] == 200, statuses
        assert _call(base, "DELETE", "/v2/collections/films/records", [1, 2, 999])[1] == [
            {"status": 200, "id": 1}, {"status": 200, "id": 2}, {"status": 404, "id": 999}]
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
