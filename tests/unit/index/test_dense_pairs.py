"""This module tests the following properties:

- a column's (doc, value) pairs read the same whether they are kept in arrays of their own or read
  from the per-doc values (while pair i is doc i with its one value): after any sequence of writes
  (every doc holding the field once, docs without it, docs with several values, a value arriving
  for a doc that already has one), ``pairs()``, ``pairs_since(k)`` and the facet selection equal
  a brute-force list of what was appended, and a view handed out earlier never changes;
- a column that stays dense keeps no pair arrays (the point of it), and one saved and loaded
  again reads its pairs from the per-doc values when they hold them;
- a per-doc array grown write by write holds the values set and ``fill`` everywhere else, and a
  view of it handed out earlier keeps its length and values.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.facets.text import select_pairs
from roarsearch.index.bitmaps import GrowableArray
from roarsearch.index.columns import NumericColumn, ValueColumn
from roarsearch.index.index import Index
from roarsearch.index.state import index_from_state, index_to_state

#: One write: per doc (consecutive, from the column's next doc plus a gap), its values (none: the
#: doc lacks the field). ``back``: the write also gives a value to a doc written before.
writes = st.lists(
    st.tuples(st.integers(0, 2),  # gap before the write's first doc
              st.lists(st.lists(st.integers(0, 5), max_size=3), min_size=1, max_size=12),
              st.booleans()),
    min_size=1, max_size=8)


def _apply(column: NumericColumn | ValueColumn, plan: list, numeric: bool) -> list[tuple[int, float]]:
    """Apply ``plan`` to ``column``; returns every pair appended, in order (the reference)."""
    expected: list[tuple[int, float]] = []
    next_doc = 0
    views = []
    for gap, per_doc, back in plan:
        docs, values = [], []
        if back and expected:
            docs.append(expected[-1][0])
            values.append(-1)  # below every other value: it changes the per-doc minimum
        next_doc += gap
        for held in per_doc:
            for value in held:
                docs.append(next_doc)
                values.append(value)
            next_doc += 1
        if not docs:
            continue
        order = np.argsort(docs, kind="stable")
        docs_array = np.asarray(docs, dtype=np.uint32)[order]
        values_array = np.asarray(values)[order]
        before = [(docs_now.copy(), values_now.copy(), docs_now, values_now) for docs_now, values_now in [column.pairs()]]
        if numeric:
            column.add(docs_array, values_array.astype(np.float64))
            expected += list(zip(docs_array.tolist(), values_array.astype(np.float64).tolist()))
        else:
            ids = column.intern_many([f"v{value}" for value in values_array.tolist()])
            column.add(docs_array, ids)
            # A value repeated within a doc counts once; pairs are (doc, value id) ordered per write.
            pairs = sorted(set(zip(docs_array.tolist(), ids.tolist())))
            expected += pairs
        views += before
    for copied_docs, copied_values, docs_view, values_view in views:
        assert np.array_equal(copied_docs, docs_view) and np.array_equal(copied_values, values_view)
    return expected


@settings(max_examples=150, deadline=None)
@given(writes, st.booleans(), st.data())
def test_pairs_read_from_the_per_doc_values_equal_the_pairs_appended(plan: list, numeric: bool,
                                                                     data: st.DataObject) -> None:
    column: NumericColumn | ValueColumn = NumericColumn() if numeric else ValueColumn()
    expected = _apply(column, plan, numeric)
    docs, values = column.pairs()
    assert list(zip(docs.tolist(), values.tolist())) == expected
    assert column.count == len(expected)
    start = data.draw(st.integers(0, len(expected)))
    since_docs, since_values = column.pairs_since(start)
    assert list(zip(since_docs.tolist(), since_values.tolist())) == expected[start:]
    dense = [doc for doc, _ in expected] == list(range(len(expected)))
    assert (column.dense_values() is not None) == dense
    if dense:
        assert column._pairs.docs.size == 0  # nothing stored beside the per-doc values
    candidates = BitMap(data.draw(st.lists(st.integers(0, 40), max_size=20)))
    chosen_docs, chosen_values = select_pairs(column, candidates)
    assert list(zip(chosen_docs.tolist(), chosen_values.tolist())) == [pair for pair in expected if pair[0] in candidates]


def test_a_field_every_record_holds_once_keeps_no_pairs_and_loads_so_again() -> None:
    index = Index()
    index.add_records([{"id": i, "n": i % 7, "tag": f"t{i % 3}"} for i in range(500)])
    index.add_records([{"id": 500 + i, "n": 1.5, "tag": "t9"} for i in range(300)])
    numeric, values = index.columns["n"].numeric, index.columns["tag"].values
    assert numeric is not None and values is not None
    assert numeric.dense_values() is not None and values.dense_values() is not None
    assert numeric._pairs.docs.size == 0 and values._pairs.docs.size == 0
    loaded = index_from_state(index_to_state(index))
    loaded_numeric, loaded_values = loaded.columns["n"].numeric, loaded.columns["tag"].values
    assert loaded_numeric is not None and loaded_values is not None
    assert loaded_numeric.dense_values() is not None and loaded_values.dense_values() is not None
    for before, after in ((numeric, loaded_numeric), (values, loaded_values)):
        assert all(np.array_equal(left, right) for left, right in zip(before.pairs(), after.pairs()))
    # A record without the field: from then on the pairs are arrays of their own, still the same.
    index.add_records([{"id": 900, "other": 1}, {"id": 901, "n": 3, "tag": "t1"}])
    assert numeric.dense_values() is None and values.dense_values() is None
    docs, numbers = numeric.pairs()
    assert docs.tolist() == list(range(800)) + [801] and numbers[-1] == 3 and numbers[:500].tolist() == [i % 7 for i in range(500)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(-5, 5)), max_size=30))
def test_a_per_doc_array_holds_what_was_set_and_fill_elsewhere(sets: list[tuple[int, int]]) -> None:
    array = GrowableArray(np.int32, -1)
    reference: dict[int, int] = {}
    views = []
    for at, (doc, value) in enumerate(sets):
        array.ensure(doc + 1)
        array.data[doc] = value
        reference[doc] = value
        views.append((at, array.data, array.data.copy()))
        expected = np.full(array.data.size, -1, dtype=np.int32)
        for known, held in reference.items():
            expected[known] = held
        assert array.data.size == max(reference) + 1 and np.array_equal(array.data, expected)
    for at, view, copied in views:
        assert view.size == copied.size
        # A view changes only where a doc inside it was set again after it was handed out.
        set_later = {doc for doc, _ in sets[at + 1:]}
        assert set(np.flatnonzero(view != copied).tolist()) <= set_later
