"""``storage.spill``: a durable collection keeps the stored records of batches added since its
snapshot in ``records.spill`` (read back through mappings, not held in memory), reads them from
the snapshot once one is taken, never reads a leftover file after a restart, and keeps records in
memory when the disk refuses the file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from roarsearch import Engine
from roarsearch.storage import spill as spill_module


def _records(first: int, count: int) -> list[dict]:
    return [{"id": i, "text": f"record number {i} " + "prose " * (i % 40)} for i in range(first, first + count)]


def _ids(engine: Engine, query: str = "") -> list[int]:
    return sorted(hit["id"] for hit in engine.search({"collection": "c", "query": query, "count": 1000})["results"])


def test_records_added_since_the_snapshot_are_read_from_the_spill_file(tmp_path: Path) -> None:
    with Engine(str(tmp_path)) as engine:
        engine.add_records("c", _records(0, 300))
        collection = engine._collections["c"]
        spill_path = os.path.join(collection.store.directory, spill_module.SPILL_FILE)
        assert os.path.getsize(spill_path) > 0
        packed = collection.index.docs._packed
        assert packed and all(isinstance(part, memoryview) for part in packed)
        assert _ids(engine, "number") == list(range(300))
        assert engine.get_records("c", [5, 299])[1]["id"] == 299
        with collection.write_mutex:
            collection.take_snapshot()
        assert not os.path.exists(spill_path)  # started anew: the snapshot holds them now
        engine.add_records("c", _records(300, 50))
        assert os.path.exists(spill_path)
        assert _ids(engine) == list(range(350))
        engine.delete_records("c", ids=[3, 310])
    with Engine(str(tmp_path)) as engine:
        assert _ids(engine) == [i for i in range(350) if i not in (3, 310)]


def test_a_leftover_spill_file_is_never_read(tmp_path: Path) -> None:
    with Engine(str(tmp_path)) as engine:
        engine.add_records("c", _records(0, 20))
        folder = engine._collections["c"].store.directory
    leftover = os.path.join(folder, spill_module.SPILL_FILE)
    with open(leftover, "wb") as garbage:
        garbage.write(b"\xff" * 10_000)
    with Engine(str(tmp_path)) as engine:
        assert not os.path.exists(leftover)
        assert _ids(engine, "record") == list(range(20))


def test_a_disk_that_refuses_the_spill_file_leaves_records_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*_args: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with Engine(str(tmp_path)) as engine:
        monkeypatch.setattr(spill_module, "_pwrite", full)
        engine.add_records("c", _records(0, 100))
        engine.add_records("c", _records(100, 100))
        assert all(isinstance(part, bytes) for part in engine._collections["c"].index.docs._packed)
        assert _ids(engine, "number") == list(range(200))
    monkeypatch.undo()
    with Engine(str(tmp_path)) as engine:
        assert _ids(engine) == list(range(200))
