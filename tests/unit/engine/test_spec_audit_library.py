"""This module tests the following properties (contract §1 "The library", as the earlier audits
did for §2-§9):

- ``with Engine(path)`` closes cleanly also when its body raises: the exception propagates, the
  acknowledged writes are there on reopening, and the directory lock is released;
- a second ``Engine`` refused on an open directory changes nothing: the first one keeps writing,
  and the directory reopens whole and passes ``check()``;
- an on-disk engine that was closed never acknowledges a write it does not keep, and never
  corrupts the directory that the next open engine owns: every call on a closed engine (on disk
  or in memory) is a 503 ``SearchError``, as on a closed sharded engine;
- every failure of every library call is a ``SearchError`` of the subclass its ``status`` maps to
  (``ERROR_BY_STATUS``), with an ``int`` status, a non-empty ``str`` data, and ``to_dict()``
  exactly ``{"status": status, "data": data}``;
- every answer (add, search with facets, groups, highlights and geo, delete by ids, filter and
  clear, multi-search) is plain JSON: dicts with string keys, lists, strings, numbers, booleans
  and null only, equal to itself after a JSON round trip;
- writes from several threads are serialised: concurrent batches that upsert the same ids never
  interleave (every record ends, and every search sees, one batch's values, never a mix), no
  concurrent add is lost (also after reopening), and a delete by filter or clear is seen wholly
  or not at all, also for batches big enough to be logged in a second thread;
- searches that run concurrently, each the first to index a field's exact values (a sort, a facet,
  a group, an equality filter) on a fresh engine, answer exactly as the same searches run one
  after another.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from roarsearch import Engine, SearchError
from roarsearch.engine.collection import THREADED_LOG_RECORDS
from roarsearch.errors import ERROR_BY_STATUS
from roarsearch.index import writer as index_writer


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


# ---------------------------------------------------------------- lifecycle


def test_context_manager_releases_the_lock_when_its_body_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": 1, "t": "kept"}, {"id": 2, "t": "kept"}])
        raise RuntimeError("boom")
    with Engine(tmp_path) as reopened:  # no DirectoryLockedError: released on the way out
        assert ids(reopened.search({"collection": "c", "query": "kept"})) == [1, 2]
        assert reopened.check()["ok"]


def test_a_refused_second_engine_changes_nothing(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", {"id": 1, "t": "first"})
        with pytest.raises(SearchError) as caught:
            Engine(tmp_path)
        assert caught.value.status == 409 and "in use by another open engine" in caught.value.data
        assert engine.add_records("c", {"id": 2, "t": "after the refusal"}) == {"status": 201}
        assert engine.delete_records("c", ids=[1]) == [{"status": 200, "id": 1}]
    with Engine(tmp_path) as reopened:
        assert reopened.page_records("c")["records"] == [{"id": 2, "t": "after the refusal"}]
        assert reopened.check()["ok"]


@pytest.mark.parametrize("on_disk", [True, False])
def test_every_call_on_a_closed_engine_is_a_503(tmp_path: Path, on_disk: bool) -> None:
    engine = Engine(tmp_path) if on_disk else Engine()
    engine.add_records("c", {"id": 1, "t": "x"})
    engine.close()
    engine.close()  # idempotent
    calls: list[Callable[[], Any]] = [
        lambda: engine.add_records("c", {"id": 2}), lambda: engine.add_records("new", {"id": 2}),
        lambda: engine.add_batches("c", [[{"id": 3}]]), lambda: engine.delete_records("c", ids=[1]),
        lambda: engine.delete_records("c", clear=True), lambda: engine.update_settings("c", {"stopWords": ["x"]}),
        lambda: engine.drop_collection("c"), lambda: engine.search({"collection": "c"}),
        lambda: engine.multi_search([{"collection": "c"}])[0], lambda: engine.get_records("c", [1]),
        lambda: engine.collections(), lambda: engine.collection_info("c"),
    ]
    for call in calls:
        try:
            answer = call()
        except SearchError as error:
            assert (error.status, type(error).__name__) == (503, "ServiceUnavailableError"), error
        else:  # multi-search answers each search's Error object in place
            assert answer == {"status": 503, "data": answer["data"]} and "closed" in answer["data"], answer
    if on_disk:
        with Engine(tmp_path) as reopened:
            assert ids(reopened.search({"collection": "c"})) == [1]


def closed_and_new_owner(directory: Path) -> tuple[Engine, Engine]:
    """An engine that wrote record 1 and was closed, and the engine that owns the directory now
    (it wrote record 10)."""
    engine = Engine(directory)
    engine.add_records("c", {"id": 1})
    engine.close()
    owner = Engine(directory)
    owner.add_records("c", {"id": 10})
    return engine, owner


def test_a_closed_engine_never_acknowledges_a_write_it_does_not_keep(tmp_path: Path) -> None:
    engine, owner = closed_and_new_owner(tmp_path)
    try:
        answer: Any = engine.add_records("c", {"id": 2})
    except SearchError as error:
        answer = error
    owner.close()
    with Engine(tmp_path) as reopened:
        kept = ids(reopened.search({"collection": "c"}))
    # Either the closed engine refuses with a SearchError, or what it acknowledged survives.
    assert isinstance(answer, SearchError) or (answer == {"status": 201} and kept == [1, 2, 10]), (answer, kept)


def test_a_closed_engine_never_corrupts_the_next_owners_directory(tmp_path: Path) -> None:
    engine, owner = closed_and_new_owner(tmp_path)
    try:
        engine.add_records("c", {"id": 3})
    except SearchError:
        pass
    owner.add_records("c", {"id": 11})
    owner._directory.close()  # type: ignore[union-attr]  # the owner "crashes": no snapshot, lock released
    with Engine(tmp_path) as reopened:  # today: CorruptionError "sequence 2 follows 2"
        assert {1, 10, 11} <= set(ids(reopened.search({"collection": "c"})))
        assert reopened.check()["ok"]


# ---------------------------------------------------------------- errors


def _failing_calls(tmp_path: Path) -> list[tuple[str, Callable[[Engine], Any]]]:
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a data directory")
    return [
        ("search unknown collection", lambda e: e.search({"collection": "nobody"})),
        ("search bad type", lambda e: e.search({"collection": "c", "count": "ten"})),
        ("search unknown field", lambda e: e.search({"collection": "c", "qurey": "x"})),
        ("search not a dict", lambda e: e.search(["c"])),  # type: ignore[arg-type]
        ("search bad filter", lambda e: e.search({"collection": "c", "filter": "n >"})),
        ("add bad record", lambda e: e.add_records("c", [{"id": 9}, {"name": "no id"}])),
        ("add empty batch", lambda e: e.add_records("c", [])),
        ("add bad collection id", lambda e: e.add_records("no/such", {"id": 1})),
        ("delete no selector", lambda e: e.delete_records("c")),
        ("delete unknown collection", lambda e: e.delete_records("nobody", ids=[1])),
        ("delete bad filter", lambda e: e.delete_records("c", filter="n >")),
        ("get_records unknown collection", lambda e: e.get_records("nobody", [1])),
        ("page_records bad count", lambda e: e.page_records("c", count=0)),
        ("get_settings unknown collection", lambda e: e.get_settings("nobody")),
        ("update_settings unknown key", lambda e: e.update_settings("c", {"nope": 1})),
        ("collection_info unknown", lambda e: e.collection_info("nobody")),
        ("drop unknown", lambda e: e.drop_collection("nobody")),
        ("multi_search too many", lambda e: e.multi_search([{"collection": "c"}] * 101)),
        ("facet values no query", lambda e: e.search_facet_values("c", "t", {"textFacetQuery": 5})),
        ("second engine on the directory", lambda e: Engine(tmp_path / "data")),
        ("engine on a foreign directory", lambda e: Engine(foreign)),
    ]


def test_every_failure_is_the_search_error_subclass_of_its_status(tmp_path: Path) -> None:
    statuses = set()
    with Engine(tmp_path / "data") as engine:
        engine.add_records("c", [{"id": 1, "t": "x", "n": 1}])
        for name, call in _failing_calls(tmp_path):
            with pytest.raises(SearchError) as caught:
                call(engine)
            error = caught.value
            assert type(error.status) is int and error.status >= 400, name
            assert issubclass(type(error), ERROR_BY_STATUS[error.status]), (name, type(error), error.status)
            assert isinstance(error.data, str) and error.data, name
            wire = error.to_dict()
            assert wire == {"status": error.status, "data": error.data} and list(wire) == ["status", "data"], name
            assert json.loads(json.dumps(wire)) == wire
            statuses.add(error.status)
        assert engine.page_records("c")["records"] == [{"id": 1, "t": "x", "n": 1}]  # no failure changed anything
    assert statuses == {400, 404, 409}


# ---------------------------------------------------------------- plain JSON


def _assert_plain_json(value: Any, where: str = "answer") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str, (where, key)
            _assert_plain_json(item, f"{where}.{key}")
    elif isinstance(value, list):
        for position, item in enumerate(value):
            _assert_plain_json(item, f"{where}[{position}]")
    else:
        assert value is None or type(value) in (str, int, float, bool), (where, type(value))


def test_every_answer_is_plain_json() -> None:
    engine = Engine()
    added = engine.add_records("c", [
        {"id": 1, "t": "red lamp", "n": 5, "tags": ["a", "b"], "_geo": {"lat": 48.85, "lng": 2.35}},
        {"id": "x", "t": "blue lamp", "n": 7.5, "flag": True, "nested": {"k": "v"}},
        {"id": 3, "t": "green lamp", "n": None}])
    answers: list[Any] = [added]
    answers.append(engine.search({
        "collection": "c", "query": "lamp", "fields": ["t", "nested.k", "tags"], "textFacets": ["tags", "flag"],
        "numericFacets": {"n": ["[0,6)", "[6,10]"]}, "groupBy": "tags", "highlightFields": ["t"],
        "sort": ["-n"], "geo": {"around": {"lat": 48.8, "lng": 2.3}}}))
    answers.append(engine.search({"collection": "c", "query": "lamp", "textFacetFilters": {"tags": ["a"]},
                                  "numericFacets": {"n": []}, "filter": "nope = 1"}))  # warnings too
    answers.append(engine.multi_search([{"collection": "c"}, {"collection": "nobody"}]))
    answers.append(engine.search_facet_values("c", "tags", {"textFacetQuery": {"query": "a"}}))
    answers.append(engine.delete_records("c", ids=[1, 99]))
    answers.append(engine.delete_records("c", filter="n > 7"))
    answers.append(engine.delete_records("c", clear=True))
    for answer in answers:
        _assert_plain_json(answer)
        assert json.loads(json.dumps(answer, allow_nan=False)) == answer
    assert "warnings" in answers[2] and answers[3][1]["status"] == 404


# ---------------------------------------------------------------- threads


def test_concurrent_write_batches_never_interleave(tmp_path: Path) -> None:
    shared = list(range(40))
    seen_mixed: list[Any] = []
    stop = threading.Event()
    with Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": i, "v": "start", "kind": "shared"} for i in shared])

        def writer(name: str) -> None:
            for batch in range(8):
                tag = f"{name}-{batch}"
                engine.add_records("c", [{"id": i, "v": tag, "kind": "shared"} for i in shared])
                engine.add_records("c", [{"id": f"{name}-{batch}-{j}", "v": tag, "kind": "own"} for j in range(5)])

        def reader() -> None:
            while not stop.is_set():
                facet = engine.search({"collection": "c", "filter": "kind = shared", "count": 0,
                                       "textFacets": ["v"]})["textFacets"][0]["values"]
                if len(facet) != 1 or facet[0]["count"] != len(shared):
                    seen_mixed.append(facet)
                    return

        writers = [threading.Thread(target=writer, args=(name,)) for name in "abc"]
        readers = [threading.Thread(target=reader) for _ in range(2)]
        for thread in readers + writers:
            thread.start()
        for thread in writers:
            thread.join()
        stop.set()
        for thread in readers:
            thread.join()
        assert not seen_mixed, seen_mixed[0]
        final = {record["v"] for record in engine.get_records("c", shared)}
        assert len(final) == 1, final  # the last batch wholly, not a mix of batches
        own = engine.search({"collection": "c", "filter": "kind = own", "count": 0})["totalHits"]
        assert own == 3 * 8 * 5  # no concurrent add was lost
    with Engine(tmp_path) as reopened:
        assert reopened.search({"collection": "c", "count": 0})["totalHits"] == len(shared) + 3 * 8 * 5
        assert len({record["v"] for record in reopened.get_records("c", shared)}) == 1
        assert reopened.check()["ok"]


def test_deletes_by_filter_and_clear_are_seen_wholly_or_not_at_all() -> None:
    engine = Engine()
    size = 25
    bad: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            total = engine.search({"collection": "c", "query": "word", "count": 0})["totalHits"]
            if total % size:
                bad.append(total)
                return

    engine.add_records("c", [{"id": i, "t": "word", "b": 0} for i in range(size)])
    live = {0}
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for thread in readers:
        thread.start()
    try:
        for batch in range(1, 30):
            engine.add_records("c", [{"id": batch * size + i, "t": "word", "b": batch} for i in range(size)])
            live.add(batch)
            if batch % 3 == 0:
                deleted = size if batch - 1 in live else 0
                assert engine.delete_records("c", filter=f"b = {batch - 1}") == [{"status": 200, "deleted": deleted}]
                live.discard(batch - 1)
            if batch % 10 == 0:
                assert engine.delete_records("c", clear=True) == [{"status": 200, "deleted": size * len(live)}]
                live.clear()
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    assert not bad, bad


def test_large_logged_batches_are_seen_wholly_or_not_at_all(tmp_path: Path) -> None:
    size = THREADED_LOG_RECORDS  # logged in a second thread while the batch is prepared
    totals: list[int] = []
    stop = threading.Event()
    with Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": i, "t": "word", "v": 0} for i in range(size)])

        def reader() -> None:
            while not stop.is_set():
                answer = engine.search({"collection": "c", "query": "word", "count": 0, "textFacets": ["v"]})
                totals.append(answer["totalHits"])
                if answer["totalHits"] % size or len(answer["textFacets"][0]["values"]) != answer["totalHits"] // size:
                    stop.set()

        readers = [threading.Thread(target=reader) for _ in range(2)]
        for thread in readers:
            thread.start()
        try:
            for batch in range(1, 5):
                engine.add_records("c", [{"id": i, "t": "word", "v": batch} for i in range(size)])  # all upserts
                engine.add_records("c", [{"id": batch * size + i, "t": "word", "v": batch} for i in range(size)])
        finally:
            stop.set()
            for thread in readers:
                thread.join()
        assert totals and all(total % size == 0 for total in totals), sorted(set(totals))
    with Engine(tmp_path) as reopened:
        assert reopened.search({"collection": "c", "count": 0})["totalHits"] == 5 * size


def test_concurrent_first_searches_answer_as_serial_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fields past this many distinct values get their exact values indexed on first use, by a search.
    monkeypatch.setattr(index_writer, "AUTO_VALUE_LIMIT", 3)
    records = [{"id": i, "t": f"item {'red' if i % 3 else 'blue'} lamp", "n": (i * 7) % 23, "cat": f"c{i % 5}",
                "tags": [f"t{i % 4}", f"t{i % 6}"], "price": (i * 13) % 101 + 0.5} for i in range(300)]
    requests: list[dict[str, Any]] = [
        {"collection": "c", "sort": ["-n", "cat"], "count": 50},
        {"collection": "c", "query": "lamp", "textFacets": ["cat", "tags"], "count": 5},
        {"collection": "c", "numericFacets": {"price": ["[0,50)", "[50,200]"]}, "sort": ["price"], "count": 20},
        {"collection": "c", "query": "red", "groupBy": "cat", "filter": "n >= 5 AND tags = t1"},
        {"collection": "c", "textFacetFilters": {"tags": ["t2", "t3"]}, "textFacets": ["tags"], "sort": ["tags"]},
        {"collection": "c", "numericFacetFilters": {"n": ["[3,9]"]}, "numericFacets": {"n": []}, "sort": ["-price"]},
    ]

    def strip(answer: dict[str, Any]) -> dict[str, Any]:
        return {key: value for key, value in answer.items() if key != "responseTime"}

    serial_engine = Engine()
    serial_engine.add_records("c", records)
    expected = [strip(serial_engine.search(request)) for request in requests]
    for _round in range(3):
        engine = Engine()
        engine.add_records("c", records)
        barrier = threading.Barrier(len(requests) * 2)
        answers: dict[int, list[Any]] = {}

        def run(slot: int, engine: Engine = engine, barrier: threading.Barrier = barrier,
                answers: dict[int, list[Any]] = answers) -> None:
            order = requests if slot % 2 == 0 else list(reversed(requests))
            barrier.wait()
            try:
                answers[slot] = [strip(engine.search(request)) for request in order]
            except BaseException as error:  # reported by the comparison below
                answers[slot] = [error]

        threads = [threading.Thread(target=run, args=(slot,)) for slot in range(len(requests) * 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for slot, got in answers.items():
            want = expected if slot % 2 == 0 else list(reversed(expected))
            assert got == want, slot
