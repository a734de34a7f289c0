"""This module tests the following properties:

- a snapshot keeps the lexicon's sorted prefix views: after a load, prefix and typo lookups and
  ``id_of`` answer as before without sorting or hashing the vocabulary, and the first write after
  the load merges its new terms into them;
- fields are indexed as exact values from their first write while they have at most
  ``AUTO_VALUE_LIMIT`` distinct values; a field that grows past it is dropped and indexed from
  the stored records on first use; facets, equality filters and sorts answer the same either way;
- a field that older snapshots held without indexing its values is not indexed at write time (its
  earlier values would be missing) but on first use, and fields new since the load are;
- ``check()`` stays clean through all of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from roarsearch import Engine
from roarsearch.index import columns, writer
from roarsearch.index.index import Index
from roarsearch.index.lexicon import Lexicon, _PermutedTerms
from roarsearch.index.state import index_from_state, index_to_state


def records(start: int, count: int) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"place {i} zeta{i % 17}", "country": ["FR", "DE", "IT"][i % 3],
             "flag": i % 2 == 0, "population": i * 10} for i in range(start, start + count)]


def index_of(engine: Engine, name: str = "c") -> Index:
    return engine._collection(name).index


def test_lexicon_views_survive_a_state_round_trip() -> None:
    lexicon = Lexicon.from_terms(["paris", "parma", "berlin", "bern", "zeta", "apple", "pariss"])
    expected = {prefix: lexicon.prefix_ids(prefix).tolist() for prefix in ("par", "ber", "z", "q", "")}
    typos = lexicon.prefix_candidates("brl", 1)
    loaded = Lexicon.from_state(lexicon.to_state())
    assert isinstance(loaded._by_term[0].terms, _PermutedTerms) and loaded._ids is None
    assert {prefix: loaded.prefix_ids(prefix).tolist() for prefix in expected} == expected
    assert loaded.prefix_candidates("brl", 1) == typos
    assert [loaded.id_of(term) for term in ("paris", "bern", "nope", "")] == [0, 3, None, None]
    assert loaded.typo_candidates("parris", 1) == lexicon.typo_candidates("parris", 1)
    assert loaded._ids is None  # no write yet: nothing hashed every term
    loaded.intern_many(["parkland", "bern"])
    assert loaded.prefix_ids("park").tolist() == [7]
    assert loaded.id_of("parkland") == 7 and loaded.id_of("paris") == 0
    fresh = Lexicon.from_terms(loaded.terms())
    assert [a.tolist() for a in loaded.sorted_order()] == [b.tolist() for b in fresh.sorted_order()]


def test_older_lexicon_state_without_views_still_loads() -> None:
    lexicon = Lexicon.from_terms(["paris", "parma", "berlin"])
    state = lexicon.to_state()
    del state["sorted_ids"], state["tail_ids"]
    loaded = Lexicon.from_state(state)
    assert loaded.id_of("parma") == 1
    assert loaded.prefix_ids("par").tolist() == [0, 1]


def test_short_valued_fields_are_indexed_at_write_time(tmp_path: Path) -> None:
    with Engine(tmp_path) as engine:
        engine.add_records("c", records(0, 300))
        index = index_of(engine)
        assert {"country", "flag", "name", "population"} <= index.value_fields
        assert index.columns["population"].values is None  # numbers only: no values to keep
    with Engine(tmp_path) as engine:
        index = index_of(engine)
        assert "country" in index.value_fields and index.columns["country"].values is not None
        response = engine.search({"collection": "c", "textFacets": ["country", "flag"], "filter": "country = fr"})
        assert response["totalHits"] == 100
        assert engine.search({"collection": "c", "sort": ["-country"], "count": 1})["results"][0]["country"] == "IT"
        assert engine.check()["ok"]


def test_a_field_past_the_limit_is_dropped_and_indexed_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "AUTO_VALUE_LIMIT", 50)
    engine = Engine()
    engine.add_records("c", records(0, 40))
    index = index_of(engine)
    assert "name" in index.auto_value_fields
    engine.add_records("c", records(40, 40))  # name now has 80 distinct values
    assert "name" not in index.value_fields and index.columns["name"].values is None
    assert "country" in index.auto_value_fields
    engine.add_records("c", records(80, 10))  # a known field is not picked up again
    assert "name" not in index.value_fields
    response = engine.search({"collection": "c", "filter": 'name = "place 85 zeta0"'})
    assert [record["id"] for record in response["results"]] == [85]
    assert "name" in index.value_fields and "name" not in index.auto_value_fields  # kept from now on
    engine.add_records("c", records(90, 100))
    assert "name" in index.value_fields
    assert engine.search({"collection": "c", "filter": 'name = "place 150 zeta14"'})["totalHits"] == 1
    assert engine.check()["ok"]


def test_fields_an_older_snapshot_did_not_index_stay_on_demand() -> None:
    index = Index()
    index.auto_values = False  # what older versions did: index values only on demand
    index.add_records(records(0, 30))
    state = index_to_state(index)
    del state["auto_value_fields"]
    loaded = index_from_state(state)
    assert loaded.value_fields == set() and loaded.auto_values
    loaded.add_records([{"id": 1000, "country": "ES", "colour": "red"}])
    assert loaded.value_fields == {"colour"}  # new since the load: complete from its first value
    values = loaded.value_column("country")  # built from every stored record
    assert values is not None and sorted(map(str, values.values)) == ["DE", "ES", "FR", "IT"]


def test_auto_value_limit_is_shared() -> None:
    assert writer.AUTO_VALUE_LIMIT == columns.AUTO_VALUE_LIMIT


def test_numeric_value_order_survives_a_state_round_trip() -> None:
    index = Index()
    index.add_records([{"id": i, "n": [(i * 7) % 11, 3]} for i in range(50)])
    loaded = index_from_state(index_to_state(index))
    numeric = loaded.columns["n"].numeric
    assert numeric is not None and numeric._order is not None  # adopted, not sorted again
    assert loaded.number_range("n", 2, True, 4, True).to_array().tolist() == list(range(50))
    assert loaded.number_range("n", 9, True, None, True) == index.number_range("n", 9, True, None, True)
    adopted = numeric._order
    loaded.add_records([{"id": 100, "n": 1.5}])
    assert 100 in {loaded.docs.record_ids[d] for d in loaded.number_range("n", 1, True, 2, True)}
    # The adopted order was extended by the new pair, not sorted again: still the stable order.
    _docs, values = numeric.pairs()
    assert numeric.sort_order() is not adopted and numeric.sort_order().size == values.size
    assert np.array_equal(numeric.sort_order(), np.argsort(values, kind="stable"))
