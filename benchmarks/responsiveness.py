"""Responsiveness under the most expensive requests the bounds allow.

What's measured: a real ``roarsearch serve`` on 127.0.0.1 holding 100,000 real places
(``roarsearch.datasets.load_places(500)``, first 100,000 by GeoNames id). First every candidate
heavy request runs alone (its own latency and body size); then, for each, ``--clients`` clients
send it back to back for ``--seconds`` while two probes measure, one request at a time, the latency
of ``GET /health`` and of a one-word search. The baseline row is the probes with no heavy load.
A heavy request that holds the server past about a second, or a probe whose p99 grows past about a
second, is what the bounds (contract §3, "Types and bounds") must prevent.

Candidates (each at the bound, so one more entry would be a 400):
- ``fields-1000``: 1,000 ``searchFields``, ``highlightFields`` and ``fields`` (``alternateNames``
  and ``name`` repeated), ``count`` 1,000, a two-word query;
- ``facets-1000``: 1,000 ``textFacets`` (``alternateNames`` repeated, the field with most values),
  ``facetCount`` 10,000; ``facets-1000-distinct``: the 5 text fields and 995 that no record holds;
- ``facet-filter-1000x1000``: ``textFacetFilters`` of 1,000 fields × 1,000 values (about 11 MB;
  over the 10,000-values total bound, so now a 400);
- ``facet-filter-10k``: at that bound: 1,000 values on each of the 5 text fields, 10 on each of
  495 others, and ``textFacets`` on all 500 (each counted without its own filter);
- ``numeric-1000x1000``: ``numericFacets`` and ``numericFacetFilters`` of 1,000 fields × 1,000
  intervals (now a 400); ``numeric-10k``: both at the bound, 1,000 intervals on each numeric field;
- ``query-1024-typos``: a 1,024-character query of 8-letter words that each need two typos
  (``typoTolerance`` 2), so that words are dropped one at a time from the end;
- ``filter-16k``: a 16 KiB filter of ``OR``-ed comparisons on a many-valued text field;
- ``skip-deep-sort``: ``skip`` 99,000 with ``sort`` on three keys and ``count`` 1,000;
- ``group-deep``: ``groupBy`` ``countryCode`` with ``groupLimit`` 1,000, ``count`` 1,000 (a page of
  up to a million records; over the 10,000-results bound, so now a 400);
  ``group-10k``: at that bound, 10 groups of up to 1,000.

Also bounded after these measurements: the search routes take bodies of at most
4 MiB (a 14 MB or 29 MB body is now a 413 answered from ``Content-Length``, not decoded).

How to run: ``python -m benchmarks.responsiveness [--records 100000] [--seconds 10] [--clients 3]
[--only NAME ...] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from roarsearch import Engine
from roarsearch.datasets import load_places

ROOT = Path(__file__).resolve().parents[1]
ADMIN = "responsiveness-admin-key"
sys.path.insert(0, str(ROOT))
from benchmarks.load import start_server as start_load_server  # noqa: E402

COLLECTION = "places"
HEAVY_TIMEOUT_S = 300
REAL_TEXT = ["alternateNames", "name", "countryCode", "admin1Code", "timezone"]
REAL_NUMERIC = ["population", "latitude", "longitude"]


def candidates(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rng = random.Random(12)
    names = [record["name"] for record in rng.sample(records, 5000)]
    words = sorted({word for name in names for word in name.lower().split() if word.isalpha() and len(word) >= 8})
    typo_words = []
    for word in words[:200]:
        chars = list(word[:8])
        chars[1], chars[5] = "q", "z"  # two substitutions: needs typoTolerance 2
        typo_words.append("".join(chars))
    query = ""
    for word in typo_words * 10:
        if len(query) + len(word) + 1 > 1024:
            break
        query += word + " "
    values = [name for name in names]
    clauses = []
    filter_text = ""
    for name in names:
        clause = f'alternateNames = "{name.replace(chr(34), "")}"'
        if len((filter_text + " OR " + clause).encode()) > 16 * 1024:
            break
        clauses.append(clause)
        filter_text = " OR ".join(clauses)
    base = {"collection": COLLECTION}
    # At the total bound: 10,000 values (or intervals) over 1,000 fields, the real ones given 1,000 each.
    facet_filters: dict[str, list[Any]] = {field: values[:1000] for field in REAL_TEXT}
    facet_filters.update({f"g{n}": values[:10] for n in range((10_000 - 1000 * len(REAL_TEXT)) // 10)})
    numeric: dict[str, list[str]] = {field: [f"[{n * 0.1 - 50},{n * 0.1 - 49.5})" for n in range(1000)]
                                     for field in REAL_NUMERIC}
    numeric.update({f"n{n}": ["[0,1)"] * 10 for n in range((10_000 - 1000 * len(REAL_NUMERIC)) // 10)})
    return {
        "fields-1000": {**base, "query": "san jose", "searchFields": ["alternateNames", "name"] * 500,
                        "highlightFields": ["alternateNames", "name"] * 500, "fields": ["alternateNames", "name"] * 500,
                        "count": 1000},
        "facets-1000": {**base, "textFacets": ["alternateNames"] * 1000, "facetCount": 10_000},
        "facets-1000-distinct": {**base, "textFacets": REAL_TEXT + [f"f{n}" for n in range(1000 - len(REAL_TEXT))],
                                 "facetCount": 10_000},
        "facet-filter-1000x1000": {**base, "textFacetFilters": {
            ("alternateNames" if field == 0 else f"field{field}"): values[:1000] for field in range(1000)}},
        "facet-filter-10k": {**base, "textFacetFilters": facet_filters,
                             "textFacets": list(facet_filters), "facetCount": 10_000},
        "numeric-1000x1000": {**base, "numericFacets": {
            ("population" if field == 0 else f"n{field}"): [f"[{n * 100},{n * 100 + 50})" for n in range(1000)]
            for field in range(1000)},
            "numericFacetFilters": {("latitude" if field == 0 else f"m{field}"): [f"[{n - 90},{n - 89}]" for n in range(1000)]
                                    for field in range(1000)}},
        "numeric-10k": {**base, "numericFacets": numeric, "numericFacetFilters": numeric},
        "query-1024-typos": {**base, "query": query.strip(), "typoTolerance": 2},
        "filter-16k": {**base, "filter": filter_text, "query": "a"},
        "skip-deep-sort": {**base, "skip": 99_000, "count": 1000, "sort": ["countryCode", "-population", "name"]},
        "group-deep": {**base, "groupBy": "countryCode", "groupLimit": 1000, "count": 1000, "skip": 100},
        "group-10k": {**base, "groupBy": "countryCode", "groupLimit": 1000, "count": 10},
    }


def quantiles(latencies: list[float]) -> dict[str, float]:
    if not latencies:
        return {"n": 0, "p50_ms": float("nan"), "p99_ms": float("nan"), "max_ms": float("nan")}
    ordered = sorted(latencies)
    pick = lambda q: round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)  # noqa: E731
    return {"n": len(ordered), "p50_ms": pick(0.5), "p99_ms": pick(0.99), "max_ms": round(ordered[-1], 1)}


def probe(url: str, stop: threading.Event, send: Callable[[httpx.Client], httpx.Response]) -> list[float]:
    """One request at a time until ``stop``; the latency of each (ms)."""
    latencies: list[float] = []
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=HEAVY_TIMEOUT_S) as client:
        while not stop.is_set():
            started = time.perf_counter()
            response = send(client)
            latencies.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text[:300]
            time.sleep(0.02)
    return latencies


def run_probes(url: str, seconds: float, heavy: bytes | None, clients: int, words: list[str]) -> dict[str, Any]:
    stop = threading.Event()
    counter = iter(range(10**9))
    results: dict[str, Any] = {}
    heavy_latencies: list[float] = []
    statuses: set[int] = set()

    def heavy_client() -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}",
                                                 "Content-Type": "application/json"}, timeout=HEAVY_TIMEOUT_S) as client:
            while not stop.is_set():
                started = time.perf_counter()
                response = client.post("/v2", content=heavy)
                heavy_latencies.append((time.perf_counter() - started) * 1000)
                statuses.add(response.status_code)

    def health() -> None:
        results["health"] = quantiles(probe(url, stop, lambda client: client.get("/health")))

    def search() -> None:
        results["search"] = quantiles(probe(url, stop, lambda client: client.post("/v2", json={
            "collection": COLLECTION, "query": words[next(counter) % len(words)], "count": 10, "fields": ["name"]})))

    threads = [threading.Thread(target=health), threading.Thread(target=search)]
    if heavy is not None:
        threads += [threading.Thread(target=heavy_client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    results["heavy"] = quantiles(heavy_latencies) if heavy is not None else None
    results["heavy_statuses"] = sorted(statuses)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    records = load_places(500, limit=args.records)
    rng = random.Random(9)
    words = [record["name"].split()[0].lower() for record in rng.sample(records, 500)]
    heavy = {name: body for name, body in candidates(records).items() if args.only is None or name in args.only}
    report: dict[str, Any] = {"records": len(records), "clients": args.clients, "seconds": args.seconds,
                              "command": "python -m benchmarks.responsiveness " + " ".join(sys.argv[1:]),
                              "alone": {}, "loaded": {}}
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "data")
        with Engine(os.path.join(data, "default")) as engine:
            for start in range(0, len(records), 20_000):
                engine.add_records(COLLECTION, records[start:start + 20_000])
        server, url = start_load_server(data, os.path.join(folder, "server.log"), admin=ADMIN)
        try:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}",
                                                     "Content-Type": "application/json"},
                              timeout=HEAVY_TIMEOUT_S) as client:
                for word in words:  # every probe word warm: the rows measure the heavy requests, not first use
                    client.post("/v2", json={"collection": COLLECTION, "query": word}).raise_for_status()
                bodies = {name: json.dumps(body).encode() for name, body in heavy.items()}
                for name, body in bodies.items():
                    timings, status = [], 0
                    for _ in range(3):
                        started = time.perf_counter()
                        response = client.post("/v2", content=body)
                        timings.append((time.perf_counter() - started) * 1000)
                        status = response.status_code
                    report["alone"][name] = {"bytes": len(body), "status": status,
                                             "median_ms": round(statistics.median(timings), 1),
                                             "data": response.json().get("data") if status != 200 else None}
                    print(f"alone {name:24} {report['alone'][name]}", file=sys.stderr, flush=True)
            report["loaded"]["(none)"] = run_probes(url, args.seconds, None, args.clients, words)
            for name, body in bodies.items():
                report["loaded"][name] = run_probes(url, args.seconds, body, args.clients, words)
                print(f"loaded {name:24} {report['loaded'][name]}", file=sys.stderr, flush=True)
        finally:
            server.terminate()
            report["server_exit_status"] = server.wait(timeout=60)
    if args.json:
        print(json.dumps(report))
        return
    print(f"$ {report['command']}")
    print(f"{report['records']:,} records, {args.clients} heavy clients, {args.seconds:g} s per row, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| heavy request | body | alone | heavy p50 / p99 | /health p50 / p99 / max | one-word search p50 / p99 / max |")
    print("|---|---|---|---|---|---|")
    for name, loaded in report["loaded"].items():
        alone, heavy_q, health, search = report["alone"].get(name), loaded["heavy"], loaded["health"], loaded["search"]
        size = f"{alone['bytes'] / 1024:,.0f} KiB" if alone else "-"
        alone_ms = f"{alone['median_ms']:,.0f} ms ({alone['status']})" if alone else "-"
        heavy_ms = f"{heavy_q['p50_ms']:,.0f} / {heavy_q['p99_ms']:,.0f} ms" if heavy_q else "-"
        print(f"| {name} | {size} | {alone_ms} | {heavy_ms} | {health['p50_ms']} / {health['p99_ms']} / "
              f"{health['max_ms']} ms | {search['p50_ms']} / {search['p99_ms']} / {search['max_ms']} ms |")
    print(f"server exit status {report['server_exit_status']}")


if __name__ == "__main__":
    main()
