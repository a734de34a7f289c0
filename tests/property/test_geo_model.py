"""This module tests the following properties:

- on real GeoNames coordinates (a seeded sample of the places corpus, plus points at both poles and
  on the antimeridian), ``GeoColumn.within_circle`` returns exactly the docs whose distance is at
  most the radius, for random centres and radii: across the antimeridian, around the poles, radius
  0, radii equal to a point's distance (inclusive), radii covering the globe;
- ``distances`` equals an independent brute-force haversine to 1e-6 relative (NaN without a point),
  and the circle filter agrees bit for bit with it;
- ``within_polygon`` equals an exact brute-force point-in-polygon model (even-odd rule, integer
  arithmetic on the floats' exact values, boundary inside) for random convex, concave and
  self-intersecting polygons, with data points placed exactly on vertices and edges;
- a ``universe`` only restricts (small universes take the doc-by-doc path, large ones the spatial
  path: same answer), and a snapshot round trip through msgpack answers the same.
"""

from __future__ import annotations

import math
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.datasets import load_places
from roarsearch.index import geo
from roarsearch.index.geo import UNIVERSE_CHECK_THRESHOLD, GeoColumn

R = 6_371_008.8
SAMPLE = 3_000


@pytest.fixture(scope="module")
def points() -> tuple[np.ndarray, np.ndarray]:
    places = load_places(15000)
    rng = np.random.default_rng(15)
    chosen = rng.choice(len(places), size=SAMPLE, replace=False)
    lat = [places[i]["latitude"] for i in chosen]
    lng = [places[i]["longitude"] for i in chosen]
    # Corners of the sphere the sample lacks: poles, antimeridian, a duplicate point.
    lat += [90.0, 90.0, -90.0, 89.99, -89.99, 0.0, 0.0, 65.0, 65.0, -16.5, lat[0]]
    lng += [0.0, 123.0, -45.0, 180.0, -180.0, 180.0, -180.0, 179.999, -179.999, 179.5, lng[0]]
    return np.array(lat), np.array(lng)


@pytest.fixture(scope="module")
def column(points: tuple[np.ndarray, np.ndarray]) -> GeoColumn:
    lat, lng = points
    column = GeoColumn()
    half = lat.size // 2  # two writes, as two batches would
    column.add(np.arange(half, dtype=np.uint32), lat[:half], lng[:half])
    column.add(np.arange(half, lat.size, dtype=np.uint32), lat[half:], lng[half:])
    return column


def model_distance(lat1: float, lng1: float, lat2: np.ndarray, lng2: np.ndarray) -> np.ndarray:
    """Haversine written independently (degrees → radians by pi/180, arctan2 form)."""
    p1, p2 = lat1 * math.pi / 180, lat2 * math.pi / 180
    dp, dl = p2 - p1, (lng2 - lng1) * math.pi / 180
    a = np.sin(dp / 2) ** 2 + math.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    a = np.minimum(a, 1.0)
    return np.asarray(2 * R * np.arctan2(np.sqrt(a), np.sqrt(1 - a)))


def check_circle(column: GeoColumn, lat: np.ndarray, lng: np.ndarray, clat: float, clng: float,
                 radius: float) -> None:
    docs = np.arange(lat.size)
    model = model_distance(clat, clng, lat, lng)
    distance = column.distances(docs, clat, clng)
    np.testing.assert_allclose(distance, model, rtol=1e-6, atol=1e-6)
    got = column.within_circle(clat, clng, radius)
    expected = BitMap(np.flatnonzero(distance <= radius).tolist())
    assert got == expected
    # And against the model, away from rounding at the boundary.
    slack = radius * 1e-9 + 1e-3
    assert BitMap(np.flatnonzero(model <= radius - slack).tolist()) <= got
    assert not (got & BitMap(np.flatnonzero(model > radius + slack).tolist()))


CENTRE = st.one_of(
    st.tuples(st.floats(-90, 90), st.floats(-180, 180)),
    st.tuples(st.sampled_from([90.0, -90.0, 89.9, -89.95, 0.0]), st.floats(-180, 180)),
    st.tuples(st.floats(-80, 80), st.sampled_from([180.0, -180.0, 179.9, -179.95])),
    # Beside the sample's antimeridian points (and Fiji's places), on either side of the line.
    st.tuples(st.sampled_from([0.0, 65.0, -16.5, -17.8, 65.01]), st.sampled_from([180.0, -180.0, 179.99, -179.99])),
)
RADIUS = st.one_of(
    st.just(0.0),
    st.floats(1.0, 50_000.0),
    st.floats(50_000.0, 3_000_000.0),
    st.floats(3_000_000.0, 21_000_000.0),
    st.sampled_from([math.pi * R, 2 * math.pi * R, math.inf]),
)


@given(centre=CENTRE, radius=RADIUS)
def test_circle_random_centres(column: GeoColumn, points: tuple[np.ndarray, np.ndarray],
                               centre: tuple[float, float], radius: float) -> None:
    lat, lng = points
    check_circle(column, lat, lng, centre[0], centre[1], radius)


@given(at=st.integers(0, SAMPLE + 10), radius=RADIUS, target=st.integers(0, SAMPLE + 10))
def test_circle_around_points(column: GeoColumn, points: tuple[np.ndarray, np.ndarray], at: int, radius: float,
                              target: int) -> None:
    lat, lng = points
    clat, clng = float(lat[at]), float(lng[at])
    check_circle(column, lat, lng, clat, clng, radius)
    assert at in column.within_circle(clat, clng, 0.0)  # its own point, at distance exactly 0
    # A radius equal to a point's distance takes that point in.
    exact = float(column.distances(np.array([target]), clat, clng)[0])
    assert target in column.within_circle(clat, clng, exact)
    check_circle(column, lat, lng, clat, clng, exact)


@given(centre=CENTRE, radius=RADIUS, seed=st.integers(0, 2**32 - 1),
       size=st.sampled_from([0, 1, 50, UNIVERSE_CHECK_THRESHOLD, UNIVERSE_CHECK_THRESHOLD + 1, 2_900]))
def test_universe_only_restricts(column: GeoColumn, points: tuple[np.ndarray, np.ndarray], centre: tuple[float, float],
                                 radius: float, seed: int, size: int) -> None:
    lat, _lng = points
    rng = np.random.default_rng(seed)
    universe = BitMap(rng.choice(lat.size + 20, size=size, replace=False).tolist())  # ids past the end too
    everything = column.within_circle(centre[0], centre[1], radius)
    square = [(centre[0] - 5, centre[1] - 5), (centre[0] - 5, centre[1] + 5), (centre[0] + 5, centre[1] + 5),
              (centre[0] + 5, centre[1] - 5)]
    inside_square = column.within_polygon(square)
    # Every way of meeting a universe: doc by doc (small, or outnumbered), or spatial then restricted.
    for threshold, ratio in [(geo.UNIVERSE_CHECK_THRESHOLD, geo.UNIVERSE_COST_RATIO), (0, 0), (0, 10**9)]:
        saved = geo.UNIVERSE_CHECK_THRESHOLD, geo.UNIVERSE_COST_RATIO
        geo.UNIVERSE_CHECK_THRESHOLD, geo.UNIVERSE_COST_RATIO = threshold, ratio
        try:
            assert column.within_circle(centre[0], centre[1], radius, universe) == everything & universe
            assert column.within_polygon(square, universe) == inside_square & universe
        finally:
            geo.UNIVERSE_CHECK_THRESHOLD, geo.UNIVERSE_COST_RATIO = saved


# -- polygons ----------------------------------------------------------------------------------

_SCALE = 1100  # every float in degree range is a multiple of 2**-1074: scaled, it is an exact integer


def _exact(value: float) -> int:
    numerator, denominator = float(value).as_integer_ratio()
    return numerator * ((1 << _SCALE) // denominator)


def model_polygon(lat: np.ndarray, lng: np.ndarray, vertices: list[tuple[float, float]]) -> set[int]:
    """Brute force, exact: even-odd crossings of an eastward ray, and boundary points, in integers."""
    ex = [(_exact(v_lat), _exact(v_lng)) for v_lat, v_lng in vertices]
    lat_low, lat_high = min(v[0] for v in vertices), max(v[0] for v in vertices)
    lng_low, lng_high = min(v[1] for v in vertices), max(v[1] for v in vertices)
    inside: set[int] = set()
    for doc in range(lat.size):
        if not (lat_low <= lat[doc] <= lat_high and lng_low <= lng[doc] <= lng_high):
            continue  # outside the bounding box: neither inside nor on the boundary
        py, px = _exact(lat[doc]), _exact(lng[doc])
        odd, boundary = False, False
        for index, (ay, ax) in enumerate(ex):
            by, bx = ex[(index + 1) % len(ex)]
            cross = (bx - ax) * (py - ay) - (by - ay) * (px - ax)
            if cross == 0 and min(ax, bx) <= px <= max(ax, bx) and min(ay, by) <= py <= max(ay, by):
                boundary = True
                break
            if (ay > py) != (by > py):
                # x of the edge at height py, compared without division: px < ax + (py-ay)(bx-ax)/(by-ay)
                lhs = (px - ax) * (by - ay)
                rhs = (py - ay) * (bx - ax)
                if (lhs < rhs) if by > ay else (lhs > rhs):
                    odd = not odd
        if odd or boundary:
            inside.add(doc)
    return inside


COORD = st.floats(-60, 60, allow_nan=False)


@st.composite
def polygons(draw: Any) -> list[tuple[float, float]]:
    kind = draw(st.sampled_from(["star", "random", "grid", "box"]))
    clat, clng = draw(st.floats(-60, 60)), draw(st.floats(-170, 170))
    if kind == "box":
        height, width = draw(st.floats(0.01, 20)), draw(st.floats(0.01, 20))
        return [(clat, clng), (clat + height, clng), (clat + height, clng + width), (clat, clng + width)]
    count = draw(st.integers(3, 9))
    if kind == "star":  # star-shaped: concave as soon as radii differ
        angles = sorted(draw(st.lists(st.floats(0, 2 * math.pi, exclude_max=True), min_size=count,
                                      max_size=count, unique=True)))
        radii = draw(st.lists(st.floats(0.05, 15), min_size=count, max_size=count))
        return [(max(-90.0, min(90.0, clat + r * math.sin(a))), max(-180.0, min(180.0, clng + r * math.cos(a))))
                for a, r in zip(angles, radii)]
    if kind == "grid":  # vertices on a coarse grid: axis-aligned edges, collinear points
        step = draw(st.sampled_from([0.5, 1.0, 2.0]))
        offsets = draw(st.lists(st.tuples(st.integers(-6, 6), st.integers(-6, 6)), min_size=count, max_size=count))
        return [(round(clat) + a * step, round(clng) + b * step) for a, b in offsets]
    offsets = draw(st.lists(st.tuples(st.floats(-10, 10), st.floats(-10, 10)), min_size=count, max_size=count))
    return [(max(-90.0, min(90.0, clat + a)), max(-180.0, min(180.0, clng + b))) for a, b in offsets]


def _edge_points(vertices: list[tuple[float, float]], fractions: list[float]) -> tuple[list[float], list[float]]:
    """Vertices, edge midpoints and points part-way along edges (on the edge when exact, else near)."""
    lat, lng = [], []
    for index, (ay, ax) in enumerate(vertices):
        by, bx = vertices[(index + 1) % len(vertices)]
        lat.append(ay)
        lng.append(ax)
        for t in fractions:
            lat.append(ay + (by - ay) * t)
            lng.append(ax + (bx - ax) * t)
    return lat, lng


@settings(max_examples=100)
@given(vertices=polygons(), fractions=st.lists(st.floats(0, 1), max_size=3), seed=st.integers(0, 2**32 - 1))
def test_polygon_against_exact_model(points: tuple[np.ndarray, np.ndarray], vertices: list[tuple[float, float]],
                                     fractions: list[float], seed: int) -> None:
    base_lat, base_lng = points
    edge_lat, edge_lng = _edge_points(vertices, [0.5, 0.25, *fractions])
    # Plus random points near the polygon, some snapped to its grid.
    rng = np.random.default_rng(seed)
    v = np.array(vertices)
    near_lat = rng.uniform(v[:, 0].min() - 1, v[:, 0].max() + 1, 300)
    near_lng = rng.uniform(v[:, 1].min() - 1, v[:, 1].max() + 1, 300)
    near_lat[:100], near_lng[:100] = np.round(near_lat[:100] * 2) / 2, np.round(near_lng[:100] * 2) / 2
    lat = np.concatenate([base_lat, np.array(edge_lat), np.clip(near_lat, -90, 90)])
    lng = np.concatenate([base_lng, np.array(edge_lng), np.clip(near_lng, -180, 180)])
    column = GeoColumn()
    column.add(np.arange(lat.size, dtype=np.uint32), lat, lng)
    expected = model_polygon(lat, lng, vertices)
    assert set(column.within_polygon(vertices)) == expected
    # Both ways of testing points (a points × edges matrix, or edge by edge) on every point.
    array = np.array(vertices)
    assert set(np.flatnonzero(geo._points_in_polygon_matrix(lng, lat, array)).tolist()) == expected
    assert set(np.flatnonzero(geo._points_in_polygon_by_edge(lng, lat, array)).tolist()) == expected
    # Every vertex and every exact edge midpoint of an axis-aligned edge is inside (boundary).
    vertex_docs = base_lat.size + np.arange(len(vertices)) * (2 + len(fractions) + 1)
    assert set(vertex_docs.tolist()) <= expected
    # The doc-by-doc path answers the same.
    universe = BitMap(range(0, lat.size, 7)) | BitMap(vertex_docs.tolist())
    assert column.within_polygon(vertices, universe) == BitMap(expected) & universe


def test_snapshot_round_trip(column: GeoColumn, points: tuple[np.ndarray, np.ndarray]) -> None:
    state = msgpack.unpackb(msgpack.packb(column.to_state()))
    restored = GeoColumn.from_state(state)
    docs, lat, lng = restored.pairs()
    original = column.pairs()
    assert np.array_equal(docs, original[0]) and np.array_equal(lat, original[1]) and np.array_equal(lng, original[2])
    assert restored.docs == column.docs
    for clat, clng, radius in [(48.85, 2.35, 800_000.0), (-33.9, 151.2, 3e6), (0.0, 180.0, 5e5)]:
        assert restored.within_circle(clat, clng, radius) == column.within_circle(clat, clng, radius)
        probe = np.arange(points[0].size + 3)
        np.testing.assert_array_equal(restored.distances(probe, clat, clng), column.distances(probe, clat, clng))
