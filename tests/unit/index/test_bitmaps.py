"""This module tests the following properties:

- ``sorted_unique`` gives exactly ``np.unique``'s answer (values, dtype) for integer arrays of
  any width and shape, empty and single ones included.
- ``bitmap_from_array`` holds exactly the set of its ids, in any order, with duplicates, for any
  integer dtype, below and above the size from which it sorts them first (a non-contiguous slice
  included), and leaves its input as it was.
- ``bitmap_from_mask`` holds exactly the set entries of a boolean mask of any length (empty,
  within one container, across several, ending mid-container), whether each container holds
  none, a few, exactly 4,096 or 4,097 (where sparse containers give way to bits) or all of its
  2^16 entries, and equals the bitmap built from the same ids; it is a new, mutable bitmap.
- ``contains_each`` says for each id (any order, repeats, absent ones) whether the bitmap holds
  it, as one test per id does, below and above the count from which it is vectorised.
- ``union_all`` of any number of bitmaps (frozen or not, sparse or dense) is their set union, as a
  new bitmap (frozen when the first is), and leaves its inputs as they were.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap, FrozenBitMap

from roarsearch.index.bitmaps import (
    CONTAINS_EACH_MIN,
    SORT_BEFORE_BUILD,
    bitmap_from_array,
    bitmap_from_mask,
    contains_each,
    sorted_unique,
    union_all,
)


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


# Per container of 2^16 entries, how many are set: around the array/bits boundary, none and all.
_CONTAINER_FILLS = st.sampled_from([0, 1, 7, 4095, 4096, 4097, 30_000, 65_535, 65_536])


@given(fills=st.lists(_CONTAINER_FILLS, max_size=4), tail=st.integers(0, 70_000), seed=st.integers(0, 2**32 - 1))
def test_bitmap_from_mask_holds_the_set_entries(fills: list[int], tail: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    mask = np.zeros(len(fills) * (1 << 16) + tail, dtype=bool)
    for container, fill in enumerate(fills):
        mask[(container << 16) + rng.choice(1 << 16, size=fill, replace=False)] = True
    if tail:
        mask[len(fills) << 16:] = rng.random(tail) < rng.random()
    expected = np.flatnonzero(mask)
    found = bitmap_from_mask(mask)
    assert isinstance(found, BitMap) and not isinstance(found, FrozenBitMap)
    assert len(found) == expected.size
    assert found == bitmap_from_array(expected)
    assert np.array_equal(np.asarray(found.to_array(), dtype=np.int64), expected)
    found.add(int(mask.size) + 1)  # a new, mutable bitmap


@given(members=st.lists(st.integers(0, 5_000), max_size=400), ids=st.lists(st.integers(0, 5_100), max_size=600),
       repeats=st.integers(1, 3), frozen=st.booleans())
def test_contains_each_tests_every_id(members: list[int], ids: list[int], repeats: int, frozen: bool) -> None:
    bitmap = (FrozenBitMap if frozen else BitMap)(members)
    array = np.asarray(ids * repeats, dtype=np.uint32)
    expected = [doc in bitmap for doc in array.tolist()]
    assert contains_each(bitmap, array).tolist() == expected
    assert len(bitmap) == len(set(members))  # left as it was


def test_contains_each_is_vectorised_past_its_threshold() -> None:
    bitmap = BitMap(range(0, 10_000, 3))
    ids = np.arange(CONTAINS_EACH_MIN * 4, dtype=np.uint32)[::-1]
    assert contains_each(bitmap, ids).tolist() == [doc % 3 == 0 for doc in ids.tolist()]

