"""Batch validation decided column by column (``schema._valid_by_columns``) must agree with the
record-by-record checks on every batch: the same records accepted, the same first error raised."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch.errors import BadRequestError
from roarsearch.schema import (
    GEO_FIELD,
    INT64_MAX,
    INT64_MIN,
    _check_records,
    _valid_by_columns,
    record_columns,
    validate_and_pack_records,
)

ids = st.one_of(
    st.integers(INT64_MIN - 2, INT64_MIN + 2), st.integers(INT64_MAX - 2, INT64_MAX + 2), st.integers(-5, 50),
    st.text(max_size=3), st.text(min_size=120, max_size=140), st.sampled_from(["\ud800", "a" * 513, "é" * 200, "\U0001f600" * 129, "\U0001f600" * 128]),
    st.none(), st.booleans(), st.floats(), st.lists(st.integers(0, 3), max_size=2),
)
edge_ids = st.sampled_from(["\U0001f600" * 129, "\U0001f600" * 128, "", INT64_MAX + 1, INT64_MIN - 1, None])
leaves = st.one_of(
    st.text(max_size=4), st.booleans(), st.none(), st.integers(-3, 3), st.integers(INT64_MAX - 1, INT64_MAX + 1),
    st.floats(allow_nan=True, allow_infinity=True), st.just("\udfff"),
)
values = st.one_of(
    leaves, st.lists(st.text(max_size=3), max_size=3), st.lists(leaves, max_size=3),
    st.dictionaries(st.sampled_from(["a", "b", ""]), leaves, max_size=2), st.tuples(st.text(max_size=2)),
    st.just({"lat": 1.0, "lng": 2.0}), st.just(set()),
)
# Values each one check exists for: drawn often, so that leaving any check out is caught.
edge_values = st.sampled_from([float("nan"), float("inf"), -float("inf"), INT64_MAX + 1, INT64_MIN - 1, INT64_MAX,
                               "\udfff", [1], [float("nan")], [INT64_MAX + 1], ["a", None], {"a": 1}, ("a",), b"x"])
keys = st.sampled_from(["id", "title", "tags", "n", "", GEO_FIELD, "x"])
# A batch a bulk load sends: every record with an id of one type, plain fields.
plain_values = st.one_of(st.text(max_size=4), st.booleans(), st.none(), st.integers(-3, 3), st.floats(-1e9, 1e9),
                         st.lists(st.text(max_size=3), max_size=3))
plain_batches = st.tuples(st.booleans(), st.lists(st.dictionaries(st.sampled_from(["title", "tags", "n"]), plain_values,
                                                                  max_size=3), min_size=1, max_size=6)).map(
    lambda drawn: [{**record, "id": str(place) if drawn[0] else place} for place, record in enumerate(drawn[1])])


@st.composite
def batches(draw: st.DrawFn) -> list[Any]:
    """A plain batch, often with one record's id or one field changed to anything (maybe invalid)."""
    batch: list[Any] = draw(plain_batches)
    for _ in range(draw(st.integers(0, 2))):
        place = draw(st.integers(0, len(batch) - 1))
        change = draw(st.sampled_from(["id", "edge id", "field", "edge field", "edge field", "record"]))
        if change != "record" and not isinstance(batch[place], dict):
            continue
        if change in ("id", "edge id"):
            batch[place]["id"] = draw(ids if change == "id" else edge_ids)
        elif change in ("field", "edge field"):
            batch[place][draw(keys)] = draw(values if change == "field" else edge_values)
        else:
            batch[place] = draw(st.one_of(st.dictionaries(keys, values, max_size=4), st.just([1]), st.just("record")))
    return batch


def record_by_record(batch: list[Any]) -> tuple[list[Any], list[bytes]]:
    """What validation did before it looked at columns: each record checked, then all encoded."""
    _check_records(batch)
    packer = msgpack.Packer(use_bin_type=True)
    try:
        return batch, list(map(packer.pack, batch))
    except UnicodeEncodeError:
        raise BadRequestError("not valid Unicode", field="records") from None


def outcome(function: Any, batch: list[Any]) -> Any:
    try:
        return "ok", function(batch)
    except BadRequestError as error:
        message = str(error.data)
        return "error", "unicode" if "Unicode" in message else message


@settings(max_examples=1000, deadline=None)
@given(batches())
def test_columns_agree_with_record_by_record_checks(batch: list[Any]) -> None:
    expected = outcome(record_by_record, batch)
    assert outcome(lambda records: validate_and_pack_records(records, columns=True)[:2], batch) == expected
    assert outcome(lambda records: validate_and_pack_records(records)[:2], batch) == expected


def by_columns(batch: list[Any]) -> bool:
    columns = record_columns(batch)
    return columns is not None and _valid_by_columns(columns)


def test_plain_batches_are_decided_by_columns() -> None:
    batch = [{"id": i, "title": f"t{i}", "tags": ["a", "b"], "size": i * 1.5, "count": i, "flag": i % 2 == 0,
              "note": None} for i in range(100)]
    assert by_columns(batch)
    assert by_columns([{"id": "a", "t": "x"}, {"id": "b"}])


@pytest.mark.parametrize("bad", [
    {"id": INT64_MAX + 1}, {"id": 1, "n": float("nan")}, {"id": 1, "n": float("-inf")}, {"id": 1, "n": INT64_MIN - 1},
    {"id": 1, "tags": ["a", 1.5]}, {"t": "no id"}, {"id": 1, "": 2}, {"id": True},
])
def test_a_bad_record_is_left_to_the_record_checks(bad: dict[str, Any]) -> None:
    assert not by_columns([{"id": 0, "t": "fine"}, bad])
