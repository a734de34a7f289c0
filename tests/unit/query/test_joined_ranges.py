"""Two bounds on one numeric field: one range where each record holds one number, apart on arrays."""

from __future__ import annotations

from roarsearch import Engine


def _ids(engine: Engine, expression: str) -> list[int]:
    return [hit["id"] for hit in engine.search({"collection": "c", "filter": expression, "count": 100})["results"]]


def test_bounds_on_a_single_valued_field_select_one_range() -> None:
    with Engine() as engine:
        engine.add_records("c", [{"id": i, "n": i} for i in range(20)])
        assert _ids(engine, "n >= 5 AND n < 9") == [5, 6, 7, 8]
        assert _ids(engine, "n > 5 AND n <= 9") == [6, 7, 8, 9]
        assert _ids(engine, "n < 9 AND id != 6 AND n >= 5") == [5, 7, 8]
        assert _ids(engine, "n >= 9 AND n < 5") == []
        assert _ids(engine, "n > 2 AND n > 4 AND n < 7") == [5, 6]
        assert _ids(engine, "id >= 3 AND id <= 4") == [3, 4]


def test_bounds_on_a_field_of_arrays_may_hold_for_different_elements() -> None:
    with Engine() as engine:
        engine.add_records("c", [{"id": 1, "n": [1, 20]}, {"id": 2, "n": [7]}, {"id": 3, "n": 30}])
        # Record 1 has an element above 5 (20) and one below 10 (1): each comparison holds (§3).
        assert _ids(engine, "n > 5 AND n < 10") == [1, 2]
