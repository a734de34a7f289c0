"""Sharded engine figures: ingest and search throughput with 1, 2 and 4 shards against
one in-process Engine, the merge overhead per request, and memory and disk per record.

What's measured, on the same records and requests:

- ingest: ``add_records`` in batches of ``--batch`` (durable: every shard fsyncs its prepare file
  and its write-ahead log, the coordinator fsyncs its commit line) → records/s;
- search: a fixed mix of requests (plain text, typos, facets, filter, sort, groupBy) run one at a
  time (latency p50/p95 → the per-request merge overhead against one Engine) and from
  ``--threads`` client threads at once (requests/s);
- multi-search: the same requests ten per ``multi_search`` call (p50 per call);
- settings: the requests again with ``customRanking`` and stop words set (p50);
- memory: resident memory of each shard actor after ingest minus before, per record; disk: the
  data directory's size per record.

Corpus: ``benchmarks.data.places`` (real GeoNames places). Local Ray with 2 CPUs, shards
``num_cpus=0``.

How to run: ``python -m benchmarks.cluster [--records 100000] [--shards 1 2 4] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from benchmarks.data import places
from roarsearch import Engine

QUERIES = ["london", "san", "new york", "berlin", "paris fr", "springfeld", "lake", "mount st", "rio", "santa maria"]


def requests() -> list[dict[str, Any]]:
    shapes: list[dict[str, Any]] = [
        {},
        {"textFacets": ["countryCode", "timezone"], "numericFacets": {"population": ["[0,1000)", "[1000,)"]}},
        {"filter": "population > 1000"},
        {"sort": ["-population"]},
        {"groupBy": "countryCode", "groupLimit": 2, "count": 10},
    ]
    return [{"collection": "places", "query": query, **shape} for query in QUERIES for shape in shapes]


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def directory_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def measure(engine: Any, records: list[dict[str, Any]], batch: int, threads: int, pids: list[int]) -> dict[str, Any]:
    before = sum(rss(pid) for pid in pids)
    started = time.perf_counter()
    for start in range(0, len(records), batch):
        engine.add_records("places", records[start:start + batch])
    ingest = len(records) / (time.perf_counter() - started)
    after = sum(rss(pid) for pid in pids)
    bodies = requests()
    for body in bodies[:10]:  # warm caches
        engine.search(body)
    latencies = []
    for body in bodies:
        began = time.perf_counter()
        engine.search(body)
        latencies.append((time.perf_counter() - began) * 1000)
    # Multi-search: the same requests, ten per call (Engine runs them in turn; ShardedEngine keeps
    # four in flight, since each mostly waits on its shards).
    multi = []
    for start in range(0, len(bodies), 10):
        began = time.perf_counter()
        engine.multi_search(bodies[start:start + 10])
        multi.append((time.perf_counter() - began) * 1000)
    # Settings: customRanking and stop words apply from the next search on (contract §7).
    engine.update_settings("places", {"customRanking": ["-population"], "stopWords": ["the", "de"]})
    with_settings = []
    for body in bodies:
        began = time.perf_counter()
        engine.search(body)
        with_settings.append((time.perf_counter() - began) * 1000)
    engine.update_settings("places", {"customRanking": None, "stopWords": None})
    rounds = 3
    began = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(engine.search, bodies * rounds))
    throughput = len(bodies) * rounds / (time.perf_counter() - began)
    latencies.sort()
    return {
        "ingest_records_per_s": round(ingest),
        "search_p50_ms": round(statistics.median(latencies), 2),
        "search_p95_ms": round(latencies[int(len(latencies) * 0.95) - 1], 2),
        "search_mean_ms": round(statistics.fmean(latencies), 2),
        "search_qps_threads": round(throughput, 1),
        "multi_search_10_p50_ms": round(statistics.median(multi), 2),
        "search_p50_ms_with_settings": round(statistics.median(with_settings), 2),
        "memory_bytes_per_record": round((after - before) / len(records)) if pids else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    records = places(args.records)
    results: dict[str, Any] = {"records": len(records), "cpus": os.cpu_count()}
    root = tempfile.mkdtemp(prefix="roarsearch-cluster-bench-")
    try:
        path = os.path.join(root, "single")
        with Engine(path) as engine:
            results["engine"] = measure(engine, records, args.batch, args.threads, [os.getpid()])
            results["engine"]["memory_bytes_per_record"] = None  # the driver's RSS holds the corpus too
        results["engine"]["disk_bytes_per_record"] = round(directory_size(path) / len(records))
        import ray

        from roarsearch.cluster import ShardedEngine

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 object_store_memory=512 * 1024 * 1024)
        try:
            for shards in args.shards:
                path = os.path.join(root, f"sharded-{shards}")
                with ShardedEngine(path, shards=shards) as engine:
                    pids = ray.get([actor.ping.remote() for actor in engine._actors])
                    figures = measure(engine, records, args.batch, args.threads, pids)
                figures["disk_bytes_per_record"] = round(directory_size(path) / len(records))
                results[f"shards={shards}"] = figures
        finally:
            ray.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    single = results["engine"]
    for key, figures in results.items():
        if key.startswith("shards="):
            figures["merge_overhead_p50_ms"] = round(figures["search_p50_ms"] - single["search_p50_ms"], 2)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{results['records']} records, {results['cpus']} CPUs")
    columns = ["ingest_records_per_s", "search_p50_ms", "search_p95_ms", "search_qps_threads",
               "merge_overhead_p50_ms", "multi_search_10_p50_ms", "search_p50_ms_with_settings",
               "memory_bytes_per_record", "disk_bytes_per_record"]
    print("| engine | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for key, figures in results.items():
        if isinstance(figures, dict):
            print(f"| {key} | " + " | ".join(str(figures.get(column, "")) for column in columns) + " |")


if __name__ == "__main__":
    main()
