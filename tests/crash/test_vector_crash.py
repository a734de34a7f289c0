"""This module tests the following properties:

- a writer of records with vectors (upserts changing them, deletes), SIGKILLed at each named
  failpoint and at random moments, reopens with every acknowledged record's vector in place (a
  search for it finds it at distance 0, exactly and through the graph), no deleted or replaced
  vector found, the vector index equal to the stored vectors (``check()``), and new writes accepted.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.storage.failpoints import NAMES
from tests.crash.vector_writer import vector_of

ROOT = Path(__file__).resolve().parents[2]
BATCHES, SIZE = 400, 7


def run(data: Path, failpoint: str | None, kill_after: float | None) -> list[str]:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, ROARSEARCH_SNAPSHOT_LOG_RECORDS="6", PYTHONPATH=path)
    env.pop("ROARSEARCH_FAILPOINTS", None)
    if failpoint:
        env["ROARSEARCH_FAILPOINTS"] = failpoint
    writer = subprocess.Popen([sys.executable, "-m", "tests.crash.vector_writer", str(data), str(BATCHES), str(SIZE)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    if kill_after is not None:
        time.sleep(kill_after)
        writer.send_signal(signal.SIGKILL)
    stdout, stderr = writer.communicate(timeout=300)
    assert "Traceback" not in stderr, stderr[-2000:]
    return [line for line in stdout.splitlines() if line.startswith("ACK")]


def expected(acks: list[str]) -> dict[int, int]:
    """Record id → vector version after the acknowledged writes."""
    versions: dict[int, int] = {}
    for line in acks:
        parts = line.split()
        if parts[1] == "add":
            versions.update({int(parts[2]) * 1000 + i: 0 for i in range(SIZE)})
        elif parts[1] == "upsert":
            versions.update({int(parts[2]) * 1000 + i: int(parts[3]) for i in range(SIZE)})
        elif parts[1] == "delete":
            versions.pop(int(parts[2]), None)
    return versions


def verify(data: Path, acks: list[str]) -> None:
    versions = expected(acks)
    with Engine(data) as engine:
        if "c" not in engine.collection_names():
            assert not versions
            return
        report = engine.check()
        assert report["ok"] or all("cut off at open" in p for p in report["problems"]), report
        last = acks[-1].split() if acks else []
        for record_id, version in list(versions.items())[::5]:
            body: dict[str, Any] = {"collection": "c", "fields": ["id", "_vectors"], "count": 3,
                                    "vector": {"name": "v", "values": vector_of(record_id, version), "k": 3}}
            for exact in (True, False):
                body["vector"]["exact"] = exact
                found = engine.search(body)["results"]
                first = found[0]
                if first["id"] != record_id:
                    # Only the very next, unacknowledged write may have replaced or deleted it.
                    assert last and last[1] in ("add", "upsert"), (record_id, found)
                    continue
                assert first["_vectorScore"] == 0.0
                assert first["_vectors"] == {"v": vector_of(record_id, version)}
        engine.add_records("c", {"id": -1, "_vectors": {"v": [0.5, 0.5, 0.5, 0.5]}})
        found = engine.search({"collection": "c", "vector": {"name": "v", "values": [0.5, 0.5, 0.5, 0.5], "k": 1}})
        assert found["results"][0]["id"] == -1


@pytest.mark.parametrize("failpoint", NAMES)
def test_kill_at_named_failpoints(tmp_path: Path, failpoint: str) -> None:
    acks = run(tmp_path, f"{failpoint}=kill@3", None)
    assert len(acks) >= 2  # the space was declared and a batch added before the kill
    verify(tmp_path, acks)


@pytest.mark.parametrize("seed", range(4))
def test_kill_at_random_moments(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for round_number in range(2):
        data = tmp_path / f"data{round_number}"
        verify(data, run(data, None, rng.uniform(0.3, 1.5)))


def test_clean_run_reopens_with_the_graph(tmp_path: Path) -> None:
    acks = run(tmp_path, None, None)
    assert acks
    with Engine(tmp_path) as engine:
        space = engine._collection("c").index.vectors.spaces["v"]
        assert space.graph is not None and space.graph_buffer is not None  # opened as a view, not rebuilt
    verify(tmp_path, acks)
