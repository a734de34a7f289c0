"""This module tests the following properties of ``roarsearch serve`` as a process:

- with no key configured it generates an admin key, prints it exactly once, and never runs open;
  keys also come from ROARSEARCH_API_KEY / ROARSEARCH_SEARCH_KEYS; the default CORS policy allows
  any origin; it prints exactly one ready line;
- SIGTERM during an import: in-flight writes finish, the process exits 0, and after a restart every
  acknowledged batch is there, whole (at most the one batch whose answer was lost is there too);
- SIGINT also stops it with exit status 0 and releases the data directory;
- a second server on the same data directory exits 1 with the lock message, before binding a port;
- an unexpected internal error is a 500 carrying only a request id, and the log has that id with
  the traceback.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from pathlib import Path

import httpx

from roarsearch import Engine
from tests.http.conftest import ADMIN, launch, start_server, stop_server

BATCH = 50


def test_generated_key_environment_keys_and_ready_line(tmp_path: Path) -> None:
    generated = start_server(tmp_path / "a", keys=False)
    try:
        output = generated.output()
        keys = re.findall(r"generated an admin key for this run \(shown only now\): (\S+)", output)
        assert len(keys) == 1 and len(keys[0]) >= 24
        assert output.count("roarsearch ready on") == 1
        with generated.client(None) as anonymous, generated.client(keys[0]) as admin:
            assert anonymous.post("/v2", json={"collection": "c"}).status_code == 401
            assert admin.post("/v2/collections/c/records", json={"id": 1}).status_code == 201
        preflight = httpx.options(f"{generated.url}/v2", headers={
            "Origin": "https://anywhere.example", "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "*"
    finally:
        assert stop_server(generated) == 0
    assert keys[0] not in generated.output().split(keys[0], 1)[1]  # printed once, not at shutdown either

    from_env = start_server(tmp_path / "b", keys=False,
                            env={"ROARSEARCH_API_KEY": "env-admin", "ROARSEARCH_SEARCH_KEYS": "s1, s2"})
    try:
        assert "generated an admin key" not in from_env.output()
        with from_env.client("env-admin") as admin, from_env.client("s2") as searcher:
            assert admin.post("/v2/collections/c/records", json={"id": 1}).status_code == 201
            assert searcher.post("/v2", json={"collection": "c"}).json()["totalHits"] == 1
            assert searcher.post("/v2/collections/c/records", json={"id": 2}).status_code == 403
    finally:
        assert stop_server(from_env) == 0


def test_sigterm_during_import_keeps_acknowledged_batches(tmp_path: Path) -> None:
    data = tmp_path / "data"
    # Each write sleeps 100 ms after its fsync, before it is acknowledged: the signal lands mid-write.
    running = start_server(data, env={"ROARSEARCH_FAILPOINTS": "wal.after_fsync=sleep:100"})
    acknowledged: list[int] = []
    outcome: list[str] = []

    def writer() -> None:
        with running.client(ADMIN) as admin:
            for batch in range(10_000):
                try:
                    response = admin.post("/v2/collections/c/records",
                                          json=[{"id": batch * BATCH + i, "batch": batch} for i in range(BATCH)])
                except httpx.HTTPError as error:
                    outcome.append(type(error).__name__)
                    return
                if response.status_code != 201:
                    outcome.append(f"status {response.status_code}")
                    return
                acknowledged.append(batch)

    thread = threading.Thread(target=writer)
    thread.start()
    while len(acknowledged) < 5 and thread.is_alive():
        time.sleep(0.01)
    time.sleep(0.03)  # the next batch is in flight
    in_flight = len(acknowledged)
    assert stop_server(running) == 0
    thread.join(timeout=30)
    assert not thread.is_alive() and outcome  # the writer saw the server go away
    assert len(acknowledged) > in_flight  # the write in flight at SIGTERM finished and was acknowledged

    restarted = start_server(data)
    try:
        with restarted.client(ADMIN) as admin:
            total = admin.post("/v2", json={"collection": "c", "count": 0}).json()["totalHits"]
            assert total in (len(acknowledged) * BATCH, (len(acknowledged) + 1) * BATCH)
            for batch in acknowledged:
                response = admin.post("/v2", json={"collection": "c", "filter": f"batch = {batch}", "count": 0})
                assert response.json()["totalHits"] == BATCH, batch
    finally:
        assert stop_server(restarted) == 0


def test_sigint_stops_cleanly_and_second_server_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    running = start_server(data)
    try:
        with running.client(ADMIN) as admin:
            assert admin.post("/v2/collections/c/records", json={"id": 1, "t": "kept"}).status_code == 201
        second, log = launch(data)
        assert second.wait(timeout=30) == 1
        refused = log.read_text()
        assert "roarsearch serve:" in refused and "in use" in refused and "ready" not in refused
        assert "Traceback" not in refused
    finally:
        assert stop_server(running, signal.SIGINT) == 0
    with Engine(data / "default") as engine:  # the directory was released and the write is there
        assert engine.search({"collection": "c", "query": "kept"})["totalHits"] == 1


def test_unexpected_error_is_500_with_request_id(tmp_path: Path) -> None:
    running = start_server(tmp_path / "data", env={"ROARSEARCH_FAILPOINTS": "wal.after_append_before_fsync=raise"})
    try:
        with running.client(ADMIN) as admin:
            response = admin.post("/v2/collections/c/records", json={"id": 1})
            assert response.status_code == 500
            body = response.json()
            found = re.fullmatch(r"internal error, request id ([0-9a-f]{12})", body["data"])
            assert body["status"] == 500 and found, body
            assert admin.get("/health").status_code == 200  # still serving
    finally:
        assert stop_server(running) == 0
    log = running.output()
    assert f"request {found[1]} POST /v2/collections/c/records failed" in log and "FailpointError" in log
