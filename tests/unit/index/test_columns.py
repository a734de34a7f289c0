"""This module tests the following properties:

- a numeric range gives the same docs by each of its three ways (check within a small set, slice
  of the value-sorted pairs, dense scan of single-valued fields), for single- and multi-valued
  fields, inclusive and exclusive bounds, open ends, and equals a brute-force scan.
"""

from __future__ import annotations

import random

import numpy as np
from pyroaring import BitMap

from roarsearch.index import columns as columns_module
from roarsearch.index.columns import NumericColumn


def brute(values: dict[int, list[float]], low, low_inclusive, high, high_inclusive) -> set[int]:
    def inside(v: float) -> bool:
        if low is not None and (v < low if low_inclusive else v <= low):
            return False
        return not (high is not None and (v > high if high_inclusive else v >= high))
    return {doc for doc, found in values.items() if any(inside(v) for v in found)}


def test_range_ways_agree(monkeypatch) -> None:
    rng = random.Random(4)
    for multi in (False, True):
        values: dict[int, list[float]] = {}
        docs, numbers = [], []
        for doc in range(3000):
            if rng.random() < 0.2:
                continue
            found = [float(rng.randint(0, 100)) for _ in range(rng.randint(2, 3) if multi and rng.random() < 0.3 else 1)]
            values[doc] = found
            docs += [doc] * len(found)
            numbers += found
        column = NumericColumn()
        column.add(np.asarray(docs[:2000], dtype=np.uint32), np.asarray(numbers[:2000]))
        column.add(np.asarray(docs[2000:], dtype=np.uint32), np.asarray(numbers[2000:]))
        assert column.multi_valued == multi
        for _ in range(60):
            low = rng.choice([None, rng.randint(0, 100)])
            high = rng.choice([None, rng.randint(0, 100)])
            flags = (rng.random() < 0.5, rng.random() < 0.5)
            expected = brute(values, low, flags[0], high, flags[1])
            assert set(column.range(low, flags[0], high, flags[1])) == expected
            within = BitMap(rng.sample(range(3000), 300))
            assert set(column.range(low, flags[0], high, flags[1], within)) & set(within) == expected & set(within)
            monkeypatch.setattr(columns_module, "RANGE_CHECK_THRESHOLD", 10**9)
            assert set(column.range(low, flags[0], high, flags[1], BitMap(range(3000)))) == expected
            monkeypatch.setattr(columns_module, "RANGE_CHECK_THRESHOLD", 50_000)


def test_single_valued_numbers_keep_one_per_doc_array_until_a_doc_gets_a_second() -> None:
    column = NumericColumn()
    column.add(np.array([0, 1, 2]), np.array([5.0, 7.0, 6.0]))
    assert column.maximum is column.minimum and column.first is column.minimum  # 8 bytes per doc, not 24
    column.add(np.array([4]), np.array([1.0]))
    assert not column.multi_valued and column.maximum is column.minimum
    column.add(np.array([1]), np.array([9.0]))  # doc 1 again, in a later add: now it has two
    assert column.multi_valued and column.maximum is not column.minimum and column.first is not column.minimum
    assert column.minimum.data[:5].tolist()[:3] == [5.0, 7.0, 6.0] and column.maximum.data[1] == 9.0
    column.add(np.array([5, 5]), np.array([3.0, 2.0]))
    assert (column.minimum.data[5], column.maximum.data[5], column.first.data[5]) == (2.0, 3.0, 3.0)
    assert column.minimum.data[0] == column.maximum.data[0] == column.first.data[0] == 5.0


def test_a_snapshot_between_writes_saves_the_numeric_sort_order_only_if_known() -> None:
    """A final snapshot saves each numeric column's value order (a reopen then needs no argsort);
    one taken between writes saves it only when a query already computed it, and either loads
    to the same range answers."""
    from roarsearch.index.index import Index
    from roarsearch.index.state import index_from_state, index_to_state

    index = Index()
    index.add_records([{"id": i, "price": float((i * 37) % 101)} for i in range(500)])
    numeric = index.columns["price"].numeric
    assert numeric is not None and numeric.known_sort_order() is None
    assert "order" not in index_to_state(index, sort_orders=False)["columns"]["price"]["numeric"]
    final = index_to_state(index)
    assert "order" in final["columns"]["price"]["numeric"]
    assert "order" in index_to_state(index, sort_orders=False)["columns"]["price"]["numeric"]  # known now
    expected = sorted(numeric.range(10.0, True, 20.0, False))
    fresh = Index()
    fresh.add_records([{"id": i, "price": float((i * 37) % 101)} for i in range(500)])
    without_order = index_to_state(fresh, sort_orders=False)
    assert "order" not in without_order["columns"]["price"]["numeric"]
    for state in (final, without_order):
        loaded = index_from_state(state).columns["price"].numeric
        assert loaded is not None and sorted(loaded.range(10.0, True, 20.0, False)) == expected
