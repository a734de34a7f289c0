"""A bulk load (``Engine.add_batches``) SIGKILLed at random moments, snapshots included, leaves
a prefix of its batches, each batch whole (upserts with it), every batch it had reported written
among them; the directory reopens, passes the integrity check and takes new writes. (Kills at
the write path's named failpoints are ``test_crash_recovery``'s: the bulk path writes through it.)"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roarsearch import Engine

ROOT = Path(__file__).resolve().parents[2]
BATCHES, SIZE = 5000, 40
AFTER_CRASH_ID = 10**9


def run_until_killed(data: Path, kill_after: float) -> list[int]:
    env = dict(os.environ, ROARSEARCH_SNAPSHOT_LOG_RECORDS="5", PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    writer = subprocess.Popen([sys.executable, "-m", "tests.crash.bulk_writer", str(data), str(BATCHES), str(SIZE)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    time.sleep(kill_after)
    writer.send_signal(signal.SIGKILL)
    out, err = writer.communicate()
    assert writer.returncode == -signal.SIGKILL, err[-2000:]  # killed mid-load, not finished
    return [int(line.split()[1]) for line in out.splitlines() if line.startswith("WRITTEN")]


def verify(data: Path, written: list[int]) -> None:
    with Engine(data) as engine:
        if "c" not in engine.collection_names():
            assert not written
            return
        found: dict[int, dict] = {}
        page: dict = {"next": None}
        while True:  # every record, by the stored-records cursor (not the search path)
            page = engine.page_records("c", count=1000, after=page["next"])
            found.update((record["id"], record) for record in page["records"] if record["id"] != AFTER_CRASH_ID)
            if page["next"] is None:
                break
        assert engine.search({"collection": "c", "count": 0})["totalHits"] == len(found)  # the index agrees
        batches = sorted({record_id // 1000 for record_id in found})
        assert batches == list(range(len(batches))), "the batches kept are a prefix"
        assert not written or batches[-1] >= written[-1], "a batch reported written is missing"
        for n in batches:
            ids = {n * 1000 + i for i in range(SIZE)}
            assert ids <= found.keys(), f"batch {n} is not whole"
            upserted = n + 1 in batches and (n + 1) % 4 == 3
            for i in range(2):
                assert found[n * 1000 + i].get("upsert") == (n + 1 if upserted else None)
        assert engine.check()["ok"]
        engine.add_records("c", [{"id": AFTER_CRASH_ID, "text": "after the crash"}])
        assert engine.search({"collection": "c", "query": "after crash", "count": 0})["totalHits"] == 1


@pytest.mark.parametrize("seed", range(4))
def test_bulk_load_killed_at_random_moments(tmp_path: Path, seed: int) -> None:
    data = tmp_path / "data"
    verify(data, run_until_killed(data, random.Random(seed).uniform(0.6, 2.0)))
