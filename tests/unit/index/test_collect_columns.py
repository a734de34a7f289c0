"""A batch of flat records is collected field by field (``writer._collect_columns``, validation's
columns reused, array elements read once) into exactly the index that walking it record by record
builds: strings, numbers, booleans, nulls, arrays of strings, empty arrays, arrays with nulls or
numbers in them, and fields mixing those kinds (a batch with objects in arrays is walked record by
record either way)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roarsearch.index.writer as writer_module
from roarsearch.index.index import Index
from roarsearch.index.integrity import compare_indexes
from roarsearch.schema import record_columns, validate_and_pack_records

WORDS = st.sampled_from(["alpha", "beta", "Gamma", "café", "東京", "x1", ""])
SCALARS = st.one_of(WORDS, st.integers(-5, 5), st.floats(-3, 3, allow_nan=False), st.booleans(), st.none())
#: A field's values: of one kind throughout (the common shape) or mixed.
FIELD_KINDS = {
    "text": WORDS,
    "number": st.integers(0, 9),
    "tags": st.lists(WORDS, max_size=3),
    "tags_with_nulls": st.lists(st.one_of(WORDS, st.none()), max_size=3),
    "numbers_array": st.lists(st.integers(0, 9), max_size=3),
    "mixed": st.one_of(SCALARS, st.lists(SCALARS, max_size=3)),
    # Objects in arrays: the batch is not flat, and is walked record by record both ways.
    "objects": st.lists(st.fixed_dictionaries({"k": WORDS}), max_size=2),
}


@st.composite
def flat_batches(draw: Any) -> list[dict[str, Any]]:
    fields = draw(st.lists(st.sampled_from(sorted(FIELD_KINDS)), min_size=1, max_size=4, unique=True))
    batch = []
    for record_id in range(draw(st.integers(1, 12))):
        record: dict[str, Any] = {"id": record_id}
        for field in fields:
            if draw(st.booleans()) or draw(st.booleans()):  # most records hold the field
                record[field] = draw(FIELD_KINDS[field])
        batch.append(record)
    return batch


def _indexed(batch: list[dict[str, Any]], columns: bool) -> Index:
    records, packed, by_column = validate_and_pack_records(batch, columns=columns)
    index = Index()
    index.commit_add(index.prepare_add(records, packed, index.collect_add(records, 0, by_column)))
    return index


@settings(max_examples=150, deadline=None)
@given(flat_batches())
def test_collected_by_columns_as_record_by_record(batch: list[dict[str, Any]]) -> None:
    by_columns = _indexed(batch, columns=True)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(writer_module, "_collect_columns", lambda *args: None)  # the record-by-record walk
        by_records = _indexed(batch, columns=False)
    assert compare_indexes(by_columns, by_records) == []
    assert sorted(by_columns.postings) == sorted(by_records.postings)


def test_array_elements_are_read_once_with_their_kinds() -> None:
    columns = record_columns([{"id": 1, "tags": ["a", "b"], "n": 1}, {"id": 2}, {"id": 3, "tags": ["c", None]}])
    assert columns is not None
    by_key = dict(zip(columns.keys, columns.elements))
    assert by_key["tags"] == (["a", "b", "c", None], {str, type(None)})
    assert by_key["n"] is None and by_key["id"] is None
