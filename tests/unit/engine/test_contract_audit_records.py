"""This module tests the following properties (contract §2 "Records and collections", and the
Unicode rule of §4 for records):

- a collection id matches ``[A-Za-z0-9_-]{1,64}``: 64 characters and ``_``/``-`` are accepted, 65
  characters and a non-ASCII letter are a 400;
- an integer id is any signed 64-bit integer (both ends accepted, one past either end a 400);
  a string id is at most 512 *bytes* (UTF-8), not characters;
- a batch with several invalid records is rejected whole, naming the index and field of the
  FIRST bad record;
- text that is not valid Unicode (a lone surrogate) in a record's value, field name or id is a
  400, never a 500, and nothing of the batch is written;
- nested objects are addressed with dots in ``filter``, ``sort`` and ``textFacets``.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


@pytest.mark.parametrize("name", ["a" * 64, "A_b-9", "_", "-"])
def test_collection_ids_of_the_allowed_alphabet_up_to_64_characters_are_accepted(name: str) -> None:
    engine = Engine()
    assert engine.add_records(name, {"id": 1}) == {"status": 201}
    assert engine.search({"collection": name})["totalHits"] == 1


@pytest.mark.parametrize("name", ["a" * 65, "é", "a.b", "a b", ""])
def test_collection_ids_outside_the_pattern_are_a_400(name: str) -> None:
    engine = Engine()
    with pytest.raises(BadRequestError) as caught:
        engine.add_records(name, {"id": 1})
    assert caught.value.status == 400
    assert caught.value.data.startswith("collectionId: must be 1 to 64 characters")
    assert engine.collections() == []


def test_integer_ids_span_the_signed_64_bit_range() -> None:
    engine = Engine()
    assert engine.add_records("c", [{"id": INT64_MIN}, {"id": INT64_MAX}, {"id": 0}]) == {"status": 201}
    assert ids(engine.search({"collection": "c"})) == [INT64_MIN, 0, INT64_MAX]
    assert [record["id"] for record in engine.get_records("c", [INT64_MAX, INT64_MIN])] == [INT64_MAX, INT64_MIN]
    for outside in (INT64_MIN - 1, INT64_MAX + 1):
        with pytest.raises(BadRequestError) as caught:
            engine.add_records("c", [{"id": 5}, {"id": outside}])
        assert caught.value.data == f"records[1].id: integer {outside} is outside the signed 64-bit range"
    assert engine.search({"collection": "c"})["totalHits"] == 3


def test_string_ids_are_limited_in_utf8_bytes_not_characters() -> None:
    engine = Engine()
    at_limit = ["x" * 512, "é" * 256, "\U0001f600" * 128]  # 512 bytes each
    assert engine.add_records("c", [{"id": text} for text in at_limit]) == {"status": 201}
    assert engine.search({"collection": "c"})["totalHits"] == 3
    for over in ("é" * 257, "\U0001f600" * 129):  # 514 / 516 bytes, but only 257 / 129 characters
        with pytest.raises(BadRequestError) as caught:
            engine.add_records("c", {"id": over})
        assert caught.value.data == "records[0].id: string ids are at most 512 bytes"
    assert engine.search({"collection": "c"})["totalHits"] == 3


def test_a_batch_with_several_bad_records_names_the_first_one() -> None:
    engine = Engine()
    engine.add_records("c", {"id": 99})
    batch: list[Any] = [{"id": 1}, {"id": 2, "n": float("inf")}, {"id": 1.5}, {"name": "no id"}]
    with pytest.raises(BadRequestError) as caught:
        engine.add_records("c", batch)
    assert caught.value.data == "records[1].n: numbers must be finite, got inf"
    batch = [{"id": 1}, {"id": 2}, {"title": "no id"}, {"id": 3, "n": float("nan")}]
    with pytest.raises(BadRequestError) as caught:
        engine.add_records("c", batch)
    assert caught.value.data == "records[2].id: is required"
    assert ids(engine.search({"collection": "c"})) == [99]


@pytest.mark.parametrize(("bad", "where"), [
    ({"id": 2, "title": "a\ud800b"}, "records[1].title"),
    ({"id": 2, "tags": ["ok", "\udfff"]}, "records[1].tags"),
    ({"id": 2, "address": {"city": "\ud800"}}, "records[1].address.city"),
    ({"id": 2, "t\udc00": "x"}, "records[1]"),
    ({"id": "\ud800"}, "records[1].id"),
])
def test_a_lone_surrogate_in_a_record_is_a_400_and_writes_nothing(bad: dict[str, Any], where: str) -> None:
    engine = Engine()
    engine.add_records("c", {"id": 99, "title": "kept"})
    with pytest.raises(BadRequestError) as caught:
        engine.add_records("c", [{"id": 1, "title": "fine"}, bad])
    assert caught.value.status == 400
    assert caught.value.data.startswith(where + ": ") or caught.value.data.startswith(where + "[")
    assert "is not valid Unicode" in caught.value.data
    assert ids(engine.search({"collection": "c"})) == [99]


def test_nested_fields_are_addressed_with_dots() -> None:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "address": {"city": "Paris", "zip": 75001}},
        {"id": 2, "address": {"city": "Lyon", "zip": 69001}},
        {"id": 3, "address": {"city": "Paris", "zip": 75002}},
        {"id": 4, "name": "no address"},
    ])
    assert ids(engine.search({"collection": "c", "filter": 'address.city = "paris"'})) == [1, 3]
    assert ids(engine.search({"collection": "c", "filter": "address.zip > 70000"})) == [1, 3]
    assert ids(engine.search({"collection": "c", "sort": ["-address.zip"]})) == [3, 1, 2, 4]
    facets = engine.search({"collection": "c", "textFacets": ["address.city"]})["textFacets"]
    assert facets == [{"field": "address.city", "values": [{"value": "Paris", "count": 2}, {"value": "Lyon", "count": 1}]}]
