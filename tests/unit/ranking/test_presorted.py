"""Sorting by one numeric field: the walk from the column's best end (growing steps, skipped for
few candidates) pages exactly like keying every candidate — ties, arrays, missing values, skips."""

from __future__ import annotations

import random

import pytest

from roarsearch import Engine
from roarsearch.query.request import SortKey
from roarsearch.ranking import sort


@pytest.mark.parametrize("seed", range(4))
def test_walk_pages_like_keying_every_candidate(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = random.Random(seed)
    engine = Engine()
    records = []
    for i in range(3000):
        record: dict[str, object] = {"id": i, "text": generator.choice(["red", "blue", "red fox", "green"])}
        kind = generator.random()
        if kind < 0.7:
            record["n"] = generator.randint(0, 50)  # many ties
        elif kind < 0.85:
            record["n"] = [generator.randint(0, 50) for _ in range(generator.randint(1, 3))]
        records.append(record)
    engine.add_records("c", records)
    bodies = [{"collection": "c", "query": query, "filter": expression, "sort": [key], "skip": skip, "count": count,
               "fields": ["id"]}
              for query in ("", "red", "fox")
              for expression in ("n >= 0", "n >= 45", "n < 3 OR n > 48", "text = green")
              for key in ("n", "-n")
              for skip, count in ((0, 30), (40, 25), (0, 1))]

    def pages() -> list[list[object]]:
        return [[hit["id"] for hit in engine.search(body)["results"]] for body in bodies]

    index = engine._collections["c"].index
    walk_applies = sort._presorted_docs(index, index.alive, (SortKey("n", False),), 30) is not None
    walked = pages()
    # Off through its threshold, read at call time (a replaced function would not be seen by
    # the compiled module's own calls).
    monkeypatch.setattr(sort, "PRESORTED_MIN_RATIO", 1 << 62)
    assert walk_applies and sort._presorted_docs(index, index.alive, (SortKey("n", False),), 30) is None
    assert pages() == walked
