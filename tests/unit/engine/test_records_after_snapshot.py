"""After a snapshot, stored records are views of the snapshot file, not a private copy.

The build of a large collection held every record it had stored (compressed) in memory until the
process ended; now a snapshot hands them over to its file, as a reopen does. These tests check
that the records read back the same through every path (search results, get by id, paging,
deletes, the next snapshot, a reopen), and that rewriting a snapshot from the mapped records
drops their pages as it goes.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.storage import snapshot as snapshot_module


def records(first: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "title": f"record number {i} of {'alpha beta gamma'.split()[i % 3]}",
             "body": "lorem ipsum " * (i % 7), "n": i % 13} for i in range(first, first + count)]


def snapshot(engine: Engine, name: str) -> None:
    collection = engine._collection(name)
    with collection.write_mutex:
        collection.take_snapshot()


def mapped_parts(engine: Engine, name: str) -> list[bool]:
    packed = engine._collection(name).index.docs._packed
    return [isinstance(part, memoryview) and isinstance(part.obj, mmap.mmap) for part in packed]


def test_records_live_in_the_snapshot_file_and_read_back_the_same(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", records(0, 700))
        spill = engine._collection("c").store.spill.path
        assert all(mapped_parts(engine, "c")) and os.path.exists(spill)  # not snapshotted yet: the spill file
        snapshot(engine, "c")
        assert all(mapped_parts(engine, "c")) and not os.path.exists(spill)  # the snapshot's file
        engine.delete_records("c", [5, 400])
        engine.add_records("c", records(700, 300) + [{"id": 6, "title": "replaced six"}])
        got = engine.get_records("c", [1, 5, 6, 699, 999])
        assert [record["id"] for record in got] == [1, 6, 699, 999]
        assert got[1]["title"] == "replaced six" and got[0] == records(1, 1)[0]
        snapshot(engine, "c")  # rewrites the mapped parts (dropping the deleted records)
        assert all(mapped_parts(engine, "c"))
        response = engine.search({"collection": "c", "query": "gamma", "count": 1000})
        assert response["totalHits"] == len([r for r in records(0, 1000) if r["id"] % 3 == 2 and r["id"] not in (5, 400)])
        expected = {r["id"]: r for r in records(0, 1000) if r["id"] not in (5, 400, 6)}
        expected[6] = {"id": 6, "title": "replaced six"}
        for result in response["results"]:
            assert {k: v for k, v in result.items() if k != "_rank"} == expected[result["id"]]
        paged = engine.page_records("c", count=1000)["records"]
        assert paged == [expected[i] for i in sorted(expected)]
    with Engine(tmp_path) as engine:
        assert engine.page_records("c", count=1000)["records"] == paged


def test_rewriting_a_snapshot_drops_the_mapped_pages_it_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dropped: list[mmap.mmap] = []
    original = snapshot_module._drop_mapped_pages
    monkeypatch.setattr(snapshot_module, "CHECK_SLICE_BYTES", 4096)
    monkeypatch.setattr(snapshot_module, "_drop_mapped_pages", lambda mapping: (dropped.append(mapping), original(mapping)))
    with Engine(tmp_path) as engine:
        engine.add_records("c", records(0, 3000))
        snapshot(engine, "c")
        assert dropped  # the first snapshot read the records from the spill file, dropping its pages
        dropped.clear()
        engine.add_records("c", records(3000, 10))
        snapshot(engine, "c")
        assert dropped and all(isinstance(mapping, mmap.mmap) for mapping in dropped)
        assert engine.get_records("c", [0, 2999, 3009])[1] == records(2999, 1)[0]


def test_a_snapshot_drops_the_pages_of_every_spill_mapping_it_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records added since the last snapshot sit in one spill-file mapping per batch: writing them
    into the snapshot lets go of every one of those mappings' pages, not only the last one read."""
    dropped: list[mmap.mmap] = []
    original = snapshot_module._drop_mapped_pages
    monkeypatch.setattr(snapshot_module, "CHECK_SLICE_BYTES", 1 << 20)  # more than one batch's parts
    monkeypatch.setattr(snapshot_module, "_drop_mapped_pages", lambda mapping: (dropped.append(mapping), original(mapping)))
    with Engine(tmp_path) as engine:
        for first in range(0, 3000, 500):
            engine.add_records("c", records(first, 500))
        spilled = {id(part.obj) for part in engine._collection("c").index.docs._packed}
        assert len(spilled) == 6  # one mapping per batch
        snapshot(engine, "c")
        assert spilled <= {id(mapping) for mapping in dropped}
