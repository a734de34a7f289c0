"""This module tests the following properties of the read-only follower (``engine/follower.py``,
``storage/follow.py``) against a real writing ``Engine`` on the same directory:

- after each published write the follower answers every search exactly as the writer does
  (adds, replacements, deletes by id and filter, clear, settings changes);
- nothing unpublished is seen: a batch logged after the last publication stays invisible until
  it is published;
- it follows checkpoints: a snapshot that resets the log, whether it caught up between every write
  (the new log is read from its start) or only after several (the batches are only in the snapshot
  now: it reloads);
- a torn tail (an unacknowledged append cut by a crash) is not read, and the records the restarted
  writer appends where the tail was are;
- a dropped collection disappears, and one created again under the same name holds only its new
  records;
- the commit board round-trips and counts versions; the follower never writes to the directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.engine.follower import FollowerEngine
from roarsearch.index import writer as writer_module
from roarsearch.server.workers import Publisher, board_path, committed_positions
from roarsearch.storage import store as store_module
from roarsearch.storage.follow import CommitBoard


class Pair:
    """A writer, its board (with a drop count) and a follower, as ``serve --workers`` wires them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writer = Engine(path / "data")
        self.board = CommitBoard(str(path / "board"), create=True)
        self.drops = 0
        self.publish()
        self.follower = FollowerEngine(path / "data", CommitBoard(str(path / "board")))

    def publish(self, dropped: bool = False) -> None:
        self.drops += dropped
        self.board.publish(committed_positions(self.writer), self.drops)

    def same(self, body: dict[str, Any]) -> dict[str, Any]:
        """Catch up, then check the follower answers ``body`` as the writer does."""
        self.follower.catch_up()
        ours, theirs = self.writer.search(body), self.follower.search(body)
        for response in (ours, theirs):
            response.pop("responseTime")
        assert theirs == ours
        return theirs

    def close(self) -> None:
        self.writer.close()
        self.follower.close()


@pytest.fixture
def pair(tmp_path: Path) -> Any:
    made = Pair(tmp_path)
    yield made
    made.close()


def records(start: int, count: int, word: str = "alpha") -> list[dict[str, Any]]:
    return [{"id": i, "title": f"{word} record {i}", "n": i % 7, "tag": ["x", "y"][i % 2]} for i in range(start, start + count)]


ALL = {"collection": "c", "count": 1000, "sort": ["id"], "textFacets": ["tag"]}


def test_follows_every_kind_of_write(pair: Pair) -> None:
    pair.writer.add_records("c", records(0, 50))
    pair.publish()
    assert pair.same(ALL)["totalHits"] == 50
    pair.writer.add_records("c", records(10, 5, word="beta"))  # replacements
    pair.writer.delete_records("c", [1, 2, 999])
    pair.publish()
    assert pair.same({"collection": "c", "query": "beta"})["totalHits"] == 5
    assert pair.same(ALL)["totalHits"] == 48
    pair.writer.delete_records("c", filter="n = 3")
    pair.writer.update_settings("c", {"searchFields": ["title"]})
    pair.publish()
    pair.same(ALL)
    assert pair.follower.get_settings("c") == pair.writer.get_settings("c")
    pair.writer.delete_records("c", clear=True)
    pair.publish()
    assert pair.same(ALL)["totalHits"] == 0


def test_unpublished_batches_stay_invisible(pair: Pair) -> None:
    pair.writer.add_records("c", records(0, 3))
    pair.publish()
    assert pair.same(ALL)["totalHits"] == 3
    pair.writer.add_records("c", records(3, 3))  # logged and fsynced, not published yet
    assert not pair.follower.stale()
    pair.follower.catch_up()
    assert pair.follower.search(ALL)["totalHits"] == 3
    pair.publish()
    assert pair.follower.stale()
    assert pair.same(ALL)["totalHits"] == 6


@pytest.mark.parametrize("publish_every_write", [True, False])
def test_follows_checkpoints(pair: Pair, monkeypatch: pytest.MonkeyPatch, publish_every_write: bool) -> None:
    monkeypatch.setattr(store_module, "SNAPSHOT_LOG_RECORDS", 3)  # a snapshot and log reset every 3 batches
    wal = pair.path / "data" / "collections" / "c" / "wal.rlog"
    inodes = set()
    for batch in range(10):
        pair.writer.add_records("c", records(batch * 10, 10))
        inodes.add(os.stat(wal).st_ino)
        if publish_every_write:
            pair.publish()
            assert pair.same(ALL)["totalHits"] == (batch + 1) * 10
    pair.publish()
    assert len(inodes) > 2  # the log was replaced by resets while the follower followed
    assert pair.same(ALL)["totalHits"] == 100
    assert pair.same({"collection": "c", "query": "record 42"})["totalHits"] >= 1


def test_torn_tail_then_restarted_writer(pair: Pair) -> None:
    pair.writer.add_records("c", records(0, 5))
    pair.publish()
    pair.same(ALL)
    wal = pair.path / "data" / "collections" / "c" / "wal.rlog"
    with open(wal, "ab") as handle:  # an append cut by a crash: never acknowledged
        handle.write(b"\x30\x00\x00\x00torn-record-bytes")
    pair.publish()
    assert pair.follower.catch_up() and pair.follower.search(ALL)["totalHits"] == 5
    fresh = FollowerEngine(pair.path / "data", CommitBoard(str(pair.path / "board")))  # loading past a torn tail
    assert fresh.search(ALL)["totalHits"] == 5
    # The writer "restarts": it cuts the torn tail and appends where it was.
    assert pair.writer._directory is not None
    pair.writer._directory.close()  # releases the lock without the snapshot a clean close takes
    pair.writer = Engine(pair.path / "data")
    pair.writer.add_records("c", records(5, 5))
    pair.publish()
    assert pair.same(ALL)["totalHits"] == 10
    fresh.catch_up()
    assert fresh.search(ALL)["totalHits"] == 10


def test_drop_and_create_again(pair: Pair) -> None:
    pair.writer.add_records("c", records(0, 5))
    pair.writer.add_records("d", records(0, 2))
    pair.publish()
    pair.same(ALL)
    pair.writer.drop_collection("c")
    pair.publish(dropped=True)
    pair.follower.catch_up()
    assert pair.follower.collection_names() == ["d"]
    pair.writer.add_records("c", records(100, 2, word="gamma"))
    pair.publish()
    assert [r["id"] for r in pair.same(ALL)["results"]] == [100, 101]


def test_follower_writes_nothing(pair: Pair) -> None:
    pair.writer.add_records("c", records(0, 5))
    pair.publish()
    before = sorted((str(path), path.stat().st_mtime_ns) for path in (pair.path / "data").rglob("*"))
    pair.same(ALL)
    FollowerEngine(pair.path / "data", CommitBoard(str(pair.path / "board"))).close()
    assert sorted((str(path), path.stat().st_mtime_ns) for path in (pair.path / "data").rglob("*")) == before
    with pytest.raises(RuntimeError, match="read-only"):
        pair.follower.add_records("c", records(0, 1))


def test_commit_board_round_trip(tmp_path: Path) -> None:
    board = CommitBoard(str(tmp_path / "board"), create=True)
    reader = CommitBoard(str(tmp_path / "board"))
    assert reader.read() == (0, {}, 0)
    board.publish({"a": 3, "b": 0}, 1)
    version, committed, drops = reader.read()
    assert (committed, drops) == ({"a": 3, "b": 0}, 1) and version == reader.version() == 2
    board.publish({"a": 4}, 1)
    assert reader.read() == (4, {"a": 4}, 1)
    board.close()
    reader.close()


def test_logged_batches_are_applied_early_and_reads_do_not_wait_for_them(pair: Pair) -> None:
    pair.writer.add_records("c", records(0, 3))
    pair.publish()
    pair.same(ALL)
    acknowledged = committed_positions(pair.writer)
    pair.writer.add_records("c", records(3, 3))
    # Announced as durable in the log, not acknowledged: a read need not wait for it ...
    pair.board.publish(acknowledged, pair.drops, committed_positions(pair.writer))
    assert pair.follower.behind() and not pair.follower.stale()
    # ... and catching up (the background thread's) applies it.
    pair.follower.catch_up()
    assert pair.follower.search(ALL)["totalHits"] == 6
    pair.publish()  # acknowledged now: already applied, so nothing to wait for
    assert not pair.follower.stale()
    assert pair.same(ALL)["totalHits"] == 6
    pair.writer.add_records("c", records(6, 1))
    pair.publish()
    assert pair.follower.stale()


def test_publisher_announces_a_batch_before_the_writer_applies_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(tmp_path / "data")
    engine.add_records("c", records(0, 2))
    publisher = Publisher(str(tmp_path), {"app": engine}, workers=2)
    reader = CommitBoard(board_path(str(tmp_path), "app"))
    seen: list[tuple[dict[str, int], dict[str, int]]] = []
    commit = writer_module.commit_add

    def watched(*args: Any) -> Any:
        _version, committed, logged, _drops = reader.read_all()
        seen.append((committed, logged))
        return commit(*args)

    # The writer module's commit (pure Python, called through its module): compiled callers do not
    # see a replaced method of the collection or the index.
    monkeypatch.setattr(writer_module, "commit_add", watched)
    engine.add_records("c", records(2, 2))
    assert seen == [({"c": 1}, {"c": 2})]  # logged, not acknowledged, while the writer applies it
    publisher.publish("app")
    assert reader.read_all()[1:3] == ({"c": 2}, {"c": 2})
    reader.close()
    publisher.close()
    engine.close()
