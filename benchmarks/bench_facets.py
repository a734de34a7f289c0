"""Facet, grouping and facet value search latency at 1M places.

What's measured, on ``benchmarks.datasets`` places (234,908 real GeoNames places scaled up with
new ids to ``--records``, 1M by default; fields kept: name, countryCode ~250 values, timezone
~400, admin1Code ~670, population, plus ``region`` = countryCode-admin1Code, ~3,900 values):

1. ``Engine.search`` end to end with two text facets (countryCode, timezone) and one numeric
   facet (population, 4 ranges) for filters matching ~45% and ~12% of the records — target p50
   ≤ 10 ms — and the facet stage alone (the three facet functions on the same candidates);
2. ``groupBy`` admin1Code and region (groupCount 10, groupLimit 3) with the same filters —
   target p50 ≤ 20 ms;
3. the text facet algorithm switches: gathering pairs by binary search vs a dense mask +
   ``bincount`` for growing candidate sets (``GATHER_THRESHOLD``), and one
   ``intersection_cardinality`` per value (bitmaps cached per write) vs pairs + ``bincount`` for
   fields with more and more values (``PER_VALUE_LIMIT``);
4. facet value search over ``name`` of the first 300k places (~280k distinct values): empty,
   prefix, several-word and typo queries.

Nothing asserts a time; the figures go to docs/facets.md.

How to run: ``python -m benchmarks.bench_facets [--records 1000000] [--repeats 30] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from pyroaring import BitMap

from benchmarks.datasets import iter_batches, jsonl_path
from roarsearch import Engine
from roarsearch.facets import text as text_facets
from roarsearch.facets.numeric import numeric_facet, parse_interval
from roarsearch.facets.text import count_text_facet
from roarsearch.facets.value_search import search_facet_values
from roarsearch.index.bitmaps import array_from_bitmap
from roarsearch.index.index import Index

FIELDS = ("id", "name", "countryCode", "timezone", "admin1Code", "population")
RANGES = ["[0,1000)", "[1000,10000)", "[10000,100000)", "[100000,)"]
FILTERS = {"~45%": "population >= 2000", "~12%": "population >= 20000"}
VALUE_QUERIES = ["", "san", "sant", "new yo", "springfeld", "karlsrue"]


def project(record: dict[str, Any]) -> dict[str, Any]:
    kept = {key: record[key] for key in FIELDS if key in record}
    if "countryCode" in record and "admin1Code" in record:
        kept["region"] = f"{record['countryCode']}-{record['admin1Code']}"
    return kept


def timed(call: Callable[[], Any], repeats: int) -> dict[str, float]:
    call()  # warm: lazily built structures are not part of a steady-state request
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50_ms": round(statistics.median(samples), 2), "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 2)}


def load(records: int) -> tuple[Engine, float]:
    engine = Engine()
    spent = 0.0
    for batch in iter_batches(jsonl_path("places", records), 10_000):
        projected = [project(record) for record in batch]
        started = time.perf_counter()
        engine.add_records("places", projected)
        spent += time.perf_counter() - started
    return engine, spent


def facet_figures(engine: Engine, repeats: int) -> dict[str, Any]:
    index = engine._collection("places").index  # the facet stage alone needs the index itself
    started = time.perf_counter()
    engine.search({"collection": "places", "textFacets": ["countryCode", "timezone"],
                   "numericFacets": {"population": RANGES}, "groupBy": "region", "count": 1})
    first_request_s = time.perf_counter() - started  # builds exact values of the fields once
    figures: dict[str, Any] = {"first_facet_request_s": round(first_request_s, 2), "queries": {}}
    intervals = [parse_interval(text, "bench") for text in RANGES]
    for label, expression in FILTERS.items():
        low = float(expression.split(">=")[1])
        candidates = index.number_range("population", low, True, None, False) & index.alive
        body = {"collection": "places", "filter": expression, "count": 20}
        facets = {"textFacets": ["countryCode", "timezone"], "numericFacets": {"population": RANGES}}

        def facet_stage(candidates: BitMap = candidates) -> None:
            text_facets._last_mask[:] = [None, None]  # each request has its own candidates
            count_text_facet(index.field_columns("countryCode"), candidates, 100)
            count_text_facet(index.field_columns("timezone"), candidates, 100)
            numeric_facet("population", index.field_columns("population"), candidates, intervals)

        figures["queries"][label] = {
            "filter": expression,
            "matching": len(candidates),
            "search_without_facets": timed(lambda body=body: engine.search(body), repeats),
            "search_with_facets": timed(lambda body=body: engine.search({**body, **facets}), repeats),
            "facet_stage_only": timed(facet_stage, repeats),
            "group_admin1Code": timed(lambda body=body: engine.search(
                {**body, "groupBy": "admin1Code", "groupCount": 10, "groupLimit": 3}), repeats),
            "group_region": timed(lambda body=body: engine.search(
                {**body, "groupBy": "region", "groupCount": 10, "groupLimit": 3}), repeats),
        }
    return figures


KNOBS = ("PER_VALUE_LIMIT", "PER_VALUE_LIMIT_MANY_CANDIDATES", "GATHER_THRESHOLD", "GATHER_RATIO")


def _count_with(columns: Any, candidates: BitMap, per_value: bool, gather: bool) -> None:
    """count_text_facet with the algorithm forced (per value, else gather or mask)."""
    saved = [getattr(text_facets, knob) for knob in KNOBS]
    forced = (1 << 40, 1 << 40, 0, 1) if per_value else ((0, 0, 1 << 40, 0) if gather else (0, 0, 0, 1))
    for knob, value in zip(KNOBS, forced):
        setattr(text_facets, knob, value)
    text_facets._last_mask[:] = [None, None]  # a request's first facet builds the mask
    try:
        count_text_facet(columns, candidates, 100)
    finally:
        for knob, value in zip(KNOBS, saved):
            setattr(text_facets, knob, value)


def threshold_figures(engine: Engine, repeats: int) -> dict[str, list[dict[str, Any]]]:
    """Each text facet algorithm forced, over fields with more and more values and candidate sets."""
    index = engine._collection("places").index
    alive = array_from_bitmap(index.alive)
    rng = np.random.default_rng(7)
    by_candidates = []
    region = index.field_columns("region")
    for size in (1_000, 4_000, 8_000, 16_000, 64_000, 256_000):
        candidates = BitMap(np.sort(rng.choice(alive, size=min(size, alive.size), replace=False)).tolist())
        by_candidates.append({
            "candidates": size,
            "gather": timed(lambda c=candidates: _count_with(region, c, False, True), repeats)["p50_ms"],
            "mask_bincount": timed(lambda c=candidates: _count_with(region, c, False, False), repeats)["p50_ms"],
        })
    by_values = []
    for field in ("countryCode", "timezone", "admin1Code", "region"):
        columns = index.field_columns(field)
        assert columns is not None and columns.values is not None
        text_facets.value_bitmaps(columns.values)  # built once per write of the column
        for share in (0.01, 0.45):
            candidates = BitMap(np.sort(rng.choice(alive, size=int(share * alive.size), replace=False)).tolist())
            by_values.append({
                "field": field, "values": len(columns.values.values), "candidates": len(candidates),
                "intersection_per_value": timed(lambda c=candidates, f=columns: _count_with(f, c, True, False),
                                                repeats)["p50_ms"],
                "pairs_bincount": timed(lambda c=candidates, f=columns: _count_with(f, c, False, text_facets.gathers(len(c), f.values.pairs()[0].size)),
                                        repeats)["p50_ms"],
            })
    return {"gather_vs_mask_region": by_candidates, "per_value_vs_bincount": by_values}


def value_search_figures(records: int, repeats: int) -> dict[str, Any]:
    index = Index()
    for batch in iter_batches(jsonl_path("places", records), 10_000):
        index.add_records([{"id": record["id"], "name": record["name"]} for record in batch])
        if len(index.alive) >= 300_000:
            break
    columns = index.field_columns("name")
    assert columns is not None and columns.values is not None
    started = time.perf_counter()
    search_facet_values(columns, index.alive, "san", 10)
    figures: dict[str, Any] = {"records": len(index.alive), "distinct_values": len(columns.values.values),
                               "first_query_s": round(time.perf_counter() - started, 2), "queries": {}}
    for query in VALUE_QUERIES:
        answer = search_facet_values(columns, index.alive, query, 10)
        figures["queries"][query or "(empty)"] = {
            **timed(lambda query=query: search_facet_values(columns, index.alive, query, 10), repeats),
            "top": [entry["value"] for entry in answer[:3]],
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    arguments = parser.parse_args()
    engine, ingest_s = load(arguments.records)
    report: dict[str, Any] = {"records": arguments.records, "ingest_s": round(ingest_s, 1)}
    report["facets"] = facet_figures(engine, arguments.repeats)
    report["gather_threshold"] = threshold_figures(engine, max(5, arguments.repeats // 3))
    del engine
    report["value_search"] = value_search_figures(arguments.records, arguments.repeats)
    if arguments.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{arguments.records:,} places, ingest {report['ingest_s']} s, "
          f"first facet request {report['facets']['first_facet_request_s']} s")
    print("| filter | matching | search | + 2 text facets + numeric facet | facet stage | group admin1Code | group region |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, row in report["facets"]["queries"].items():
        cells = [row[key]["p50_ms"] for key in ("search_without_facets", "search_with_facets", "facet_stage_only",
                                                 "group_admin1Code", "group_region")]
        print(f"| `{row['filter']}` ({label}) | {row['matching']:,} | " + " | ".join(f"{cell} ms" for cell in cells) + " |")
    print("\nregion (pairs paths): | candidates | gather | mask + bincount |\n|---:|---:|---:|")
    for row in report["gather_threshold"]["gather_vs_mask_region"]:
        print(f"| {row['candidates']:,} | {row['gather']} ms | {row['mask_bincount']} ms |")
    print("\n| field | values | candidates | intersection per value | pairs + bincount |\n|---|---:|---:|---:|---:|")
    for row in report["gather_threshold"]["per_value_vs_bincount"]:
        print(f"| {row['field']} | {row['values']:,} | {row['candidates']:,} | {row['intersection_per_value']} ms "
              f"| {row['pairs_bincount']} ms |")
    value_search = report["value_search"]
    print(f"\nfacet value search over name: {value_search['distinct_values']:,} values, "
          f"first query {value_search['first_query_s']} s")
    print("| query | p50 | p95 | top |\n|---|---:|---:|---|")
    for query, row in value_search["queries"].items():
        print(f"| `{query}` | {row['p50_ms']} ms | {row['p95_ms']} ms | {', '.join(map(str, row['top']))} |")


if __name__ == "__main__":
    main()
