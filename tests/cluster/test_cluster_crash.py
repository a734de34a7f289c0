"""This module tests the following properties:

- a driver process SIGKILLed (with its whole process group: the local Ray it started and the
  shard actors die too) at a random moment of a stream of write batches: after reopening, every
  acknowledged batch is present and the one batch in flight is wholly present or wholly absent
  (the state equals the model after the acknowledged batches, or after one more);
- a shard actor killed (``ray.kill``) while batches are being written: it is restarted from its
  directory, calls meanwhile fail only with 503, searches are 503 or see whole batches only, and after
  reopening every acknowledged batch is present and every failed one wholly present or absent;
- a driver SIGKILLed while it updates settings and drops collections: after reopening, every
  shard holds the same collections with the same settings, those after the acknowledged
  operations (or after one more): never a settings update or a drop on some shards only;
- reopening with another shard count is a 400.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")

from roarsearch import Engine, SearchError
from roarsearch.cluster import ShardedEngine
from tests.cluster.writer import apply, apply_settings, operations, settings_operations

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

ROOT = Path(__file__).resolve().parents[2]
BATCHES, SIZE, SHARDS = 40, 6, 3


def _state(engine: ShardedEngine) -> dict[Any, dict[str, Any]]:
    try:
        response = engine.search({"collection": "c", "count": 1000})
    except SearchError as error:
        if error.status == 404:
            return {}
        raise
    assert response["totalHits"] <= 1000
    return {result["id"]: {key: value for key, value in result.items() if key != "_rank"} for result in response["results"]}


def _models(ops: list[tuple[str, Any]], acked: int) -> tuple[dict[Any, Any], dict[Any, Any]]:
    model: dict[Any, dict[str, Any]] = {}
    for op in ops[:acked]:
        apply(model, op)
    after = dict(model)
    if acked < len(ops):
        apply(after, ops[acked])
    return model, after


@pytest.mark.parametrize("seed", [1, 2])
def test_driver_killed_mid_batch(tmp_path: Path, ray_session: Any, seed: int) -> None:
    data = tmp_path / "data"
    writer = subprocess.Popen([sys.executable, "-m", "tests.cluster.writer", str(data), str(SHARDS), str(BATCHES), str(SIZE)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    acked = -1
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line.strip() == "READY", line
        target = random.Random(seed).randint(3, 25)
        while acked < target:
            line = writer.stdout.readline()
            if not line.startswith("ACK"):
                break
            acked = int(line.split()[1])
        time.sleep(random.Random(seed).random() * 0.05)
        writer.send_signal(signal.SIGKILL)  # the driver, mid-batch
        writer.wait(30)
        rest = writer.stdout.read()
        acked = max([acked] + [int(line.split()[1]) for line in rest.splitlines() if line.startswith("ACK")])
    finally:
        try:
            os.killpg(writer.pid, signal.SIGKILL)  # its local Ray and shard actors
        except ProcessLookupError:
            pass
    ops = operations(BATCHES, SIZE)
    with ShardedEngine(data) as engine:
        state = _state(engine)
    before, after = _models(ops, acked + 1)
    assert state in (before, after), (acked, len(state), len(before), len(after))


def _kill_writer_after(data: Path, seed: int, *extra: str) -> int:
    """Start a writer process, SIGKILL it (with its Ray) a little after a random acknowledged
    operation; the number of the last acknowledged operation."""
    writer = subprocess.Popen([sys.executable, "-m", "tests.cluster.writer", str(data), str(SHARDS), str(BATCHES),
                               str(SIZE), *extra],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    acked = -1
    try:
        assert writer.stdout is not None
        line = writer.stdout.readline()
        assert line.strip() == "READY", line
        target = random.Random(seed).randint(3, 40)
        while acked < target:
            line = writer.stdout.readline()
            if not line.startswith("ACK"):
                break
            acked = int(line.split()[1])
        time.sleep(random.Random(seed).random() * 0.03)
        writer.send_signal(signal.SIGKILL)  # the driver, mid-operation
        writer.wait(30)
        rest = writer.stdout.read()
        return max([acked] + [int(line.split()[1]) for line in rest.splitlines() if line.startswith("ACK")])
    finally:
        try:
            os.killpg(writer.pid, signal.SIGKILL)  # its local Ray and shard actors
        except ProcessLookupError:
            pass


@pytest.mark.parametrize("seed", [3, 4])
def test_driver_killed_mid_settings_or_drop(tmp_path: Path, ray_session: Any, seed: int) -> None:
    data = tmp_path / "data"
    acked = _kill_writer_after(data, seed, "settings")
    with ShardedEngine(data) as engine:  # recovery resolves the operation in flight on every shard
        seen = {entry["collection"]: engine.get_settings(entry["collection"]) for entry in engine.collections()}
    shards = []
    for shard in range(SHARDS):  # each shard's own directory, as it is on disk
        with Engine(data / f"shard-{shard}") as one:
            shards.append({name: one.get_settings(name) for name in one.collection_names()})
    assert all(state == shards[0] for state in shards), shards
    assert seen == shards[0]
    ops = settings_operations(BATCHES)
    assert acked < len(ops) - 1, "the writer finished before it was killed"
    before: dict[str, Any] = {}
    for op in ops[:acked + 1]:
        apply_settings(before, op)
    after = dict(before)
    if acked + 1 < len(ops):
        apply_settings(after, ops[acked + 1])
    assert shards[0] in (before, after), (acked, sorted(shards[0]))


def test_shard_actor_killed_mid_batch(tmp_path: Path, ray_session: Any) -> None:
    data = tmp_path / "data"
    ops = operations(60, SIZE)
    outcomes: list[bool | None] = []  # per op: acknowledged, failed (503), or not tried
    unavailable = 0
    inconsistent: list[int] = []
    with ShardedEngine(data, shards=SHARDS) as engine:
        done = threading.Event()

        def write() -> None:
            nonlocal unavailable
            for kind, argument in ops:
                try:
                    if kind == "add":
                        engine.add_records("c", argument)
                    else:
                        engine.delete_records("c", ids=argument)
                    outcomes.append(True)
                except SearchError as error:
                    assert error.status == 503, error
                    unavailable += 1
                    outcomes.append(False)
                    time.sleep(0.2)
            done.set()

        def read() -> None:
            nonlocal unavailable
            while not done.is_set():
                try:
                    response = engine.search({"collection": "c", "count": 0, "textFacets": ["batch"]})
                except SearchError as error:
                    assert error.status in (503, 404), error
                    unavailable += error.status == 503
                    continue
                # whole batches only: every batch number is held by a multiple of half a batch
                for entry in response["textFacets"][0]["values"]:
                    if entry["count"] not in (SIZE // 2, SIZE):
                        inconsistent.append(entry["count"])

        threads = [threading.Thread(target=write), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        import ray

        for _ in range(2):
            time.sleep(0.5)
            assert not done.is_set(), "the writes ended before a shard was killed"
            killed = engine._actors[1]
            ray.kill(killed, no_restart=True)  # a shard dies mid-stream
            deadline = time.monotonic() + 60
            while engine._actors[1] is killed:  # until a call notices and the shard is restarted
                assert time.monotonic() < deadline
                time.sleep(0.05)
        for thread in threads:
            thread.join(300)
        assert not inconsistent
        # 503s are likely but not certain: a shard that dies while a batch commits is restarted
        # inside that write, with searches held, so no caller may notice.
        assert True in outcomes, outcomes
    with ShardedEngine(data) as engine:
        state = _state(engine)
    # Replay: acknowledged ops are in; a failed op may be wholly in or out — try both per failed op.
    candidates: list[dict[Any, Any]] = [{}]
    for op, outcome in zip(ops, outcomes):
        next_candidates = []
        for model in candidates:
            applied = dict(model)
            apply(applied, op)
            next_candidates.append(applied)
            if outcome is False:
                next_candidates.append(model)
        unique = {tuple(sorted((k, tuple(sorted(v.items()))) for k, v in m.items())): m for m in next_candidates}
        candidates = list(unique.values())
    assert state in candidates, (outcomes, len(state))


def test_shard_count_is_remembered(tmp_path: Path, ray_session: Any) -> None:
    with ShardedEngine(tmp_path / "d", shards=2) as engine:
        engine.add_records("c", [{"id": 1, "a": "x"}])
    with pytest.raises(SearchError) as error:
        ShardedEngine(tmp_path / "d", shards=3)
    assert error.value.status == 400
    with ShardedEngine(tmp_path / "d") as engine:
        assert engine.shards == 2 and engine.search({"collection": "c"})["totalHits"] == 1
