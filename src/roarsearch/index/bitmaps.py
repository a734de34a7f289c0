"""Conversions between pyroaring bitmaps and numpy arrays that stay in C.

Owns: the two hot conversions every stage needs. ``BitMap(numpy_array)`` iterates in Python-visible
steps and is several times slower than building from an ``array.array('I')``, which pyroaring
adds in one call; ``to_array()`` exposes a buffer numpy reads without copying element by element.
"""

from __future__ import annotations

import array

import numpy as np
from pyroaring import BitMap

EMPTY = BitMap()


def bitmap_from_array(doc_ids: np.ndarray) -> BitMap:
    """A BitMap of ``doc_ids`` (any integer dtype, any order, duplicates allowed)."""
    if doc_ids.size == 0:
        return BitMap()
    buffer = array.array("I")
    buffer.frombytes(np.ascontiguousarray(doc_ids, dtype=np.uint32).tobytes())
    return BitMap(buffer)


def array_from_bitmap(bitmap: BitMap) -> np.ndarray:
    """The sorted doc ids of ``bitmap`` as a uint32 numpy array."""
    if not bitmap:
        return np.empty(0, dtype=np.uint32)
    return np.frombuffer(bitmap.to_array(), dtype=np.uint32)


def union_all(bitmaps: list[BitMap]) -> BitMap:
    """Union of many bitmaps in one call (pyroaring's multi-way union)."""
    if not bitmaps:
        return BitMap()
    if len(bitmaps) == 1:
        return bitmaps[0].copy()
    return BitMap.union(*bitmaps)


class GrowableArray:
    """A dense numpy array indexed by doc id that grows by doubling; unset slots hold ``fill``."""

    __slots__ = ("data", "fill")

    def __init__(self, dtype: type | np.dtype, fill: float | int) -> None:
        self.fill = fill
        self.data = np.full(1024, fill, dtype=dtype)

    def ensure(self, size: int) -> None:
        if size > self.data.size:
            capacity = max(size, self.data.size * 2)
            grown = np.full(capacity, self.fill, dtype=self.data.dtype)
            grown[: self.data.size] = self.data
            self.data = grown
