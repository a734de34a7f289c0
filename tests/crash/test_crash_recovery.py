"""This module tests the following properties:

- a writer process SIGKILLed at each named failpoint (log appended but not fsynced; fsynced but not
  acknowledged; halfway through a snapshot; between the snapshot rename and the log reset) and at
  random moments loses no acknowledged batch, keeps no part of an unacknowledged one, reopens,
  passes check(), and accepts new writes;
- a second engine on the same directory, in another process or this one, gets a clear error.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roarsearch import DirectoryLockedError, Engine
from roarsearch.storage.failpoints import NAMES

ROOT = Path(__file__).resolve().parents[2]
BATCHES, SIZE = 2000, 7


def start_writer(data: Path, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, ROARSEARCH_SNAPSHOT_LOG_RECORDS="6", PYTHONPATH=str(ROOT))
    env.pop("ROARSEARCH_FAILPOINTS", None)
    if failpoint:
        env["ROARSEARCH_FAILPOINTS"] = failpoint
    return subprocess.Popen([sys.executable, "-m", "tests.crash.writer", str(data), str(BATCHES), str(SIZE)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def expected_state(acks: list[str]) -> tuple[dict[int, dict], set[int]]:
    """Records that must exist (id → fields) after the acknowledged writes, and ids of the first
    unacknowledged write (which may or may not have happened, but wholly)."""
    records: dict[int, dict] = {}
    for line in acks:
        parts = line.split()
        if parts[1] == "add":
            n = int(parts[2])
            for i in range(SIZE):
                records[n * 1000 + i] = {"batch": n}
        elif parts[1] == "upsert":
            n, by = int(parts[2]), int(parts[3])
            for i in range(SIZE):
                records[n * 1000 + i] = {"batch": n, "upsert": by}
        elif parts[1] == "delete":
            records.pop(int(parts[2]), None)
    return records, set()


def verify(data: Path, acks: list[str]) -> None:
    records, _ = expected_state(acks)
    with Engine(data) as engine:
        if "c" not in engine.collection_names():
            assert not records
            return
        total = engine.search({"collection": "c", "count": 0})["totalHits"]
        found = {r["id"]: r for skip in range(0, total, 1000)
                 for r in engine.search({"collection": "c", "count": 1000, "skip": skip})["results"]}
        assert total == len(found)
        for record_id, fields in records.items():
            if record_id not in found:
                # Only the very next, unacknowledged write may differ: a delete of this id.
                assert _next_write_deletes(acks, record_id), (record_id, acks[-3:])
                continue
            got = found[record_id]
            if got.get("upsert") != fields.get("upsert"):
                assert _next_write_upserts(acks, record_id // 1000), (record_id, got, fields)
        unexpected = set(found) - set(records)
        # Records the acknowledged writes do not explain must form one whole unacknowledged batch.
        if unexpected:
            batches = {record_id // 1000 for record_id in unexpected}
            assert len(batches) == 1, unexpected
            (batch,) = batches
            assert {batch * 1000 + i for i in range(SIZE)} == unexpected, unexpected
        report = engine.check()
        assert report["ok"] or all("cut off at open" in p for p in report["problems"]), report
        engine.add_records("c", {"id": -1, "text": "after recovery"})
        assert engine.search({"collection": "c", "query": "recovery"})["totalHits"] == 1


def _next_write(acks: list[str]) -> tuple[str, int]:
    last = acks[-1].split() if acks else ["ACK", "none", "-1"]
    kind, value = last[1], int(last[2])
    if kind == "add":
        n = value
        if n % 3 == 2:
            return "upsert", n - 1
        if n % 5 == 4:
            return "delete", (n - 2) * 1000
        return "add", n + 1
    if kind == "upsert":
        n = int(last[3])
        return ("delete", (n - 2) * 1000) if n % 5 == 4 else ("add", n + 1)
    return "add", (value // 1000) + 3


def _next_write_deletes(acks: list[str], record_id: int) -> bool:
    kind, value = _next_write(acks)
    return kind == "delete" and value == record_id


def _next_write_upserts(acks: list[str], batch: int) -> bool:
    kind, value = _next_write(acks)
    return kind == "upsert" and value == batch


def run_until_killed(data: Path, failpoint: str | None, kill_after: float | None) -> list[str]:
    writer = start_writer(data, failpoint)
    if kill_after is not None:
        time.sleep(kill_after)
        writer.send_signal(signal.SIGKILL)
    stdout, stderr = writer.communicate(timeout=120)
    acks = [line for line in stdout.splitlines() if line.startswith("ACK")]
    if kill_after is None and failpoint:
        assert writer.returncode == -signal.SIGKILL, (failpoint, writer.returncode, stderr[-2000:])
    return acks


@pytest.mark.parametrize("failpoint", NAMES)
@pytest.mark.parametrize("hit", [1, 3])
def test_kill_at_named_failpoints(tmp_path: Path, failpoint: str, hit: int) -> None:
    acks = run_until_killed(tmp_path, f"{failpoint}=kill@{hit}", None)
    verify(tmp_path, acks)


@pytest.mark.parametrize("seed", range(20))
def test_kill_at_random_moments(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    for round_number in range(3):
        data = tmp_path / f"data{round_number}"
        verify(data, run_until_killed(data, None, rng.uniform(0.2, 1.4)))


def test_second_engine_is_refused_in_another_process_and_this_one(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", {"id": 1})
        with pytest.raises(DirectoryLockedError) as caught:
            Engine(tmp_path)
        assert f"pid {os.getpid()}" in caught.value.data
        other = subprocess.run(
            [sys.executable, "-c", "import sys; from roarsearch import Engine\n"
             "try:\n    Engine(sys.argv[1])\nexcept Exception as e:\n    print(type(e).__name__, e.status)",
             str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert other.stdout.strip() == "DirectoryLockedError 409", other.stderr
    with Engine(tmp_path) as engine:  # released on close
        assert engine.search({"collection": "c"})["totalHits"] == 1
