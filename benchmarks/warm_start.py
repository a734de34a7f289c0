"""Warm start: what the first requests after opening a durable collection cost.

What's measured: a durable ``Engine(path)`` is built from the places corpus (batches of 10,000,
closed: one snapshot) with its ingest time and the snapshot's size; then every probe runs in a
fresh process that opens the directory (timed: ``Engine(path)``), asks one request (timed) and
reports its resident memory. Probes, each the first request after open:

- ``one_word``: ``"paris"`` (default typo tolerance, the last word also a prefix);
- ``typo``: ``"londno"`` (one typo from ``london``; prefix too);
- ``facet``: ``textFacets: ["timezone"]`` over everything — a field never faceted before the build;
- ``sort``: ``sort: ["-population"]`` over everything (numeric);
- ``sort_text``: ``sort: ["countryCode"]`` (a short string field never sorted before).

Each probe is repeated ``--repeat`` times (a new process each time); medians are reported.

Corpus: ``benchmarks.datasets`` places (real GeoNames first, then deterministic scaled copies).

Also ``--ingest-ab``: in-memory ingest with fields indexed as exact values at write time and
without (the behaviour before), in alternating fresh processes — records/s and resident memory.

How to run: ``python -m benchmarks.warm_start --records 100000 [--repeat 3] [--json]``;
``python -m benchmarks.warm_start --records 100000 --ingest-ab``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks.datasets import iter_batches, jsonl_path

PROBES: dict[str, dict[str, Any]] = {
    "one_word": {"query": "paris"},
    "typo": {"query": "londno"},
    "facet": {"textFacets": ["timezone"], "count": 10},
    "sort": {"sort": ["-population"], "count": 10},
    "sort_text": {"sort": ["countryCode"], "count": 10},
}

_CHILD = r"""
import json, sys, time
started = time.perf_counter()
from roarsearch import Engine
imported = time.perf_counter()
engine = Engine(sys.argv[1])
opened = time.perf_counter()
request = json.loads(sys.argv[2])
request["collection"] = "places"
response = engine.search(request)
searched = time.perf_counter()
again = time.perf_counter()
engine.search(request)
warm = time.perf_counter() - again
rss = 0.0
with open("/proc/self/status") as handle:
    for line in handle:
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) * 1024 / 1e6
import roarsearch
print(json.dumps({"open_s": opened - imported, "first_ms": (searched - opened) * 1000, "warm_ms": warm * 1000,
                  "hits": response["totalHits"], "rss_mb": rss, "module": roarsearch.__file__}))
"""


_INGEST_CHILD = r"""
import gc, json, sys, time
from benchmarks.datasets import iter_batches, jsonl_path
from roarsearch import Engine

def rss():
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024 / 1e6

engine = Engine()
engine.add_records("places", [{"id": -1}])
index = engine._collection("places").index
index.auto_values = sys.argv[2] == "on"
gc.collect()
before = rss()
ingest = 0.0
for batch in iter_batches(jsonl_path("places", int(sys.argv[1])), 10_000):
    started = time.perf_counter()
    engine.add_records("places", batch)
    ingest += time.perf_counter() - started
del batch
gc.collect()
print(json.dumps({"ingest_s": ingest, "rss_mb": rss() - before, "value_fields": sorted(index.value_fields)}))
"""


def ingest_ab(records: int, repeat: int) -> dict[str, Any]:
    """In-memory ingest with fields indexed at write time ("on") and without ("off", the old
    behaviour), alternating fresh processes: records/s and the index's resident memory."""
    runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for _ in range(repeat):
        for mode in ("off", "on"):
            done = subprocess.run([sys.executable, "-c", _INGEST_CHILD, str(records), mode], capture_output=True,
                                  text=True, check=True)
            runs[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return {mode: {"records_per_s": round(records / statistics.median(run["ingest_s"] for run in found)),
                   "index_rss_mb": round(statistics.median(run["rss_mb"] for run in found), 1),
                   "runs_s": [round(run["ingest_s"], 2) for run in found],
                   "value_fields": found[0]["value_fields"]}
            for mode, found in runs.items()}


def directory_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def build(directory: str, records: int) -> dict[str, Any]:
    from roarsearch import Engine

    path = jsonl_path("places", records)
    engine = Engine(directory)
    ingest_s = 0.0
    count = 0
    for batch in iter_batches(path, 10_000):
        started = time.perf_counter()
        engine.add_records("places", batch)
        ingest_s += time.perf_counter() - started
        count += len(batch)
    index = engine._collection("places").index
    value_columns = {path: index.columns[path].values for path in sorted(index.value_fields)}
    values = {path: {"values": len(column.values), "pairs_mb": round(sum(a.nbytes for a in column.pairs()) / 1e6, 1),
                     "first_mb": round(column.first.data.nbytes / 1e6, 1)}
              for path, column in value_columns.items() if column is not None}
    started = time.perf_counter()
    engine.close()
    return {"value_columns": values,"records": count, "ingest_s": round(ingest_s, 2), "records_per_s": round(count / ingest_s),
            "close_snapshot_s": round(time.perf_counter() - started, 2),
            "disk_mb": round(directory_size(directory) / 1e6, 1)}


def probe(directory: str, request: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _CHILD, directory, json.dumps(request)], capture_output=True,
                          text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--probes", default=",".join(PROBES), help="comma-separated subset of " + ",".join(PROBES))
    parser.add_argument("--dir", help="reuse (or create) this data directory instead of a temporary one")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ingest-ab", action="store_true",
                        help="instead: in-memory ingest with and without write-time value indexing")
    args = parser.parse_args()
    if args.ingest_ab:
        print(json.dumps(ingest_ab(args.records, args.repeat)))
        return
    directory = args.dir or tempfile.mkdtemp(prefix="roarsearch-warm-")
    results: dict[str, Any] = {}
    try:
        if not os.path.isdir(directory) or not os.listdir(directory):
            results["build"] = build(directory, args.records)
        opens: list[float] = []
        rss: list[float] = []
        for name in args.probes.split(","):
            runs = [probe(directory, PROBES[name]) for _ in range(args.repeat)]
            opens.extend(run["open_s"] for run in runs)
            rss.extend(run["rss_mb"] for run in runs)
            results[name] = {"first_ms": round(statistics.median(run["first_ms"] for run in runs), 1),
                             "runs_ms": [round(run["first_ms"], 1) for run in runs],
                             "warm_ms": round(statistics.median(run["warm_ms"] for run in runs), 2),
                             "hits": runs[0]["hits"]}
            results["module"] = runs[0]["module"]
        results["open_s"] = round(statistics.median(opens), 2)
        results["open_runs_s"] = [round(value, 2) for value in opens]
        results["rss_after_first_mb"] = round(statistics.median(rss), 1)
    finally:
        if not args.dir:
            shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:20} {value}")


if __name__ == "__main__":
    main()
