"""This module tests the following properties of ``roarsearch serve --workers N`` (a real server on
127.0.0.1, every request on a new connection, so that the kernel spreads them over the workers):

- read-your-writes on every worker: after each acknowledged add, delete (by id, by filter, clear),
  settings change and collection drop, every one of many searches and reads — answered by the
  writer and by the readers alike (``/health`` names the worker) — sees it; writes sent to a reader
  are forwarded and answered as the writer answers;
- the readers follow checkpoints: with a snapshot and log reset every 3 batches, counts stay exact;
- errors keep the ``{status, data}`` shape on every worker (401, 400, 404);
- the writer files each add batch's analysis for the readers (after the batch that creates the
  collection), and the readers index those batches alike;
- a reader killed with SIGKILL is started again and serves again; SIGTERM stops every worker and
  exits 0, and the data written through any worker is there after a restart.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.http.conftest import ADMIN, SEARCH, Server, start_server, stop_server

WORKERS = 3
#: New connections per check: with 3 workers, the chance that one never answers is (2/3)^12 < 1%
#: per check, and the test checks dozens of times.
TRIES = 12


def fresh(server: Server, key: str = ADMIN) -> httpx.Client:
    """A client that opens a new connection for every request (no keep-alive)."""
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30,
                        limits=httpx.Limits(max_keepalive_connections=0))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("workers") / "data"
    running = start_server(data, "--workers", str(WORKERS), env={"ROARSEARCH_SNAPSHOT_LOG_RECORDS": "3"})
    yield running
    assert stop_server(running) == 0


def every_worker_sees(server: Server, body: dict[str, Any], check: Any, seen: set[str]) -> None:
    with fresh(server) as client:
        for _ in range(TRIES):
            seen.add(client.get("/health").headers["x-roarsearch-worker"])
            answer = client.post("/v2", json=body)
            assert answer.status_code == 200, answer.text
            check(answer.json())


def test_read_your_writes_on_every_worker(served: Server) -> None:
    seen: set[str] = set()
    with fresh(served) as client:
        for i in range(12):
            assert client.post("/v2/collections/c/records", json=[{"id": i, "title": f"word{i} common", "n": i}]).status_code == 201
            every_worker_sees(served, {"collection": "c", "query": f"word{i}"},
                              lambda answer, i=i: answer["results"][0]["id"] == i or pytest.fail(str(answer)), seen)
            every_worker_sees(served, {"collection": "c", "count": 0},
                              lambda answer, i=i: answer["totalHits"] == i + 1 or pytest.fail(str(answer)), seen)
        assert client.request("DELETE", "/v2/collections/c/records", json=[0, 1]).json() == [{"status": 200, "id": 0},
                                                                                  {"status": 200, "id": 1}]
        every_worker_sees(served, {"collection": "c", "count": 0}, lambda answer: answer["totalHits"] == 10 or pytest.fail(str(answer)), seen)
        assert client.request("DELETE", "/v2/collections/c/records", json={"filter": "n >= 10"}).json() == [{"status": 200, "deleted": 2}]
        every_worker_sees(served, {"collection": "c", "count": 0}, lambda answer: answer["totalHits"] == 8 or pytest.fail(str(answer)), seen)
        assert client.put("/v2/collections/c/settings", json={"searchFields": ["n"]}).status_code == 200
        for _ in range(TRIES):
            assert client.get("/v2/collections/c/settings").json()["searchFields"] == ["n"]
        every_worker_sees(served, {"collection": "c", "query": "common"}, lambda answer: answer["totalHits"] == 0 or pytest.fail(str(answer)), seen)
        assert client.delete("/v2/collections/c/records", params={"clear": "true"}).status_code == 200
        every_worker_sees(served, {"collection": "c", "count": 0}, lambda answer: answer["totalHits"] == 0 or pytest.fail(str(answer)), seen)
        assert client.delete("/v2/collections/c").json() == {"status": 200}
        for _ in range(TRIES):
            assert client.get("/v2/collections").json() == []
            missing = client.post("/v2", json={"collection": "c"})
            assert (missing.status_code, missing.json()) == (404, {"status": 404, "data": "collection 'c' not found"})
    assert seen == {str(worker) for worker in range(WORKERS)}


def test_readers_follow_checkpoints(served: Server) -> None:
    with fresh(served) as client:
        for batch in range(10):  # a snapshot and log reset every 3 batches (see the fixture)
            records = [{"id": batch * 5 + i, "title": f"batch{batch}"} for i in range(5)]
            assert client.post("/v2/collections/k/records", json=records).status_code == 201
            for _ in range(4):
                assert client.post("/v2", json={"collection": "k", "count": 0}).json()["totalHits"] == (batch + 1) * 5
        for _ in range(TRIES):
            assert client.post("/v2", json={"collection": "k", "query": "batch7"}).json()["totalHits"] == 5


def test_errors_keep_their_shape_on_every_worker(served: Server) -> None:
    with fresh(served, SEARCH) as client:
        for _ in range(TRIES):
            forbidden = client.post("/v2/collections/c/records", json=[{"id": 1}])
            assert (forbidden.status_code, forbidden.json()["status"]) == (403, 403)
            bad = client.post("/v2", content=b"{nope", headers={"Content-Type": "application/json"})
            assert bad.status_code == 400 and set(bad.json()) == {"status", "data"}
            unauthorized = client.post("/v2", json={"collection": "c"}, headers={"Authorization": "Bearer wrong"})
            assert unauthorized.status_code == 401 and unauthorized.headers["www-authenticate"] == "Bearer"
    with fresh(served) as client:
        for _ in range(TRIES):
            bad_record = client.post("/v2/collections/c/records", json=[{"title": "no id"}])
            assert bad_record.status_code == 400 and set(bad_record.json()) == {"status", "data"}



def test_a_drop_with_a_body_is_answered_on_every_worker(served: Server) -> None:
    # The writer used to answer a forwarded drop before reading its body: the close then reset the
    # connection and the reader answered 503 "nothing was written" for a drop that had happened.
    body = b"[" * 300_000 + b"]" * 300_000
    with fresh(served) as client:
        for _ in range(TRIES):
            assert client.post("/v2/collections/dropped/records", json=[{"id": 1}]).status_code in (200, 201)
            dropped = client.request("DELETE", "/v2/collections/dropped", content=body,
                                     headers={"Content-Type": "application/json"})
            assert dropped.status_code == 200, dropped.text

def reader_pids(server: Server) -> set[int]:
    pids = set()
    with fresh(server) as client:
        for _ in range(40):
            answer = client.get("/health")
            if answer.headers["x-roarsearch-worker"] != "0":
                pids.add(answer.headers["x-roarsearch-worker"])
    return {int(pid) for pid in pids}


def children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(child) for child in handle.read().split()]


def test_dead_reader_is_restarted_and_sigterm_stops_all(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", "--workers", "2")
    try:
        readers = children(server.process.pid)
        assert len(readers) == 1
        with fresh(server) as client:
            assert client.post("/v2/collections/c/records", json=[{"id": 1, "title": "kept"}]).status_code == 201
        os.kill(readers[0], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = children(server.process.pid)
            if now and now != readers and os.path.exists(f"/proc/{now[0]}"):
                break
            time.sleep(0.1)
        assert children(server.process.pid) != readers
        with fresh(server) as client:
            seen = set()
            for _ in range(60):
                seen.add(client.get("/health").headers["x-roarsearch-worker"])
                assert client.post("/v2", json={"collection": "c", "query": "kept"}).json()["totalHits"] == 1
                if seen == {"0", "1"}:
                    break
            assert seen == {"0", "1"}
            assert client.post("/v2/collections/c/records", json=[{"id": 2, "title": "kept too"}]).status_code == 201
        last = children(server.process.pid)
    finally:
        status = stop_server(server)
    assert status == 0
    assert all(not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z" for pid in last)
    assert "worker 1 (pid" in server.output()  # the restart was logged
    again = start_server(tmp_path / "data", "--workers", "2")
    try:
        with fresh(again) as client:
            for _ in range(TRIES):
                assert client.post("/v2", json={"collection": "c", "query": "kept"}).json()["totalHits"] == 2
    finally:
        assert stop_server(again) == 0


def test_readers_are_handed_the_writers_analysis(tmp_path: Path) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    server = start_server(tmp_path / "data", "--workers", "2", env={"TMPDIR": str(temporary)})
    try:
        with fresh(server) as client:
            for batch in range(4):  # the first creates the collection; each later one is filed once
                records = [{"id": batch * 100 + i, "title": f"straße batch{batch} record {i}"} for i in range(80)]
                assert client.post("/v2/collections/c/records", json=records).status_code == 201
        filed = list(temporary.glob("roarsearch-serve-*/board-*.analyses/*.analysis"))
        assert len(filed) == 3
        def twenty(answer: dict[str, Any]) -> None:
            assert answer["totalHits"] == 80

        every_worker_sees(server, {"collection": "c", "query": "strasse batch3"}, twenty, set())
    finally:
        assert stop_server(server) == 0
    assert not list(temporary.glob("roarsearch-serve-*"))  # the run folder goes with the server
