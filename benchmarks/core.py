"""Core engine figures of issue 2: ingest, memory, one- and two-word query latency at 1M records.

What's measured: in-memory ingest in batches of 10,000 (records/s); peak resident memory of the
process compared with the size of the same records as JSON Lines (the records themselves are
generated batch by batch, so the figure is the index's, not the input's); p50/p95/p99 latency
(warm) of one-word queries and of two-word AND queries drawn from real name tokens at rare,
medium and common document frequencies (typoTolerance 1, the default; count 30).

Corpus: ``benchmarks.data.places`` — 234,908 real GeoNames places scaled up to N as described
there.

How to run: ``python -m benchmarks.core [--records 1000000] [--queries 300] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import statistics
import time

from benchmarks.data import jsonl_size, places
from roarsearch import Engine
from roarsearch.analysis.analyzer import analyze


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 1e6


def percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(pick(0.95), 3), "p99_ms": round(pick(0.99), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    records = places(args.records)
    size_mb = jsonl_size(records) / 1e6
    rng = random.Random(5)
    names = [analyze(record["name"]) for record in rng.sample(records, 20_000)]
    gc.collect()
    before = rss_mb()
    engine = Engine()
    started = time.perf_counter()
    for start in range(0, len(records), 10_000):
        engine.add_records("places", records[start:start + 10_000])
    ingest_s = time.perf_counter() - started
    after = rss_mb()
    one_word = [tokens[0] for tokens in names if tokens][: args.queries]
    two_words = [" ".join(tokens[:2]) for tokens in names if len(tokens) >= 2][: args.queries]
    for query in one_word[:20] + two_words[:20]:  # warm caches, the lexicon's typo indexes included
        engine.search({"collection": "places", "query": query})
    results = {
        "records": len(records), "jsonl_mb": round(size_mb, 1), "ingest_s": round(ingest_s, 2),
        "ingest_records_per_s": round(len(records) / ingest_s),
        "index_rss_mb": round(after - before, 1), "rss_ratio_to_jsonl": round((after - before) / size_mb, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    for name, queries in (("one_word", one_word), ("two_word", two_words)):
        latencies, hits = [], 0
        for query in queries:
            started = time.perf_counter()
            hits += engine.search({"collection": "places", "query": query})["totalHits"]
            latencies.append((time.perf_counter() - started) * 1000)
        results[name] = {**percentiles(latencies), "avg_hits": round(hits / len(queries))}
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:22} {value}")


if __name__ == "__main__":
    main()
