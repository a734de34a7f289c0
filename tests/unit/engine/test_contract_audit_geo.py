"""This module tests the following properties (contract §9 "Geo search"), through the library, on
hand-placed points whose exact distances are known:

- a record is inside a circle when its EXACT distance is at most ``radius``: radius 0 keeps a point
  at the centre itself, and a point 1000.4 m away is outside a 1000 m circle although its
  ``_geoDistance`` rounds to 1000 (while one 999.6 m away is inside);
- ``_geoDistance`` is the distance rounded to the NEAREST whole metre (1000.7 m -> 1001, 2000.3 m
  -> 2000), an ``int``;
- ties of ``_geoDistance`` in a distance sort are broken by the exact distance, in both
  directions, not by id; records at the very same distance then follow the rest of the request
  (the next sort key, or relevance then id);
- a point on a polygon's edge or vertex is inside; polygons use the even-odd rule (the centre of a
  pentagram, covered twice, is outside; its tips are inside); longitudes are taken as given (a
  polygon from 170 to -170 spans the whole width between them, not across ±180);
- ``around`` and ``polygon`` together keep only records inside both;
- without ``radius`` records lacking ``_geo`` are kept, carry no ``_geoDistance`` key, and sort
  last with ``_geoDistance`` and with ``-_geoDistance``; records lacking ``_geo`` never match a
  circle or a polygon;
- geo applies like a filter before word dropping: when no record inside holds every query word,
  words are dropped, even though a record outside holds them all; ``totalHits`` and text facets
  count only the records inside;
- ``_geoDistance`` (either direction) in ``sort`` or in ``numericFacets`` without ``around`` is a
  400, as are unknown keys in ``geo``, string coordinates or radius, and a negative radius.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from roarsearch import BadRequestError, Engine

EARTH_RADIUS_M = 6_371_008.8


def north_of_origin(metres: float) -> dict[str, float]:
    """The point ``metres`` north of (0, 0) along the meridian: its great-circle distance is ``metres``."""
    return {"lat": math.degrees(metres / EARTH_RADIUS_M), "lng": 0.0}


ORIGIN = {"lat": 0.0, "lng": 0.0}


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


def search(engine: Engine, **request: Any) -> dict[str, Any]:
    return engine.search({"collection": "c", **request})


def test_radius_is_inclusive_on_the_exact_distance() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "_geo": ORIGIN}, {"id": 2, "_geo": north_of_origin(1000.4)},
                             {"id": 3, "_geo": north_of_origin(999.6)}, {"id": 4}])
    at_centre = search(engine, geo={"around": {**ORIGIN, "radius": 0}})
    assert ids(at_centre) == [1] and at_centre["results"][0]["_geoDistance"] == 0
    circle = search(engine, geo={"around": {**ORIGIN, "radius": 1000}}, sort=["_geoDistance"])
    assert ids(circle) == [1, 3]  # 1000.4 m is outside although it rounds to 1000
    assert [result["_geoDistance"] for result in circle["results"]] == [0, 1000]
    assert circle["totalHits"] == 2
    assert ids(search(engine, geo={"around": {**ORIGIN, "radius": 1000.5}}, sort=["_geoDistance"])) == [1, 3, 2]


def test_geo_distance_is_rounded_to_the_nearest_metre() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "_geo": north_of_origin(1000.7)}, {"id": 2, "_geo": north_of_origin(2000.3)},
                             {"id": 3, "_geo": north_of_origin(0.6)}])
    answer = search(engine, geo={"around": ORIGIN}, sort=["_geoDistance"])
    distances = {result["id"]: result["_geoDistance"] for result in answer["results"]}
    assert distances == {3: 1, 1: 1001, 2: 2000}
    assert all(type(value) is int for value in distances.values())


def test_distance_ties_are_broken_by_the_exact_distance_then_the_request() -> None:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "_geo": north_of_origin(1000.4), "n": 1},  # both round to 1000 m;
        {"id": 2, "_geo": north_of_origin(999.6), "n": 2},   # id order is the opposite of distance
        {"id": 3, "_geo": north_of_origin(5000), "n": 1},    # 3 and 4 at the very same point
        {"id": 4, "_geo": north_of_origin(5000), "n": 2},
    ])
    near_first = search(engine, geo={"around": ORIGIN}, sort=["_geoDistance"])
    assert [r["_geoDistance"] for r in near_first["results"]] == [1000, 1000, 5000, 5000]
    assert ids(near_first) == [2, 1, 3, 4]  # exact distance, then relevance and id
    assert ids(search(engine, geo={"around": ORIGIN}, sort=["-_geoDistance"])) == [3, 4, 1, 2]
    assert ids(search(engine, geo={"around": ORIGIN}, sort=["_geoDistance", "-n"])) == [2, 1, 4, 3]
    assert ids(search(engine, geo={"around": ORIGIN}, sort=["-_geoDistance", "-n"])) == [4, 3, 1, 2]


SQUARE = [{"lat": 0, "lng": 0}, {"lat": 0, "lng": 2}, {"lat": 2, "lng": 2}, {"lat": 2, "lng": 0}]


def test_a_point_on_a_polygon_edge_or_vertex_is_inside() -> None:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "_geo": {"lat": 1, "lng": 1}},      # inside
        {"id": 2, "_geo": {"lat": 0, "lng": 1}},      # on the bottom edge
        {"id": 3, "_geo": {"lat": 2, "lng": 2}},      # on a vertex
        {"id": 4, "_geo": {"lat": 1, "lng": 2}},      # on the right edge
        {"id": 5, "_geo": {"lat": 2.001, "lng": 1}},  # just outside
        {"id": 6},                                    # no location: never inside
    ])
    assert ids(search(engine, geo={"polygon": SQUARE})) == [1, 2, 3, 4]
    triangle = [{"lat": 0, "lng": 0}, {"lat": 2, "lng": 2}, {"lat": 0, "lng": 2}]
    engine.add_records("c", [{"id": 7, "_geo": {"lat": 0.5, "lng": 0.5}}, {"id": 8, "_geo": {"lat": 0.5, "lng": 0.25}}])
    found = ids(search(engine, geo={"polygon": triangle}))
    assert 7 in found and 3 in found and 8 not in found  # the diagonal edge holds (0.5, 0.5)


def test_polygons_use_the_even_odd_rule() -> None:
    # A pentagram drawn in one stroke: its centre is wound twice (outside by even-odd, inside by non-zero).
    star = [{"lat": 10 * math.sin(math.radians(90 + 144 * k)), "lng": 10 * math.cos(math.radians(90 + 144 * k))}
            for k in range(5)]
    engine = Engine()
    engine.add_records("c", [{"id": 1, "_geo": {"lat": 0, "lng": 0}}, {"id": 2, "_geo": {"lat": 8, "lng": 0}},
                             {"id": 3, "_geo": {"lat": 20, "lng": 0}}])
    assert ids(search(engine, geo={"polygon": star})) == [2]


def test_polygon_longitudes_are_taken_as_given() -> None:
    wide = [{"lat": -10, "lng": 170}, {"lat": 10, "lng": 170}, {"lat": 10, "lng": -170}, {"lat": -10, "lng": -170}]
    engine = Engine()
    engine.add_records("c", [{"id": 1, "_geo": {"lat": 0, "lng": 179}}, {"id": 2, "_geo": {"lat": 0, "lng": -179}},
                             {"id": 3, "_geo": {"lat": 0, "lng": 0}}])
    assert ids(search(engine, geo={"polygon": wide})) == [3]


def test_around_and_polygon_both_apply() -> None:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "_geo": {"lat": 1, "lng": 1}},      # in the square and in the circle (89 km away)
        {"id": 2, "_geo": {"lat": 1.9, "lng": 1.9}},  # in the square only (214 km away)
        {"id": 3, "_geo": {"lat": 1, "lng": -0.3}},   # in the circle only (56 km away)
    ])
    both = {"around": {"lat": 1, "lng": 0.2, "radius": 100_000}, "polygon": SQUARE}
    answer = search(engine, geo=both)
    assert ids(answer) == [1] and answer["totalHits"] == 1
    assert ids(search(engine, geo={"polygon": SQUARE})) == [1, 2]
    assert ids(search(engine, geo={"around": both["around"]})) == [1, 3]


def test_without_radius_records_lacking_geo_are_kept_and_sort_last() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "t": "x"}, {"id": 2, "_geo": north_of_origin(5000), "t": "x"},
                             {"id": 3, "_geo": north_of_origin(100), "t": "x"}, {"id": 4, "_geo": None, "t": "x"}])
    plain = search(engine, geo={"around": ORIGIN})
    assert ids(plain) == [1, 2, 3, 4] and plain["totalHits"] == 4
    for result in plain["results"]:
        assert ("_geoDistance" in result) == (result["id"] in (2, 3)), result
    assert ids(search(engine, geo={"around": ORIGIN}, sort=["_geoDistance"])) == [3, 2, 1, 4]
    assert ids(search(engine, geo={"around": ORIGIN}, sort=["-_geoDistance"])) == [2, 3, 1, 4]
    assert ids(search(engine, geo={"around": {**ORIGIN, "radius": 10**7}})) == [2, 3]


def test_geo_applies_before_word_dropping_and_counts_only_records_inside() -> None:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "name": "paris texas", "country": "us", "_geo": {"lat": 33.66, "lng": -95.55}},
        {"id": 2, "name": "paris", "country": "fr", "_geo": {"lat": 48.8566, "lng": 2.3522}},
        {"id": 3, "name": "paris hilton", "country": "fr", "_geo": {"lat": 48.87, "lng": 2.30}},
    ])
    around_paris = {"around": {"lat": 48.8566, "lng": 2.3522, "radius": 50_000}}
    answer = search(engine, query="paris texas", geo=around_paris, textFacets=["country"])
    assert ids(answer) == [2, 3] and answer["totalHits"] == 2  # "texas" dropped: nobody inside holds it
    assert answer["textFacets"] == [{"field": "country", "values": [{"value": "fr", "count": 2}]}]
    assert ids(search(engine, query="paris texas")) == [1]


@pytest.mark.parametrize(("request_part", "fragment"), [
    ({"sort": ["_geoDistance"]}, "sort: _geoDistance needs geo.around"),
    ({"sort": ["-_geoDistance"]}, "sort: _geoDistance needs geo.around"),
    ({"sort": ["_geoDistance"], "geo": {"polygon": SQUARE}}, "sort: _geoDistance needs geo.around"),
    ({"numericFacets": {"_geoDistance": ["[0,1000)"]}}, "numericFacets._geoDistance: needs geo.around"),
    ({"numericFacets": {"_geoDistance": []}, "geo": {"polygon": SQUARE}}, "numericFacets._geoDistance: needs geo.around"),
    ({"geo": {"around": {"lat": 0, "lng": 0}, "near": 1}}, "geo.near: unknown field"),
    ({"geo": {"around": {"lat": 0, "lng": 0, "radius": 1, "unit": "km"}}}, "geo.around.unit: unknown field"),
    ({"geo": {"around": {"lat": "0", "lng": 0}}}, "geo.around.lat: must be a number"),
    ({"geo": {"around": {"lat": 0, "lng": "0"}}}, "geo.around.lng: must be a number"),
    ({"geo": {"around": {"lat": 0, "lng": 0, "radius": "5"}}}, "geo.around.radius: must be a number"),
    ({"geo": {"around": {"lat": 0, "lng": 0, "radius": -0.5}}}, "geo.around.radius: must be a number of metres, 0 or more"),
    ({"geo": {"polygon": [{"lat": 0, "lng": 0}, {"lat": "1", "lng": 0}, {"lat": 1, "lng": 1}]}},
     "geo.polygon[1].lat: must be a number"),
])
def test_bad_geo_requests_are_400s(request_part: dict[str, Any], fragment: str) -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "_geo": ORIGIN}])
    with pytest.raises(BadRequestError) as caught:
        search(engine, **request_part)
    assert caught.value.status == 400 and fragment in caught.value.data, caught.value.data


def test_distance_is_accepted_with_around() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "_geo": north_of_origin(700)}, {"id": 2, "_geo": north_of_origin(1500)}])
    answer = search(engine, geo={"around": ORIGIN}, sort=["-_geoDistance"],
                    numericFacets={"_geoDistance": ["[0,1000)", "[1000,2000]"]})
    assert ids(answer) == [2, 1]
    assert [entry["count"] for entry in answer["numericFacets"][0]["ranges"]] == [1, 1]
