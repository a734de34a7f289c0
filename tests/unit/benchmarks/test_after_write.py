"""``benchmarks.after_write`` on a tiny synthetic collection: it runs the load's mix between writes,
reports every figure, and refuses to go on when a write's records are not all counted."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from benchmarks import after_write
from roarsearch import Engine

WORDS = ["python", "library", "data", "tool", "server", "parser", "client", "fonts", "game", "audio"]


def _records(count: int) -> list[dict[str, Any]]:
    rng = random.Random(3)
    return [{"id": i, "name": f"pkg{i}", "summary": " ".join(rng.sample(WORDS, 3)),
             "description": " ".join(rng.choices(WORDS, k=20)), "section": rng.choice(["libs", "net", "games"]),
             "priority": "optional", "architecture": rng.choice(["amd64", "all"]),
             "installedSize": rng.randint(1, 5000), "size": rng.randint(1, 900), "dependsCount": rng.randint(0, 9)}
            for i in range(count)]


def _built(path: Path, records: list[dict[str, Any]]) -> str:
    data = str(path / "data")
    with Engine(data) as engine:
        engine.add_records(after_write.COLLECTION, records)
    return data


@pytest.mark.parametrize("new_words", [False, True])
def test_measures_passes_after_each_write(tmp_path: Path, new_words: bool) -> None:
    records = _records(300)
    result = after_write.measure(_built(tmp_path, records), records, writes=2, batch=25, steady_passes=2,
                                 new_words=new_words)
    assert set(result["pass_ms"]) == {"steady", "first_after_write", "second_after_write"}
    assert all(value > 0 for value in result["pass_ms"].values())
    assert result["search_ms"]["first_after_write"]["max"] >= result["search_ms"]["first_after_write"]["p50"]
    assert "first after a write" in after_write.markdown({**result, "command": "c", "machine": "m", "date": "d",
                                                          "source": "s", "records": 300, "writes": 2, "batch": 25,
                                                          "searches": 160})


def test_a_write_that_is_not_counted_stops_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = _records(100)
    data = _built(tmp_path, records)
    # Batches that reuse loaded ids: upserts, so the count does not grow by the batch.
    monkeypatch.setattr(after_write, "writer_batches", lambda loaded, count, size: [loaded[:size]] * count)
    with pytest.raises(RuntimeError, match="counts 100 records, not 110"):
        after_write.measure(data, records, writes=1, batch=10, steady_passes=1)


def test_new_words_are_new_to_the_vocabulary() -> None:
    batches = after_write._with_new_words(after_write.writer_batches(_records(50), 2, 5))
    words = [record["description"].split()[-1] for batch in batches for record in batch]
    assert len(set(words)) == 10 and not set(words) & set(WORDS)
