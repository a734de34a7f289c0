"""Searches right after a write: what a steady writer costs the searches that follow each batch.

What's measured, in one process (the engine a server worker holds): a durable collection of
``--records`` package records (``benchmarks.datasets``, built in batches of 10,000 or copied from
``--built``); the HTTP load's mix of 160 searches (``benchmarks.load``: one-word, two-word, typo and
filtered + faceted, 10 results, ``id``/``name``/``summary``) run three times to warm up, then
``--steady`` passes with no write between them; then ``--writes`` times: one batch of ``--batch``
new records (copies of loaded ones under new ids, as the load's writer sends), the mix once
(*first after the write*: every structure kept across searches that the write touched is brought up
to date here), the mix again (*second*, as warm as the steady passes). Every first-after-write pass
also checks that an empty query counts every record added so far (answers stay exact).
``--new-words``: each written record also brings a word no record had, so every write grows the
vocabulary (typo expansions are then brought up to date too).

Reported: the batch's add time (median), per pass the total of its 160 searches (median over the
steady passes, the first-after-write passes, the second passes), what the first pass after a write
costs beyond the second (median and max over the writes), and per search the p50, p99 and max of
the first-after-write passes beside the steady ones. Nothing is cached whole: the same requests are
asked again, as a server's clients do.

How to run: ``python -m benchmarks.after_write --records 1000000 [--writes 8] [--batch 1000]
[--built DIR] [--new-words] [--json] [--out STEM]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

from benchmarks.datasets import iter_batches, jsonl_path
from benchmarks.load import (
    COLLECTION,
    _machine,
    _source,
    build_collection,
    mix_entries,
    roarsearch_request,
    writer_batches,
)


def _pass(engine: Any, requests: list[dict[str, Any]]) -> list[float]:
    """Milliseconds of each search of one pass over ``requests``."""
    took = []
    for request in requests:
        started = time.perf_counter()
        engine.search(request)
        took.append((time.perf_counter() - started) * 1000)
    return took


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _with_new_words(batches: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each record's description given one word no record had (a made-up spelling of its id):
    every write then grows the vocabulary, as real records do."""
    return [[{**record, "description": f"{record.get('description') or ''} qz{record['id']:x}"} for record in batch]
            for batch in batches]


def measure(data: str, records: list[dict[str, Any]], writes: int, batch: int, steady_passes: int,
            new_words: bool = False) -> dict[str, Any]:
    from roarsearch import Engine

    requests = [roarsearch_request(entry) for _, entry in mix_entries()]
    batches = writer_batches(records, writes, batch)
    if new_words:
        batches = _with_new_words(batches)
    with Engine(data) as engine:
        for _ in range(3):
            _pass(engine, requests)
        steady = [_pass(engine, requests) for _ in range(steady_passes)]
        add_ms, first, second = [], [], []
        expected = engine.search({"collection": COLLECTION, "count": 0})["totalHits"]
        for new_records in batches:
            started = time.perf_counter()
            engine.add_records(COLLECTION, new_records)
            add_ms.append((time.perf_counter() - started) * 1000)
            first.append(_pass(engine, requests))
            second.append(_pass(engine, requests))
            expected += len(new_records)
            counted = engine.search({"collection": COLLECTION, "count": 0})["totalHits"]
            if counted != expected:
                raise RuntimeError(f"after a write the collection counts {counted} records, not {expected}")
    extra = [sum(one) - sum(two) for one, two in zip(first, second)]
    steady_all = [ms for one in steady for ms in one]
    first_all = [ms for one in first for ms in one]
    return {
        "add_ms_median": round(statistics.median(add_ms), 1),
        "pass_ms": {"steady": round(statistics.median(map(sum, steady)), 1),
                    "first_after_write": round(statistics.median(map(sum, first)), 1),
                    "second_after_write": round(statistics.median(map(sum, second)), 1)},
        "first_pass_extra_ms": {"median": round(statistics.median(extra), 1), "max": round(max(extra), 1)},
        "search_ms": {name: {"p50": round(_percentile(values, 0.5), 3), "p99": round(_percentile(values, 0.99), 3),
                             "max": round(max(values), 3)}
                      for name, values in (("steady", steady_all), ("first_after_write", first_all))},
    }


def markdown(result: dict[str, Any]) -> str:
    passes, searches = result["pass_ms"], result["search_ms"]
    lines = [f"Command: `{result['command']}`. Machine: {result['machine']}. Date: {result['date']}. "
             f"Source: {result['source']}.", "",
             f"{result['records']:,} package records; {result['writes']} writes of {result['batch']:,} records "
             + ("(each with a word no record had) " if result.get("new_words") else "")
             + f"(add: median {result['add_ms_median']} ms); the HTTP load's mix of {result['searches']} searches "
             "per pass.", "",
             "| pass of the mix | total ms (median) |", "|---|---:|",
             f"| steady (no write between) | {passes['steady']} |",
             f"| first after a write | {passes['first_after_write']} |",
             f"| second after a write | {passes['second_after_write']} |", "",
             f"The first pass after a write costs {result['first_pass_extra_ms']['median']} ms more than the second "
             f"(median; max {result['first_pass_extra_ms']['max']}).", "",
             "| searches | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|"]
    for name, label in (("steady", "steady"), ("first_after_write", "first after a write")):
        lines.append(f"| {label} | {searches[name]['p50']} | {searches[name]['p99']} | {searches[name]['max']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--steady", type=int, default=5, help="passes with no write between")
    parser.add_argument("--built", help="a roarsearch data directory of the same records, copied instead of building one")
    parser.add_argument("--new-words", action="store_true", help="each written record brings a word no record had")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", help="write STEM.json and STEM.md")
    args = parser.parse_args()
    records = [record for batch in iter_batches(jsonl_path(COLLECTION, args.records)) for record in batch]
    # This harness's million record dicts are no server's: the collector is not to walk them.
    gc.freeze()
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "data")
        build_collection(records, data, args.built)
        result: dict[str, Any] = {
            "command": "python -m benchmarks.after_write " + " ".join(sys.argv[1:]), "machine": _machine(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "source": _source(),
            "records": len(records), "writes": args.writes, "batch": args.batch, "searches": len(mix_entries()),
            "new_words": args.new_words, **measure(data, records, args.writes, args.batch, args.steady, args.new_words)}
    if args.out:
        with open(args.out + ".json", "w") as out:
            json.dump(result, out, indent=2)
        with open(args.out + ".md", "w") as out:
            out.write(markdown(result))
    print(json.dumps(result, indent=2) if args.json else markdown(result))


if __name__ == "__main__":
    main()
