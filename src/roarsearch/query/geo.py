"""The request's ``geo`` object (contract §9): validation into a frozen :class:`GeoQuery`.

Owns: the shape of ``geo`` (``around`` with ``lat``, ``lng`` and an optional ``radius`` in metres;
``polygon`` as 3 or more ``{"lat", "lng"}`` points), every message naming the field, and the rule
that ``_geoDistance`` in ``sort`` or ``numericFacets`` needs ``around``. No index access: the
search pipeline hands :class:`GeoQuery` to :class:`roarsearch.index.geo.GeoColumn`.

Called by ``engine.request.parse_search_request`` (``parse_geo(body["geo"])``) and, with the
parsed sort keys and numeric facet names, :func:`check_distance_uses`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from roarsearch.errors import BadRequestError
from roarsearch.schema import check_coordinate, check_geo_point, describe_value

#: The pseudo-field of distances from ``geo.around``: a result key, a sort key, a numeric facet.
GEO_DISTANCE_FIELD = "_geoDistance"
#: Most vertices of ``geo.polygon`` (the same bound as any array of a request).
MAX_POLYGON_POINTS = 1_000
#: Radii are metres on the ground; nothing is farther than half the circumference, but a larger
#: radius is harmless (it matches every located record), so only finiteness is required.
_AROUND_KEYS = ("lat", "lng", "radius")
_GEO_KEYS = ("around", "polygon")


@dataclass(frozen=True, slots=True)
class GeoAround:
    """A centre in degrees and an optional radius in metres (``None``: measure, do not filter)."""

    lat: float
    lng: float
    radius: float | None = None


@dataclass(frozen=True, slots=True)
class GeoQuery:
    """A validated ``geo``: either part may be absent, never both.

    ``polygon`` holds ``(lat, lng)`` pairs in degrees, in the order given (at least 3).
    """

    around: GeoAround | None = None
    polygon: tuple[tuple[float, float], ...] | None = None

    @property
    def filters(self) -> bool:
        """Whether the query restricts the records (a radius or a polygon), not only measures."""
        return self.polygon is not None or (self.around is not None and self.around.radius is not None)


def _is_empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def parse_geo(value: Any) -> GeoQuery | None:
    """Validate a request's ``geo`` and return it, or ``None`` when it is absent or empty.

    >>> parse_geo({"around": {"lat": 48.85, "lng": 2.35, "radius": 5000}})
    GeoQuery(around=GeoAround(lat=48.85, lng=2.35, radius=5000.0), polygon=None)
    >>> parse_geo(None) is None
    True
    >>> parse_geo({"around": {"lat": "48.85", "lng": 2.35}})
    Traceback (most recent call last):
    ...
    roarsearch.errors.BadRequestError: BadRequestError(status=400, data='geo.around.lat: must be a number between -90 and 90, got string "48.85"')
    """
    if _is_empty(value):
        return None
    if not isinstance(value, dict):
        raise BadRequestError(
            'geo: must be an object like {"around": {"lat": 48.85, "lng": 2.35, "radius": 5000}} or '
            f'{{"polygon": [{{"lat": ..., "lng": ...}}, ...]}}, got {describe_value(value)}', field="geo"
        )
    for key in value:
        if key not in _GEO_KEYS:
            raise BadRequestError(f"geo.{key}: unknown field; expected 'around' or 'polygon'", field="geo")
    around = None if value.get("around") is None else _parse_around(value["around"])
    polygon = None if value.get("polygon") is None else _parse_polygon(value["polygon"])
    if around is None and polygon is None:
        return None
    return GeoQuery(around=around, polygon=polygon)


def _parse_around(value: Any) -> GeoAround:
    if not isinstance(value, dict):
        raise BadRequestError(
            'geo.around: must be an object like {"lat": 48.85, "lng": 2.35, "radius": 5000}, '
            f"got {describe_value(value)}", field="geo"
        )
    for key in value:
        if key not in _AROUND_KEYS:
            raise BadRequestError(f"geo.around.{key}: unknown field; expected 'lat', 'lng' or 'radius'", field="geo")
    for key in ("lat", "lng"):
        if value.get(key) is None:
            raise BadRequestError(f"geo.around.{key}: is required", field="geo")
    lat = check_coordinate(value["lat"], "geo.around.lat", 90.0, "geo")
    lng = check_coordinate(value["lng"], "geo.around.lng", 180.0, "geo")
    radius = value.get("radius")
    if radius is None:
        return GeoAround(lat, lng, None)
    if (isinstance(radius, bool) or not isinstance(radius, (int, float))
            or (isinstance(radius, float) and not math.isfinite(radius)) or radius < 0):
        raise BadRequestError(
            f"geo.around.radius: must be a number of metres, 0 or more, got {describe_value(radius)}", field="geo"
        )
    try:
        return GeoAround(lat, lng, float(radius))
    except OverflowError:  # an integer beyond float range: farther than anything on Earth
        return GeoAround(lat, lng, math.inf)


def _parse_polygon(value: Any) -> tuple[tuple[float, float], ...]:
    if not isinstance(value, (list, tuple)):
        raise BadRequestError(
            f'geo.polygon: must be an array of 3 or more points like {{"lat": 48.85, "lng": 2.35}}, '
            f"got {describe_value(value)}", field="geo"
        )
    if len(value) < 3:
        raise BadRequestError(f"geo.polygon: must have at least 3 points, got {len(value)}", field="geo")
    if len(value) > MAX_POLYGON_POINTS:
        raise BadRequestError(
            f"geo.polygon: must have at most {MAX_POLYGON_POINTS} points, got {len(value)}", field="geo"
        )
    return tuple(check_geo_point(point, f"geo.polygon[{position}]", "geo") for position, point in enumerate(value))


def check_distance_uses(geo: GeoQuery | None, sort_fields: Iterable[str], numeric_facet_fields: Iterable[str]) -> None:
    """Raise a 400 when ``_geoDistance`` is sorted on or faceted without ``geo.around``.

    ``sort_fields`` are the field names of the parsed sort keys (no ``-`` or ``:asc``).
    """
    if geo is not None and geo.around is not None:
        return
    if any(name == GEO_DISTANCE_FIELD for name in sort_fields):
        raise BadRequestError(f"sort: {GEO_DISTANCE_FIELD} needs geo.around (the point distances are measured from)",
                              field="sort")
    if any(name == GEO_DISTANCE_FIELD for name in numeric_facet_fields):
        raise BadRequestError(
            f"numericFacets.{GEO_DISTANCE_FIELD}: needs geo.around (the point distances are measured from)",
            field="numericFacets",
        )
