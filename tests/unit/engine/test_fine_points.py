"""Contract §3–§4 fine points: string sort folding, arrays descending, facet filter kinds, the
first-letter typo."""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import Engine


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


@pytest.fixture()
def engine() -> Engine:
    return Engine()


def test_strings_sort_by_folded_text_alone_so_the_next_key_decides(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "brand": "acme", "qty": 1}, {"id": 2, "brand": "Acme", "qty": 2},
                             {"id": 3, "brand": "ácme", "qty": 3}, {"id": 4, "brand": "Bolt", "qty": 0}])
    assert ids(engine.search({"collection": "c", "sort": ["brand", "-qty"]})) == [3, 2, 1, 4]
    assert ids(engine.search({"collection": "c", "sort": ["-brand", "qty"]})) == [4, 1, 2, 3]
    # No further key: relevance, then id ascending, between equal folded strings.
    assert ids(engine.search({"collection": "c", "sort": ["brand"]})) == [1, 2, 3, 4]


def test_custom_ranking_on_strings_folds_too(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "brand": "ACME", "qty": 1}, {"id": 2, "brand": "acme", "qty": 2}])
    engine.update_settings("c", {"customRanking": ["brand", "-qty"]})
    assert ids(engine.search({"collection": "c"})) == [2, 1]


def test_descending_an_array_holding_a_string_is_placed_by_its_largest_string(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "mix": ["b", 2]}, {"id": 2, "mix": 9}, {"id": 3, "mix": ["a", 50]},
                             {"id": 4, "mix": "c"}, {"id": 5}])
    assert ids(engine.search({"collection": "c", "sort": ["-mix"]})) == [4, 1, 3, 2, 5]
    assert ids(engine.search({"collection": "c", "sort": ["mix:desc"]})) == [4, 1, 3, 2, 5]
    # Ascending, numbers come first: an array holding a number is placed by its smallest number.
    assert ids(engine.search({"collection": "c", "sort": ["mix"]})) == [1, 2, 3, 4, 5]


def test_a_facet_leaves_out_only_its_own_filter_of_its_own_kind(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "qty": 1}, {"id": 2, "qty": 2}, {"id": 3, "qty": 3}, {"id": 4, "qty": [3, 9]},
                             {"id": 5, "qty": 9}])
    response = engine.search({
        "collection": "c",
        "textFacetFilters": {"qty": [3, 9]}, "numericFacetFilters": {"qty": ["[1,3]"]},
        "textFacets": ["qty"], "numericFacets": {"qty": ["[0,5)", "[5,10]"]},
    })
    assert response["totalHits"] == 2  # ids 3 and 4
    # The numeric facet leaves out [1,3] but keeps the text filter (3 or 9): ids 3, 4, 5.
    numeric = response["numericFacets"][0]
    assert numeric["stats"] == {"min": 3, "max": 9, "avg": 6.0, "count": 3}
    assert numeric["ranges"] == [{"range": "[0,5)", "count": 2}, {"range": "[5,10]", "count": 2}]
    # The text facet leaves out (3, 9) but keeps the numeric filter [1,3]: ids 1-4.
    assert response["textFacets"][0]["values"] == [
        {"value": 3, "count": 2}, {"value": 1, "count": 1}, {"value": 2, "count": 1}, {"value": 9, "count": 1}]


def test_facet_value_search_keeps_the_other_kind_of_filter(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "tag": "red"}, {"id": 2, "tag": "red"}, {"id": 3, "tag": 7}])
    values = engine.search_facet_values("c", "tag", {"textFacetFilters": {"tag": ["red"]},
                                                     "numericFacetFilters": {"tag": ["[5,10]"]},
                                                     "textFacetQuery": {"query": ""}})["values"]
    assert values == [{"value": 7, "count": 1}]


@pytest.fixture()
def packages(engine: Engine) -> Engine:
    names = ["zlib1g", "zlib", "libssl3", "libc6", "libzstd1", "lib", "libxml2", "kitten", "mitten", "kitchen",
             "kittens"]
    engine.add_records("p", [{"id": i, "name": name} for i, name in enumerate(names)])
    return engine


def names(engine: Engine, query: str, tolerance: int = 1) -> list[str]:
    response = engine.search({"collection": "p", "query": query, "typoTolerance": tolerance, "count": 100,
                              "sort": ["name"]})
    return [engine.get_records("p", [result["id"]])[0]["name"] for result in response["results"]]


def test_a_typo_on_the_first_letter_counts_as_two(packages: Engine) -> None:
    assert names(packages, "zlib") == ["zlib", "zlib1g"]        # not every lib… word
    assert names(packages, "zlib ") == ["zlib"]
    assert names(packages, "citten ", 1) == []
    assert names(packages, "citten ", 2) == []                  # six letters allow one typo only
    packages.update_settings("p", {"typoMinWordSize": {"oneTypo": 4, "twoTypos": 5}})
    assert names(packages, "citten ", 2) == ["kitten", "mitten"]  # two typos allowed: one on the first letter
    assert names(packages, "citten ", 1) == []


def test_typos_after_the_first_letter_still_count_as_one(packages: Engine) -> None:
    assert names(packages, "kittne ") == ["kitten"]
    assert names(packages, "kiten") == ["kitten", "kittens"]
    assert names(packages, "libsl") == ["libssl3"]


def test_a_first_letter_typo_ranks_below_other_typos(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "w": "mittens"}, {"id": 2, "w": "kittens"}])
    engine.update_settings("c", {"typoMinWordSize": {"oneTypo": 4, "twoTypos": 5}})
    response = engine.search({"collection": "c", "query": "kittenz ", "typoTolerance": 2})
    assert ids(response) == [2]  # mittens would need a first-letter typo (two) plus one more
    response = engine.search({"collection": "c", "query": "kittens ", "typoTolerance": 2})
    assert ids(response) == [2, 1]


def test_facet_value_search_counts_a_first_letter_typo_as_two(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "pkg": "libssl"}, {"id": 2, "pkg": "zlib"}, {"id": 3, "pkg": "lib tools"}])
    values = engine.search_facet_values("c", "pkg", {"textFacetQuery": {"query": "zlib"}})["values"]
    assert [entry["value"] for entry in values] == ["zlib"]
    values = engine.search_facet_values("c", "pkg", {"textFacetQuery": {"query": "libsll"}})["values"]
    assert [entry["value"] for entry in values] == ["libssl"]


def test_flat_geo_keys_are_a_location_for_add_search_reopen_and_check(tmp_path: Any) -> None:
    rows = [{"id": 1, "name": "Paris", "_geo.lat": 48.8566, "_geo.lng": 2.3522},
            {"id": 2, "name": "Versailles", "_geo": {"lat": 48.8049, "lng": 2.1204}},
            {"id": 3, "name": "Nowhere", "_geo.lat": None, "_geo.lng": None},
            {"id": 4, "name": "London", "_geo.lat": 51.5074, "_geo.lng": -0.1278}]
    around = {"around": {"lat": 48.85, "lng": 2.35, "radius": 30_000}}
    with Engine(tmp_path / "data") as engine:
        engine.add_records("places", rows)
        response = engine.search({"collection": "places", "geo": around, "sort": ["_geoDistance"]})
        assert ids(response) == [1, 2]
        assert engine.check()["ok"], engine.check()
        # Stored and exported as given; filters address both forms with the same dotted path.
        assert engine.get_records("places", [1])[0] == rows[0]
        assert ids(engine.search({"collection": "places", "filter": "_geo.lat > 49"})) == [4]
        assert ids(engine.search({"collection": "places", "filter": "_geo.lat < 49"})) == [1, 2]
    with Engine(tmp_path / "data") as engine:
        assert ids(engine.search({"collection": "places", "geo": around, "sort": ["_geoDistance"]})) == [1, 2]
        assert engine.check()["ok"]


@pytest.mark.parametrize(("record", "message"), [
    ({"id": 1, "_geo.lat": 91, "_geo.lng": 2}, "records[0]._geo.lat: must be a number between -90 and 90, got 91"),
    ({"id": 1, "_geo.lat": 48.8}, "records[0]._geo.lng: is required with _geo.lat"),
    ({"id": 1, "_geo.lng": 2.3, "_geo.lat": None}, "records[0]._geo.lat: is required with _geo.lng"),
    ({"id": 1, "_geo.lat": "48.8", "_geo.lng": 2}, 'records[0]._geo.lat: must be a number between -90 and 90, got string "48.8"'),
    ({"id": 1, "_geo.lat": 1, "_geo.lng": 2, "_geo": {"lat": 1, "lng": 2}},
     "records[0]._geo: a location is either the object _geo or the keys _geo.lat and _geo.lng, not both"),
])
def test_flat_geo_keys_are_checked_like_the_object(engine: Engine, record: dict[str, Any], message: str) -> None:
    from roarsearch import SearchError

    with pytest.raises(SearchError) as caught:
        engine.add_records("places", [{"id": 0, "name": "fine"}, record])
    assert caught.value.status == 400
    assert caught.value.data.replace("records[1]", "records[0]").startswith(message), caught.value.data
    assert engine.collections() == [] or engine.search({"collection": "places"})["totalHits"] == 0


def test_dotted_keys_and_nested_objects_are_the_same_field(engine: Engine) -> None:
    engine.add_records("c", [{"id": 1, "address.city": "Paris", "n": 1}, {"id": 2, "address": {"city": "Lyon"}, "n": 2}])
    assert ids(engine.search({"collection": "c", "filter": 'address.city = "paris"'})) == [1]
    assert ids(engine.search({"collection": "c", "query": "lyon"})) == [2]
    facets = engine.search({"collection": "c", "textFacets": ["address.city"]})["textFacets"][0]["values"]
    assert facets == [{"value": "Lyon", "count": 1}, {"value": "Paris", "count": 1}]
    assert ids(engine.search({"collection": "c", "sort": ["-address.city"]})) == [1, 2]
    assert engine.check()["ok"]
