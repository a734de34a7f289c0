"""This module tests the following properties:

- circles: antimeridian crossing both ways, circles holding a pole, radius 0, globe-sized radii,
  docs without a point, an empty column, several writes;
- polygons: boundary (vertices, edges) inside, even-odd for self-intersecting shapes, a concave
  shape, longitudes as given (no wrapping), degenerate (collinear) polygons, exact on-line points;
- distances: NaN without a point, known values; ``nearest`` orders with ties by doc id;
- ``extract_points`` and the state round trip.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from pyroaring import BitMap

from roarsearch.index.geo import (
    EARTH_RADIUS_M,
    GeoColumn,
    _bitmap,
    _bitmap_from_mask,
    extract_points,
    haversine_m,
    nearest,
    points_in_polygon,
)


def make(points: list[tuple[float, float]], first: int = 0) -> GeoColumn:
    column = GeoColumn()
    lat = np.array([p[0] for p in points])
    lng = np.array([p[1] for p in points])
    column.add(np.arange(first, first + len(points), dtype=np.uint32), lat, lng)
    return column


def test_antimeridian_both_ways() -> None:
    column = make([(0.0, 179.99), (0.0, -179.99), (0.0, 179.0), (0.0, -179.0), (0.0, 0.0)])
    km = 1_000.0
    for centre in (180.0, -180.0, 179.995, -179.995):
        assert list(column.within_circle(0.0, centre, 5 * km)) == [0, 1]
    assert list(column.within_circle(0.0, 179.5, 60 * km)) == [0, 1, 2]
    assert list(column.within_circle(0.0, -179.5, 60 * km)) == [0, 1, 3]


def test_circle_holding_a_pole() -> None:
    column = make([(89.9, lng) for lng in (-180.0, -90.0, 0.0, 45.0, 179.0)] + [(89.0, 0.0), (-89.9, 0.0), (90.0, 17.0)])
    # 89.9° N is 11.1 km from the pole; a 20 km circle around (89.95, 0) holds it whole.
    assert list(column.within_circle(89.95, 0.0, 20_000.0)) == [0, 1, 2, 3, 4, 7]
    assert list(column.within_circle(90.0, 0.0, 11_200.0)) == [0, 1, 2, 3, 4, 7]
    assert list(column.within_circle(-90.0, 123.0, 11_200.0)) == [6]


def test_radius_zero_and_globe() -> None:
    column = make([(10.0, 20.0), (10.0, 20.000000001), (-10.0, -160.0)])
    assert list(column.within_circle(10.0, 20.0, 0.0)) == [0]
    assert list(column.within_circle(10.0, 20.0, math.pi * EARTH_RADIUS_M)) == [0, 1, 2]
    assert list(column.within_circle(10.0, 20.0, math.inf)) == [0, 1, 2]
    antipode = float(column.distances(np.array([2]), 10.0, 20.0)[0])
    # Haversine is ill-conditioned at the antipode (arcsin near 1): about 0.2 m of 20,015 km.
    assert antipode == pytest.approx(math.pi * EARTH_RADIUS_M, rel=1e-7)
    assert list(column.within_circle(10.0, 20.0, antipode)) == [0, 1, 2]
    assert list(column.within_circle(10.0, 20.0, antipode * (1 - 1e-9))) == [0, 1]


def test_empty_and_sparse() -> None:
    empty = GeoColumn()
    assert not empty.within_circle(0, 0, 1e7)
    assert not empty.within_polygon([(0, 0), (1, 0), (1, 1)])
    assert np.isnan(empty.distances(np.array([0, 5]), 0, 0)).all()
    column = make([(1.0, 1.0)], first=5)  # docs 0..4 have no point
    assert np.isnan(column.distances(np.array([0, 4, 6, 10_000]), 1, 1)).all()
    assert column.distances(np.array([5]), 1.0, 1.0).tolist() == [0.0]
    assert list(column.within_circle(0, 0, 1e7, BitMap([0, 1, 5, 99]))) == [5]
    assert list(column.within_polygon([(0, 0), (2, 0), (2, 2), (0, 2)], BitMap([0, 5, 99]))) == [5]


def test_several_writes() -> None:
    column = make([(1.0, 1.0), (2.0, 2.0)])
    assert list(column.within_circle(1.0, 1.0, 200_000.0)) == [0, 1]
    column.add(np.array([2, 3], np.uint32), np.array([1.5, 50.0]), np.array([1.5, 50.0]))
    assert list(column.within_circle(1.0, 1.0, 200_000.0)) == [0, 1, 2]
    assert len(column) == 4 and list(column.docs) == [0, 1, 2, 3]
    assert column.pairs()[0].tolist() == [0, 1, 2, 3]


def test_known_distance() -> None:
    # Paris–London along the sphere of mean radius (independently: 343.56 km for R = 6371.0088 km).
    paris_london = haversine_m(48.8566, 2.3522, np.array([51.5074]), np.array([-0.1278]))[0]
    assert paris_london == pytest.approx(343_557.0, abs=1.0)
    quarter = haversine_m(0.0, 0.0, np.array([0.0, 90.0]), np.array([90.0, 0.0]))
    np.testing.assert_allclose(quarter, [math.pi / 2 * EARTH_RADIUS_M] * 2, rtol=1e-12)


SQUARE = [(0.0, 0.0), (0.0, 2.0), (2.0, 2.0), (2.0, 0.0)]


def test_polygon_boundary_is_inside() -> None:
    points = [(0.0, 0.0), (1.0, 0.0), (2.0, 1.0), (1.0, 1.0), (2.0, 2.0), (2.0000001, 1.0), (-1e-300, 1.0),
              (1.0, 2.0), (3.0, 3.0)]
    column = make(points)
    assert list(column.within_polygon(SQUARE)) == [0, 1, 2, 3, 4, 7]


def test_polygon_slanted_edges_exact() -> None:
    triangle = [(0.0, 0.0), (3.0, 3.0), (0.0, 3.0)]  # hypotenuse lat == lng
    on_line = 0.1 * 3  # 0.30000000000000004: lat == lng exactly, so exactly on the edge
    points = [(on_line, on_line), (1.0, 1.0), (1.0, np.nextafter(1.0, 0.0)), (1.0, np.nextafter(1.0, 2.0)), (0.5, 2.0)]
    column = make(points)
    # (1, 1-ulp) is just west of the edge, outside; (1, 1+ulp) just east, inside.
    assert list(column.within_polygon(triangle)) == [0, 1, 3, 4]


def test_polygon_even_odd_and_concave() -> None:
    bowtie = [(0.0, 0.0), (2.0, 2.0), (0.0, 2.0), (2.0, 0.0)]  # edges cross at (1, 1)
    column = make([(0.5, 1.0), (1.5, 1.0), (1.0, 0.5), (1.0, 1.5), (1.0, 1.0)])
    assert list(column.within_polygon(bowtie)) == [2, 3, 4]
    # Overlapping loops: the doubly covered part is outside under even-odd.
    double = [(0.0, 0.0), (0.0, 4.0), (4.0, 4.0), (4.0, 0.0), (0.0, 0.0), (1.0, 1.0), (1.0, 3.0), (3.0, 3.0),
              (3.0, 1.0), (1.0, 1.0)]
    column = make([(2.0, 2.0), (0.5, 0.5), (1.0, 2.0)])
    assert list(column.within_polygon(double)) == [1, 2]
    # A "U": the notch is outside.
    u_shape = [(0.0, 0.0), (0.0, 3.0), (3.0, 3.0), (3.0, 2.0), (1.0, 2.0), (1.0, 1.0), (3.0, 1.0), (3.0, 0.0)]
    column = make([(2.0, 1.5), (0.5, 1.5), (2.0, 0.5), (2.0, 1.0)])
    assert list(column.within_polygon(u_shape)) == [1, 2, 3]


def test_polygon_longitudes_as_given() -> None:
    # From 170° to -170° "eastwards" is, as given, the band from -170° to 170°: no wrapping.
    band = [(-10.0, 170.0), (-10.0, -170.0), (10.0, -170.0), (10.0, 170.0)]
    column = make([(0.0, 175.0), (0.0, 0.0), (0.0, -175.0)])
    assert list(column.within_polygon(band)) == [1]


def test_degenerate_polygon() -> None:
    segment = [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0)]
    column = make([(0.5, 0.5), (0.5, 0.6), (2.0, 2.0), (3.0, 3.0)])
    assert list(column.within_polygon(segment)) == [0, 2]
    repeated = [(1.0, 1.0), (1.0, 1.0), (1.0, 1.0)]
    assert list(column.within_polygon(repeated)) == []
    assert list(make([(1.0, 1.0)]).within_polygon(repeated)) == [0]
    with pytest.raises(ValueError):
        column.within_polygon([(0.0, 0.0), (1.0, 1.0)])


def test_points_in_polygon_helper() -> None:
    inside = points_in_polygon(np.array([1.0, 2.0, 2.1]), np.array([1.0, 2.0, 1.0]), np.array(SQUARE))
    assert inside.tolist() == [True, True, False]


def test_nearest_orders_and_breaks_ties() -> None:
    column = make([(0.0, 1.0), (0.0, -1.0), (0.0, 2.0), (1.0, 0.0), (0.0, 0.5)])
    docs = np.array([0, 1, 2, 3, 4, 9])  # 9 has no point
    order, distance = nearest(column, docs, 0.0, 0.0, 3)
    assert order.tolist() == [4, 0, 1]  # 0, 1 and 3 are all one degree away: doc id breaks the tie
    assert distance[0] == pytest.approx(0.5 * math.pi / 180 * EARTH_RADIUS_M)
    assert nearest(column, docs, 0.0, 0.0, 6)[0].tolist() == [4, 0, 1, 3, 2, 9]
    assert nearest(column, docs, 0.0, 0.0, 2, descending=True)[0].tolist() == [2, 0]
    assert nearest(column, docs, 0.0, 0.0, 6, descending=True)[0].tolist() == [2, 0, 1, 3, 4, 9]
    assert nearest(column, docs, 0.0, 0.0, 0)[0].tolist() == []


def test_extract_points() -> None:
    records = [{"id": 1, "_geo": {"lat": 1.5, "lng": 2}}, {"id": 2}, {"id": 3, "_geo": None},
               {"id": 4, "_geo": {"lng": -3.0, "lat": -4}}]
    positions, lat, lng = extract_points(records)
    assert positions.tolist() == [0, 3] and lat.tolist() == [1.5, -4.0] and lng.tolist() == [2.0, -3.0]


def test_state_version_is_checked() -> None:
    state = make([(1.0, 2.0)]).to_state()
    assert GeoColumn.from_state(dict(state)).pairs()[1].tolist() == [1.0]
    with pytest.raises(ValueError):
        GeoColumn.from_state({**state, "version": 99})


@pytest.mark.parametrize("count", [0, 1, 4096, 4097, 30_000, 200_000])
def test_bitmap_from_mask_matches_ids(count: int) -> None:
    # Array containers (<= 4096 values) and bitsets (more), over several containers.
    rng = np.random.default_rng(count)
    mask = np.zeros(4 * 65536, dtype=bool)
    mask[rng.choice(mask.size, size=count, replace=False)] = True
    mask[70_000:74_097] = count > 0  # one container with exactly 4097 values at its edge
    assert _bitmap_from_mask(mask) == BitMap(np.flatnonzero(mask).tolist())
    docs = np.flatnonzero(mask).astype(np.uint32)
    rng.shuffle(docs)
    assert _bitmap(docs, mask.size - 5) == BitMap(np.flatnonzero(mask).tolist())


def test_differences_for_check() -> None:
    column = make([(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)])
    assert column.differences(np.array([2, 0, 1]), np.array([5.0, 1.0, 3.0]), np.array([6.0, 2.0, 4.0])) == []
    problems = column.differences(np.array([0, 1, 7]), np.array([1.0, 3.5, 0.0]), np.array([2.0, 4.0, 0.0]))
    assert problems == ["geo: 1 docs lack their point (first doc ids [7])",
                        "geo: 1 docs have a point no record holds (first [2])",
                        "geo: 1 docs have another point than their record (first [1])"]
    # Retired docs (outside ``only``) are not compared.
    assert column.differences(np.array([0, 1]), np.array([1.0, 3.0]), np.array([2.0, 4.0]), only=BitMap([0, 1])) == []


def test_polygon_tiny_coordinates_exact() -> None:
    # Differences around 1e-160 underflow when multiplied: the exact path decides them.
    triangle = [(0.0, 0.0), (3e-160, 3e-160), (0.0, 3e-160)]
    column = make([(1e-160, 1e-160), (1e-160, 2e-160), (2e-160, 1e-160), (0.0, 0.0)])
    assert list(column.within_polygon(triangle)) == [0, 1, 3]
