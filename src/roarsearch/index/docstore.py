"""Record ids, doc ids, stored records and the alive bitmap.

Owns: the mapping between external *record ids* (int or str) and internal *doc ids* (dense
uint32, assigned in increasing order and never reused), the records themselves stored as msgpack
bytes (one ``bytes`` object per doc, not a dict), and ``alive``: the bitmap of doc ids whose record
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

from typing import Any

import msgpack
import numpy as np
from pyroaring import AbstractBitMap, BitMap, FrozenBitMap

from roarsearch.index.bitmaps import bitmap_from_array

RecordId = int | str


def id_sort_key(record_id: RecordId) -> tuple[int, int | str]:
    """Total order over record ids: integers first (numerically), then strings."""
    return (1, record_id) if isinstance(record_id, str) else (0, record_id)


class DocStore:
    """Record id ↔ doc id, stored msgpack payloads, and the alive bitmap."""

    def __init__(self) -> None:
        self.record_ids: list[RecordId | None] = []
        self.payloads: list[bytes | None] = []
        self.doc_of: dict[RecordId, int] = {}
        self.alive = FrozenBitMap()
        # True while every assigned doc's record id is greater than all earlier ones.
        self.ids_in_doc_order = True
        self._last_id_key: tuple[int, int | str] | None = None
        self._id_rank: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.alive)

    @property
    def next_doc(self) -> int:
        return len(self.record_ids)

    def add(self, records: list[dict[str, Any]]) -> tuple[np.ndarray, AbstractBitMap]:
        """Store ``records`` under new doc ids; returns (new doc ids, doc ids they replaced).

        Within one batch a repeated id keeps its last record, as sequential upserts would.
        """
        packb = msgpack.packb
        start = len(self.record_ids)
        self.record_ids.extend(record["id"] for record in records)
        self.payloads.extend(packb(record, use_bin_type=True) for record in records)
        replaced_docs: list[int] = []
        doc_of = self.doc_of
        for offset, record in enumerate(records):
            record_id = record["id"]
            previous = doc_of.get(record_id)
            if previous is not None:
                replaced_docs.append(previous)
                self.payloads[previous] = None
                self.record_ids[previous] = None
            doc_of[record_id] = start + offset
            self._note_order(record_id)
        new_docs = np.arange(start, start + len(records), dtype=np.uint32)
        replaced = BitMap(replaced_docs)
        # A repeated id inside the batch replaced an earlier doc of the same batch: drop it too.
        self.alive = FrozenBitMap((self.alive | bitmap_from_array(new_docs)) - replaced)
        self._id_rank = None
        return new_docs, replaced

    def _note_order(self, record_id: RecordId) -> None:
        key = id_sort_key(record_id)
        if self._last_id_key is not None and key <= self._last_id_key:
            self.ids_in_doc_order = False
        self._last_id_key = key

    def remove(self, record_ids: list[RecordId]) -> list[bool]:
        """Retire the docs of ``record_ids``; one flag per id, False where the id was absent."""
        found: list[bool] = []
        retired: list[int] = []
        for record_id in record_ids:
            doc = self.doc_of.pop(record_id, None)
            found.append(doc is not None)
            if doc is not None:
                retired.append(doc)
                self.payloads[doc] = None
                self.record_ids[doc] = None
        # The id ranks of the remaining docs keep their relative order: ``_id_rank`` stays valid.
        self.alive = FrozenBitMap(self.alive - BitMap(retired))
        return found

    def remove_docs(self, docs: AbstractBitMap) -> int:
        """Retire the given alive docs (delete by filter or clear); returns how many."""
        docs = docs & self.alive
        for doc in docs:
            record_id = self.record_ids[doc]
            if record_id is not None:
                del self.doc_of[record_id]
            self.record_ids[doc] = None
            self.payloads[doc] = None
        self.alive = FrozenBitMap(self.alive - docs)
        return len(docs)

    def record(self, doc: int) -> dict[str, Any]:
        payload = self.payloads[doc]
        if payload is None:
            raise KeyError(doc)
        record: dict[str, Any] = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        return record

    def id_rank(self) -> np.ndarray | None:
        """Per doc id, the rank of its record id in id order; None while doc order is id order."""
        if self.ids_in_doc_order:
            return None
        if self._id_rank is None:
            docs = list(self.alive)
            ordered = sorted(docs, key=lambda doc: id_sort_key(self.record_ids[doc]))  # type: ignore[arg-type]
            rank = np.zeros(len(self.record_ids), dtype=np.int64)
            rank[np.asarray(ordered, dtype=np.int64)] = np.arange(len(ordered), dtype=np.int64)
            self._id_rank = rank
        return self._id_rank
