"""This module tests the following properties:

- every validation rule of a request's ``vector`` and ``semanticRatio`` (contract §11) answers with
  a 400 whose exact message names the field and the problem;
- a record's ``_vectors`` is validated all or nothing against the declared spaces, with a 400 naming
  ``records[i]._vectors.NAME`` (undeclared name, wrong length, non-number, NaN, infinity, a cosine
  vector of norm 0), through ``add_records`` and ``add_batches`` alike; nothing of the batch is added;
- every rule of the ``vectors`` setting, and changing a space's dimensions or metric while records
  hold vectors for it, is a 400 that changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine

NAN = float("nan")
INF = float("inf")

REQUEST_ERRORS: list[tuple[dict[str, Any], str]] = [
    ({"vector": [0.1, 0.2]}, 'vector: must be an object like {"name": "text", "values": [0.1, ...], "k": 100}, got array'),
    ({"vector": {"name": "t", "values": [1, 0], "K": 3}}, "vector.K: unknown field (vector has name, values, k, exact)"),
    ({"vector": {"values": [1, 0]}}, "vector.name: is required"),
    ({"vector": {"name": 3, "values": [1, 0]}}, "vector.name: must be the name of a vector space, got 3"),
    ({"vector": {"name": "t"}}, "vector.values: is required (an array of numbers)"),
    ({"vector": {"name": "t", "values": "1,0"}}, "vector.values: must be an array of numbers, got string"),
    ({"vector": {"name": "t", "values": []}}, "vector.values: must hold 1 to 4096 numbers, got 0"),
    ({"vector": {"name": "t", "values": [1, "0"]}}, 'vector.values[1]: must be a number, got string "0"'),
    ({"vector": {"name": "t", "values": [True, 0]}}, "vector.values[0]: must be a number, got boolean true"),
    ({"vector": {"name": "t", "values": [NAN, 0]}}, "vector.values[0]: must be a finite number, got NaN"),
    ({"vector": {"name": "t", "values": [1, -INF]}}, "vector.values[1]: must be a finite number, got -Infinity"),
    ({"vector": {"name": "t", "values": [1, 0], "k": 0}}, "vector.k: must be an integer between 1 and 10000, got 0"),
    ({"vector": {"name": "t", "values": [1, 0], "k": 10_001}},
     "vector.k: must be an integer between 1 and 10000, got 10001"),
    ({"vector": {"name": "t", "values": [1, 0], "k": 2.5}}, "vector.k: must be an integer between 1 and 10000, got 2.5"),
    ({"vector": {"name": "t", "values": [1, 0], "exact": "yes"}}, 'vector.exact: must be true or false, got string "yes"'),
    ({"vector": {"name": "t", "values": [1, 0]}, "semanticRatio": 1.5},
     "semanticRatio: must be a number between 0 and 1, got 1.5"),
    ({"vector": {"name": "t", "values": [1, 0]}, "semanticRatio": "0.5"},
     'semanticRatio: must be a number between 0 and 1, got string "0.5"'),
    # Checked against the collection's spaces:
    ({"vector": {"name": "text", "values": [1, 0]}},
     "vector.name: no vector space 'text' is declared in the collection's settings (declared: t)"),
    ({"vector": {"name": "t", "values": [1, 0, 0]}}, "vector.values: must hold exactly 2 numbers, got 3"),
    ({"vector": {"name": "t", "values": [0, 0]}}, "vector.values: a cosine vector must not be all zeros (its norm is 0)"),
    ({"vector": {"name": "t", "values": [1e39, 0]}}, "vector.values: numbers must fit in 32-bit floats"),
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 2}}})
    engine.add_records("c", [{"id": 1, "_vectors": {"t": [1, 0]}}])
    return engine


@pytest.mark.parametrize(("fields", "message"), REQUEST_ERRORS)
def test_bad_vector_requests_name_the_field(engine: Engine, fields: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        engine.search({"collection": "c", **fields})
    assert caught.value.data == message
    assert caught.value.status == 400


RECORD_ERRORS: list[tuple[Any, str]] = [
    ([1, 0], "records[1]._vectors: must be an object mapping vector space names to arrays of numbers, got array"),
    ({"text": [1, 0]}, "records[1]._vectors.text: no vector space 'text' is declared in the collection's settings "
                       "(declared: t, u)"),
    ({"t": [1, 0, 0]}, "records[1]._vectors.t: must hold exactly 2 numbers, got 3"),
    ({"t": "1,0"}, "records[1]._vectors.t: must be an array of 2 numbers, got string"),
    ({"t": [1, "0"]}, 'records[1]._vectors.t[1]: must be a number, got string "0"'),
    ({"t": [1, None]}, "records[1]._vectors.t[1]: must be a number, got null"),
    ({"t": [NAN, 0]}, "records[1]._vectors.t[0]: numbers must be finite, got nan"),
    ({"t": [1, INF]}, "records[1]._vectors.t[1]: numbers must be finite, got inf"),
    ({"t": [0, 0.0]}, "records[1]._vectors.t: a cosine vector must not be all zeros (its norm is 0)"),
    ({"u": [1, 2, 3]}, "records[1]._vectors.u: must hold exactly 4 numbers, got 3"),
]


@pytest.mark.parametrize(("vectors", "message"), RECORD_ERRORS)
def test_bad_record_vectors_reject_the_batch(vectors: Any, message: str) -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 2}, "u": {"dimensions": 4, "metric": "l2"}}})
    batch = [{"id": 1, "_vectors": {"t": [1, 0]}}, {"id": 2, "_vectors": vectors}]
    with pytest.raises(BadRequestError) as caught:
        engine.add_records("c", batch)
    assert caught.value.data.endswith(message), caught.value.data
    with pytest.raises(BadRequestError) as in_batches:
        engine.add_batches("c", [batch])
    assert in_batches.value.data.startswith("batches[0].")
    assert engine.search({"collection": "c"})["totalHits"] == 0


def test_null_vectors_and_zero_vectors_outside_cosine_are_accepted() -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 2}, "u": {"dimensions": 2, "metric": "dot"}}})
    engine.add_records("c", [{"id": 1, "_vectors": {"t": None, "u": [0, 0]}}, {"id": 2, "_vectors": None}])
    found = engine.search({"collection": "c", "vector": {"name": "u", "values": [1, 1]}})
    assert [shown["id"] for shown in found["results"]] == [1]
    assert engine.search({"collection": "c", "vector": {"name": "t", "values": [1, 1]}})["totalHits"] == 0


SETTINGS_ERRORS: list[tuple[Any, str]] = [
    ([384], "vectors: must be an object like {\"text\": {\"dimensions\": 384, \"metric\": \"cosine\"}}, got array"),
    ({"a b": {"dimensions": 3}}, "vectors.a b: a vector space name is 1 to 64 letters, digits, '_' or '-'"),
    ({"t": 384}, 'vectors.t: must be an object like {"dimensions": 384, "metric": "cosine"}, got number'),
    ({"t": {"dimensions": 3, "size": 2}}, "vectors.t.size: unknown key (a vector space has dimensions and metric)"),
    ({"t": {"metric": "l2"}}, "vectors.t.dimensions: must be an integer between 1 and 4096, got null"),
    ({"t": {"dimensions": 0}}, "vectors.t.dimensions: must be an integer between 1 and 4096, got 0"),
    ({"t": {"dimensions": 4097}}, "vectors.t.dimensions: must be an integer between 1 and 4096, got 4097"),
    ({"t": {"dimensions": 3.0}}, "vectors.t.dimensions: must be an integer between 1 and 4096, got 3.0"),
    ({"t": {"dimensions": 3, "metric": "euclid"}}, 'vectors.t.metric: must be one of cosine, dot, l2, got string "euclid"'),
]


@pytest.mark.parametrize(("value", "message"), SETTINGS_ERRORS)
def test_bad_vector_settings_change_nothing(value: Any, message: str) -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 2}}})
    with pytest.raises(BadRequestError) as caught:
        engine.update_settings("c", {"vectors": value})
    assert caught.value.data == message
    assert engine.get_settings("c")["vectors"] == {"t": {"dimensions": 2, "metric": "cosine"}}


def test_a_space_holding_vectors_keeps_its_dimensions_and_metric() -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 2}}})
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 3, "metric": "dot"}}})  # no vectors yet: allowed
    engine.add_records("c", [{"id": 1, "_vectors": {"t": [1, 0, 2]}}])
    for changed in ({"dimensions": 4, "metric": "dot"}, {"dimensions": 3, "metric": "l2"}):
        with pytest.raises(BadRequestError) as caught:
            engine.update_settings("c", {"vectors": {"t": changed}})
        assert caught.value.data.startswith("vectors.t: records hold vectors of 3 dimensions (dot); its dimensions "
                                            "and metric cannot change while they do")
    engine.delete_records("c", ids=[1])
    engine.update_settings("c", {"vectors": {"t": {"dimensions": 4, "metric": "l2"}}})  # none held any more
    engine.add_records("c", [{"id": 2, "_vectors": {"t": [1, 0, 2, 2]}}])
    engine.update_settings("c", {"vectors": None})  # removing drops the vectors
    assert engine.get_settings("c")["vectors"] == {}
    with pytest.raises(BadRequestError):
        engine.search({"collection": "c", "vector": {"name": "t", "values": [1, 0, 2, 2]}})
    assert engine.check()["ok"]
