"""RecordIds: the compact form (int64 array + retired bitmap) answers exactly as a list and a dict.

A reference model (a list with None for retired docs, a dict from record id to current doc) is
driven by the same random operations: batches of increasing integer ids (which keep the compact
form), batches that break the order, repeat an id, use strings or ids past int64 (which turn it
into the list and dict), deletes by id and by doc set, and saving and loading both ways.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.index.docstore import RecordIds


class Reference:
    def __init__(self) -> None:
        self.ids: list[Any] = []
        self.docs: dict[Any, int] = {}

    def append(self, ids: list[Any]) -> list[int]:
        replaced = []
        start = len(self.ids)
        self.ids.extend(ids)
        for offset, record_id in enumerate(ids):
            previous = self.docs.get(record_id)
            if previous is not None:
                replaced.append(previous)
                self.ids[previous] = None
            self.docs[record_id] = start + offset
        return replaced

    def retire_id(self, record_id: Any) -> int | None:
        doc = self.docs.pop(record_id, None)
        if doc is not None:
            self.ids[doc] = None
        return doc


def check_same(ids: RecordIds, reference: Reference, probes: list[Any]) -> None:
    assert len(ids) == len(reference.ids)
    assert ids.to_list() == reference.ids
    assert [ids[doc] for doc in range(len(ids))] == reference.ids
    assert ids.ids_of(list(range(len(ids)))) == reference.ids
    assert ids.ids_of(list(range(len(ids)))[::-1]) == reference.ids[::-1]  # a page comes in rank order
    assert ids.ids_of(np.arange(len(ids))) == reference.ids
    assert ids.retired().tolist() == [record_id is None for record_id in reference.ids]
    for record_id in probes:
        assert ids.doc(record_id) == reference.docs.get(record_id), record_id


increasing_batch = st.integers(1, 20).flatmap(
    lambda size: st.lists(st.integers(1, 50), min_size=size, max_size=size)).map(lambda gaps: np.cumsum(gaps).tolist())
any_batch = st.lists(st.one_of(st.integers(-5, 200), st.sampled_from(["a", "b", "zz", "10"]),
                               st.just(2 ** 70)), min_size=0, max_size=12)
operations = st.lists(st.one_of(
    st.tuples(st.just("increasing"), increasing_batch),
    st.tuples(st.just("any"), any_batch),
    st.tuples(st.just("delete"), st.lists(st.integers(-5, 1200), max_size=6)),
    st.tuples(st.just("delete_docs"), st.lists(st.integers(0, 300), max_size=6)),
    st.tuples(st.just("reload"), st.booleans()),
), max_size=12)


@settings(max_examples=300, deadline=None)
@given(operations)
def test_record_ids_match_a_list_and_a_dict(steps: list[tuple[str, Any]]) -> None:
    ids, reference = RecordIds(), Reference()
    probes: list[Any] = [0, 1, True, 1.0, 2.5, "a", 2 ** 70, -3, float("inf"), None]
    for kind, argument in steps:
        if kind in ("increasing", "any"):
            batch = argument
            if kind == "increasing":  # after everything so far, as a bulk load sends them
                top = max((i for i in reference.docs if isinstance(i, int) and abs(i) < 2 ** 63), default=0)
                batch = [top + value for value in batch]
            assert sorted(ids.append(list(batch))) == sorted(reference.append(list(batch)))
            probes.extend(batch)
        elif kind == "delete":
            for record_id in argument:
                assert ids.retire_id(record_id) == reference.retire_id(record_id)
        elif kind == "delete_docs":
            docs = BitMap([doc for doc in argument if doc < len(reference.ids) and reference.ids[doc] is not None])
            ids.retire_docs(docs)
            for doc in docs:
                reference.retire_id(reference.ids[doc])
        elif argument:  # reload from the saved list
            ids = RecordIds.from_list(ids.to_list())
        elif ids.compact:  # reload from the saved arrays
            array = ids.int_array()
            assert array is not None
            ids = RecordIds.from_arrays(array.copy(), ids.retired_bitmap())
        check_same(ids, reference, probes)


def test_increasing_integer_ids_stay_compact_and_an_upsert_leaves_it() -> None:
    ids = RecordIds()
    assert ids.append(list(range(1, 1001))) == []
    assert ids.append([1005, 2000]) == []
    assert ids.compact and ids.doc(1005) == 1000 and ids.doc(1004) is None and ids.doc(True) == 0
    assert ids.retire_id(500) == 499 and ids.doc(500) is None and ids[499] is None and ids.compact
    assert ids.append([7]) == [6]  # an upsert: list and dict from here on
    assert not ids.compact and ids.doc(7) == 1002 and ids[6] is None and ids.doc(500) is None
