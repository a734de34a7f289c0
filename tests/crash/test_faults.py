"""This module tests the following properties:

- I/O error loop (SQLite's ioerr): failing the Nth file operation with ENOSPC or EIO, for N = 1, 2, …
  until a write succeeds, makes add/delete raise StorageError with memory unchanged, and reopening
  gives exactly the old state (or the new one once the write succeeded);
- power cut simulation: bytes written after the last fsync are kept, dropped, torn or garbled at
  random; reopening gives the old state or the new one, never a mix, and check() passes;
- bit flips and truncations at many offsets of every file type (snapshot, log, format marker) are
  detected: opening raises CorruptionError naming the file and offset, or — for damage confined to
  an unacknowledged tail of the log — cuts it off and check() reports it; never wrong answers;
- a frozen data directory of format version 1 (tests/compat/format_v1) keeps opening.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from pathlib import Path

import pytest

from roarsearch import CorruptionError, Engine, StorageError
from roarsearch.storage import failpoints
from roarsearch.storage.fs import FaultyFileSystem

FROZEN = Path(__file__).resolve().parents[1] / "compat" / "format_v1"


def snapshot_ids(engine: Engine) -> list:
    if "c" not in engine.collection_names():
        return []
    return sorted(r["id"] for r in engine.search({"collection": "c", "count": 1000})["results"])


def crash(engine: Engine) -> None:
    """Drop the engine as a killed process would: no snapshot, no clean close; release the lock."""
    assert engine._directory is not None
    engine._directory.close()


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO])
def test_io_error_loop(tmp_path: Path, error: int) -> None:
    base = [{"id": i, "t": "base"} for i in range(5)]
    for n in range(1, 40):
        data = tmp_path / f"run{n}"
        with Engine(data) as engine:
            engine.add_records("c", base)
        fs = FaultyFileSystem(fail_errno=error)
        engine = Engine(data, filesystem=fs)
        before = snapshot_ids(engine)
        fs.fail_at = fs.operations + n
        try:
            engine.add_records("c", [{"id": 100, "t": "new"}, {"id": 101, "t": "new"}])
            engine.delete_records("c", ids=[0])
            succeeded = True
        except StorageError as failure:
            assert os.strerror(error) in failure.data or "could not" in failure.data
            succeeded = False
        after = snapshot_ids(engine)
        if not succeeded:
            # Memory holds whole batches only: the old state, or the add without the delete.
            assert after in (before, sorted(before + [100, 101]))
        crash(engine)
        with Engine(data) as reopened:
            assert snapshot_ids(reopened) == after
            assert reopened.check()["ok"]
        if succeeded:
            assert after == sorted([i for i in range(1, 5)] + [100, 101])
            return
    pytest.fail("the write never succeeded")


@pytest.mark.parametrize("seed", range(30))
def test_power_cut_keeps_old_or_new(tmp_path: Path, seed: int) -> None:
    data = tmp_path / "data"
    with Engine(data) as engine:
        engine.add_records("c", [{"id": i, "t": "old"} for i in range(4)])
    fs = FaultyFileSystem()
    engine = Engine(data, filesystem=fs)
    failpoints.arm("wal.after_append_before_fsync", "raise")
    try:
        with pytest.raises(failpoints.FailpointError):
            engine.add_records("c", [{"id": 10 + i, "t": "new"} for i in range(3)])
    finally:
        failpoints.disarm_all()
    crash(engine)
    fs.crash(seed)  # the power cut: the unsynced append is kept, dropped, torn or garbled
    with Engine(data) as reopened:
        ids = snapshot_ids(reopened)
        assert ids in ([0, 1, 2, 3], [0, 1, 2, 3, 10, 11, 12])
        report = reopened.check()
        assert report["ok"] or all("cut off at open" in p for p in report["problems"])


def build(data: Path) -> None:
    with Engine(data) as engine:  # closing writes a snapshot
        engine.add_records("c", [{"id": i, "t": f"word{i}", "n": i} for i in range(20)])
    engine = Engine(data)
    engine.add_records("c", [{"id": 100 + i, "t": "logged"} for i in range(3)])  # stays in the log
    engine.add_records("c", [{"id": 200, "t": "logged again"}])
    crash(engine)


@pytest.mark.parametrize("name", ["snapshot.rsnap", "wal.rlog", "FORMAT"])
def test_bit_flips_and_truncations_are_detected(tmp_path: Path, name: str) -> None:
    pristine = tmp_path / "pristine"
    build(pristine)
    with Engine(pristine) as engine:
        expected = snapshot_ids(engine)
    crash_free = pristine / ("FORMAT" if name == "FORMAT" else f"collections/c/{name}")
    size = crash_free.stat().st_size
    rng = random.Random(name)
    offsets = sorted(set(rng.randrange(size) for _ in range(25)) | {0, size - 1})
    damages = [("flip", offset) for offset in offsets] + [("cut", offset) for offset in offsets[::3]]
    for kind, offset in damages:
        data = tmp_path / f"{kind}{offset}"
        shutil.copytree(pristine, data)
        target = data / crash_free.relative_to(pristine)
        raw = bytearray(target.read_bytes())
        if kind == "flip":
            raw[offset] ^= 1 << rng.randrange(8)
        else:
            del raw[offset:]
        target.write_bytes(bytes(raw))
        try:
            with Engine(data) as engine:
                ids = snapshot_ids(engine)
                report = engine.check()
        except CorruptionError as error:
            assert str(target) in error.data or name in error.data
            assert "offset" in error.data
            continue
        # Opened: only damage to the log's last (unacknowledged-looking) record may be absorbed,
        # and then it is reported; the answers are never wrong.
        assert name == "wal.rlog", (kind, offset)
        assert ids in (expected, [i for i in expected if i != 200]), (kind, offset)
        if ids != expected:
            assert any("cut off at open" in problem for problem in report["problems"]), report


def test_frozen_format_v1_directory_opens(tmp_path: Path) -> None:
    data = tmp_path / "copy"
    shutil.copytree(FROZEN, data)
    with Engine(data) as engine:
        response = engine.search({"collection": "people", "query": "lovlace", "textFacets": ["field"]})
        assert [r["id"] for r in response["results"]] == [1]
        assert engine.search({"collection": "people", "count": 0})["totalHits"] == 3
        assert engine.search({"collection": "people", "filter": "born > 1900", "count": 0})["totalHits"] == 2
        assert engine.check()["ok"]
