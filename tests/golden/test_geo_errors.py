"""This module tests the following properties:

- every validation rule of a request's ``geo`` (contract §9) answers with a 400 whose exact message
  names the field and the problem: unknown keys, non-numeric coordinates and radius (JSON strings
  and booleans included), NaN and infinities, out-of-range coordinates, negative radius, polygons
  of fewer than 3 or more than 1,000 points, malformed polygon points;
- ``_geoDistance`` in ``sort`` or ``numericFacets`` without ``around`` is a 400;
- every rule of a record's ``_geo`` (lat in [-90, 90], lng in [-180, 180], numbers, exactly
  ``lat`` and ``lng``) answers through the add path with a 400 naming ``records[i]._geo...``;
- valid forms parse to the expected :class:`GeoQuery` (snapshots below).
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine
from roarsearch.query.geo import GeoAround, GeoQuery, check_distance_uses, parse_geo
from roarsearch.schema import validate_records

NAN = float("nan")
INF = float("inf")

GEO_ERRORS: list[tuple[Any, str]] = [
    ("paris", 'geo: must be an object like {"around": {"lat": 48.85, "lng": 2.35, "radius": 5000}} or '
              '{"polygon": [{"lat": ..., "lng": ...}, ...]}, got string "paris"'),
    ({"lat": 1}, "geo.lat: unknown field; expected 'around' or 'polygon'"),
    ({"around": [48.85, 2.35]},
     'geo.around: must be an object like {"lat": 48.85, "lng": 2.35, "radius": 5000}, got array'),
    ({"around": {"lat": 1, "lng": 2, "radious": 5}}, "geo.around.radious: unknown field; expected 'lat', 'lng' or 'radius'"),
    ({"around": {"lng": 2.35}}, "geo.around.lat: is required"),
    ({"around": {"lat": 48.85}}, "geo.around.lng: is required"),
    ({"around": {"lat": "48.85", "lng": 2.35}},
     'geo.around.lat: must be a number between -90 and 90, got string "48.85"'),
    ({"around": {"lat": True, "lng": 2.35}}, "geo.around.lat: must be a number between -90 and 90, got boolean true"),
    ({"around": {"lat": 90.5, "lng": 2.35}}, "geo.around.lat: must be a number between -90 and 90, got 90.5"),
    ({"around": {"lat": -91, "lng": 2.35}}, "geo.around.lat: must be a number between -90 and 90, got -91"),
    ({"around": {"lat": NAN, "lng": 2.35}}, "geo.around.lat: must be a number between -90 and 90, got NaN"),
    ({"around": {"lat": 1, "lng": 180.01}}, "geo.around.lng: must be a number between -180 and 180, got 180.01"),
    ({"around": {"lat": 1, "lng": -INF}}, "geo.around.lng: must be a number between -180 and 180, got -Infinity"),
    ({"around": {"lat": 1, "lng": [2]}}, "geo.around.lng: must be a number between -180 and 180, got array"),
    ({"around": {"lat": 1, "lng": 10**400}},
     "geo.around.lng: must be a number between -180 and 180, got " + repr(10**400)),
    ({"around": {"lat": 1, "lng": 2, "radius": -1}},
     "geo.around.radius: must be a number of metres, 0 or more, got -1"),
    ({"around": {"lat": 1, "lng": 2, "radius": "5000"}},
     'geo.around.radius: must be a number of metres, 0 or more, got string "5000"'),
    ({"around": {"lat": 1, "lng": 2, "radius": False}},
     "geo.around.radius: must be a number of metres, 0 or more, got boolean false"),
    ({"around": {"lat": 1, "lng": 2, "radius": INF}},
     "geo.around.radius: must be a number of metres, 0 or more, got Infinity"),
    ({"around": {"lat": 1, "lng": 2, "radius": NAN}},
     "geo.around.radius: must be a number of metres, 0 or more, got NaN"),
    ({"polygon": {"lat": 1, "lng": 2}},
     'geo.polygon: must be an array of 3 or more points like {"lat": 48.85, "lng": 2.35}, got object'),
    ({"polygon": [{"lat": 1, "lng": 2}, {"lat": 2, "lng": 2}]}, "geo.polygon: must have at least 3 points, got 2"),
    ({"polygon": [{"lat": 0, "lng": 0}] * 1001}, "geo.polygon: must have at most 1000 points, got 1001"),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 1, "lng": 0}, [1, 1]]},
     'geo.polygon[2]: must be an object like {"lat": 48.8566, "lng": 2.3522}, got array'),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 1, "lng": 0}, {"lat": 1, "lon": 1}]},
     "geo.polygon[2].lon: unknown field; a location holds only lat and lng"),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 1}, {"lat": 1, "lng": 1}]}, "geo.polygon[1].lng: is required"),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 1, "lng": "0"}, {"lat": 1, "lng": 1}]},
     'geo.polygon[1].lng: must be a number between -180 and 180, got string "0"'),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 95, "lng": 0}, {"lat": 1, "lng": 1}]},
     "geo.polygon[1].lat: must be a number between -90 and 90, got 95"),
]


@pytest.mark.parametrize(("geo", "message"), GEO_ERRORS)
def test_geo_validation_messages(geo: Any, message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        parse_geo(geo)
    assert caught.value.data == message
    assert caught.value.status == 400
    assert caught.value.field == "geo"


@pytest.mark.parametrize(("geo", "expected"), [
    (None, None),
    ({}, None),
    ({"around": None, "polygon": None}, None),
    ({"around": {"lat": 48.85, "lng": 2.35, "radius": 5000}}, GeoQuery(GeoAround(48.85, 2.35, 5000.0))),
    ({"around": {"lat": -90, "lng": 180, "radius": 0}}, GeoQuery(GeoAround(-90.0, 180.0, 0.0))),
    ({"around": {"lat": 1, "lng": 2}}, GeoQuery(GeoAround(1.0, 2.0, None))),
    ({"around": {"lat": 1, "lng": 2, "radius": None}}, GeoQuery(GeoAround(1.0, 2.0, None))),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 1, "lng": 0}, {"lat": 1, "lng": 1}]},
     GeoQuery(None, ((0.0, 0.0), (1.0, 0.0), (1.0, 1.0)))),
    ({"around": {"lat": 1, "lng": 2, "radius": 10**400}}, GeoQuery(GeoAround(1.0, 2.0, float("inf")))),
])
def test_geo_valid_forms(geo: Any, expected: GeoQuery | None) -> None:
    assert parse_geo(geo) == expected


def test_filters_flag() -> None:
    assert not GeoQuery(GeoAround(1, 2, None)).filters
    assert GeoQuery(GeoAround(1, 2, 0.0)).filters
    assert GeoQuery(None, ((0, 0), (1, 0), (1, 1))).filters


@pytest.mark.parametrize(("geo", "sort", "facets", "message"), [
    (None, ["_geoDistance"], [], "sort: _geoDistance needs geo.around (the point distances are measured from)"),
    (GeoQuery(None, ((0, 0), (1, 0), (1, 1))), [], ["_geoDistance"],
     "numericFacets._geoDistance: needs geo.around (the point distances are measured from)"),
])
def test_distance_needs_around(geo: GeoQuery | None, sort: list[str], facets: list[str], message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        check_distance_uses(geo, sort, facets)
    assert caught.value.data == message


def test_distance_with_around_is_accepted() -> None:
    check_distance_uses(GeoQuery(GeoAround(1, 2, None)), ["_geoDistance"], ["_geoDistance"])
    check_distance_uses(None, ["price"], ["price"])


RECORD_ERRORS: list[tuple[Any, str]] = [
    ([{"id": 1, "_geo": {"lat": 1, "lng": 2}}, {"id": 2, "_geo": "48.8,2.3"}],
     'records[1]._geo: must be an object like {"lat": 48.8566, "lng": 2.3522}, got string "48.8,2.3"'),
    ([{"id": 1, "_geo": [48.8, 2.3]}], 'records[0]._geo: must be an object like {"lat": 48.8566, "lng": 2.3522}, got array'),
    ([{"id": 1, "_geo": {"lat": 91, "lng": 2}}], "records[0]._geo.lat: must be a number between -90 and 90, got 91"),
    ([{"id": 1, "_geo": {"lat": -90.0001, "lng": 2}}],
     "records[0]._geo.lat: must be a number between -90 and 90, got -90.0001"),
    ([{"id": 1, "_geo": {"lat": 1, "lng": -181}}], "records[0]._geo.lng: must be a number between -180 and 180, got -181"),
    ([{"id": 1, "_geo": {"lat": "1", "lng": 2}}], 'records[0]._geo.lat: must be a number between -90 and 90, got string "1"'),
    ([{"id": 1, "_geo": {"lat": 1, "lng": True}}], "records[0]._geo.lng: must be a number between -180 and 180, got boolean true"),
    ([{"id": 1, "_geo": {"lat": NAN, "lng": 2}}], "records[0]._geo.lat: must be a number between -90 and 90, got NaN"),
    ([{"id": 1, "_geo": {"lat": 1, "lng": None}}], "records[0]._geo.lng: must be a number between -180 and 180, got null"),
    ([{"id": 1, "_geo": {"lat": 1}}], "records[0]._geo.lng: is required"),
    ([{"id": 1, "_geo": {"lng": 1}}], "records[0]._geo.lat: is required"),
    ([{"id": 1, "_geo": {"lat": 1, "lng": 2, "alt": 30}}],
     "records[0]._geo.alt: unknown field; a location holds only lat and lng"),
]


@pytest.mark.parametrize(("records", "message"), RECORD_ERRORS)
def test_record_geo_messages(records: Any, message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        validate_records(records)
    assert caught.value.data == message


@pytest.mark.parametrize(("records", "message"), RECORD_ERRORS[:3])
def test_record_geo_messages_through_engine(records: Any, message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        Engine().add_records("places", records)
    assert caught.value.data == message


def test_record_geo_valid_forms() -> None:
    records = [{"id": 1, "_geo": {"lat": 90, "lng": -180}}, {"id": 2, "_geo": {"lng": 180.0, "lat": -90.0}},
               {"id": 3, "_geo": None}, {"id": 4}]
    assert validate_records(records) == records
