"""The writer answers a write once its readers have applied it (``server.workers.ReaderProgress``):

- a reader's slot says the board version it applied; the writer's check passes only when every
  reader (not the writer's own slot) is at that version or later, and always without readers;
- a follower reports the version after every catch-up, its first load included;
- the writer knows the board version of the last batch it announced as logged, and its check
  passes once every reader has applied it;
- through the app (in process): a write is acknowledged (published, then answered) only once the
  readers have applied it, or after ``READERS_WAIT_S`` when they never do; a failed write does
  not wait.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.engine.follower import FollowerEngine
from roarsearch.server import app as app_module
from roarsearch.server.app import create_app
from roarsearch.server.config import ServerConfig
from roarsearch.server.workers import Publisher, ReaderProgress, applied_path, board_path
from roarsearch.storage.follow import CommitBoard
from tests.unit.server.conftest import app_client


def test_every_reader_must_have_applied_the_version(tmp_path: Path) -> None:
    writer_side = ReaderProgress(str(tmp_path / "applied"), 3, create=True)
    reader_side = ReaderProgress(str(tmp_path / "applied"), 3)
    writer_side.mark(0, 99)  # the writer's own slot does not count
    assert not writer_side.all_applied(5)
    reader_side.mark(1, 6)
    assert not writer_side.all_applied(5)
    reader_side.mark(2, 5)
    assert writer_side.all_applied(5) and not writer_side.all_applied(6)
    assert ReaderProgress(str(tmp_path / "alone"), 1, create=True).all_applied(10**6)  # no readers


def test_a_follower_reports_what_it_applied(tmp_path: Path) -> None:
    writer = Engine(tmp_path / "data")
    writer.add_records("c", [{"id": 1, "title": "a"}])
    publisher = Publisher(str(tmp_path), {"default": writer}, workers=2)  # announces c's logged batches from now on
    progress = ReaderProgress(applied_path(str(tmp_path), "default"), 2)
    reports: list[int] = []

    def applied(version: int) -> None:
        reports.append(version)
        progress.mark(1, version)

    follower = FollowerEngine(tmp_path / "data", CommitBoard(board_path(str(tmp_path), "default")), on_applied=applied)
    assert len(reports) == 1 and publisher.readers_applied("default")  # the first load
    writer.add_records("c", [{"id": 2, "title": "b"}])  # logged: announced, not acknowledged
    assert publisher.logged_version["default"] > reports[-1]
    assert not publisher.readers_applied("default")
    follower.catch_up()
    assert reports[-1] == publisher.logged_version["default"] and publisher.readers_applied("default")
    assert follower.search({"collection": "c"})["totalHits"] == 2
    follower.close()
    writer.close()
    publisher.close()


@pytest.mark.anyio
async def test_a_write_is_acknowledged_once_the_readers_applied_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(tmp_path / "data")
    events: list[str] = []
    ready_after = {"checks": 5}

    def publish(app: str, dropped: bool = False) -> None:
        events.append(f"publish {app}")

    def readers_applied(app: str) -> bool:
        events.append(f"check {app}")
        return events.count(f"check {app}") >= ready_after["checks"]

    app = create_app(ServerConfig(admin_keys=("admin",)), {"default": engine}, publish=publish, readers_applied=readers_applied)
    headers = {"Authorization": "Bearer admin"}
    async with app_client(app) as client:
        answer = await client.post("/v2/collections/c/records", json=[{"id": 1, "title": "a"}], headers=headers)
        assert answer.status_code == 201
        # polled until the readers had it, then published (acknowledged), then answered
        assert events == ["check default"] * 5 + ["publish default"]

        events.clear()
        ready_after["checks"] = 10**9  # readers that never catch up: acknowledged after the bound
        monkeypatch.setattr(app_module, "READERS_WAIT_S", 0.05)
        started = time.monotonic()
        answer = await client.post("/v2/collections/c/records", json=[{"id": 2, "title": "b"}], headers=headers)
        assert answer.status_code == 201 and 0.05 <= time.monotonic() - started < 5
        assert events[-1] == "publish default" and set(events[:-1]) == {"check default"}

        events.clear()
        answer = await client.post("/v2/collections/c/records", json=[{"title": "no id"}], headers=headers)
        assert answer.status_code == 400 and events == ["publish default"]  # a failed write: no wait
        results: Any = engine.search({"collection": "c"})["results"]
        assert sorted(hit["id"] for hit in results) == [1, 2]


@pytest.mark.anyio
async def test_a_read_on_a_stale_reader_sees_every_acknowledged_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No follow thread here: the read waits CATCH_UP_WAIT_S for one, then applies the write itself.
    writer = Engine(tmp_path / "data")
    writer.add_records("c", [{"id": 1, "title": "red"}])
    publisher = Publisher(str(tmp_path), {"default": writer}, workers=2)
    follower = FollowerEngine(tmp_path / "data", CommitBoard(board_path(str(tmp_path), "default")))
    writer.add_records("c", [{"id": 2, "title": "red"}])
    publisher.publish("default")
    assert follower.stale()
    monkeypatch.setattr(app_module, "CATCH_UP_WAIT_S", 0.02)
    app = create_app(ServerConfig(admin_keys=("admin",)), {"default": follower})
    async with app_client(app) as client:
        started = time.monotonic()
        answer = await client.post("/v2", json={"collection": "c", "query": "red"}, headers={"Authorization": "Bearer admin"})
        assert time.monotonic() - started >= 0.02
        assert sorted(hit["id"] for hit in answer.json()["results"]) == [1, 2]
    writer.close()
    publisher.close()
