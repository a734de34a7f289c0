"""An add prepared without the write lock and committed under it (``writer.prepare_add`` / ``commit_add``)."""

from __future__ import annotations

import pytest

from roarsearch.index.index import Index
from roarsearch.index.integrity import compare_indexes, rebuild_index


def _index() -> Index:
    index = Index()
    index.add_records([{"id": 1, "colour": "red", "title": "a red kite"}, {"id": 2, "colour": "blue", "title": "blue sky"}])
    return index


def test_searches_during_prepare_see_nothing_of_the_batch() -> None:
    index = _index()
    prepared = index.prepare_add([{"id": 3, "colour": "green", "title": "green kite"}])
    assert len(index.alive) == 2
    assert not index.equal_text("colour", "green")
    index.commit_add(prepared)
    assert set(index.equal_text("colour", "green")) == {2}
    assert len(index.alive) == 3
    assert compare_indexes(index, rebuild_index(index)) == []


def test_values_indexed_on_demand_between_prepare_and_commit_are_kept() -> None:
    index = _index()
    # As when a field exceeds the automatic value limit: its values are no longer kept by writes.
    index.columns["colour"].values = None
    index.value_fields.discard("colour")
    index.auto_value_fields.discard("colour")
    prepared = index.prepare_add([{"id": 3, "colour": "green", "title": "green kite"}])
    # A search facets on the field meanwhile: its values are indexed from the stored records.
    assert set(index.equal_text("colour", "red")) == {0}
    index.commit_add(prepared)
    assert set(index.equal_text("colour", "green")) == {2}
    assert compare_indexes(index, rebuild_index(index)) == []


def test_a_write_between_prepare_and_commit_is_refused() -> None:
    index = _index()
    prepared = index.prepare_add([{"id": 3, "title": "late"}])
    index.add_records([{"id": 4, "title": "first"}])
    with pytest.raises(RuntimeError):
        index.commit_add(prepared)


def test_postings_merged_by_a_reader_between_prepare_and_commit() -> None:
    index = Index()
    for start in range(0, 40, 10):  # several token chunks per field
        index.add_records([{"id": i, "title": f"kite {i} word{i % 3}"} for i in range(start, start + 10)])
    prepared = index.prepare_add([{"id": 100, "title": "kite zebra"}, {"id": 101, "title": "zebra", "other": "zebra kite"}])
    index.postings["title"].csr_arrays()  # a reader merges the chunks meanwhile
    index.commit_add(prepared)
    assert set(index.field_docs("title", [index.lexicon.id_of("zebra")])) == {40, 41}
    assert set(index.field_docs("other", [index.lexicon.id_of("zebra")])) == {41}
    assert compare_indexes(index, rebuild_index(index)) == []
