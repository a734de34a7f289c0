"""This module tests the following properties:

- a search with ``geo`` (around with and without radius, polygon, both) combined with a filter, a
  facet filter, text and numeric facets (``_geoDistance`` ranges included), sort by distance both
  ways and pages gives what a brute-force model gives over real GeoNames coordinates: the records
  inside, `totalHits`, the page in order, `_geoDistance` in whole metres on every result, facet
  counts; records without `_geo` never match a geo filter and sort last without one;
- geo points follow upserts and deletes, survive a close and reopen, and `check()` agrees;
- bad geo input is a 400 (request and record), never a 500.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roarsearch import Engine, SearchError
from roarsearch.datasets import load_places

EARTH_RADIUS_M = 6_371_008.8


def haversine(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lng2 - lng1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * math.asin(min(1.0, math.sqrt(a)))


def inside_polygon(lat: float, lng: float, polygon: list[tuple[float, float]]) -> bool:
    """Even-odd rule with edges straight in (lat, lng); a point on an edge is inside."""
    inside = False
    for (alat, alng), (blat, blng) in zip(polygon, polygon[1:] + polygon[:1]):
        cross = (blng - alng) * (lat - alat) - (blat - alat) * (lng - alng)
        if cross == 0 and min(alat, blat) <= lat <= max(alat, blat) and min(alng, blng) <= lng <= max(alng, blng):
            return True
        if (alat > lat) != (blat > lat):
            at = alng + (lat - alat) * (blng - alng) / (blat - alat)
            if lng < at:
                inside = not inside
    return inside


def _places() -> list[dict[str, Any]]:
    rows = []
    for i, place in enumerate(load_places()[:3000:3]):
        row: dict[str, Any] = {"id": i, "name": place["name"], "country": place["countryCode"],
                               "population": place["population"]}
        if i % 7:
            row["_geo"] = {"lat": place["latitude"], "lng": place["longitude"]}
        rows.append(row)
    return rows


PLACES = _places()
CENTRES = [(row["_geo"]["lat"], row["_geo"]["lng"]) for row in PLACES if "_geo" in row][::25] + [(0.0, 179.9), (89.9, 0.0)]


@st.composite
def geo_requests(draw: Any) -> dict[str, Any]:
    geo: dict[str, Any] = {}
    if draw(st.booleans()):
        lat, lng = draw(st.sampled_from(CENTRES))
        around: dict[str, Any] = {"lat": lat, "lng": lng}
        if draw(st.booleans()):
            around["radius"] = draw(st.sampled_from([0, 10_000, 250_000, 2_000_000, 20_000_000]))
        geo["around"] = around
    if not geo or draw(st.booleans()):
        lat, lng = draw(st.sampled_from(CENTRES))
        size = draw(st.sampled_from([2.0, 10.0, 40.0]))
        def point(dlat: float, dlng: float) -> dict[str, float]:
            return {"lat": min(90.0, max(-90.0, lat + dlat)), "lng": min(180.0, max(-180.0, lng + dlng))}

        # A concave quadrilateral around the centre (longitudes as given: no wrapping at ±180°).
        geo["polygon"] = [point(-size, -size), point(size, 0), point(0, size / 2), point(-size / 3, size)]
    request: dict[str, Any] = {
        "geo": geo,
        "filter": draw(st.sampled_from(["", "population > 5000", "NOT country = US"])),
        "textFacets": ["country"],
        "facetCount": 5,
        "count": draw(st.integers(1, 20)),
        "skip": draw(st.integers(0, 5)),
    }
    if "around" in geo:
        request["sort"] = draw(st.sampled_from([["_geoDistance"], ["-_geoDistance"], []]))
        request["numericFacets"] = {"_geoDistance": ["[0,50000)", "[50000,1000000]", "(1000000,)"]}
    return request


def model(rows: list[dict[str, Any]], request: dict[str, Any]) -> dict[str, Any]:
    geo = request["geo"]
    around = geo.get("around")
    polygon = [(point["lat"], point["lng"]) for point in geo.get("polygon", [])]

    def passes(row: dict[str, Any]) -> bool:
        if request["filter"] == "population > 5000" and not row["population"] > 5000:
            return False
        if request["filter"] == "NOT country = US" and row["country"].lower() == "us":
            return False
        point = row.get("_geo")
        if around is not None and "radius" in around:
            if point is None or haversine(around["lat"], around["lng"], point["lat"], point["lng"]) > around["radius"]:
                return False
        if polygon and (point is None or not inside_polygon(point["lat"], point["lng"], polygon)):
            return False
        return True

    selected = [row for row in rows if passes(row)]

    def distance(row: dict[str, Any]) -> float | None:
        point = row.get("_geo")
        return None if point is None or around is None else haversine(around["lat"], around["lng"], point["lat"], point["lng"])

    sort = request.get("sort", [])
    if sort:
        descending = sort[0].startswith("-")
        selected.sort(key=lambda row: (distance(row) is None,
                                       0.0 if distance(row) is None else (-1 if descending else 1) * distance(row),
                                       row["id"]))
    page = selected[request["skip"]:request["skip"] + request["count"]]
    answer: dict[str, Any] = {
        "totalHits": len(selected),
        "ids": [row["id"] for row in page],
        "distances": [None if distance(row) is None else math.floor(distance(row) + 0.5) for row in page],
    }
    counts: dict[str, int] = {}
    for row in selected:
        counts[row["country"]] = counts.get(row["country"], 0) + 1
    answer["country"] = sorted(counts.items(), key=lambda item: (-item[1], item[0].lower(), item[0]))[:5]
    if "numericFacets" in request:
        metres = [math.floor(distance(row) + 0.5) for row in selected if distance(row) is not None]
        answer["ranges"] = [sum(1 for m in metres if 0 <= m < 50_000), sum(1 for m in metres if 50_000 <= m <= 1_000_000),
                            sum(1 for m in metres if m > 1_000_000)]
    return answer


def engine_answer(engine: Engine, request: dict[str, Any]) -> dict[str, Any]:
    response = engine.search({"collection": "places", **request})
    answer: dict[str, Any] = {
        "totalHits": response["totalHits"],
        "ids": [result["id"] for result in response["results"]],
        "distances": [result.get("_geoDistance") for result in response["results"]],
        "country": [(value["value"], value["count"]) for value in response["textFacets"][0]["values"]],
    }
    if "numericFacets" in request:
        answer["ranges"] = [entry["count"] for entry in response["numericFacets"][0]["ranges"]]
    return answer


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    engine.add_records("places", PLACES)
    return engine


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=geo_requests())
def test_geo_searches_match_the_model(engine: Engine, request: dict[str, Any]) -> None:
    got, expected = engine_answer(engine, request), model(PLACES, request)
    if not request.get("sort"):  # relevance ties are in id order: the model's order too
        expected["ids"] = sorted(row_id for row_id in expected["ids"])
    # Whole metres may differ by one where the model's floating point rounds the other way.
    assert len(got["distances"]) == len(expected["distances"])
    for mine, theirs in zip(got["distances"], expected["distances"]):
        assert (mine is None) == (theirs is None) and (mine is None or abs(mine - theirs) <= 1), request
    got.pop("distances"), expected.pop("distances")
    assert got == expected, request


def test_points_follow_writes_and_reopen(tmp_path: Path) -> None:
    paris = {"lat": 48.8566, "lng": 2.3522}
    request = {"collection": "c", "geo": {"around": {**paris, "radius": 1000}}}
    with Engine(tmp_path) as engine:
        engine.add_records("c", [{"id": 1, "_geo": paris}, {"id": 2, "_geo": {"lat": 51.5, "lng": -0.12}}, {"id": 3}])
        assert [r["id"] for r in engine.search(request)["results"]] == [1]
        engine.add_records("c", {"id": 1, "_geo": {"lat": 40.7, "lng": -74.0}})  # moved away
        engine.add_records("c", {"id": 3, "_geo": paris})  # gained a point
        assert [r["id"] for r in engine.search(request)["results"]] == [3]
    with Engine(tmp_path) as engine:
        assert [r["id"] for r in engine.search(request)["results"]] == [3]
        engine.delete_records("c", ids=[3])
        assert engine.search(request)["totalHits"] == 0
        assert engine.check()["ok"]


@pytest.mark.parametrize(("geo", "message"), [
    ({"around": {"lat": 91, "lng": 0}}, "geo.around.lat: must be a number between -90 and 90, got 91"),
    ({"around": {"lat": 0, "lng": 0, "radius": -1}}, "geo.around.radius: must be a number of metres, 0 or more, got -1"),
    ({"polygon": [{"lat": 0, "lng": 0}, {"lat": 1, "lng": 1}]}, "geo.polygon: must have at least 3 points, got 2"),
])
def test_bad_geo_is_a_400(engine: Engine, geo: dict[str, Any], message: str) -> None:
    with pytest.raises(SearchError) as caught:
        engine.search({"collection": "places", "geo": geo})
    assert caught.value.status == 400 and caught.value.data == message


def test_distance_needs_around(engine: Engine) -> None:
    with pytest.raises(SearchError) as caught:
        engine.search({"collection": "places", "sort": ["_geoDistance"]})
    assert caught.value.status == 400 and "_geoDistance" in caught.value.data
    with pytest.raises(SearchError) as caught:
        engine.add_records("places", {"id": 10**9, "_geo": {"lat": 0, "lng": 200}})
    assert caught.value.status == 400 and "records[0]._geo.lng" in caught.value.data
