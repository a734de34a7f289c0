"""Geo points of one collection: the ``_geo`` column (contract §9).

Owns: one point (latitude, longitude in degrees) per doc id, the spatial view that answers radius
and polygon queries, and exact great-circle distances. Callers: the index writer (``add`` with the
points of a batch, :func:`extract_points`), the search pipeline (``within_circle``,
``within_polygon``, ``distances``), snapshots (``to_state``/``from_state``) and ``check()``
(``pairs``).

Invariants:

- Append-only, at most one point per doc id: an upsert gives the record a new doc id and a delete
  only clears ``alive``, so every reader intersects with the alive docs (results here include
  retired docs unless ``universe`` excludes them).
- Distance is the haversine great-circle distance on a sphere of :data:`EARTH_RADIUS_M`, computed by
  one function (:func:`_haversine`) from the stored degrees. A point is inside a circle exactly
  when that computed distance is ``<= radius``; ``distances`` returns the same numbers, so
  ``_geoDistance`` and the filter never disagree.
- Everything spatial is a *prefilter*: strips and bounding boxes are widened by a margin far
  larger than any rounding, the unit-vector test settles only points well away from the circle's
  edge, and the haversine (or the exact polygon test) decides the rest.

The spatial view (built lazily once, then extended by the points each write adds — new docs come
after every old one) orders the
points by ``(latitude strip, longitude)``, strips being :data:`STRIP_DEGREES` high. A query's
bounding box becomes, for each strip it touches, one or two longitude slices found by binary
search on a single composite key, so the work is proportional to the points near the area.
Memory: 16 bytes per doc id (dense degrees) plus 52 per point (the view).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import GrowableArray, array_from_bitmap, bitmap_from_array
from roarsearch.schema import record_location

#: Mean Earth radius (IUGG), the sphere of contract §9.
EARTH_RADIUS_M = 6_371_008.8
#: Height of a latitude strip of the spatial view. Smaller strips cut the candidates of a small
#: circle closer to its bounding box; larger ones mean fewer binary searches for a large one.
#: A quarter degree (~28 km) keeps both under a few hundred searches per query.
STRIP_DEGREES = 0.25
#: A universe (candidates from words or filters) at most this large is tested doc by doc without
#: consulting the spatial view.
UNIVERSE_CHECK_THRESHOLD = 2_048
#: A larger universe is tested doc by doc only when the spatial candidates of the area outnumber it
#: this many times: a doc of the universe costs a haversine on randomly placed memory, a spatial
#: candidate one mask lookup (measured at 1M points: about 130 ns against 5 ns).
UNIVERSE_COST_RATIO = 16
#: Results holding more than 1/this of the doc id space are collected through a dense boolean mask
#: (sorted doc ids for free) instead of sorting the candidate doc ids.
DENSE_RESULT_FRACTION = 16
#: Widening of every prefilter (metres on the ground; radians for the angular forms below). The
#: exact test decides; this only has to exceed the rounding of the haversine formula (nanometres
#: for circles narrower than a hemisphere; wider ones hold a pole and take every longitude).
_MARGIN_M = 1.0
_MARGIN_RAD = _MARGIN_M / EARTH_RADIUS_M
_MARGIN_DEG = math.degrees(_MARGIN_RAD)
#: Band around a circle's edge (metres) where the unit-vector prefilter defers to the haversine:
#: the dot product of unit vectors and the haversine each err by well under 1 m (worst at the
#: antipode, where both are ill-conditioned), so outside the band their verdicts agree.
_CHORD_BAND_M = 10.0
_COSINE_SLACK = 1e-12
#: Slices at least this long on average are scanned in place (a loop over slices); shorter ones
#: are gathered into one index array (one numpy call per step, whatever the number of slices).
MIN_RUN = 64
#: Composite key stride: longitudes shifted into [0, 360] never reach the next strip's range.
_KEY_STRIDE = 512.0
_N_STRIPS = int(math.ceil(180.0 / STRIP_DEGREES))
#: Shewchuk's error bound for the float orientation determinant: beyond it the sign is exact.
_ORIENT_ERROR = (3.0 + 16.0 * 2.0**-53) * 2.0**-53
_TINY = 1e-280
#: Points × edges at most this large are tested in one matrix pass (few numpy calls); larger
#: candidate sets go edge by edge, each edge over the points level with it.
MATRIX_CELLS = 1 << 16


def _haversine(lat1: float, lng1: float, lat2: np.ndarray, lng2: np.ndarray) -> np.ndarray:
    """Great-circle distances in metres from one point to many, all in degrees.

    The one distance of this module: filters, ``distances`` and :func:`haversine_m` all call it on
    the same stored degrees, so their numbers agree bit for bit.
    """
    lat1_rad = math.radians(lat1)
    lat2_rad = np.radians(lat2)
    half_dlat = np.sin((lat2_rad - lat1_rad) * 0.5)
    half_dlng = np.sin((np.radians(lng2) - math.radians(lng1)) * 0.5)
    h = half_dlat * half_dlat + (math.cos(lat1_rad) * np.cos(lat2_rad)) * (half_dlng * half_dlng)
    # Rounding can push h a hair above 1 for antipodal points; arcsin would return NaN.
    np.clip(h, 0.0, 1.0, out=h)
    return np.asarray((2.0 * EARTH_RADIUS_M) * np.arcsin(np.sqrt(h)), dtype=np.float64)


def haversine_m(lat1: float, lng1: float, lat2: np.ndarray, lng2: np.ndarray) -> np.ndarray:
    """Distances in metres from (lat1, lng1) to each (lat2, lng2), all in degrees.

    The very function the column uses, so the numbers agree bit for bit with
    :meth:`GeoColumn.distances`.

    >>> round(float(haversine_m(48.8566, 2.3522, np.array([51.5074]), np.array([-0.1278]))[0]))
    343557
    """
    return _haversine(lat1, lng1, np.asarray(lat2, dtype=np.float64), np.asarray(lng2, dtype=np.float64))


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for every (s, e), without a Python loop."""
    lengths = ends - starts
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0, dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    index: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)
    return index


def _bitmap(docs: np.ndarray, id_space: int) -> AbstractBitMap:
    """A bitmap of unsorted, distinct doc ids: built from a dense mask when many, a sort when few."""
    if docs.size * DENSE_RESULT_FRACTION > id_space:
        mask = np.zeros(-(-id_space // _CONTAINER) * _CONTAINER, dtype=bool)
        mask[docs] = True
        return _bitmap_from_mask(mask)
    return bitmap_from_array(np.sort(docs))


_CONTAINER = 1 << 16  # doc ids per roaring container
_ARRAY_CONTAINER_MAX = 4096  # beyond this many values a container is a bitset
_NO_RUN_COOKIE = 12346


def _bitmap_from_mask(mask: np.ndarray) -> AbstractBitMap:
    """The bitmap of a boolean mask (length a multiple of 65,536), in roaring's portable format.

    Large results are where building a AbstractBitMap costs most (sorted ids copied through an
    ``array.array``: ~2 ms for 200k ids); here a dense container is one ``packbits`` and the
    whole bitmap one ``deserialize``. Format: cookie 12346 and container count (uint32 each);
    per container its key and cardinality - 1 (uint16 each); per container its byte offset
    (uint32); then each container, sorted uint16 values (at most 4096) or a 1024-word bitset.
    """
    blocks = mask.reshape(-1, _CONTAINER)
    counts = np.count_nonzero(blocks, axis=1)
    keys = np.flatnonzero(counts)
    descriptive = np.empty(keys.size * 2, dtype="<u2")
    descriptive[0::2] = keys
    descriptive[1::2] = counts[keys] - 1
    bodies = []
    for key in keys.tolist():  # one step per 65,536 doc ids
        if counts[key] > _ARRAY_CONTAINER_MAX:
            bodies.append(np.packbits(blocks[key], bitorder="little").tobytes())
        else:
            bodies.append(np.flatnonzero(blocks[key]).astype("<u2").tobytes())
    sizes = np.fromiter((len(body) for body in bodies), dtype=np.int64, count=len(bodies))
    offsets = 8 + 8 * keys.size + np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    header = np.array([_NO_RUN_COOKIE, keys.size], dtype="<u4").tobytes()
    return BitMap.deserialize(b"".join([header, descriptive.tobytes(), offsets.astype("<u4").tobytes(), *bodies]))


class GeoColumn:
    """The ``_geo`` points of one collection, by doc id.

    >>> column = GeoColumn()
    >>> column.add(np.array([0, 1, 2], np.uint32), np.array([48.8566, 51.5074, 40.7128]),
    ...            np.array([2.3522, -0.1278, -74.006]))
    >>> list(column.within_circle(48.85, 2.35, 500_000))
    [0, 1]
    >>> column.distances(np.array([1, 7]), 48.8566, 2.3522).round().tolist()
    [343557.0, nan]
    """

    __slots__ = ("_flat", "_view", "_lat_by_doc", "_lng_by_doc", "docs")

    def __init__(self) -> None:
        self._flat: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._view: _SpatialView | None = None
        # Dense per-doc degrees (NaN where a doc has no point): the only copy of the points. The
        # spatial view is derived from them, and small universes read them in doc order.
        self._lat_by_doc = GrowableArray(np.float64, np.nan)
        self._lng_by_doc = GrowableArray(np.float64, np.nan)
        #: Docs having a point (retired ones included).
        self.docs = BitMap()

    def __len__(self) -> int:
        return len(self.docs)

    # -- writes -------------------------------------------------------------------------------

    def add(self, docs: np.ndarray, lat: np.ndarray, lng: np.ndarray) -> None:
        """Add one point per doc (degrees, already validated: lat in [-90, 90], lng in [-180, 180]).

        Each doc id is new (doc ids are never reused), so a doc holds at most one point; adding a
        doc again replaces its point.
        """
        docs = np.asarray(docs, dtype=np.uint32)
        if docs.size == 0:
            return
        lat = np.asarray(lat, dtype=np.float64)
        lng = np.asarray(lng, dtype=np.float64)
        if not (docs.shape == lat.shape == lng.shape):
            raise ValueError("docs, lat and lng must have the same length")
        if self.docs and not int(docs.min()) > self.docs.max():
            # A point replaced, or docs out of order: the views are made again, not extended.
            self._flat = None
            self._view = None
        top = int(docs.max()) + 1
        self._lat_by_doc.ensure(top)
        self._lng_by_doc.ensure(top)
        self._lat_by_doc.data[docs] = lat
        self._lng_by_doc.data[docs] = lng
        self.docs |= bitmap_from_array(docs)

    # -- reads --------------------------------------------------------------------------------

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(docs uint32, lat float64, lng float64) of every point, in doc order (degrees)."""
        flat = self._flat
        if flat is None:
            flat = self._points_after(-1)
        elif flat[0].size != len(self.docs):
            added = self._points_after(int(flat[0][-1]) if flat[0].size else -1)
            flat = (np.concatenate((flat[0], added[0])), np.concatenate((flat[1], added[1])),
                    np.concatenate((flat[2], added[2])))
        self._flat = flat
        return flat

    def _points_after(self, last_doc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(docs, lat, lng) of the points of docs after ``last_doc``, in doc order."""
        docs = self.docs
        if last_doc >= 0 and docs:
            docs = docs & BitMap(range(last_doc + 1, docs.max() + 1))
        ids = array_from_bitmap(docs)
        return ids, self._lat_by_doc.data[ids], self._lng_by_doc.data[ids]

    def _spatial(self) -> _SpatialView:
        view = self._view
        if view is None:
            docs, lat, lng = self.pairs()
            view = _SpatialView(docs, lat, lng)
        elif view.docs.size != len(self.docs):
            view = view.extended(*self._points_after(view.last_doc))
        self._view = view
        return view

    def distances(self, docs: np.ndarray, lat: float, lng: float) -> np.ndarray:
        """Exact distances in metres from (lat, lng) to each doc's point; NaN where a doc has none.

        ``docs`` may be in any order and hold any doc id (unknown ones give NaN).
        """
        docs = np.asarray(docs, dtype=np.int64)
        known = (docs >= 0) & (docs < self._lat_by_doc.data.size)
        result = np.full(docs.shape, np.nan)
        chosen = docs[known]
        # A doc without a point holds NaN degrees, and NaN goes through as NaN.
        result[known] = _haversine(lat, lng, self._lat_by_doc.data[chosen], self._lng_by_doc.data[chosen])
        return result

    def within_circle(self, lat: float, lng: float, radius_m: float, universe: AbstractBitMap | None = None) -> AbstractBitMap:
        """Docs whose point is at most ``radius_m`` metres (great circle) from (lat, lng).

        Args:
            lat, lng: the centre in degrees (validated by the caller).
            radius_m: metres, ``>= 0`` (``inf`` allowed); 0 matches points at distance exactly 0.
            universe: when given, only these docs are considered. A universe much smaller than the
                points near the circle is tested doc by doc; otherwise the spatial candidates are
                filtered by it before any distance is computed.
        Returns:
            The docs inside, retired docs included unless ``universe`` excludes them.
        """
        if not self.docs or (universe is not None and not universe):
            return BitMap()
        if universe is not None and len(universe) <= UNIVERSE_CHECK_THRESHOLD:
            return self._circle_check(array_from_bitmap(universe), lat, lng, radius_m)
        view = self._spatial()
        starts, ends = view.circle_slices(lat, lng, radius_m)
        if universe is not None and len(universe) * UNIVERSE_COST_RATIO <= int((ends - starts).sum()):
            return self._circle_check(array_from_bitmap(universe), lat, lng, radius_m)
        candidates = int((ends - starts).sum())
        if universe is not None and candidates > len(universe):
            # Many candidates: drop those outside the universe before measuring any distance.
            index = self._restrict(view, _ranges(starts, ends), universe)
            return _bitmap(view.circle_test(index, lat, lng, radius_m), self._lat_by_doc.data.size)
        result = _bitmap(view.circle_test_slices(starts, ends, lat, lng, radius_m), self._lat_by_doc.data.size)
        if universe is not None:
            result &= universe
        return result

    def within_polygon(self, points: list[tuple[float, float]] | np.ndarray, universe: AbstractBitMap | None = None) -> AbstractBitMap:
        """Docs whose point is inside the polygon or on its boundary.

        Args:
            points: ``(lat, lng)`` vertices in degrees, at least 3, in order (closing edge implied).
                Edges are straight lines in latitude/longitude; longitudes are taken as given (no
                wrapping at ±180°); the even-odd rule decides self-intersecting polygons.
            universe: as for :meth:`within_circle`.
        """
        vertices = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        if vertices.shape[0] < 3:
            raise ValueError("a polygon needs at least 3 points")
        if not self.docs or (universe is not None and not universe):
            return BitMap()
        if universe is not None and len(universe) <= UNIVERSE_CHECK_THRESHOLD:
            return self._polygon_check(array_from_bitmap(universe), vertices)
        view = self._spatial()
        starts, ends = view.box_slices(float(vertices[:, 0].min()), float(vertices[:, 0].max()),
                                       [(float(vertices[:, 1].min()), float(vertices[:, 1].max()))])
        if universe is not None and len(universe) * UNIVERSE_COST_RATIO <= int((ends - starts).sum()):
            return self._polygon_check(array_from_bitmap(universe), vertices)
        candidates = int((ends - starts).sum())
        index = _ranges(starts, ends)
        if universe is not None and candidates > len(universe):
            index = self._restrict(view, index, universe)
        inside = points_in_polygon(view.lat[index], view.lng[index], vertices)
        result = _bitmap(view.docs[index[inside]], self._lat_by_doc.data.size)
        if universe is not None and candidates <= len(universe):
            result &= universe
        return result

    def _restrict(self, view: _SpatialView, index: np.ndarray, universe: AbstractBitMap | None) -> np.ndarray:
        """Drop the candidates outside ``universe`` (a dense mask: one lookup per candidate)."""
        if universe is None:
            return index
        mask = np.zeros(self._lat_by_doc.data.size, dtype=bool)
        members = array_from_bitmap(universe)
        mask[members[members < mask.size]] = True
        kept: np.ndarray = index[mask[view.docs[index]]]
        return kept

    def _circle_check(self, docs: np.ndarray, lat: float, lng: float, radius_m: float) -> AbstractBitMap:
        docs = docs[docs < self._lat_by_doc.data.size]
        return bitmap_from_array(docs[_haversine(lat, lng, self._lat_by_doc.data[docs],
                                                 self._lng_by_doc.data[docs]) <= radius_m])  # NaN: False

    def _polygon_check(self, docs: np.ndarray, vertices: np.ndarray) -> AbstractBitMap:
        docs = docs[docs < self._lat_by_doc.data.size]
        lat, lng = self._lat_by_doc.data[docs], self._lng_by_doc.data[docs]
        has_point = ~np.isnan(lat)
        docs, lat, lng = docs[has_point], lat[has_point], lng[has_point]
        return bitmap_from_array(docs[points_in_polygon(lat, lng, vertices)])

    def differences(self, docs: np.ndarray, lat: np.ndarray, lng: np.ndarray, only: AbstractBitMap | None = None,
                    limit: int = 10) -> list[str]:
        """For ``check()``: how this column differs from points rebuilt from the stored records.

        ``docs``/``lat``/``lng`` are the expected points (any order); ``only`` limits the comparison
        to these docs (the alive ones, when retired records are no longer stored). Returns at
        most ``limit`` messages, empty when the points agree exactly.
        """
        expected_docs = np.asarray(docs, dtype=np.uint32)
        order = np.argsort(expected_docs, kind="stable")
        expected = (expected_docs[order], np.asarray(lat, np.float64)[order], np.asarray(lng, np.float64)[order])
        have = self.pairs()
        if only is not None:
            scope = array_from_bitmap(only)
            have = tuple(part[np.isin(have[0], scope)] for part in have)  # type: ignore[assignment]
            expected = tuple(part[np.isin(expected[0], scope)] for part in expected)  # type: ignore[assignment]
        problems: list[str] = []
        missing = np.setdiff1d(expected[0], have[0])
        extra = np.setdiff1d(have[0], expected[0])
        if missing.size:
            problems.append(f"geo: {missing.size} docs lack their point (first doc ids {missing[:limit].tolist()})")
        if extra.size:
            problems.append(f"geo: {extra.size} docs have a point no record holds (first {extra[:limit].tolist()})")
        common, mine, theirs = np.intersect1d(have[0], expected[0], assume_unique=True, return_indices=True)
        wrong = common[(have[1][mine] != expected[1][theirs]) | (have[2][mine] != expected[2][theirs])]
        if wrong.size:
            problems.append(f"geo: {wrong.size} docs have another point than their record (first {wrong[:limit].tolist()})")
        return problems[:limit]

    # -- snapshots ----------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """msgpack-ready state: ``{"version": 1, "docs": <uint32 LE>, "lat": <float64 LE>,
        "lng": <float64 LE>}`` (raw buffers, doc order, degrees)."""
        docs, lat, lng = self.pairs()
        return {"version": GEO_STATE_VERSION, "docs": _bytes(docs.astype("<u4")),
                "lat": _bytes(lat.astype("<f8")), "lng": _bytes(lng.astype("<f8"))}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> GeoColumn:
        """Rebuild from :meth:`to_state` output (the derived views are rebuilt on first use)."""
        if state.get("version") != GEO_STATE_VERSION:
            raise ValueError(f"unsupported geo state version {state.get('version')!r}")
        column = cls()
        column.add(np.frombuffer(state["docs"], dtype="<u4").astype(np.uint32),
                   np.frombuffer(state["lat"], dtype="<f8").astype(np.float64),
                   np.frombuffer(state["lng"], dtype="<f8").astype(np.float64))
        return column


GEO_STATE_VERSION = 1


def _bytes(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def _keyed(lat: np.ndarray, lng: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Points' composite keys, their stable order and unit vectors (in the points' order)."""
    key = _strip(lat) * _KEY_STRIDE + (lng + 180.0)
    lat_rad, lng_rad = np.radians(lat), np.radians(lng)
    cos_lat = np.cos(lat_rad)
    return key, np.argsort(key, kind="stable"), cos_lat * np.cos(lng_rad), cos_lat * np.sin(lng_rad), np.sin(lat_rad)


class _SpatialView:
    """The points ordered by (latitude strip, longitude), with a composite key for slicing, and
    their unit vectors (a chord length costs 3 multiplications, a haversine 4 transcendental calls).
    """

    __slots__ = ("key", "docs", "lat", "lng", "x", "y", "z", "last_doc")

    def __init__(self, docs: np.ndarray, lat: np.ndarray, lng: np.ndarray) -> None:
        """The view of points given in doc order (ties of the key stay in doc order)."""
        key, order, x, y, z = _keyed(lat, lng)
        self.key = key[order]
        self.docs = docs[order]
        self.lat = lat[order]
        self.lng = lng[order]
        self.x, self.y, self.z = x[order], y[order], z[order]
        #: The last doc covered: points of later docs are merged in by :meth:`extended`.
        self.last_doc = int(docs[-1]) if docs.size else -1

    def extended(self, docs: np.ndarray, lat: np.ndarray, lng: np.ndarray) -> _SpatialView:
        """This view with points of later docs (in doc order) merged in: each goes after the
        points of an equal key, as the stable sort of all the points in doc order places it."""
        key, order, x, y, z = _keyed(lat, lng)
        at = np.searchsorted(self.key, key[order], side="right")
        merged = object.__new__(_SpatialView)
        for name, new in (("key", key), ("docs", docs), ("lat", lat), ("lng", lng), ("x", x), ("y", y), ("z", z)):
            setattr(merged, name, np.insert(getattr(self, name), at, new[order]))
        merged.last_doc = int(docs[-1]) if docs.size else self.last_doc
        return merged

    def box_slices(self, lat_low: float, lat_high: float,
                   lng_intervals: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the slices holding every point of the box (and a few more)."""
        first = int(_strip(np.array([lat_low]))[0])
        last = int(_strip(np.array([lat_high]))[0])
        strips = np.arange(first, last + 1, dtype=np.float64) * _KEY_STRIDE
        lows = np.concatenate([strips + (low + 180.0) for low, _high in lng_intervals])
        highs = np.concatenate([strips + (high + 180.0) for _low, high in lng_intervals])
        return (np.searchsorted(self.key, lows, side="left").astype(np.int64),
                np.searchsorted(self.key, highs, side="right").astype(np.int64))

    def circle_slices(self, lat: float, lng: float, radius_m: float) -> tuple[np.ndarray, np.ndarray]:
        """Slices covering the circle's bounding box, widened by the margin (see module doc)."""
        angle = radius_m / EARTH_RADIUS_M + _MARGIN_RAD
        lat_rad = math.radians(lat)
        low, high = lat_rad - angle, lat_rad + angle
        if low <= -math.pi / 2 or high >= math.pi / 2:
            # The widened circle holds a pole: every longitude above (or below) the band's edge.
            return self.box_slices(math.degrees(max(low, -math.pi / 2)), math.degrees(min(high, math.pi / 2)),
                                   [(-180.0, 180.0)])
        # Widest longitude reach of a circle that holds no pole (|lat| + angle < 90°, so ratio < 1).
        ratio = math.sin(angle) / math.cos(lat_rad)
        reach = math.degrees(math.asin(min(ratio, 1.0))) + _MARGIN_DEG
        west, east = lng - reach, lng + reach
        if reach >= 180.0:
            intervals = [(-180.0, 180.0)]
        elif west < -180.0:  # crosses the antimeridian westwards: two intervals
            intervals = [(-180.0, east), (west + 360.0, 180.0)]
        elif east > 180.0:
            intervals = [(west, 180.0), (-180.0, east - 360.0)]
        else:
            intervals = [(west, east)]
        return self.box_slices(math.degrees(low), math.degrees(high), intervals)

    def circle_test(self, index: np.ndarray, lat: float, lng: float, radius_m: float) -> np.ndarray:
        """Doc ids of the candidates at ``index`` whose haversine distance is at most ``radius_m``."""
        centre, surely_in, surely_out = _circle_bounds(lat, lng, radius_m)
        cosine = self.x[index] * centre[0]
        cosine += self.y[index] * centre[1]
        cosine += self.z[index] * centre[2]
        inside = cosine > surely_in
        doubtful = np.flatnonzero(~inside & (cosine >= surely_out))
        if doubtful.size:
            near = index[doubtful]
            inside[doubtful] = _haversine(lat, lng, self.lat[near], self.lng[near]) <= radius_m
        found: np.ndarray = self.docs[index[inside]]
        return found

    def circle_test_slices(self, starts: np.ndarray, ends: np.ndarray, lat: float, lng: float,
                           radius_m: float) -> np.ndarray:
        """:meth:`circle_test` over whole slices: long runs are read in place, without gathering."""
        lengths = ends - starts
        keep = lengths > 0
        starts, ends = starts[keep], ends[keep]
        total = int((ends - starts).sum())
        if starts.size == 0 or total < starts.size * MIN_RUN:
            return self.circle_test(_ranges(starts, ends), lat, lng, radius_m)
        centre, surely_in, surely_out = _circle_bounds(lat, lng, radius_m)
        found: list[np.ndarray] = []
        doubtful: list[np.ndarray] = []
        for start, end in zip(starts.tolist(), ends.tolist()):  # one pass per slice, not per point
            cosine = self.x[start:end] * centre[0]
            cosine += self.y[start:end] * centre[1]
            cosine += self.z[start:end] * centre[2]
            inside = cosine > surely_in
            found.append(self.docs[start:end][inside])
            doubtful.append(np.flatnonzero(~inside & (cosine >= surely_out)) + start)
        near = np.concatenate(doubtful)
        if near.size:
            found.append(self.docs[near[_haversine(lat, lng, self.lat[near], self.lng[near]) <= radius_m]])
        return np.concatenate(found)


def _circle_bounds(lat: float, lng: float, radius_m: float) -> tuple[tuple[float, float, float], float, float]:
    """The centre's unit vector and the cosine bounds of the chord prefilter.

    A point whose cosine to the centre (dot product of unit vectors) exceeds ``surely_in`` is more
    than :data:`_CHORD_BAND_M` inside the circle; one below ``surely_out`` is more than that
    outside. Both verdicts hold for the haversine too: the dot product errs by under 1e-15 and the
    haversine by well under a metre, while the band is 10 m wide (``_COSINE_SLACK`` covers the
    flat ends of the cosine, at 0 and at the antipode). Points in between get the haversine.
    """
    lat_rad, lng_rad = math.radians(lat), math.radians(lng)
    cos_lat = math.cos(lat_rad)
    centre = (cos_lat * math.cos(lng_rad), cos_lat * math.sin(lng_rad), math.sin(lat_rad))
    angle = radius_m / EARTH_RADIUS_M
    band = (_CHORD_BAND_M + radius_m * 1e-9) / EARTH_RADIUS_M
    if math.isinf(radius_m) or angle - band >= math.pi:
        surely_in = -math.inf  # the circle holds the whole sphere
    elif angle > band:
        surely_in = math.cos(angle - band) + _COSINE_SLACK
    else:
        surely_in = math.inf  # a circle narrower than the band: the haversine decides every point
    surely_out = math.cos(min(angle + band, math.pi)) - _COSINE_SLACK
    return centre, surely_in, surely_out


def _strip(lat: np.ndarray) -> np.ndarray:
    return np.clip(np.floor((lat + 90.0) / STRIP_DEGREES), 0, _N_STRIPS - 1)


def _orientation(ax: float | np.ndarray, ay: float | np.ndarray, bx: float | np.ndarray, by: float | np.ndarray,
                 px: np.ndarray, py: np.ndarray) -> np.ndarray:
    """Exact sign (-1, 0, 1) of the orientation of (a, b, p) for each p: 1 when p is left of a→b.

    The float determinant's sign is certain beyond Shewchuk's error bound; the rare points within
    it (those on the line a→b, up to rounding) are decided in exact rational arithmetic.
    """
    left = (ax - px) * (by - py)
    right = (ay - py) * (bx - px)
    determinant = left - right
    sign: np.ndarray = np.sign(determinant).astype(np.int8)
    # Products with an exactly zero factor are exact; both exact means the determinant is exact.
    left_zero = ((ax - px) == 0) | ((by - py) == 0)
    right_zero = ((ay - py) == 0) | ((bx - px) == 0)
    # The bound assumes no underflow: a product of nonzero factors this small is decided exactly.
    underflow = ((np.abs(left) < _TINY) & ~left_zero) | ((np.abs(right) < _TINY) & ~right_zero)
    doubtful = np.flatnonzero(  # positions in the flattened (broadcast) shape
        ((np.abs(determinant) <= _ORIENT_ERROR * (np.abs(left) + np.abs(right))) & ~(left_zero & right_zero))
        | underflow
    )
    if doubtful.size:
        shape = determinant.shape
        flat_sign = sign.reshape(-1)
        coordinates = [np.broadcast_to(np.asarray(value, dtype=np.float64), shape).reshape(-1)
                       for value in (ax, ay, bx, by, px, py)]
        for position in doubtful.tolist():  # only points on an edge's line, up to rounding
            fa_x, fa_y, fb_x, fb_y, fx, fy = (Fraction(float(values[position])) for values in coordinates)
            value = (fa_x - fx) * (fb_y - fy) - (fa_y - fy) * (fb_x - fx)
            flat_sign[position] = (value > 0) - (value < 0)
        sign = flat_sign.reshape(shape)
    return sign


def points_in_polygon(lat: np.ndarray, lng: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Boolean mask: which points are inside the polygon (even-odd) or on its boundary.

    Exact for every float input: a point on an edge or a vertex is inside. ``vertices`` is an
    ``(n, 2)`` array of (lat, lng). x is longitude and y latitude; the ray goes east. A few
    candidates are tested against every edge at once (a points × edges matrix: a constant number
    of numpy calls); many are tested edge by edge.

    >>> square = np.array([[0.0, 0.0], [0.0, 2.0], [2.0, 2.0], [2.0, 0.0]])
    >>> points_in_polygon(np.array([1.0, 0.0, 3.0]), np.array([1.0, 1.0, 1.0]), square).tolist()
    [True, True, False]
    """
    px, py = np.asarray(lng, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    if px.size * vertices.shape[0] > MATRIX_CELLS:
        return _points_in_polygon_by_edge(px, py, vertices)
    return _points_in_polygon_matrix(px, py, vertices)


def _points_in_polygon_matrix(px: np.ndarray, py: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Every point against every edge in one (points × edges) pass; the same tests as by edge."""
    ay, ax = vertices[:, 0], vertices[:, 1]
    following = np.arange(1, ay.size + 1) % ay.size
    by, bx = ay[following], ax[following]
    proper = (ax != bx) | (ay != by)
    if not proper.any():  # every vertex the same point
        same: np.ndarray = (px == ax[0]) & (py == ay[0])
        return same
    # A zero-length edge crosses nothing, and its point is an endpoint of a neighbouring edge.
    ay, ax, by, bx = ay[proper], ax[proper], by[proper], bx[proper]
    x, y = px[:, None], py[:, None]
    orientation = _orientation(ax, ay, bx, by, x, y)
    boundary = ((orientation == 0) & (x >= np.minimum(ax, bx)) & (x <= np.maximum(ax, bx))
                & (y >= np.minimum(ay, by)) & (y <= np.maximum(ay, by)))
    straddles = (ay > y) != (by > y)
    crossings = straddles & (orientation == np.where(by > ay, 1, -1))
    inside: np.ndarray = (np.count_nonzero(crossings, axis=1) % 2 == 1) | boundary.any(axis=1)
    return inside


def _points_in_polygon_by_edge(px: np.ndarray, py: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Edge by edge, each step over the points level with the edge (large candidate sets)."""
    inside = np.zeros(px.shape, dtype=bool)
    boundary = np.zeros(px.shape, dtype=bool)
    count = vertices.shape[0]
    for edge in range(count):  # a loop over edges; every step is vectorised over the points
        ay, ax = (float(value) for value in vertices[edge])
        by, bx = (float(value) for value in vertices[(edge + 1) % count])
        # Only points level with the edge can cross it or lie on it.
        level = np.flatnonzero((py >= min(ay, by)) & (py <= max(ay, by)))
        if level.size == 0:
            continue
        ex, ey = px[level], py[level]
        if ax == bx and ay == by:
            boundary[level] |= (ex == ax) & (ey == ay)
            continue
        orientation = _orientation(ax, ay, bx, by, ex, ey)
        boundary[level] |= (orientation == 0) & (ex >= min(ax, bx)) & (ex <= max(ax, bx))
        # Half-open rule on latitude: a vertex is counted for exactly one of its two edges.
        straddles = (ay > ey) != (by > ey)
        # East of p, the edge crosses the ray iff p is left of an upward edge / right of a downward one.
        inside[level] ^= straddles & (orientation == (1 if by > ay else -1))
    return inside | boundary


def extract_points(records: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions in the batch, lat, lng) of the records holding a location (validated): a ``_geo``
    object or the flat keys ``_geo.lat`` and ``_geo.lng``.

    For the writer: ``column.add(first_doc + positions, lat, lng)`` when docs are numbered in
    batch order. A ``null`` ``_geo`` is no point.
    """
    points = [(position, location) for position, record in enumerate(records)
              if (location := record_location(record)) is not None]
    lat = np.fromiter((location["lat"] for _, location in points), np.float64, len(points))
    lng = np.fromiter((location["lng"] for _, location in points), np.float64, len(points))
    return np.asarray([position for position, _ in points], dtype=np.int64), lat, lng


def nearest(column: GeoColumn, docs: np.ndarray, lat: float, lng: float, k: int,
            descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` docs of ``docs`` nearest (or farthest) to (lat, lng), in order, with distances.

    Ties are broken by doc id; docs without a point come last in both directions. Cost:
    one distance per doc plus ``argpartition`` (no full sort).
    """
    docs = np.asarray(docs)
    distance = column.distances(docs, lat, lng)
    key = -distance if descending else distance.copy()
    key[np.isnan(key)] = np.inf  # no point: last either way
    k = min(k, docs.size)
    if k <= 0:
        return docs[:0], distance[:0]
    if k < docs.size:
        # Everything tied with the k-th key competes on doc id, not argpartition's whim.
        kth = key[np.argpartition(key, k - 1)[k - 1]]
        top = np.flatnonzero(key <= kth)
    else:
        top = np.arange(docs.size)
    order = top[np.lexsort((docs[top], key[top]))][:k]
    return docs[order], distance[order]


def whole_metres(distances: np.ndarray) -> list[int | None]:
    """``_geoDistance`` values: each distance rounded to the nearest metre (halves up), ``None``
    where a doc has no point (the result then carries no ``_geoDistance``).

    >>> whole_metres(np.array([0.0, 2.5, 1234.4999, np.nan]))
    [0, 3, 1234, None]
    """
    rounded = np.floor(np.asarray(distances, dtype=np.float64) + 0.5)
    return [None if math.isnan(value) else int(value) for value in rounded.tolist()]
