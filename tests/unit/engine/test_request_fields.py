"""Each wire field of a search body lands in its own SearchRequest field.

parse_search_request builds the request positionally (22 keywords cost a small search more than
a microsecond); these tests give every field a value of its own, so that two arguments swapped
(``skip`` and ``count`` are both ints, ``searchFields`` and ``fields`` both tuples of strings)
fail here rather than answer the wrong page.
"""

from __future__ import annotations

import dataclasses

from roarsearch.engine.request import parse_search_request
from roarsearch.query.geo import parse_geo
from roarsearch.query.intervals import parse_interval_cached
from roarsearch.query.request import SearchRequest, SortKey
from roarsearch.query.vector import VectorQuery


def test_every_given_field_lands_in_its_own_place() -> None:
    body = {
        "collection": "films",
        "query": "night train",
        "searchFields": ["title", "plot"],
        "fields": ["id", "title", "year"],
        "filter": "year >= 1990",
        "sort": ["-year"],
        "skip": 7,
        "count": 11,
        "typoTolerance": 2,
        "textFacets": ["genre"],
        "facetCount": 13,
        "textFacetFilters": {"genre": ["drama"]},
        "numericFacets": {"year": ["[1990, 2000)"]},
        "numericFacetFilters": {"runtime": ["[90, 120)"]},
        "groupBy": "studio",
        "groupCount": 5,
        "groupLimit": 2,
        "highlightFields": ["plot"],
        "geo": {"around": {"lat": 48.85, "lng": 2.35}},
        "vector": {"name": "text", "values": [0.5, -1], "k": 9, "exact": True},
        "semanticRatio": 0.25,
    }
    request = parse_search_request(body)
    expected = {
        "collection": "films",
        "query": "night train",
        "search_fields": ("title", "plot"),
        "fields": ("id", "title", "year"),
        "filter": "year >= 1990",
        "sort": (SortKey("year", True),),
        "skip": 7,
        "count": 11,
        "typo_tolerance": 2,
        "text_facets": ("genre",),
        "facet_count": 13,
        "text_facet_filters": {"genre": ("drama",)},
        "numeric_facets": {"year": (parse_interval_cached("[1990, 2000)", "numericFacets"),)},
        "numeric_facet_filters": {"runtime": (parse_interval_cached("[90, 120)", "numericFacetFilters"),)},
        "group_by": "studio",
        "group_count": 5,
        "group_limit": 2,
        "highlight_fields": ("plot",),
        "facet_query": None,
        "facet_query_count": 100,
        "geo": parse_geo({"around": {"lat": 48.85, "lng": 2.35}}),
        "vector": VectorQuery("text", (0.5, -1.0), 9, True),
        "semantic_ratio": 0.25,
    }
    names = [field.name for field in dataclasses.fields(SearchRequest)]
    assert set(names) - set(expected) == {"filter_tree"}, "a new request field: give it a value here"
    for name, value in expected.items():
        assert getattr(request, name) == value, name
    assert request.filter_tree is not None


def test_a_body_of_defaults_makes_the_dataclass_defaults() -> None:
    """A body naming only the collection parses to the dataclass's own defaults, field by field."""
    assert parse_search_request({"collection": "films"}) == SearchRequest("films")
    assert parse_search_request({"collection": "films", "typoTolerance": None}) == SearchRequest("films")


def test_the_facet_value_search_fields_land_in_their_places() -> None:
    request = parse_search_request({"collection": "films", "textFacetQuery": {"query": "dra", "count": 9}},
                                   facet_search=True)
    assert (request.facet_query, request.facet_query_count, request.count) == ("dra", 9, 30)


def test_collection_ids_are_checked_alike_before_and_after_being_remembered() -> None:
    """Valid ids are remembered (a set test instead of the pattern), up to a bound; an invalid id
    is refused however many valid ones came first, and ids past the bound are still checked."""
    from roarsearch.engine import request as request_module
    from roarsearch.errors import BadRequestError

    for number in range(request_module._VALID_IDS_KEPT + 50):
        assert request_module.check_collection_id(f"c-{number}") == f"c-{number}"
        assert request_module.check_collection_id(f"c-{number}") == f"c-{number}"
    assert len(request_module._VALID_IDS) <= request_module._VALID_IDS_KEPT
    for bad in ("", "a b", "x" * 65, "é", "c-1 "):
        try:
            request_module.check_collection_id(bad)
        except BadRequestError as error:
            assert error.field == "collection"
        else:
            raise AssertionError(f"{bad!r} was accepted")
