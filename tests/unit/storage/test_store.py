"""This module tests the following properties:

- a collection store round-trips state + logged batches across reopenings and snapshots, and a
  crash between a snapshot's rename and the log's reset never applies a batch twice;
- power cuts (FaultyFileSystem) at every operation of a workload that creates a collection, logs
  batches and takes snapshots, over many seeds: reopening gives every acknowledged batch, plus at
  most the one in flight, whole — never a mix, never a CorruptionError;
- the data directory: FORMAT marker with its version, collections listed, foreign or newer
  directories refused with clear messages, unsafe collection names refused, creation crash-safe;
- a backup taken while batches and a snapshot land between its copies opens with every batch
  acknowledged before it started (and the other copy order is shown to lose batches).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from roarsearch.errors import BadRequestError, CorruptionError, DirectoryLockedError
from roarsearch.storage import failpoints
from roarsearch.storage import store as store_module
from roarsearch.storage.format import DIRECTORY_FORMAT
from roarsearch.storage.fs import FaultyFileSystem, FileSystem, SimulatedCrash
from roarsearch.storage.store import (
    SNAPSHOT_LOG_RECORDS,
    CollectionStore,
    DataDirectoryStore,
    backup_data_directory,
)
from tests.unit.storage.helpers import payload, recover

CRASH_SEEDS = range(8)


def run_workload(fs: FileSystem, directory: str, batches: range, snapshot_every: int) -> tuple[list[int], int | None]:
    """Log ``batches`` (snapshotting every few); return (acknowledged state, batch in flight at a crash)."""
    acknowledged: list[int] = []
    in_flight = None
    try:
        store = CollectionStore(fs, directory)
        state, replay = store.open()
        applied = (list(state["applied"]) if state is not None else []) + [item["n"] for _, item in replay]
        acknowledged = list(applied)
        for n in batches:
            in_flight = n
            store.log(payload(n))
            in_flight = None
            applied.append(n)
            acknowledged.append(n)
            if len(applied) % snapshot_every == 0:
                store.snapshot({"applied": applied})
    except SimulatedCrash:
        pass
    return acknowledged, in_flight


def test_round_trip_and_snapshot_reset(tmp_path: Path) -> None:
    directory = str(tmp_path / "c")
    acknowledged, _ = run_workload(FileSystem(), directory, range(7), snapshot_every=3)
    assert acknowledged == list(range(7))
    assert recover(directory) == list(range(7))
    store = CollectionStore(FileSystem(), directory)
    state, replay = store.open()
    assert state == {"applied": list(range(6))} and [seq for seq, _ in replay] == [7]
    assert store.last_snapshot_seq == 6 and store.wal.record_count == 1
    assert store.verify() == []


def test_crash_between_rename_and_reset_does_not_double_apply(tmp_path: Path) -> None:
    directory = str(tmp_path / "c")
    store = CollectionStore(FileSystem(), directory)
    list(store.open()[1])
    for n in range(3):
        store.log(payload(n))
    with failpoints.armed("snapshot.after_rename", "raise"), pytest.raises(failpoints.FailpointError):
        store.snapshot({"applied": [0, 1, 2]})
    assert os.path.getsize(store.wal.path) > 8  # the log was not reset
    assert recover(directory) == [0, 1, 2]
    reopened = CollectionStore(FileSystem(), directory)
    _state, replay = reopened.open()
    assert list(replay) == [] and reopened.wal.next_seq == 4 and reopened.wal.record_count == 0
    assert reopened.log(payload(3)) == 4
    assert recover(directory) == [0, 1, 2, 3]


def test_should_snapshot_follows_the_record_threshold(tmp_path: Path) -> None:
    store = CollectionStore(FileSystem(), str(tmp_path / "c"))
    list(store.open()[1])
    for n in range(SNAPSHOT_LOG_RECORDS - 1):
        store.wal.record_count = n  # the counter alone decides; no need to write 1000 records
        assert not store.should_snapshot()
    store.wal.record_count = SNAPSHOT_LOG_RECORDS
    assert store.should_snapshot()


def crash_points(tmp_path: Path, base: str | None, batches: range, snapshot_every: int) -> int:
    dry = str(tmp_path / "dry")
    if base is not None:
        shutil.copytree(base, dry)
    fs = FaultyFileSystem()
    run_workload(fs, os.path.join(dry, "c"), batches, snapshot_every)
    shutil.rmtree(dry, ignore_errors=True)
    return fs.operations


def check_power_cuts(tmp_path: Path, base: str | None, before: list[int], batches: range, seeds: range) -> int:
    total = crash_points(tmp_path, base, batches, snapshot_every=3)
    runs = 0
    for crash_at in range(1, total + 2):
        for seed in seeds:
            root = str(tmp_path / f"run-{crash_at}-{seed}")
            if base is not None:
                shutil.copytree(base, root)
            else:
                os.makedirs(root)
            fs = FaultyFileSystem(crash_at=crash_at)
            acknowledged, in_flight = run_workload(fs, os.path.join(root, "c"), batches, snapshot_every=3)
            fs.crash(seed)
            recovered = recover(os.path.join(root, "c"))
            allowed = [acknowledged] + ([acknowledged + [in_flight]] if in_flight is not None else [])
            assert recovered in allowed, (crash_at, seed, recovered, acknowledged, in_flight)
            assert recovered[: len(before)] == before
            shutil.rmtree(root)
            runs += 1
    return runs


def test_power_cut_at_every_operation(tmp_path: Path) -> None:
    base = str(tmp_path / "base")
    run_workload(FileSystem(), os.path.join(base, "c"), range(4), snapshot_every=3)
    assert check_power_cuts(tmp_path, base, list(range(4)), range(4, 11), CRASH_SEEDS) > 100


def test_power_cut_while_creating_a_collection(tmp_path: Path) -> None:
    assert check_power_cuts(tmp_path, None, [], range(4), CRASH_SEEDS) > 40


@pytest.mark.slow
def test_power_cut_at_every_operation_many_seeds(tmp_path: Path) -> None:
    base = str(tmp_path / "base")
    run_workload(FileSystem(), os.path.join(base, "c"), range(5), snapshot_every=4)
    assert check_power_cuts(tmp_path, base, list(range(5)), range(5, 17), range(100, 140)) > 1000


# ---------------------------------------------------------------------- the data directory


def test_data_directory_layout_and_listing(tmp_path: Path) -> None:
    root = tmp_path / "data"
    directory = DataDirectoryStore(root)
    try:
        assert (root / "FORMAT").read_bytes() == DIRECTORY_FORMAT
        assert (root / "LOCK").read_text() == f"{os.getpid()}\n"
        assert directory.collection_names() == []
        for name in ("movies", "books"):
            list(directory.collection(name).open()[1])
        (root / "collections" / "stray-file").write_text("not a collection")
        assert directory.collection_names() == ["books", "movies"]
        for bad in ("", ".", "..", "a/b", ".hidden"):
            with pytest.raises(ValueError, match="cannot be a folder name"):
                directory.collection(bad)
        with pytest.raises(DirectoryLockedError, match=rf"in use by another open engine \(pid {os.getpid()}"):
            DataDirectoryStore(root)
    finally:
        directory.close()
    DataDirectoryStore(root).close()  # released: it opens again


def test_foreign_and_newer_directories_are_refused(tmp_path: Path) -> None:
    foreign = tmp_path / "home"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(BadRequestError, match=r"not a roarsearch data directory and not empty.*notes\.txt"):
        DataDirectoryStore(foreign)
    newer = tmp_path / "newer"
    DataDirectoryStore(newer).close()
    (newer / "FORMAT").write_bytes(b"roarsearch data directory\nversion 2\n")
    with pytest.raises(CorruptionError, match="format version '2'; this roarsearch reads format version 1"):
        DataDirectoryStore(newer)
    (newer / "FORMAT").write_bytes(b"something else")
    with pytest.raises(CorruptionError, match="FORMAT: offset 0: not a roarsearch data directory marker"):
        DataDirectoryStore(newer)
    (newer / "FORMAT").write_bytes(DIRECTORY_FORMAT)
    DataDirectoryStore(newer).close()  # the refusals released the lock


def test_power_cut_while_creating_the_data_directory(tmp_path: Path) -> None:
    for crash_at in range(1, 12):
        for seed in CRASH_SEEDS:
            root = tmp_path / f"d{crash_at}-{seed}"
            fs = FaultyFileSystem(crash_at=crash_at)
            try:
                DataDirectoryStore(root, fs).close()
            except SimulatedCrash:
                pass
            fs.crash(seed)
            # Whatever the cut left, the directory opens (and is then complete).
            reopened = DataDirectoryStore(root)
            reopened.close()
            assert (root / "FORMAT").read_bytes() == DIRECTORY_FORMAT


# ---------------------------------------------------------------------- backups


def test_backup_while_a_snapshot_lands_between_the_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "data"
    directory = DataDirectoryStore(root)
    store = directory.collection("c")
    list(store.open()[1])
    applied = []
    for n in range(4):
        store.log(payload(n))
        applied.append(n)
    store.snapshot({"applied": list(applied)})
    for n in range(4, 7):
        store.log(payload(n))
        applied.append(n)

    def between_copies() -> None:  # the engine goes on writing and snapshots during the backup
        for n in range(7, 9):
            store.log(payload(n))
            applied.append(n)
        store.snapshot({"applied": list(applied)})
        store.log(payload(9))

    def copy_order(order_hook: str) -> list[int]:
        real_copy = shutil.copyfile
        fired = []

        def copy(source: str, target: str) -> str:
            result = real_copy(source, target)
            if source.endswith(order_hook) and not fired:
                fired.append(source)
                between_copies()
            return result

        monkeypatch.setattr(store_module.shutil, "copyfile", copy)
        target = tmp_path / f"backup-after-{order_hook}"
        backup_data_directory(root, target)
        monkeypatch.setattr(store_module.shutil, "copyfile", real_copy)
        return recover(str(target / "collections" / "c"))

    assert copy_order("wal.rlog")[:7] == list(range(7))
    # The other order (snapshot first) would have lost batches 4..6: the reason for ours.
    snapshot_first = tmp_path / "snapshot-first" / "c"
    snapshot_first.mkdir(parents=True)
    shutil.copyfile(root / "collections" / "c" / "snapshot.rsnap", snapshot_first / "snapshot.rsnap")
    between_copies()
    shutil.copyfile(root / "collections" / "c" / "wal.rlog", snapshot_first / "wal.rlog")
    with pytest.raises(CorruptionError, match=r"batches .* are missing"):
        recover(str(snapshot_first))
    directory.close()
