"""After a snapshot, the postings are read from the snapshot's file, not from a private copy.

A bulk load held every chunk's token columns and doc sets in memory until the process ended (at
10M text-heavy records, most of its peak); now a snapshot hands them over to its file, as a
reopen does. These tests check that every chunk then reads views of the mapped file, and that
searches answer exactly as an in-memory engine over the same records does: right after the
snapshot, after adds whose merges read the adopted chunks, after a second snapshot (which writes
the adopted views into a new file) and after a reopen.
"""

from __future__ import annotations

import mmap
import random
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.index import chunks as chunks_module
from roarsearch.index.blocks import LazyColumn
from roarsearch.memory import MAPPINGS, mapping_under
from roarsearch.storage import snapshot as snapshot_module

WORDS = ("amber basil cedar delta ember fjord garnet harbor indigo juniper kelp lumen marble nectar "
         "onyx pepper quartz raven saffron tundra umber velvet willow xenon yarrow zephyr").split()


def records(first: int, count: int, seed: int) -> list[dict[str, Any]]:
    chosen = random.Random(seed)
    return [{"id": i, "title": " ".join(chosen.choices(WORDS, k=3)),
             "body": " ".join(chosen.choices(WORDS, k=chosen.randint(5, 40))), "n": i % 17}
            for i in range(first, first + count)]


QUERIES = ["amber", "ced", "harbor velvet", "willow zephyr amber", "marbel", "onyx pep", "quartz raven saffron",
           "kelp lumen", "tundra"]


def answers(engine: Engine) -> list[Any]:
    found = [engine.search({"collection": "c", "query": query, "count": 50, "filter": "n < 12",
                            "textFacets": ["title"], "numericFacets": {"n": ["[0,5)", "[5,)"]}}) for query in QUERIES]
    return [{key: value for key, value in answer.items() if key != "responseTime"} for answer in found]


def snapshot(engine: Engine) -> None:
    collection = engine._collection("c")
    with collection.write_mutex:
        collection.take_snapshot()


def read_from_file(engine: Engine) -> list[bool]:
    """For every chunk: whether its token columns and doc sets are views of a mapped file."""
    def mapped(buffer: Any) -> bool:
        return isinstance(buffer, memoryview) and isinstance(buffer.obj, mmap.mmap)

    found = []
    for postings in engine._collection("c").index.postings.values():
        for chunk in postings._chunks:
            columns = (chunk._docs, chunk._positions)
            found.append(all(isinstance(column, LazyColumn) and mapped(column.data) for column in columns)
                         and chunk.doc_sets is not None and mapped(chunk.doc_sets.data))
    return found


def raw_in_scratch_files(engine: Engine) -> list[bool]:
    """For every chunk still holding raw token columns: whether they are views of a file mapping."""
    found = []
    for postings in engine._collection("c").index.postings.values():
        for chunk in postings._chunks:
            if isinstance(chunk._docs, LazyColumn):
                continue
            mappings = [mapping_under(column) for column in (chunk._docs, chunk._positions)]
            found.append(all(mapping is not None and MAPPINGS.of_file(mapping) for mapping in mappings))
    return found


@pytest.mark.parametrize("spill", [False, True])
def test_chunks_read_the_snapshot_file_and_answer_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           spill: bool) -> None:
    """``spill``: every raw chunk kept in a scratch file until the snapshot (a threshold of one
    token here), else in memory (none reaches the real threshold)."""
    monkeypatch.setattr(snapshot_module, "DIRECT_WRITE_BYTES", 16)  # every buffer written apart, even small ones
    if spill:
        monkeypatch.setattr(chunks_module, "SPILL_MIN_TOKENS", 1)
    first, later = records(0, 3000, seed=1), records(3000, 1500, seed=2) + records(10, 40, seed=3)  # upserts too
    reference = Engine()
    for start in range(0, len(first), 500):
        reference.add_records("c", first[start:start + 500])
    with Engine(tmp_path) as engine:
        for start in range(0, len(first), 500):
            engine.add_records("c", first[start:start + 500])
        assert not all(read_from_file(engine))  # chunks built here: raw columns, not read from the snapshot
        in_scratch = raw_in_scratch_files(engine)
        assert in_scratch and (all(in_scratch) if spill else not any(in_scratch))
        assert not list((tmp_path / "collections" / "c").glob("*scratch*"))  # scratch files have no name
        expected = answers(reference)
        assert answers(engine) == expected
        snapshot(engine)
        assert read_from_file(engine) and all(read_from_file(engine))
        assert answers(engine) == expected
        for start in range(0, len(later), 300):  # merges read the adopted chunks
            reference.add_records("c", later[start:start + 300])
            engine.add_records("c", later[start:start + 300])
        engine.delete_records("c", [7, 3001])
        reference.delete_records("c", [7, 3001])
        expected = answers(reference)
        assert answers(engine) == expected
        snapshot(engine)  # writes the adopted views into a new file, then reads that one
        assert all(read_from_file(engine))
        assert answers(engine) == expected
    with Engine(tmp_path) as engine:
        assert answers(engine) == expected
        assert engine.check()["ok"]
