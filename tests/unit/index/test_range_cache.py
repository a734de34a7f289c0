"""Numeric range filters asked again answer from the range's kept doc set: the same docs as the
first (per-doc) check, and nothing stale after adds, upserts and deletes change the column."""

from __future__ import annotations

import random

from roarsearch import Engine


def _expected(records: dict[str, dict[str, object]], word: str | None, low: float, high: float) -> list[str]:
    hits = []
    for record_id, record in records.items():
        if word is not None and word not in str(record["text"]).split():
            continue
        values = record.get("n")
        numbers = values if isinstance(values, list) else [values] if values is not None else []
        # AND of two bounds over an array: each bound may be met by a different element.
        if any(v >= low for v in numbers) and any(v < high for v in numbers):  # type: ignore[operator]
            hits.append(record_id)
    return sorted(hits, key=int)


def test_repeated_ranges_stay_exact_across_writes() -> None:
    generator = random.Random(7)
    engine = Engine()
    records: dict[str, dict[str, object]] = {}

    def add(first: int, count: int) -> None:
        batch = []
        for i in range(first, first + count):
            record: dict[str, object] = {"id": str(i), "text": generator.choice(["red", "blue", "red fox"])}
            kind = generator.random()
            if kind < 0.6:
                record["n"] = generator.randint(0, 100)
            elif kind < 0.8:
                record["n"] = [generator.randint(0, 100) for _ in range(generator.randint(1, 3))]
            batch.append(record)
            records[str(i)] = record
        engine.add_records("c", batch)

    add(0, 300)
    for step in range(4):
        for _ in range(3):  # first sight (per-doc check), then the kept set
            for word, (low, high) in [("fox", (10, 60)), (None, (10, 60)), ("red", (0, 30)), (None, (50, 101))]:
                body = {"collection": "c", "query": word or "", "count": 1000, "fields": ["id"],
                        "filter": f"n >= {low} AND n < {high}"}
                got = sorted((hit["id"] for hit in engine.search(body)["results"]), key=int)
                assert got == _expected(records, word, low, high), (step, word, low, high)
        add(1000 + 100 * step, 40)  # new docs in the column
        gone = generator.sample(sorted(records), 20)
        engine.delete_records("c", gone)
        for record_id in gone:
            del records[record_id]
        upserted = generator.sample(sorted(records), 10)  # upserts: new values for old ids
        batch = [{"id": record_id, "text": "red", "n": generator.randint(0, 100)} for record_id in upserted]
        engine.add_records("c", batch)
        for record in batch:
            records[str(record["id"])] = record
