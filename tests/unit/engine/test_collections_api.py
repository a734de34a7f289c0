"""This module tests the following properties of settings, records, collections and multi-search
(contract §7–§8) through the library:

- settings are durable: an on-disk engine closed and reopened (snapshot) and one that only replays
  its write-ahead log (no snapshot: the process "crashed") both answer with the settings; a
  snapshot written before settings existed (no ``settings`` key) loads with the defaults;
- settings apply from the next search without re-adding records; settings alone create the collection;
- ``get_records`` returns the records found in the order asked; ``page_records`` pages through
  every record in id order (integers, then strings), and while other threads add, upsert and delete
  between pages, no record that stays is lost or repeated;
- ``collections``, ``collection_info`` (fields, kinds, counts, settings) and ``drop_collection``,
  which is durable (a reopened engine does not see the collection, a half-finished drop is cleaned
  up and never resurrects it) and makes later writes through the old collection fail with 404;
- ``multi_search`` answers in order with a failing search in place as its Error object, and more
  than 100 searches is a 400.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from roarsearch import BadRequestError, Engine, NotFoundError
from roarsearch.storage import store as store_module

PLACES = [{"id": 1, "name": "Paris", "population": 2100000}, {"id": 2, "name": "Paris Texas", "population": 25000},
          {"id": 3, "name": "Parisville", "population": 900}, {"id": "x", "name": "New York City", "population": 8000000}]


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


def test_settings_apply_from_the_next_search() -> None:
    engine = Engine()
    engine.add_records("places", PLACES)
    assert ids(engine.search({"collection": "places", "query": "par"})) == [1, 2, 3]
    engine.update_settings("places", {"customRanking": ["population"]})
    assert ids(engine.search({"collection": "places", "query": "par"})) == [3, 2, 1]
    engine.update_settings("places", {"synonyms": {"nyc": ["new york"]}, "customRanking": None})
    assert ids(engine.search({"collection": "places", "query": "nyc"})) == ["x"]
    engine.update_settings("places", {"searchFields": ["population"]})
    assert ids(engine.search({"collection": "places", "query": "paris "})) == []
    assert ids(engine.search({"collection": "places", "query": "paris ", "searchFields": ["name"]})) == [1, 2]


def test_typo_settings() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "name": "york", "note": "lovelace"}, {"id": 2, "note": "yorkshire"}])
    assert ids(engine.search({"collection": "c", "query": "yrok "})) == [1]
    engine.update_settings("c", {"typoMinWordSize": {"oneTypo": 5, "twoTypos": 9}})
    assert ids(engine.search({"collection": "c", "query": "yrok "})) == []
    engine.update_settings("c", {"typoMinWordSize": None, "typoDisabledWords": ["YROK"]})
    assert ids(engine.search({"collection": "c", "query": "yrok "})) == []
    engine.update_settings("c", {"typoDisabledWords": None, "typoDisabledFields": ["note"]})
    assert ids(engine.search({"collection": "c", "query": "lovelase "})) == []
    assert ids(engine.search({"collection": "c", "query": "yrok "})) == [1]
    engine.update_settings("c", {"stopWords": ["the", "of"]})
    assert ids(engine.search({"collection": "c", "query": "the york of"})) == [1]
    assert engine.search({"collection": "c", "query": "the of"})["totalHits"] == 0  # only stop words: searched


def test_settings_survive_reopen_and_log_replay(tmp_path: Path) -> None:
    wanted = {"customRanking": ["-population"], "synonyms": {"big apple": ["new york"]}, "stopWords": ["the"]}
    with Engine(tmp_path / "a") as engine:
        engine.add_records("places", PLACES)
        engine.update_settings("places", wanted)
        engine.update_settings("empty", {"stopWords": ["x"]})  # settings alone create a collection
    with Engine(tmp_path / "a") as engine:  # from the snapshot taken at close
        assert {key: engine.get_settings("places")[key] for key in wanted} == wanted
        assert ids(engine.search({"collection": "places", "query": "the big apple"})) == ["x"]
        assert ids(engine.search({"collection": "places", "query": "par"})) == [1, 2, 3]
        assert engine.collections() == [{"collection": "empty", "records": 0}, {"collection": "places", "records": 4}]
    # No snapshot at all: the log alone (an engine that was never closed) replays the settings batch.
    engine = Engine(tmp_path / "b")
    engine.add_records("places", PLACES)
    engine.update_settings("places", wanted)
    engine._directory.close()  # type: ignore[union-attr]  # "crash": no snapshot, lock released
    assert not os.path.exists(tmp_path / "b" / "collections" / "places" / "snapshot.rsnap")
    with Engine(tmp_path / "b") as reopened:
        assert reopened.get_settings("places")["customRanking"] == ["-population"]
        assert ids(reopened.search({"collection": "places", "query": "par"})) == [1, 2, 3]


def test_snapshot_without_settings_loads_with_defaults(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("places", PLACES)
    # A snapshot written before settings existed has no "settings" key: this one has none either.
    with Engine(tmp_path) as engine:
        assert engine.get_settings("places")["customRanking"] == []
        assert ids(engine.search({"collection": "places", "query": "par"})) == [1, 2, 3]


def test_get_records_in_the_order_asked() -> None:
    engine = Engine()
    engine.add_records("places", PLACES)
    assert [r["id"] for r in engine.get_records("places", ["x", 9, 1, "1"])] == ["x", 1]
    with pytest.raises(BadRequestError):
        engine.get_records("places", [1.5])
    with pytest.raises(NotFoundError):
        engine.get_records("nobody", [1])


def page_all(engine: Engine, count: int, between: Any = None) -> list[Any]:
    seen: list[Any] = []
    after = None
    while True:
        page = engine.page_records("c", count=count, after=after)
        seen.extend(record["id"] for record in page["records"])
        if page["next"] is None:
            return seen
        after = page["next"]
        if between is not None:
            between()


def test_paging_is_in_id_order() -> None:
    engine = Engine()
    records = [{"id": i} for i in (5, -3, 12)] + [{"id": s} for s in ("b", "a", "10")]
    engine.add_records("c", records)
    for count in (1, 2, 4, 1000):
        assert page_all(engine, count) == [-3, 5, 12, "10", "a", "b"]
    assert engine.page_records("c", count=10) == {"records": engine.get_records("c", [-3, 5, 12, "10", "a", "b"]),
                                                   "next": None}
    engine.page_records("c")  # ranks are now cached; deletes and adds must leave paging exact
    engine.delete_records("c", ids=[5, "a"])
    assert page_all(engine, 2) == [-3, 12, "10", "b"]  # the cached ranks now have gaps
    engine.add_records("c", [{"id": 7}, {"id": "0"}])
    for count in (1, 3, 1000):
        assert page_all(engine, count) == [-3, 7, 12, "0", "10", "b"]
    for bad in ({"count": 0}, {"count": 1001}, {"after": "!!"}, {"after": "W10"}):
        with pytest.raises(BadRequestError):
            engine.page_records("c", **bad)
    with pytest.raises(BadRequestError, match="got <a 16610-bit integer>"):  # repr() would raise ValueError
        engine.page_records("c", count=10**5000)


def test_paging_under_concurrent_writes_loses_and_repeats_nothing() -> None:
    engine = Engine()
    stable = list(range(0, 2000, 2))  # even ids stay; odd ids come and go
    engine.add_records("c", [{"id": i, "v": 0} for i in stable])
    stop = threading.Event()

    def writer() -> None:
        round_ = 0
        while not stop.is_set():
            round_ += 1
            odd = [i for i in range(1 + round_ % 7, 2000, 7) if i % 2]
            engine.add_records("c", [{"id": i, "v": round_} for i in odd] + [{"id": i, "v": round_} for i in stable[::50]])
            engine.delete_records("c", ids=odd[::2])

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for thread in threads:
        thread.start()
    try:
        for count in (7, 100):
            seen = page_all(engine, count)
            assert len(seen) == len(set(seen)), "a record was repeated"
            assert seen == sorted(seen), "pages left id order"
            assert set(stable) <= set(seen), "a record that stayed was lost"
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def test_collection_info_and_drop(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("places", PLACES + [{"id": 9, "name": "Nowhere", "flag": True, "population": "many"}])
        engine.add_records("other", {"id": 1})
        engine.update_settings("places", {"stopWords": ["the"]})
        info = engine.collection_info("places")
        assert info["records"] == 5 and info["settings"]["stopWords"] == ["the"]
        fields = {entry["field"]: entry for entry in info["fields"]}
        assert fields["population"] == {"field": "population", "kinds": ["number", "string"], "records": 5}
        assert fields["flag"] == {"field": "flag", "kinds": ["boolean"], "records": 1}
        old = engine._collection("places")
        assert engine.drop_collection("places") == {"status": 200}
        with pytest.raises(NotFoundError):
            old.write({"op": "add", "records": [{"id": 1}]})  # a write racing the drop
        with pytest.raises(NotFoundError):
            engine.drop_collection("places")
        with pytest.raises(NotFoundError):
            engine.search({"collection": "places"})
        assert engine.collections() == [{"collection": "other", "records": 1}]
        engine.add_records("places", {"id": 77})  # a new collection of the same name starts empty
        assert engine.collection_info("places")["records"] == 1
        assert engine.get_settings("places")["stopWords"] == []
        engine.drop_collection("places")
    with Engine(tmp_path) as engine:
        assert engine.collection_names() == ["other"]


def test_a_drop_interrupted_after_its_rename_never_resurrects(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("places", PLACES)
    collections = tmp_path / "collections"
    # The state a crash between the rename and the deletion leaves behind.
    os.rename(collections / "places", collections / f"{store_module.DROPPED_PREFIX}places-0123")
    with Engine(tmp_path) as engine:
        assert engine.collections() == []
    assert os.listdir(collections) == []


def test_multi_search_answers_in_order_with_failures_in_place() -> None:
    engine = Engine()
    engine.add_records("places", PLACES)
    answers = engine.multi_search([{"collection": "places", "query": "paris "}, {"collection": "nobody"},
                                   {"collection": "places", "count": "x"}, {"collection": "places", "query": "nyc"}])
    assert ids(answers[0]) == [1, 2]
    assert answers[1] == {"status": 404, "data": "collection 'nobody' not found"}
    assert answers[2] == {"status": 400, "data": "count: must be an integer, got string"}
    assert answers[3]["totalHits"] == 0
    assert engine.multi_search([]) == []
    with pytest.raises(BadRequestError):
        engine.multi_search([{"collection": "places"}] * 101)
    with pytest.raises(BadRequestError):
        engine.multi_search({"collection": "places"})


def test_cursor_is_opaque_but_stable() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": "é"}, {"id": 3}])
    first = engine.page_records("c", count=1)
    assert first["next"] is not None and "=" not in first["next"]
    assert [r["id"] for r in engine.page_records("c", count=1, after=first["next"])["records"]] == ["é"]
