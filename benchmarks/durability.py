"""Durable engine figures: ingest with fsync, single-record adds, open time, disk size.

What's measured: ingest in batches of 10,000 into ``Engine(path)`` (every batch in the
write-ahead log and fsynced before ``add_records`` returns; snapshots as they fall due) against
the same ingest into ``Engine()`` in memory, as records/s and their ratio; p50/p95 of a
single-record durable add (fsync-bound); the time to close (final snapshot) and to reopen the
collection from its snapshot in a fresh process (no record is re-analysed); the data directory's
size against the JSON Lines size of the records.

Corpus: ``benchmarks.data.places`` (real GeoNames places, scaled up as documented there).

How to run: ``python -m benchmarks.durability [--records 1000000] [--json]``
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

from benchmarks.data import jsonl_size, places
from roarsearch import Engine


def directory_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    records = places(args.records)
    results: dict[str, float] = {"records": len(records), "jsonl_mb": round(jsonl_size(records) / 1e6, 1)}

    memory = Engine()
    started = time.perf_counter()
    for start in range(0, len(records), 10_000):
        memory.add_records("places", records[start:start + 10_000])
    results["memory_records_per_s"] = round(len(records) / (time.perf_counter() - started))
    del memory

    directory = tempfile.mkdtemp(prefix="roarsearch-durability-")
    try:
        engine = Engine(directory)
        started = time.perf_counter()
        for start in range(0, len(records), 10_000):
            engine.add_records("places", records[start:start + 10_000])
        results["durable_records_per_s"] = round(len(records) / (time.perf_counter() - started))
        results["durable_to_memory_ratio"] = round(results["durable_records_per_s"] / results["memory_records_per_s"], 3)
        single = []
        for i in range(200):
            started = time.perf_counter()
            engine.add_records("places", {"id": -1 - i, "name": f"probe {i}"})
            single.append((time.perf_counter() - started) * 1000)
        single.sort()
        results["single_add_p50_ms"] = round(statistics.median(single), 3)
        results["single_add_p95_ms"] = round(single[189], 3)
        started = time.perf_counter()
        engine.close()
        results["close_snapshot_s"] = round(time.perf_counter() - started, 2)
        results["disk_mb"] = round(directory_size(directory) / 1e6, 1)
        results["disk_to_jsonl_ratio"] = round(results["disk_mb"] / results["jsonl_mb"], 2)
        code = ("import sys, time; from roarsearch import Engine; t = time.perf_counter(); e = Engine(sys.argv[1]); "
                "print(time.perf_counter() - t); e.search({'collection': 'places', 'query': 'london'})")
        opened = subprocess.run([sys.executable, "-c", code, directory], capture_output=True, text=True, check=True)
        results["open_s"] = round(float(opened.stdout.strip().splitlines()[0]), 2)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:26} {value}")


if __name__ == "__main__":
    main()
