"""A reopened collection inflates a field's numeric and exact-value columns on first use, not on open."""

from __future__ import annotations

import threading
from typing import Any

from roarsearch import Engine
from roarsearch.index.state import index_from_state, index_to_state


def _records(count: int) -> list[dict[str, Any]]:
    return [{"id": i, "title": f"item {i % 7}", "price": i % 50, "brand": f"b{i % 9}", "tags": [f"t{i % 3}", "all"]}
            for i in range(count)]


def _answers(engine: Engine) -> list[Any]:
    requests = [{"filter": "price >= 10 AND brand = b3"}, {"sort": ["-price"], "count": 5},
                {"query": "item", "textFacets": ["brand", "tags"], "numericFacets": {"price": ["[0,25)", "[25,50]"]}},
                {"groupBy": "brand", "count": 3}]
    return [{key: value for key, value in engine.search({"collection": "c", **request}).items() if key != "responseTime"}
            for request in requests]


def test_columns_are_inflated_on_first_use_and_answer_the_same(tmp_path: Any) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", _records(500))
        expected = _answers(engine)
    with Engine(tmp_path) as engine:
        columns = engine._collections["c"].index.columns
        assert all(field.unread_state() is not None for path, field in columns.items() if path in ("price", "brand"))
        engine.search({"collection": "c", "query": "item"})  # a query on words only reads no column
        assert columns["price"].unread_state() is not None and columns["brand"].unread_state() is not None
        assert _answers(engine) == expected
        assert columns["price"].unread_state() is None and columns["brand"].unread_state() is None


def test_unread_columns_are_saved_again_as_loaded_and_writes_read_them_first(tmp_path: Any) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", _records(300))
        state = index_to_state(engine._collections["c"].index)
    loaded = index_from_state(state)
    again = index_to_state(loaded)
    assert again["columns"]["price"]["numeric"] is state["columns"]["price"]["numeric"]  # not inflated to save it
    with Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": 1000, "title": "item new", "price": 77, "brand": "b3"}])
        hits = engine.search({"collection": "c", "filter": "price = 77 AND brand = b3"})
        assert [result["id"] for result in hits["results"]] == [1000]
    with Engine(tmp_path) as engine:  # the write's columns were saved with the earlier values
        assert engine.search({"collection": "c", "filter": "price >= 0"})["totalHits"] == 301


def test_readers_racing_to_a_column_inflate_it_once(tmp_path: Any) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", _records(2_000))
        expected = engine.search({"collection": "c", "filter": "price < 10", "count": 0})["totalHits"]
    with Engine(tmp_path) as engine:
        totals: list[int] = []
        start = threading.Barrier(8)

        def read() -> None:
            start.wait()
            totals.append(engine.search({"collection": "c", "filter": "price < 10", "count": 0})["totalHits"])

        threads = [threading.Thread(target=read) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert totals == [expected] * 8
