"""``server.placement``: which searches run on the event loop.

- a search's shape is its request without the words: the same for other words of the same count,
  different for another word count, prefix length, filter, facet or page; key order does not count;
- a shape runs on the loop only once it has been seen, and while its searches' mean CPU time
  stays under the limit; a slow run moves it back to a thread, fast runs bring it back;
- the table of shapes is bounded, least recently seen forgotten first;
- through the app (in process): the first search of a shape runs in a worker thread, the next
  ones on the loop; a shape whose searches take long keeps running in a thread, and answers are
  the same wherever they run.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.server.app import create_app
from roarsearch.server.config import ServerConfig
from roarsearch.server.placement import SearchPlacement, search_shape
from tests.unit.server.conftest import app_client


def test_shape_is_the_request_without_its_words() -> None:
    body = {"collection": "c", "query": "red shoes ", "textFacets": ["brand"], "count": 10}
    assert search_shape(body) == search_shape({**body, "query": "blue hats "})
    assert search_shape(body) == search_shape(dict(reversed(list(body.items()))))
    others = [{**body, "query": "red "}, {**body, "query": "red shoes"}, {**body, "query": "red sh"},
              {**body, "textFacets": ["size"]}, {**body, "count": 20}, {**body, "filter": "price < 10"},
              {**body, "query": ""}, {key: value for key, value in body.items() if key != "query"}]
    shapes = [search_shape(other) for other in others]
    assert search_shape(body) not in shapes
    assert len(set(shapes)) == len(shapes)
    assert search_shape({**body, "query": "red shoes and more words than are counted "}) == \
        search_shape({**body, "query": "red shoes and more words than are counted at all "})
    assert search_shape([body]) is None and search_shape("query") is None
    assert search_shape({**body, "count": 1 << 70}) is None  # not encodable: a thread, and its 400


def test_on_the_loop_once_seen_and_short() -> None:
    placement = SearchPlacement(limit_s=0.005)
    shape = search_shape({"collection": "c", "query": "a "})
    assert not placement.on_loop(shape)  # never seen: it might build something on demand
    placement.note(shape, 0.001)
    assert placement.on_loop(shape)
    placement.note(shape, 0.050)  # mean 0.01325: long now
    assert not placement.on_loop(shape)
    for _ in range(12):
        placement.note(shape, 0.001)
    assert placement.on_loop(shape)
    assert not placement.on_loop(None)
    placement.note(None, 0.001)
    assert not placement.on_loop(None)


def test_the_table_is_bounded() -> None:
    placement = SearchPlacement(limit_s=0.005, kept=2)
    first, second, third = (search_shape({"collection": "c", "query": "a " * words}) for words in (1, 2, 3))
    placement.note(first, 0.001)
    placement.note(second, 0.001)
    placement.note(first, 0.001)  # first is now the most recent
    placement.note(third, 0.001)
    assert placement.on_loop(first) and placement.on_loop(third)
    assert not placement.on_loop(second)


@pytest.mark.anyio
async def test_the_app_runs_seen_short_searches_on_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine(tmp_path / "data")
    engine.add_records("c", [{"id": 1, "title": "red shoes"}, {"id": 2, "title": "blue shoes"}])
    config = ServerConfig(admin_keys=("admin",))
    app = create_app(config, {"default": engine})
    on_loop: list[tuple[str, bool]] = []
    search = engine.search

    def recording_search(body: Any) -> dict[str, Any]:
        on_loop.append((body["query"], threading.current_thread() is threading.main_thread()))
        if body.get("count") == 7:  # a long search: 20 ms of CPU each time
            started = time.thread_time()
            while time.thread_time() - started < 0.02:
                pass
        return search(body)

    monkeypatch.setattr(engine, "search", recording_search)
    headers = {"Authorization": "Bearer admin"}
    async with app_client(app) as client:
        answers = []
        for query in ("red ", "blue ", "shoes ", "red shoes "):
            response = await client.post("/v2", json={"collection": "c", "query": query}, headers=headers)
            assert response.status_code == 200
            answers.append([hit["id"] for hit in response.json()["results"]])
        for query in ("red ", "blue ", "shoes "):
            response = await client.post("/v2", json={"collection": "c", "query": query, "count": 7}, headers=headers)
            assert response.status_code == 200
            answers.append([hit["id"] for hit in response.json()["results"]])
    assert on_loop == [("red ", False), ("blue ", True), ("shoes ", True), ("red shoes ", False),
                       ("red ", False), ("blue ", False), ("shoes ", False)]
    assert answers == [[1], [2], [1, 2], [1], [1], [2], [1, 2]]

