"""Text facet counts of a one-value-per-doc field gathered from the dense per-doc column equal the
per-value intersections, across deletes, upserts and fields that later gain arrays."""

from __future__ import annotations

import random

import pytest
from pyroaring import BitMap

from roarsearch import Engine
from roarsearch.facets import text


@pytest.mark.parametrize("seed", range(3))
def test_dense_counts_equal_intersections(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = random.Random(seed)
    engine = Engine()
    values = [f"v{i}" for i in range(40)] + [True, False]
    engine.add_records("c", [{"id": i, "f": generator.choice(values)} for i in range(2000)])
    engine.delete_records("c", [str(i) for i in generator.sample(range(2000), 200)])
    engine.add_records("c", [{"id": i, "f": generator.choice(values)} for i in generator.sample(range(2000), 300)])
    index = engine._collection("c").index
    for step in range(2):
        columns = index.field_columns("f")
        assert columns is not None
        alive = list(index.alive)
        for size in (1, 10, 300, 1500):
            candidates = BitMap(generator.sample(alive, min(size, len(alive))))
            monkeypatch.setattr(text, "DENSE_PER_VALUE", 10**6)
            dense = text.string_counts(columns, candidates).tolist()
            monkeypatch.setattr(text, "DENSE_PER_VALUE", 0)
            monkeypatch.setattr(text, "FEW_CANDIDATES_PER_VALUE", 0)
            assert text.string_counts(columns, candidates).tolist() == dense, (step, size)
            monkeypatch.undo()
        engine.add_records("c", [{"id": 5000, "f": ["v1", "v2"]}])  # now an array: the dense path stands aside
