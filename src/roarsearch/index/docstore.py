"""Record ids, doc ids, stored records and the alive bitmap.

Owns: the mapping between external *record ids* (int or str) and internal *doc ids* (dense
uint32, assigned in increasing order and never reused), the records themselves stored as msgpack
bytes packed back to back and compressed (zstd, ``index.codec``) in parts of :data:`SAVED_PART_DOCS` docs with
per-doc offsets (no Python object per stored record; a part is inflated the first time one of
its records is read, and snapshots save the compressed parts as they are), and ``alive``: the bitmap of doc ids whose record
is current. An upsert retires the old doc id and assigns a new one, so every other structure can
be append-only and simply intersect with ``alive``. ``alive`` is a ``FrozenBitMap`` replaced whole
by every write: a reader holding it keeps a consistent set, and an identity or equality check on
it can never be fooled by a change made in place.

Ordering by record id (the last ranking rule): integers before strings, integers numerically,
strings by code point. While records arrive in increasing id order (the common case) doc id order
*is* record id order and nothing needs sorting; otherwise a rank array is computed lazily once
per write generation.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable
from typing import Any

import msgpack
import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.buffers import JoinedBuffers
from roarsearch.index import codec
from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array

RecordId = int | str

#: Stored payloads are compressed (``index.codec``) in parts of this many docs, when added; a
#: part is decompressed the first time one of its records is read, so neither holding records
#: nor opening a snapshot inflates anything.
SAVED_PART_DOCS = 128
#: zstd level 3 on 128 text-heavy records: the ratio of zlib level 4 (0.35) for 0.3x its CPU
#: (10,000 packages: 23 ms instead of 77) and a quarter of its inflate time.
SAVED_LEVEL = 3


def pack_records(records: list[dict[str, Any]]) -> list[bytes]:
    """Each record's msgpack bytes: what the doc store keeps, and (joined) what the log writes."""
    packb = msgpack.packb
    return [packb(record, use_bin_type=True) for record in records]


def joined_parts(payloads: list[bytes]) -> list[bytes]:
    """Packed records joined in parts of :data:`SAVED_PART_DOCS`, to compress."""
    join = b"".join
    return [join(payloads[first:first + SAVED_PART_DOCS]) for first in range(0, len(payloads), SAVED_PART_DOCS)]


def compress_joined(parts: list[bytes]) -> list[bytes]:
    """Parts made by :func:`joined_parts`, compressed (in one GIL-free call)."""
    return codec.compress_many(parts, SAVED_LEVEL)


def compress_parts(payloads: list[bytes]) -> list[bytes]:
    """The stored form of packed records: each part of :data:`SAVED_PART_DOCS` joined and compressed."""
    return compress_joined(joined_parts(payloads))


def _raw(array: np.ndarray) -> memoryview:
    return memoryview(np.ascontiguousarray(array).data).cast("B")


def id_sort_key(record_id: RecordId) -> tuple[int, int | str]:
    """Total order over record ids: integers first (numerically), then strings."""
    return (1, record_id) if isinstance(record_id, str) else (0, record_id)


#: Largest record id kept in the compact form of :class:`RecordIds` (int64).
_COMPACT_ID_LIMIT = (1 << 63) - 1


class RecordIds:
    """The record id of every doc id (None once retired) and the current doc of every record id.

    Compact while every record id is an integer and each new one is greater than all earlier
    ones (ids added in increasing order, no upsert of an existing id: the common bulk load): the
    ids are one int64 array in doc order, retired docs a bitmap, and finding a record id's doc a
    binary search — 8 bytes per record where a list and a dict of Python ints take ~100 (about
    100 MB at 1M records). The first id that breaks the order turns it, once, into that list
    and dict. Read like a list (``ids[doc]``, ``len(ids)``); changed only through its methods.
    """

    __slots__ = ("_ints", "_size", "_retired", "_list", "_docs")

    def __init__(self) -> None:
        self._ints: np.ndarray | None = np.empty(1024, dtype=np.int64)
        self._size = 0
        self._retired = BitMap()
        self._list: list[RecordId | None] | None = None
        self._docs: dict[RecordId, int] | None = None

    @property
    def compact(self) -> bool:
        return self._list is None

    def __len__(self) -> int:
        return self._size if self._list is None else len(self._list)

    def __getitem__(self, doc: int) -> RecordId | None:
        if self._list is not None:
            return self._list[doc]
        if not 0 <= doc < self._size:
            raise IndexError(doc)
        assert self._ints is not None
        return None if doc in self._retired else int(self._ints[doc])

    def to_list(self) -> list[RecordId | None]:
        if self._list is not None:
            return self._list
        assert self._ints is not None
        ids: list[RecordId | None] = self._ints[:self._size].tolist()
        for doc in self._retired:
            ids[doc] = None
        return ids

    def ids_of(self, docs: Iterable[int]) -> list[RecordId | None]:
        """The record ids of ``docs`` (None for retired ones), in their order."""
        if self._list is not None:
            record_list = self._list
            if isinstance(docs, np.ndarray):  # numpy integers are not ints to compiled code
                docs = docs.tolist()
            return [record_list[doc] for doc in docs]
        assert self._ints is not None
        if isinstance(docs, list) and not self._retired:  # a page of docs: one gather, no checks
            # ``take`` converts a short list of ints faster than indexing does (0.6 vs 0.8 us for 5).
            page: list[RecordId | None] = self._ints[:self._size].take(docs).tolist() if docs else []
            return page
        if isinstance(docs, AbstractBitMap):
            docs = array_from_bitmap(docs)
        positions = docs.astype(np.int64) if isinstance(docs, np.ndarray) else np.fromiter(docs, dtype=np.int64)
        if positions.size and (int(positions.min()) < 0 or int(positions.max()) >= self._size):
            raise IndexError("a doc id past the record ids")
        ids: list[RecordId | None] = self._ints[positions].tolist()
        if self._retired:
            for offset in np.flatnonzero(np.isin(positions, array_from_bitmap(self._retired))).tolist():
                ids[offset] = None
        return ids

    def int_array(self) -> np.ndarray | None:
        """The ids of docs ``0..len-1`` as int64 (retired docs included) while compact, else None."""
        return None if self._ints is None else self._ints[:self._size]

    def retired(self) -> np.ndarray:
        """Per doc, whether it is retired."""
        if self._list is not None:
            return np.fromiter((record_id is None for record_id in self._list), dtype=bool, count=len(self._list))
        mask = np.zeros(self._size, dtype=bool)
        mask[array_from_bitmap(self._retired)] = True
        return mask

    def doc(self, record_id: Any) -> int | None:
        """The current doc of ``record_id`` (dict semantics: ``True`` finds ``1``), or None."""
        if self._docs is not None:
            return self._docs.get(record_id)
        if isinstance(record_id, float) and record_id.is_integer():
            record_id = int(record_id)
        if not isinstance(record_id, int) or self._size == 0:  # bool is an int, as in a dict
            return None
        assert self._ints is not None
        ints = self._ints[:self._size]
        if not int(ints[0]) <= record_id <= int(ints[-1]):
            return None
        doc = int(np.searchsorted(ints, record_id))
        return doc if int(ints[doc]) == record_id and doc not in self._retired else None

    def append(self, ids: list[RecordId]) -> list[int]:
        """Give ``ids`` the next doc ids; returns the docs they replaced (earlier docs of the same
        record ids, within the batch too), which are retired."""
        array = self._compact_array(ids) if self._list is None else None
        if array is not None:
            assert self._ints is not None
            end = self._size + array.size
            if end > self._ints.size:
                grown = np.empty(max(end, 2 * self._ints.size), dtype=np.int64)
                grown[:self._size] = self._ints[:self._size]
                self._ints = grown
            self._ints[self._size:end] = array
            self._size = end
            return []
        if self._list is None:
            self._become_list(self.to_list())
        assert self._list is not None and self._docs is not None
        record_list, docs = self._list, self._docs
        start = len(record_list)
        record_list.extend(ids)
        replaced: list[int] = []
        for offset, record_id in enumerate(ids):
            previous = docs.get(record_id)
            if previous is not None:
                replaced.append(previous)
                record_list[previous] = None
            docs[record_id] = start + offset
        return replaced

    def _compact_array(self, ids: list[Any]) -> np.ndarray | None:
        """``ids`` as int64 when they keep the compact form (integers, increasing, after every
        earlier id), else None."""
        if not ids:
            return np.empty(0, dtype=np.int64)
        if {*map(type, ids)} != {int} or min(ids) < -_COMPACT_ID_LIMIT or max(ids) > _COMPACT_ID_LIMIT:
            return None
        array = np.asarray(ids, dtype=np.int64)
        assert self._ints is not None
        increasing = array.size < 2 or bool((array[1:] > array[:-1]).all())
        after = self._size == 0 or int(array[0]) > int(self._ints[self._size - 1])
        return array if increasing and after else None

    def _become_list(self, ids: list[RecordId | None]) -> None:
        """Hold ``ids`` (None for retired docs) as a list and a dict from here on."""
        docs: dict[RecordId | None, int] = dict(zip(ids, range(len(ids))))  # C speed
        docs.pop(None, None)  # retired docs' ids are None
        self._list, self._docs = ids, docs  # type: ignore[assignment]  # None is gone
        self._ints, self._size, self._retired = None, 0, BitMap()

    def retire_id(self, record_id: RecordId) -> int | None:
        """Retire the current doc of ``record_id``; returns it, or None when there is none."""
        if self._docs is not None:
            doc = self._docs.pop(record_id, None)
            if doc is not None:
                assert self._list is not None
                self._list[doc] = None
            return doc
        doc = self.doc(record_id)
        if doc is not None:
            self._retired.add(doc)
        return doc

    def retire_docs(self, docs: AbstractBitMap) -> None:
        if self._list is None:
            self._retired |= docs
            return
        assert self._docs is not None
        for doc in docs:
            record_id = self._list[doc]
            if record_id is not None:
                del self._docs[record_id]
            self._list[doc] = None

    @classmethod
    def from_list(cls, ids: list[RecordId | None]) -> RecordIds:
        """The ids as saved by :meth:`to_list` (None for retired docs)."""
        loaded = cls()
        if None not in ids:
            array = loaded._compact_array(ids)
            if array is not None:
                loaded._ints, loaded._size = array, array.size
                return loaded
        loaded._become_list(list(ids))
        return loaded

    @classmethod
    def from_arrays(cls, ints: np.ndarray, retired: AbstractBitMap) -> RecordIds:
        """The compact form as saved by :func:`~roarsearch.index.state.index_to_state`."""
        loaded = cls()
        loaded._ints = np.array(ints, dtype=np.int64)
        loaded._size = int(ints.size)
        loaded._retired = BitMap(retired)
        return loaded

    def retired_bitmap(self) -> AbstractBitMap:
        assert self._list is None
        return self._retired


class DocStore:
    """Record id ↔ doc id, stored msgpack payloads, and the alive bitmap."""

    def __init__(self) -> None:
        self.record_ids = RecordIds()
        # Stored records: buffer i holds docs ``_firsts[i]`` onwards, doc ``_firsts[i] + k`` at
        # ``_buffers[i][offsets[k]:offsets[k + 1]]`` with ``offsets = _offsets[i]``. Retired docs'
        # bytes stay until the next snapshot, which leaves them out.
        self._buffers: list[bytes | None] = []  # None: still compressed in ``_packed``
        self._packed: list[bytes | memoryview | None] = []  # compressed (None: inflated since)
        self._offsets: list[np.ndarray] = []
        self._firsts: list[int] = []
        self._inflate = threading.Lock()
        #: Where new batches' compressed parts are kept instead of in memory (a durable
        #: collection's ``storage.spill.SpillFile``), if anywhere.
        self.spill: Any = None
        self.alive = FrozenBitMap()
        # True while every assigned doc's record id is greater than all earlier ones.
        self.ids_in_doc_order = True
        self._last_id_key: tuple[int, int | str] | None = None
        #: While doc order is not id order: the docs below ``_ranked_upto`` that were alive then,
        #: in id order, and each doc's rank in it (see :meth:`id_rank`).
        self._id_order: np.ndarray | None = None
        self._id_rank: np.ndarray | None = None
        self._ranked_upto = 0
        self._rank_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.alive)

    @property
    def next_doc(self) -> int:
        return len(self.record_ids)

    def add(self, records: list[dict[str, Any]], payloads: list[bytes] | None = None,
            compressed: list[bytes] | None = None) -> tuple[np.ndarray, AbstractBitMap]:
        """Store ``records`` under new doc ids; returns (new doc ids, doc ids they replaced).
        ``payloads``: the records already packed by :func:`pack_records`, if they were;
        ``compressed``: those payloads' parts already compressed by :func:`compress_parts`.

        Within one batch a repeated id keeps its last record, as sequential upserts would.
        """
        start = len(self.record_ids)
        ids = [record["id"] for record in records]
        replaced_docs = self.record_ids.append(ids)
        if payloads is None:
            payloads = pack_records(records)
        lengths = np.fromiter(map(len, payloads), dtype=np.uint64, count=len(payloads))
        if compressed is None:
            compressed = compress_parts(payloads)
        kept: list[bytes] | list[bytes | memoryview] = compressed if self.spill is None else self.spill.keep(compressed)
        for part, first in zip(kept, range(0, len(payloads), SAVED_PART_DOCS)):
            last = min(first + SAVED_PART_DOCS, len(payloads))
            self._append_buffer(start + first, None, lengths[first:last], part)
        self._note_order(ids)
        new_docs = np.arange(start, start + len(records), dtype=np.uint32)
        replaced = BitMap(replaced_docs)
        # A repeated id inside the batch replaced an earlier doc of the same batch: drop it too.
        self.alive = FrozenBitMap((self.alive | bitmap_from_array(new_docs)) - replaced)
        return new_docs, replaced

    def _note_order(self, ids: list[RecordId]) -> None:
        if not ids:
            return
        if self.record_ids.compact:  # every id an int, each greater than the last: in order
            self._last_id_key = id_sort_key(ids[-1])
            return
        for record_id in ids:
            key = id_sort_key(record_id)
            if self._last_id_key is not None and key <= self._last_id_key:
                self.ids_in_doc_order = False
            self._last_id_key = key

    def doc_of(self, record_id: RecordId) -> int | None:
        """The current doc of ``record_id``, or None."""
        return self.record_ids.doc(record_id)

    def doc_for(self, record_id: RecordId) -> int:
        """The current doc of a record id known to be present (one a result just showed)."""
        doc = self.record_ids.doc(record_id)
        if doc is None:
            raise KeyError(record_id)
        return doc

    def remove(self, record_ids: list[RecordId]) -> list[bool]:
        """Retire the docs of ``record_ids``; one flag per id, False where the id was absent."""
        found: list[bool] = []
        retired: list[int] = []
        for record_id in record_ids:
            doc = self.record_ids.retire_id(record_id)
            found.append(doc is not None)
            if doc is not None:
                retired.append(doc)
        # The id ranks of the remaining docs keep their relative order: ``_id_rank`` stays valid.
        self.alive = FrozenBitMap(self.alive - BitMap(retired))
        return found

    def remove_docs(self, docs: AbstractBitMap) -> int:
        """Retire the given alive docs (delete by filter or clear); returns how many."""
        docs = docs & self.alive
        self.record_ids.retire_docs(docs)
        self.alive = FrozenBitMap(self.alive - docs)
        return len(docs)

    def _append_buffer(self, first: int, buffer: bytes | None, lengths: np.ndarray,
                       packed: bytes | memoryview | None = None) -> None:
        offsets = np.zeros(lengths.size + 1, dtype=np.uint64)
        np.cumsum(lengths, out=offsets[1:])
        self._buffers.append(buffer)
        self._packed.append(packed)
        self._offsets.append(offsets)
        self._firsts.append(first)

    def _buffer(self, part: int) -> bytes:
        buffer = self._buffers[part]
        if buffer is None:
            with self._inflate:
                buffer = self._buffers[part]
                if buffer is None:
                    packed = self._packed[part]
                    assert packed is not None
                    buffer = self._buffers[part] = codec.decompress(packed)
                    self._packed[part] = None  # one copy in memory (the next snapshot recompresses it)
        return buffer

    def payload(self, doc: int) -> memoryview:
        """The msgpack bytes of an alive (or not yet retired) doc's record."""
        if doc >= len(self.record_ids) or self.record_ids[doc] is None:
            raise KeyError(doc)
        part = bisect.bisect_right(self._firsts, doc) - 1
        k = doc - self._firsts[part]
        start, end = self._offsets[part][k:k + 2].tolist()
        return memoryview(self._buffer(part))[start:end]

    def record(self, doc: int) -> dict[str, Any]:
        record: dict[str, Any] = msgpack.unpackb(self.payload(doc), raw=False, strict_map_key=False)
        return record

    def payloads_to_state(self) -> list[dict[str, Any]]:
        """The stored records of live docs as compressed parts: ``first`` doc, per-doc byte
        ``lengths`` (0 for retired docs, whose bytes are left out) and the compressed ``data``."""
        retired = self.record_ids.retired()
        parts: list[dict[str, Any]] = []
        for part, (offsets, first) in enumerate(zip(self._offsets, self._firsts)):
            lengths = np.diff(offsets)
            dead = retired[first:first + lengths.size]
            packed = self._packed[part]
            if packed is not None and not dead[lengths > 0].any():  # saved before, unchanged since
                parts.append({"first": first, "lengths": _raw(lengths.astype(np.uint32)), "data": packed})
                continue
            buffer = self._buffer(part)
            for start in range(0, lengths.size, SAVED_PART_DOCS):
                end = min(start + SAVED_PART_DOCS, lengths.size)
                piece = buffer[int(offsets[start]):int(offsets[end])]
                piece_lengths = lengths[start:end]
                piece_dead = dead[start:end]
                if piece_dead.any():
                    keep = np.repeat(~piece_dead, piece_lengths.astype(np.int64))
                    piece = np.frombuffer(piece, dtype=np.uint8)[keep].tobytes()
                    piece_lengths = np.where(piece_dead, 0, piece_lengths)
                parts.append({"first": first + start, "lengths": _raw(piece_lengths.astype(np.uint32)),
                              "data": codec.compress(piece, SAVED_LEVEL)})
        return parts

    def payload_block_to_state(self) -> dict[str, Any]:
        """:meth:`payloads_to_state` as one block: the parts' compressed bytes back to back in
        ``data`` (one large value, which a snapshot maps rather than copies), with per part its
        ``first`` doc, doc ``count`` and byte ``size``, and every doc's ``lengths``. ``data`` is
        a :class:`~roarsearch.buffers.JoinedBuffers`: written part after part, never
        joined in memory (at 1M records that copy was a quarter of a GB at the snapshot's peak)."""
        parts = self.payloads_to_state()
        counts = [len(part["lengths"]) // 4 for part in parts]
        return {"first": _raw(np.asarray([part["first"] for part in parts], dtype=np.uint32)),
                "count": _raw(np.asarray(counts, dtype=np.uint32)),
                "size": _raw(np.asarray([len(part["data"]) for part in parts], dtype=np.uint64)),
                "lengths": b"".join(part["lengths"] for part in parts),
                "data": JoinedBuffers(part["data"] for part in parts)}

    def payload_block_from_state(self, block: dict[str, Any]) -> None:
        """Parts saved by :meth:`payload_block_to_state`, kept as views of ``data`` (compressed)."""
        firsts = np.frombuffer(block["first"], dtype=np.uint32).tolist()
        counts = np.frombuffer(block["count"], dtype=np.uint32)
        sizes = np.frombuffer(block["size"], dtype=np.uint64).astype(np.int64)
        lengths = np.frombuffer(block["lengths"], dtype=np.uint32).astype(np.uint64)
        data = block["data"]
        if isinstance(data, JoinedBuffers):  # a state handed over in memory, not through a snapshot
            data = b"".join(data)
        data = memoryview(data)
        byte_ends = np.cumsum(sizes).tolist()
        doc_ends = np.cumsum(counts.astype(np.int64)).tolist()
        packed: list[bytes | memoryview | None] = []
        offsets: list[np.ndarray] = []
        byte_start = doc_start = 0
        for byte_end, doc_end in zip(byte_ends, doc_ends):
            part_offsets = np.zeros(doc_end - doc_start + 1, dtype=np.uint64)
            np.cumsum(lengths[doc_start:doc_end], out=part_offsets[1:])
            offsets.append(part_offsets)
            packed.append(data[byte_start:byte_end])
            byte_start, doc_start = byte_end, doc_end
        # Swapped whole (also after a snapshot, when the parts become views of its file).
        self._buffers, self._packed, self._offsets, self._firsts = [None] * len(packed), packed, offsets, firsts

    def payloads_from_state(self, parts: list[dict[str, Any]]) -> None:
        """Keep saved parts compressed; each is inflated when one of its records is first read."""
        self._buffers, self._packed, self._offsets, self._firsts = [], [], [], []
        for part in parts:
            self._append_buffer(int(part["first"]), None,
                                np.frombuffer(part["lengths"], dtype=np.uint32).astype(np.uint64), bytes(part["data"]))

    def payloads_from_list(self, payloads: list[bytes | None]) -> None:
        """Stored records given one per doc (snapshots of index state version 1)."""
        present = [payload or b"" for payload in payloads]
        self._buffers, self._packed, self._offsets, self._firsts = [], [], [], []
        self._append_buffer(0, b"".join(present), np.fromiter(map(len, present), dtype=np.uint64, count=len(present)))

    def id_rank(self) -> np.ndarray | None:
        """Per doc id, the rank of its record id in id order among the live docs (docs retired
        since keep theirs: gaps); None while doc order is id order.

        Made by one sort of the live ids, then extended by each write's docs: their ids sorted
        and placed among the ranked ones by binary search, the order and the ranks rebuilt with
        array operations, not every id sorted again (a Python sort of 10M ids took seconds,
        after every write, for a collection of string ids).
        """
        if self.ids_in_doc_order:
            return None
        rank = self._id_rank
        if rank is None or self._ranked_upto != self.next_doc:
            with self._rank_lock:
                if self._id_order is None:
                    self._rank_all()
                elif self._ranked_upto != self.next_doc:
                    self._rank_added()
                rank = self._id_rank
        assert rank is not None
        return rank

    def _id_key(self, doc: int) -> tuple[int, int | str]:
        record_id = self.record_ids[doc]
        assert record_id is not None  # only live docs are ranked
        return id_sort_key(record_id)

    def _rank_all(self) -> None:
        self._set_order(np.asarray(sorted(self.alive, key=self._id_key), dtype=np.int64), self.next_doc)

    def _rank_added(self) -> None:
        order = self._id_order
        assert order is not None
        upto, alive = self.next_doc, self.alive
        new_docs = list(alive.iter_equal_or_larger(self._ranked_upto))
        if len(alive) - len(new_docs) != order.size:  # docs retired since: out of the order first
            live = np.zeros(upto, dtype=bool)
            live[array_from_bitmap(alive)] = True
            order = order[live[order]]
        key = self._id_key
        new_docs.sort(key=key)
        # Where each new id goes among the ranked ones (ids of live docs are distinct): before
        # the first ranked doc with a greater id; new docs sharing a place keep their id order.
        # (A memoryview reads the order's items as ints, without copying it.)
        ranked = np.ascontiguousarray(order).data
        places = [bisect.bisect_left(ranked, key(doc), key=key) for doc in new_docs]
        self._set_order(np.insert(order, np.asarray(places, dtype=np.int64), np.asarray(new_docs, dtype=np.int64)), upto)

    def _set_order(self, order: np.ndarray, upto: int) -> None:
        rank = np.zeros(upto, dtype=np.int64)
        rank[order] = np.arange(order.size, dtype=np.int64)
        self._id_order, self._id_rank, self._ranked_upto = order, rank, upto
