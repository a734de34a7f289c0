"""DocStore.id_rank: kept up to date across writes, it orders the live docs exactly as a sort of
their record ids does.

Random batches of integer and string ids (in and out of order, upserts of earlier ids, ids
repeated within a batch) and deletes are applied to a doc store, its id rank read after some of
them (so later ones extend it), and compared with a brute-force order of the live docs' ids
(integers before strings, integers numerically, strings by code point).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch.index import docstore as docstore_module
from roarsearch.index.docstore import DocStore, id_sort_key

IDS = st.one_of(st.integers(-50, 50), st.text(alphabet="abcAB", min_size=1, max_size=3))
STEPS = st.lists(st.one_of(st.tuples(st.just("add"), st.lists(IDS, min_size=1, max_size=8)),
                           st.tuples(st.just("remove"), st.lists(IDS, min_size=1, max_size=4))),
                 min_size=1, max_size=12)


def _live_order(store: DocStore) -> list[int]:
    live = list(store.alive)
    return sorted(live, key=lambda doc: id_sort_key(store.record_ids[doc]))  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, read_every=st.integers(1, 3))
def test_the_id_rank_orders_live_docs_as_their_ids_sort(steps: list[tuple[str, list[Any]]], read_every: int) -> None:
    store = DocStore()
    for number, (kind, ids) in enumerate(steps):
        if kind == "add":
            store.add([{"id": record_id} for record_id in ids])
        else:
            store.remove(ids)
        if number % read_every == 0:
            store.id_rank()  # made or extended now, extended again by later writes
    rank = store.id_rank()
    expected = _live_order(store)
    if rank is None:  # doc order is id order
        assert store.ids_in_doc_order and expected == sorted(expected)
        return
    live = np.asarray(sorted(store.alive), dtype=np.int64)
    ordered = live[np.argsort(rank[live], kind="stable")].tolist()
    assert ordered == expected
    assert np.unique(rank[live]).size == live.size  # distinct ranks: no ties between live docs


def test_a_write_extends_the_order_without_sorting_every_id_again() -> None:
    store = DocStore()
    store.add([{"id": f"id{k:05d}"} for k in range(0, 2000, 2)][::-1])
    store.id_rank()
    sorted_keys = []
    original = store._id_key

    def counting(doc: int) -> tuple[int, int | str]:
        sorted_keys.append(doc)
        return original(doc)

    interpreted = docstore_module.__file__.endswith(".py")  # a compiled class's methods stay as built
    if interpreted:
        store._id_key = counting  # type: ignore[method-assign]
    store.add([{"id": "id00001"}, {"id": "id01999"}, {"id": "zz"}])
    rank = store.id_rank()
    assert rank is not None
    if interpreted:
        assert len(sorted_keys) < 200  # the new ids sorted and placed by binary search: not 1,003 keys
    live = np.asarray(sorted(store.alive), dtype=np.int64)
    assert live[np.argsort(rank[live])].tolist() == _live_order(store)
