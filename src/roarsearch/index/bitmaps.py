"""Conversions between pyroaring bitmaps and numpy arrays that stay in C.

Owns: the two hot conversions every stage needs. ``BitMap(numpy_array)`` iterates in Python-visible
steps and is several times slower than building from an ``array.array('I')``, which pyroaring
adds in one call; ``to_array()`` exposes a buffer numpy reads without copying element by element.
Also :func:`sorted_unique`, the distinct values of an id array, which ``np.unique`` computes slowly.
"""

from __future__ import annotations

import array

import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

#: The empty set, frozen: a caller that tried to grow it in place would fail loudly instead of
#: silently changing every later answer that returns it.
EMPTY = FrozenBitMap()


#: Past this many ids, unordered ids are sorted before they go into a bitmap: CRoaring appends
#: sorted ids to its last container, but looks each unordered one's container up (100,000 ids
#: of a 1M-doc range slice: 4.8 ms as they come, 0.55 ms sorted first).
SORT_BEFORE_BUILD = 256


def bitmap_from_array(doc_ids: np.ndarray) -> AbstractBitMap:
    """A AbstractBitMap of ``doc_ids`` (any integer dtype, any order, duplicates allowed)."""
    if doc_ids.size == 0:
        return BitMap()
    ids = np.ascontiguousarray(doc_ids, dtype=np.uint32)
    if ids.size > SORT_BEFORE_BUILD and not bool((ids[1:] >= ids[:-1]).all()):
        ids = np.sort(ids)
    buffer = array.array("I")
    buffer.frombytes(ids.tobytes())
    return BitMap(buffer)


#: Roaring's portable serialisation (the format every implementation reads): a cookie for
#: bitmaps without run containers, then per container its key and cardinality - 1 (uint16 each),
#: its byte offset (uint32), and the containers: sorted uint16 values up to 4,096, else 2^16 bits.
_NO_RUN_COOKIE = 12346
_CONTAINER_VALUES = 1 << 16
_ARRAY_CONTAINER_MAX = 4096
#: The share of set entries from which :func:`bitmap_from_mask` beats building from the ids.
DENSE_MASK_SHARE = 1 / 16


def bitmap_from_mask(mask: np.ndarray) -> BitMap:
    """The docs whose ``mask`` entry (bool, indexed by doc id) is set.

    Built as roaring's portable serialisation in numpy and deserialised in one call: a dense
    container is the mask's 2^16 entries packed to bits, a sparse one their positions, so the
    cost follows the mask's bytes: 0.4 ms for 1M docs with half of them set, against 2.1 ms
    through their ids (``flatnonzero``, :func:`bitmap_from_array`). For masks with at least
    :data:`DENSE_MASK_SHARE` of their entries set; sparser ones cost less through their ids."""
    size = mask.size
    if not size:
        return BitMap()
    padded = size + (-size % _CONTAINER_VALUES)
    if padded != size:
        whole = np.zeros(padded, dtype=bool)
        whole[:size] = mask
        mask = whole
    blocks = mask.reshape(-1, _CONTAINER_VALUES)
    counts = np.count_nonzero(blocks, axis=1)
    keys = np.flatnonzero(counts)
    if not keys.size:
        return BitMap()
    parts: list[bytes] = []
    sizes = np.empty(keys.size, dtype=np.int64)
    for slot, key in enumerate(keys.tolist()):
        block = blocks[key]
        if counts[key] > _ARRAY_CONTAINER_MAX:
            part = np.packbits(block, bitorder="little").tobytes()
        else:
            part = np.flatnonzero(block).astype("<u2").tobytes()
        parts.append(part)
        sizes[slot] = len(part)
    header_bytes = 8 + 8 * keys.size
    descriptive = np.empty((keys.size, 2), dtype="<u2")
    descriptive[:, 0] = keys
    descriptive[:, 1] = counts[keys] - 1
    offsets = (header_bytes + np.cumsum(sizes) - sizes).astype("<u4")
    head = np.array([_NO_RUN_COOKIE, keys.size], dtype="<u4").tobytes()
    return BitMap.deserialize(b"".join((head, descriptive.tobytes(), offsets.tobytes(), *parts)))


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """The distinct values of an integer array, ascending: ``np.unique(values)`` by one sort.

    numpy 2.3+ finds them with a hash table and sorts those: 20-30x slower than sorting past a
    few thousand values (2,000 ids: 97 us against 5; 200,000: 22 ms against 0.7)."""
    ordered = np.sort(values, axis=None)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    distinct: np.ndarray = ordered[keep]
    return distinct


def array_from_bitmap(bitmap: AbstractBitMap) -> np.ndarray:
    """The sorted doc ids of ``bitmap`` as a uint32 numpy array."""
    if not bitmap:
        return np.empty(0, dtype=np.uint32)
    return np.frombuffer(bitmap.to_array(), dtype=np.uint32)


#: Below this many ids, :func:`contains_each` tests them one by one (each test ~75 ns; the
#: vectorised path costs ~10 us however few there are).
CONTAINS_EACH_MIN = 256


def contains_each(bitmap: AbstractBitMap, ids: np.ndarray) -> np.ndarray:
    """Whether each of ``ids`` (any order, repeats allowed) is in ``bitmap``, as a bool array.

    pyroaring tests one id per call; for thousands (a sorted walk testing a filter's docs in
    value order) the ids' own bitmap intersected with ``bitmap`` says which are in it, and a
    binary search in that (small) intersection marks every one of them: 4,096 ids in 75 us
    against 310 us one by one."""
    if ids.size < CONTAINS_EACH_MIN:
        return np.fromiter(map(bitmap.__contains__, ids.tolist()), dtype=bool, count=ids.size)
    held = array_from_bitmap(bitmap & bitmap_from_array(ids))
    if not held.size:
        return np.zeros(ids.size, dtype=bool)
    slots = np.searchsorted(held, ids)
    np.minimum(slots, held.size - 1, out=slots)
    found: np.ndarray = held[slots] == ids
    return found


#: Unions of at most this many bitmaps are made two at a time, larger ones by pyroaring's
#: multi-way union.
PAIRWISE_UNION_MAX = 4


def union_all(bitmaps: list[AbstractBitMap]) -> AbstractBitMap:
    """Union of ``bitmaps``, as a new bitmap (frozen when the first one is). The multi-way union
    of three or more (CRoaring's lazy ``or_many``) turns every container into an 8 KiB bitset
    and back: 12 us for four sparse sets of 50 docs, where two-at-a-time unions take 2; it pays
    from about eight bitmaps, or dense ones."""
    if not bitmaps:
        return BitMap()
    if len(bitmaps) == 1:
        return bitmaps[0].copy()
    if len(bitmaps) > PAIRWISE_UNION_MAX:
        return BitMap.union(*bitmaps)
    union = bitmaps[0] | bitmaps[1]
    for bitmap in bitmaps[2:]:
        union |= bitmap  # in place (a frozen union makes a new one)
    return union


class GrowableArray:
    """A dense numpy array indexed by doc id (``data``: as long as the largest doc asked for), with
    room to grow in a larger buffer behind it; slots not set hold ``fill``. The room is left
    unwritten (a large buffer's untouched pages are not resident): filling it ahead, as
    ``np.full`` of the doubled size did, made each per-doc column of a 10M-record load hold up to
    twice its bytes."""

    __slots__ = ("_data", "fill", "_room")

    def __init__(self, dtype: type | np.dtype, fill: float | int) -> None:
        self.fill = fill
        self._room: np.ndarray = np.empty(1024, dtype=dtype)
        self._data: np.ndarray = self._room[:0]

    @property
    def data(self) -> np.ndarray:
        return self._data

    @data.setter
    def data(self, array: np.ndarray) -> None:
        """Adopt ``array`` (a loaded column's, read-only is fine: growing copies it)."""
        self._data = self._room = array

    def ensure(self, size: int) -> None:
        """``data`` at least ``size`` long (new slots hold ``fill``); a view handed out earlier
        keeps its length and values."""
        known = self._data.size
        if size <= known:
            return
        room = self._room
        if size > room.size or not room.flags.writeable:
            room = np.empty(max(size, room.size + room.size // 2), dtype=room.dtype)
            room[:known] = self._data
            self._room = room
        room[known:size] = self.fill
        self._data = room[:size]


class DocMasks:
    """Dense boolean masks of candidate bitmaps, built once per bitmap within one request.

    The facets of one request count over the same few candidate sets; each set's mask (a pass
    over its docs) is built on first use and kept for the request. Owned by the request's
    context, never shared between requests: it holds the bitmaps it keys, so identities stay
    valid, and they are frozen or private to the request, so they cannot change underneath.
    """

    __slots__ = ("_masks",)

    def __init__(self) -> None:
        self._masks: dict[int, tuple[AbstractBitMap, np.ndarray]] = {}

    def mask(self, docs: AbstractBitMap, size: int) -> np.ndarray:
        """A mask over doc ids ``0..size-1`` (or larger) with ``docs`` set."""
        found = self._masks.get(id(docs))
        if found is not None and found[0] is docs and found[1].size >= size:
            return found[1]
        ids = array_from_bitmap(docs)
        mask = np.zeros(max(size, int(ids[-1]) + 1 if ids.size else 0), dtype=bool)
        mask[ids] = True
        self._masks[id(docs)] = (docs, mask)
        return mask
