"""This module tests the following properties:

- a collection that takes no write for ``SETTLE_IDLE_S`` merges each field's postings into one
  chunk (``Collection.settle_when_idle``) when some field holds at least ``SETTLE_IDLE_CHUNKS``
  chunks: after writes, and after it is opened with that many; fewer (one small batch after a
  settle) are left as they are;
- a write within the idle time postpones it; answers are the same before and after;
- a closed engine's collections are left alone.
"""

from __future__ import annotations

import time

import pytest

import roarsearch.engine.collection as collection_module
from roarsearch import Engine

QUERIES = ("alpha beta", "gamma", "alpah", "bet")


def _records(first: int, count: int) -> list[dict]:
    words = ["alpha", "beta", "gamma", "delta"]
    return [{"id": i, "title": f"{words[i % 4]} {words[(i * 7) % 4]} n{i}", "tags": [words[i % 3]]}
            for i in range(first, first + count)]


def _chunks(engine: Engine, collection: str = "c") -> dict[str, int]:
    index = engine._collections[collection].index
    return {path: postings.chunk_count() for path, postings in index.postings.items()}


def _answers(engine: Engine) -> list:
    answers = []
    for query in QUERIES:
        answer = engine.search({"collection": "c", "query": query, "count": 50, "sort": ["id"], "textFacets": ["tags"]})
        answer.pop("responseTime")
        answers.append(answer)
    return answers


def _settled_within(engine: Engine, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        index = engine._collections["c"].index
        if not index.unsettled():
            index.wait_for_merges()
            return True
        time.sleep(0.02)
    return False


def test_writes_then_quiet_leave_one_chunk_a_field_and_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection_module, "SETTLE_IDLE_S", 0.3)
    engine = Engine()
    for batch in range(3):
        engine.add_records("c", _records(batch * 10, 10))
    assert max(_chunks(engine).values()) > 1  # each add made a chunk: tiers below the merge factor
    before = _answers(engine)
    assert _settled_within(engine, 10)
    assert set(_chunks(engine).values()) == {1}
    assert _answers(engine) == before
    engine.add_records("c", _records(100, 5))  # one small batch after a settle: left as it is
    assert max(_chunks(engine).values()) == 2
    time.sleep(0.9)
    assert max(_chunks(engine).values()) == 2 and not engine._collections["c"].index.merging()
    engine.add_records("c", _records(200, 5))  # a third chunk: settled again once quiet
    assert max(_chunks(engine).values()) == 3
    assert _settled_within(engine, 10)


def test_a_write_within_the_idle_time_postpones_the_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection_module, "SETTLE_IDLE_S", 1.0)
    engine = Engine()
    engine.add_records("c", _records(0, 10))
    engine.add_records("c", _records(10, 10))
    time.sleep(0.7)
    engine.add_records("c", _records(20, 10))  # 0.7 s after the others: the wait starts again
    time.sleep(0.6)  # 1.3 s after the first writes, 0.6 after the last
    assert engine._collections["c"].index.unsettled()
    assert _settled_within(engine, 10)


def test_a_collection_opened_with_several_chunks_settles(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection_module, "SETTLE_IDLE_S", 60.0)  # not while it is written
    with Engine(tmp_path) as engine:
        for batch in range(3):
            engine.add_records("c", _records(batch * 10, 10))
        before = _answers(engine)
    monkeypatch.setattr(collection_module, "SETTLE_IDLE_S", 0.3)
    with Engine(tmp_path) as engine:
        assert max(_chunks(engine).values()) > 1  # saved as they were
        assert _settled_within(engine, 10)
        assert _answers(engine) == before


def test_a_closed_engine_is_left_alone(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection_module, "SETTLE_IDLE_S", 0.3)
    engine = Engine(tmp_path)
    for batch in range(3):
        engine.add_records("c", _records(batch * 10, 10))
    collection = engine._collections["c"]
    engine.close()
    time.sleep(0.8)
    assert collection.index.unsettled()


def test_a_reader_process_settles_its_own_copy(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower (each worker of ``serve --workers``) applies the published batches and settles
    its own copy once they stop; it answers as the writer does before and after."""
    from roarsearch.engine.follower import FollowerEngine
    from roarsearch.server.workers import committed_positions
    from roarsearch.storage.follow import CommitBoard

    monkeypatch.setattr(collection_module, "SETTLE_IDLE_S", 0.3)
    writer = Engine(tmp_path / "data")
    board = CommitBoard(str(tmp_path / "board"), create=True)
    board.publish(committed_positions(writer), 0)
    follower = FollowerEngine(tmp_path / "data", CommitBoard(str(tmp_path / "board")))
    try:
        for batch in range(3):
            writer.add_records("c", _records(batch * 10, 10))
        board.publish(committed_positions(writer), 0)
        follower.catch_up()
        assert max(_chunks(follower).values()) >= 3
        assert _answers(follower) == _answers(writer)
        assert _settled_within(follower, 10)
        assert set(_chunks(follower).values()) == {1}
        assert _answers(follower) == _answers(writer)
    finally:
        writer.close()
        follower.close()
