"""Core engine figures: ingest, memory, one- and two-word query latency at 1M records.

What's measured: in-memory ingest (``Engine()``, no path) in batches of 10,000 records read from
the JSON Lines cache (records/s over the whole load); resident memory the engine holds after the
load (VmRSS after minus before, with no record list alive: batches are read one at a time) and the
process's peak (VmHWM), both compared with the size of the JSON Lines file; p50/p95/p99 latency,
warm, of one-word queries (the saved rare/medium/common one-word workloads) and of two-word AND
queries (the saved two-word multi-word workloads), sent as a user types them: default
``typoTolerance`` (1), the last word also a prefix, ``count`` 30.
Targets: ingest >= 50,000 records/s; one-word p50 <= 1 ms; two-word p50 <= 2 ms;
resident memory <= 3x the JSON Lines size.

Corpus: ``benchmarks.datasets`` (default ``places``: 234,908 real GeoNames places, scaled up
deterministically to N as described there; ``--corpus movies`` for the OMDb films).

How to run: ``python -m benchmarks.core [--records 1000000] [--corpus places] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from typing import Any

from benchmarks.datasets import CORPORA, iter_batches, jsonl_path
from benchmarks.workloads import load
from roarsearch import Engine

TARGETS = {"ingest_records_per_s": 50_000, "one_word_p50_ms": 1.0, "two_word_p50_ms": 2.0, "rss_ratio_to_jsonl": 3.0}


def status_mb(key: str) -> float:
    """VmRSS / VmHWM of this process in MB (VmHWM starts afresh at exec, unlike ru_maxrss)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024 / 1e6
    raise KeyError(key)


def percentiles(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)

    def pick(quantile: float) -> float:
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]

    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(pick(0.95), 3),
            "p99_ms": round(pick(0.99), 3)}


def measure(corpus: str, records: int) -> dict[str, Any]:
    path = jsonl_path(corpus, records)
    size_mb = path.stat().st_size / 1e6
    classes = load(corpus)["classes"]
    one_word = [" ".join(e["words"]) for band in ("rare", "medium", "common") for e in classes[f"one_word_{band}"]]
    two_words = [" ".join(e["words"]) for band in ("rare", "medium", "common")
                 for e in classes[f"multi_word_{band}"] if len(e["words"]) == 2]
    gc.collect()
    before = status_mb("VmRSS")
    engine = Engine()
    count = 0
    ingest_s = 0.0
    for batch in iter_batches(path, 10_000):
        started = time.perf_counter()  # JSON parsing is not ingest: only add_records is timed
        engine.add_records(corpus, batch)
        ingest_s += time.perf_counter() - started
        count += len(batch)
    del batch
    gc.collect()
    index_mb = status_mb("VmRSS") - before
    result: dict[str, Any] = {
        "corpus": corpus, "records": count, "jsonl_mb": round(size_mb, 1), "ingest_s": round(ingest_s, 2),
        "ingest_records_per_s": round(count / ingest_s), "index_rss_mb": round(index_mb, 1),
        "rss_ratio_to_jsonl": round(index_mb / size_mb, 2), "peak_rss_mb": round(status_mb("VmHWM"), 1),
    }
    for name, queries in (("one_word", one_word), ("two_word", two_words)):
        for query in queries:  # warm: caches and the lexicon's typo indexes
            engine.search({"collection": corpus, "query": query})
        latencies, hits = [], 0
        for query in queries:
            started = time.perf_counter()
            hits += engine.search({"collection": corpus, "query": query})["totalHits"]
            latencies.append((time.perf_counter() - started) * 1000)
        result[name] = {**percentiles(latencies), "queries": len(queries), "avg_hits": round(hits / len(queries))}
    result["targets"] = {
        "ingest_records_per_s": [result["ingest_records_per_s"], TARGETS["ingest_records_per_s"]],
        "one_word_p50_ms": [result["one_word"]["p50_ms"], TARGETS["one_word_p50_ms"]],
        "two_word_p50_ms": [result["two_word"]["p50_ms"], TARGETS["two_word_p50_ms"]],
        "rss_ratio_to_jsonl": [result["rss_ratio_to_jsonl"], TARGETS["rss_ratio_to_jsonl"]],
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="places")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    result = measure(args.corpus, args.records)
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        if key != "targets":
            print(f"{key:22} {value}")
    print("\n| figure | measured | target | met |\n|---|---|---|---|")
    for key, (measured, target) in result["targets"].items():
        met = measured >= target if key == "ingest_records_per_s" else measured <= target
        print(f"| {key} | {measured:,} | {'≥' if key == 'ingest_records_per_s' else '≤'} {target:,} | {'yes' if met else 'no'} |")


if __name__ == "__main__":
    main()
