"""This module tests the following properties:

- a large add batch (logged in a second thread while its indexing is prepared, its records
  stored in a second thread while its fields are indexed) gives the same index as the same
  records added in small batches, which take neither thread: same answers, same stored records,
  and ``check()`` finds nothing wrong;
- a large batch whose logging fails (the Nth file operation fails) is not applied at all, and the
  same batch applies once logging succeeds;
- a field indexed for its exact values between two batches (by a facet request) gets them from
  the next large batch too.
"""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

from roarsearch import Engine, StorageError
from roarsearch.engine.collection import THREADED_LOG_RECORDS
from roarsearch.index.writer import THREADED_STORE_RECORDS
from roarsearch.storage.fs import FaultyFileSystem

WORDS = ["alpha", "Beta", "gamma", "Café", "東京", "delta-epsilon", "zeta", "eta"]


def records(first: int, count: int) -> list[dict[str, Any]]:
    batch: list[dict[str, Any]] = []
    for i in range(first, first + count):
        record: dict[str, Any] = {"id": i % 1700, "title": " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 5)),
                                  "tags": [WORDS[i % 8], WORDS[(i + 3) % 8]], "price": i * 0.5, "flag": i % 3 == 0}
        if i % 7 == 0:
            record["kind"] = "seven" if i % 2 else 7  # a mixed field
        if i % 11 == 0:
            record["owner"] = {"name": WORDS[i % 8]}  # nested: the record-by-record walk
        batch.append(record)
    return batch


def answers(engine: Engine) -> list[Any]:
    found = []
    for query in ("alpha", "cafe", "東", "delta eps", "gama", ""):
        answer = engine.search({"collection": "c", "query": query, "count": 50, "textFacets": ["tags", "flag"],
                                "numericFacets": {"price": ["[0,100)", "[100,)"]}, "filter": "price >= 10"})
        answer.pop("responseTime")
        found.append(answer)
    found.append(engine.get_records("c", list(range(0, 1700, 13))))
    return found


def test_large_batches_index_like_small_ones(tmp_path: Path) -> None:
    size = max(THREADED_LOG_RECORDS, THREADED_STORE_RECORDS) + 500
    large = Engine(tmp_path / "large")
    small = Engine(tmp_path / "small")
    for first in (0, size):
        batch = records(first, size)
        large.add_records("c", batch)
        for start in range(0, size, 100):
            small.add_records("c", batch[start:start + 100])
    assert answers(large) == answers(small)
    assert large.check()["ok"] and small.check()["ok"]
    large.close()
    reopened = Engine(tmp_path / "large")
    assert answers(reopened) == answers(small)
    reopened.close()
    small.close()


def test_failed_log_applies_nothing(tmp_path: Path) -> None:
    fs = FaultyFileSystem(fail_errno=errno.EIO)
    engine = Engine(tmp_path / "d", filesystem=fs)
    engine.add_records("c", records(0, 10))
    before = answers(engine)
    big = [dict(record, id=record["id"] + 5000) for record in records(0, THREADED_LOG_RECORDS + 10)]
    failures = 0
    for nth in range(1, 10):  # fail the Nth file operation of the add (the log's write, its fsync…)
        fs.fail_at = fs.operations + nth
        try:
            engine.add_records("c", big)
        except StorageError:
            failures += 1
            assert answers(engine) == before
            continue
        break
    fs.fail_at = None
    assert failures >= 2
    assert engine.search({"collection": "c", "query": "", "count": 0})["totalHits"] == 10 + len(big)
    assert engine.check()["ok"]
    engine.close()


def test_value_field_indexed_between_batches(tmp_path: Path) -> None:
    engine = Engine(tmp_path / "d")
    many = [{"id": i, "name": f"name {i}"} for i in range(THREADED_LOG_RECORDS + 10)]
    engine.add_records("c", many)  # too many distinct values: not indexed for them at write time
    engine.search({"collection": "c", "textFacets": ["name"]})  # indexes them now
    engine.add_records("c", [{"id": 10**6 + i, "name": "late"} for i in range(THREADED_LOG_RECORDS + 10)])
    facets = engine.search({"collection": "c", "textFacets": ["name"], "count": 0})
    assert engine.check()["ok"]
    assert "late" in str(facets)
    engine.close()
