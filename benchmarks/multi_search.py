"""Multi-search: sequential vs a thread pool, and the cost of settings on search.

What's measured, on the real places (``roarsearch.datasets.load_places``): the wall time of
``engine.multi_search`` over batches of 100 searches (one-typo words, prefixes, three-word queries
with facets) for 1, 2 and 4 threads; and the p50 of single searches without settings and with
``customRanking: ["-population"]`` and synonyms/stop words set.

How to run: ``python -m benchmarks.multi_search [--rounds 5] [--json]``
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from roarsearch import Engine
from roarsearch.analysis.analyzer import analyze
from roarsearch.datasets import load_places
from roarsearch.engine import engine as engine_module


def searches(records: list[dict[str, Any]], count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    bodies: list[dict[str, Any]] = []
    for record in rng.sample(records, count):
        words = analyze(record["name"]) or ["a"]
        kind = len(bodies) % 3
        query = words[0][:2] if kind == 0 else (" ".join(words[:3]) + " " if kind == 1 else words[0][:-1])
        bodies.append({"collection": "places", "query": query, "textFacets": ["countryCode"], "count": 20})
    return bodies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    records = load_places()
    engine = Engine()
    for start in range(0, len(records), 10_000):
        engine.add_records("places", records[start:start + 10_000])
    batches = [searches(records, 100, seed) for seed in range(args.rounds)]
    for batch in batches:
        engine.multi_search(batch)  # warm caches
    results: dict[str, Any] = {"records": len(records)}
    times: dict[int, list[float]] = {1: [], 2: [], 4: []}
    for batch in batches:  # thread counts interleaved, so that load from elsewhere hits them alike
        for threads in times:
            engine_module.MULTI_SEARCH_THREADS = threads
            started = time.perf_counter()
            engine.multi_search(batch)
            times[threads].append((time.perf_counter() - started) * 1000)
    for threads, measured in times.items():
        results[f"multi_search_100_threads_{threads}_ms"] = {"median": round(statistics.median(measured), 1),
                                                             "min": round(min(measured), 1)}
    engine_module.MULTI_SEARCH_THREADS = 1
    bodies = [body for batch in batches for body in batch]

    def p50() -> float:
        times = []
        for body in bodies:
            started = time.perf_counter()
            engine.search(body)
            times.append((time.perf_counter() - started) * 1000)
        return round(statistics.median(times), 3)

    p50()
    results["search_p50_ms_no_settings"] = p50()
    engine.update_settings("places", {"customRanking": ["-population"]})
    p50()
    results["search_p50_ms_custom_ranking"] = p50()
    engine.update_settings("places", {"stopWords": ["the", "of"], "synonyms": {"nyc": ["new york"]}})
    results["search_p50_ms_custom_ranking_synonyms_stop_words"] = p50()
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:52} {value}")


if __name__ == "__main__":
    main()
