"""This module tests the following properties:

- ``sorted_unique`` gives exactly ``np.unique``'s answer (values, dtype) for integer arrays of
  any width and shape, empty and single ones included.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from roarsearch.index.bitmaps import sorted_unique


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
