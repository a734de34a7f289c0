"""This module tests the following properties:

- ``sorted_unique`` gives exactly ``np.unique``'s answer (values, dtype) for integer arrays of
  any width and shape, empty and single ones included.
- ``bitmap_from_array`` holds exactly the set of its ids, in any order, with duplicates, for any
  integer dtype, below and above the size from which it sorts them first (a non-contiguous slice
  included), and leaves its input as it was.
- ``union_all`` of any number of bitmaps (frozen or not, sparse or dense) is their set union, as a
  new bitmap (frozen when the first is), and leaves its inputs as they were.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap, FrozenBitMap

from roarsearch.index.bitmaps import SORT_BEFORE_BUILD, bitmap_from_array, sorted_unique, union_all


@given(values=st.lists(st.integers(0, 2**32 - 1), max_size=300),
       dtype=st.sampled_from([np.uint32, np.int64, np.uint64]), two_rows=st.booleans())
def test_sorted_unique_is_np_unique(values: list[int], dtype: type, two_rows: bool) -> None:
    array = np.asarray(values, dtype=dtype)
    if two_rows and array.size % 2 == 0:
        array = array.reshape(2, -1)  # np.unique flattens
    found = sorted_unique(array)
    expected = np.unique(array)
    assert found.dtype == expected.dtype
    assert found.tolist() == expected.tolist()


@given(parts=st.lists(st.tuples(st.lists(st.integers(0, 300_000), max_size=200), st.booleans(), st.booleans()),
                      max_size=10))
def test_union_all_is_the_set_union(parts: list[tuple[list[int], bool, bool]]) -> None:
    bitmaps = []
    for values, frozen, dense in parts:
        docs = set(values) | (set(range(1000, 70_000)) if dense else set())
        bitmaps.append(FrozenBitMap(docs) if frozen else BitMap(docs))
    before = [set(bitmap) for bitmap in bitmaps]
    union = union_all(bitmaps)
    assert set(union) == set().union(*before)
    assert all(union is not bitmap for bitmap in bitmaps)
    assert isinstance(union, FrozenBitMap) == bool(bitmaps and isinstance(bitmaps[0], FrozenBitMap))
    if isinstance(union, BitMap):
        union.add(299_999_999)  # a new object: the inputs do not change
    assert [set(bitmap) for bitmap in bitmaps] == before


@given(values=st.lists(st.integers(0, 2**32 - 1), max_size=3 * SORT_BEFORE_BUILD),
       repeats=st.integers(1, 3), dtype=st.sampled_from([np.uint32, np.int64, np.uint64]), step=st.sampled_from([1, 2]))
def test_bitmap_from_array_holds_the_ids(values: list[int], repeats: int, dtype: type, step: int) -> None:
    array = np.asarray(values * repeats, dtype=dtype)[::step]
    before = array.copy()
    assert set(bitmap_from_array(array)) == set(array.tolist())
    assert array.tolist() == before.tolist()
