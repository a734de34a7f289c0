"""This module tests the following properties (contract §4, "Field names in a request"):

- a field that no current record holds is no error in any place of a request; the response's
  ``warnings`` name it once per place, in request order, with the closest held field as a hint;
- ``id``, ``*``, ``_rank`` are always fields; a path is held when a record holds it or a field
  below it; a field that only deleted records held counts as held by none;
- a request naming only held fields has no ``warnings`` key at all;
- on random records, deletes and requests, the warnings equal a brute-force model's (place, field)
  list, and every hint names a held field.
"""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from roarsearch import Engine

WARNING = re.compile(r"^(\w+): no record has the field '(.*?)'(?:; did you mean '(.*)'\?)?$")


def _engine() -> Engine:
    engine = Engine()
    engine.add_records("shop", [
        {"id": 1, "name": "Ada lamp", "price": 10, "brand": "acme", "address": {"city": "Paris"}},
        {"id": 2, "name": "Alan desk", "price": 20, "brand": "zeta", "legacy": "old"},
    ])
    return engine


def test_a_request_naming_only_held_fields_has_no_warnings() -> None:
    engine = _engine()
    response = engine.search({"collection": "shop", "query": "lamp", "searchFields": ["name", "*"],
                              "fields": ["id", "address", "address.city", "price"], "sort": ["-price", "_rank", "id"],
                              "textFacets": ["brand"], "numericFacets": {"price": []},
                              "textFacetFilters": {"brand": ["acme"]}, "numericFacetFilters": {"price": ["[0,100]"]},
                              "highlightFields": ["name"], "groupBy": "brand", "filter": "price > 1 AND id != 7"})
    assert "warnings" not in response
    assert response["totalHits"] == 1


def test_each_place_names_its_absent_field_with_a_hint_in_request_order() -> None:
    engine = _engine()
    response = engine.search({"collection": "shop", "filter": "pirce > 1", "searchFields": ["nmae"],
                              "fields": ["brnd"], "sort": ["-pirce"], "textFacets": ["brnd"],
                              "numericFacets": {"pirce": []}, "textFacetFilters": {"brnd": ["acme"]},
                              "numericFacetFilters": {"pirce": ["[0,5]"]}, "highlightFields": ["nmae"],
                              "groupBy": "brnd"})
    assert response["warnings"] == [
        "filter: no record has the field 'pirce'; did you mean 'price'?",
        "searchFields: no record has the field 'nmae'; did you mean 'name'?",
        "fields: no record has the field 'brnd'; did you mean 'brand'?",
        "sort: no record has the field 'pirce'; did you mean 'price'?",
        "textFacets: no record has the field 'brnd'; did you mean 'brand'?",
        "numericFacets: no record has the field 'pirce'; did you mean 'price'?",
        "textFacetFilters: no record has the field 'brnd'; did you mean 'brand'?",
        "numericFacetFilters: no record has the field 'pirce'; did you mean 'price'?",
        "highlightFields: no record has the field 'nmae'; did you mean 'name'?",
        "groupBy: no record has the field 'brnd'; did you mean 'brand'?",
    ]
    # Not an error anywhere: a facet filter on it matches nothing.
    assert response["totalHits"] == 0


def test_one_warning_per_place_and_field_and_none_for_a_held_parent_path() -> None:
    engine = _engine()
    response = engine.search({"collection": "shop", "fields": ["address", "zzzz", "zzzz"],
                              "searchFields": ["zzzz", "name"], "filter": "zzzz = 1 OR zzzz = 2"})
    places = [WARNING.match(text).group(1, 2) for text in response["warnings"]]  # type: ignore[union-attr]
    assert places == [("filter", "zzzz"), ("searchFields", "zzzz"), ("fields", "zzzz")]


def test_a_field_held_only_by_deleted_records_counts_as_held_by_none() -> None:
    engine = _engine()
    assert "warnings" not in engine.search({"collection": "shop", "fields": ["legacy"]})
    engine.delete_records("shop", ids=[2])
    response = engine.search({"collection": "shop", "fields": ["legacy"]})
    assert len(response["warnings"]) == 1
    place, name, hint = WARNING.match(response["warnings"][0]).groups()  # type: ignore[union-attr]
    assert (place, name) == ("fields", "legacy")
    assert hint != "legacy"


def test_with_nothing_to_suggest_the_warning_just_names_the_field() -> None:
    engine = Engine()
    engine.add_records("bare", [{"id": 1}])
    response = engine.search({"collection": "bare", "sort": ["price"]})
    assert response["warnings"] == ["sort: no record has the field 'price'"]


# ------------------------------------------------------------------ against a brute-force model

FIELDS = ["name", "price", "brand", "address.city", "tags"]
NAMES = [*FIELDS, "address", "pirce", "nmae", "zzz", "address.zip", "id", "*"]


def _record_strategy() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({"id": st.integers(0, 6)}, optional={
        "name": st.sampled_from(["ada", "alan lamp"]),
        "price": st.integers(0, 50),
        "brand": st.sampled_from(["acme", "zeta"]),
        "address": st.fixed_dictionaries({}, optional={"city": st.sampled_from(["paris", "rome"])}),
        "tags": st.lists(st.sampled_from(["red", "blue"]), max_size=2),
    })


def _held(records: dict[int, dict[str, Any]]) -> set[str]:
    held: set[str] = set()

    def walk(value: dict[str, Any], prefix: str) -> None:
        for key, inner in value.items():
            path = f"{prefix}{key}"
            if isinstance(inner, dict):
                walk(inner, path + ".")
                if inner:
                    held.add(path)
            elif inner is not None and inner != []:
                held.add(path)

    for record in records.values():
        walk({key: value for key, value in record.items() if key != "id"}, "")
    return held


PLACE_NAMES = st.lists(st.sampled_from(NAMES), max_size=3)


@given(records=st.lists(_record_strategy(), min_size=1, max_size=8), deleted=st.lists(st.integers(0, 6), max_size=4),
       search_fields=PLACE_NAMES, fields=PLACE_NAMES, sort=PLACE_NAMES, text_facets=PLACE_NAMES,
       numeric_facets=PLACE_NAMES, group_by=st.none() | st.sampled_from(NAMES), use_filter=st.booleans())
def test_warnings_equal_the_model(records: list[dict[str, Any]], deleted: list[int], search_fields: list[str],
                                  fields: list[str], sort: list[str], text_facets: list[str],
                                  numeric_facets: list[str], group_by: str | None, use_filter: bool) -> None:
    engine = Engine()
    engine.add_records("c", records)
    alive = {record["id"]: record for record in records}
    if deleted:
        engine.delete_records("c", ids=deleted)
        for record_id in deleted:
            alive.pop(record_id, None)
    held = _held(alive)
    sort = [name for name in sort if name != "*"]  # "*" is no sort key
    facet_names = [name for name in numeric_facets if name != "*"]
    request: dict[str, Any] = {"collection": "c", "searchFields": search_fields, "fields": fields, "sort": sort,
                               "textFacets": [name for name in text_facets if name != "*"],
                               "numericFacets": {name: [] for name in facet_names}}
    if group_by is not None and group_by != "*":
        request["groupBy"] = group_by
    filter_names = [name for name in ["price", *search_fields] if name != "*"]
    if use_filter:
        request["filter"] = " OR ".join(f"{name} = 1" for name in filter_names)
    response = engine.search(request)

    expected: list[tuple[str, str]] = []
    places: list[tuple[str, list[str]]] = []
    if use_filter:
        places.append(("filter", filter_names))
    places += [("searchFields", search_fields), ("fields", fields), ("sort", sort),
               ("textFacets", request["textFacets"]), ("numericFacets", facet_names)]
    if "groupBy" in request:
        places.append(("groupBy", [request["groupBy"]]))
    for place, names in places:
        for name in names:
            if name not in held and name not in ("*", "id", "_rank") and (place, name) not in expected:
                expected.append((place, name))
    warnings = response.get("warnings", [])
    assert "warnings" not in response or warnings, "an empty warnings list is left out"
    found = []
    for text in warnings:
        match = WARNING.match(text)
        assert match is not None, text
        place, name, hint = match.groups()
        assert hint is None or hint in held, text
        found.append((place, name))
    assert found == expected
