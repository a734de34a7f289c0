"""This module tests the following properties, with real processes killed by SIGKILL:

- a writer killed at each named failpoint (log appended but not fsynced; fsynced but not
  acknowledged; halfway through a snapshot; between the snapshot rename and the log reset; after
  the reset), on the first and the third hit: every acknowledged batch is replayed, at most the
  one batch in flight is there besides (whole), no temporary file survives the reopen, and a
  new writer goes on from there;
- the same for kills at random moments.
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

from roarsearch.storage.failpoints import NAMES
from tests.unit.storage.helpers import recover

ROOT = Path(__file__).resolve().parents[3]
WRITER = """
import sys
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.store import CollectionStore
directory, start, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = CollectionStore(FileSystem(), directory)
state, replay = store.open()
applied = (list(state["applied"]) if state is not None else []) + [item["n"] for _, item in replay]
for n in range(start, start + count):
    store.log({"op": "add", "n": n, "records": [{"id": n, "pad": "x" * (n % 50)}]})
    applied.append(n)
    print("ACK", n, flush=True)
    if store.should_snapshot():
        store.snapshot({"applied": applied})
print("DONE", flush=True)
"""


def start_writer(directory: Path, start: int, count: int, failpoint: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, ROARSEARCH_SNAPSHOT_LOG_RECORDS="5", PYTHONPATH=str(ROOT / "src"))
    env.pop("ROARSEARCH_FAILPOINTS", None)
    if failpoint is not None:
        env["ROARSEARCH_FAILPOINTS"] = failpoint
    return subprocess.Popen([sys.executable, "-c", WRITER, str(directory), str(start), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def acknowledged(output: str) -> list[int]:
    # Only whole lines: a SIGKILL can cut the last one short ("ACK " without its number).
    whole_lines = output.split("\n")[:-1]
    return [int(line.split()[1]) for line in whole_lines if line.startswith("ACK ")]


def check_after_kill(directory: Path, acks: list[int], first: int) -> list[int]:
    recovered = recover(str(directory))
    expected = list(range(first)) + acks
    in_flight = (acks[-1] + 1) if acks else first
    assert recovered in (expected, expected + [in_flight]), (recovered[-5:], acks[-5:])
    assert not [name for name in os.listdir(directory) if name.endswith(".tmp")]
    return recovered


def kill_and_check(directory: Path, failpoint: str | None, kill_after: float | None) -> None:
    first = len(recover(str(directory))) if directory.exists() else 0
    writer = start_writer(directory, first, 40 if kill_after is None else 100_000, failpoint)
    if kill_after is not None:
        time.sleep(kill_after)
        writer.send_signal(signal.SIGKILL)
    output, errors = writer.communicate(timeout=60)
    assert writer.returncode == -signal.SIGKILL, (writer.returncode, errors[-500:])
    recovered = check_after_kill(directory, acknowledged(output), first)
    # ... and a new writer goes on from there.
    follower = start_writer(directory, len(recovered), 7)
    output, errors = follower.communicate(timeout=60)
    assert follower.returncode == 0, errors[-500:]
    assert recover(str(directory)) == recovered + list(range(len(recovered), len(recovered) + 7))


@pytest.mark.parametrize("hit", [1, 3])
@pytest.mark.parametrize("name", NAMES)
def test_kill_at_failpoint(tmp_path: Path, name: str, hit: int) -> None:
    directory = tmp_path / "c"
    start_writer(directory, 0, 3).communicate(timeout=60)  # some history before the kill
    kill_and_check(directory, f"{name}=kill@{hit}", None)


@pytest.mark.parametrize("seed", range(4))
def test_kill_at_random_moments(tmp_path: Path, seed: int) -> None:
    kill_and_check(tmp_path / "c", None, random.Random(seed).uniform(0.15, 0.5))


@pytest.mark.slow
def test_kill_at_random_moments_many(tmp_path: Path) -> None:
    rng = random.Random(77)
    directory = tmp_path / "c"
    for _ in range(25):  # the same directory, killed again and again
        kill_and_check(directory, None, rng.uniform(0.12, 0.6))
