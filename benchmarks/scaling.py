"""How ingest, memory, disk, open time and first-run and warm latency grow with the collection: one
corpus at several sizes (default the packages corpus at 100k, 1M and 10M), roarsearch beside
tantivy, with the query-ready index's targets checked at every size.

For each size, two measurements, each following ../shared/BENCH-METHOD.md:
- ``benchmarks.ingest``: every engine built in its own process from records decoded batch by batch
  with the clock stopped (the adds, the final commit or close and the merges still owed are timed),
  peak resident memory of every process of the engine, resident memory after the build and in a
  fresh process after open + one query, disk bytes of the data directory;
- ``benchmarks.run --fresh N --writer``: warm p50/p95/p99 per class, first-run (fresh) p50/p95 per
  class right after the load, after the warm passes and with a 1,000 records/s writer, every
  answer compared between the engines.
Each size's two reports are saved as ``results/<name>-<size>-ingest.json`` and
``results/<name>-<size>-run.json`` (with their .md): sizes can be measured in separate commands
(the 10M one alone, on a quiet machine) and ``--combine`` rebuilds the table from every size saved
under the name. The table (``results/<name>.md``, ``.json``) and the plot (``<name>.png``) show each
figure per size and engine and roarsearch's ratio to tantivy; p50s are the geometric mean over the
classes both engines answer. The targets are printed as PASS/FAIL lines with the measured value:

- ingest records/s >= 0.5x tantivy's; peak RSS (every process) <= 2x tantivy's;
- resident after open + one query <= 25% of the JSON Lines bytes; disk <= 0.5x the JSON Lines;
- open + first query <= 3 s;
- fresh p50 <= 1.0x tantivy's and fresh p95 <= 2x on every class; with the writer p50 <= 1.5x;
- warm p50 <= 1.0x on every class;
- every compared answer agrees (warm and fresh passes).

How to run:
    python -m benchmarks.scaling --sizes 100000 --fresh 2000 --name scaling-packages
    python -m benchmarks.scaling --sizes 1000000 --fresh 2000 --name scaling-packages
    python -m benchmarks.scaling --sizes 10000000 --fresh 2000 --name scaling-packages --timeout 14400
    python -m benchmarks.scaling --combine --name scaling-packages      # table + plot of every size saved
    python -m benchmarks.scaling --sizes 10000000 --latency-only        # keeps the saved ingest report
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.datasets import CORPORA, SourceMissing
from benchmarks.workloads import CLASSES

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SIZES = (100_000, 1_000_000, 10_000_000)
DEFAULT_ENGINES = ("roarsearch", "tantivy")
REFERENCE = "tantivy"
OURS = "roarsearch"
#: Targets: (name, ratio or figure, bound, at least?) — see the module docstring.
TARGETS = {"ingest_vs_tantivy": 0.5, "peak_vs_tantivy": 2.0, "resident_vs_jsonl": 0.25, "disk_vs_jsonl": 0.5,
           "open_first_query_s": 3.0, "fresh_p50_vs_tantivy": 1.0, "fresh_p95_vs_tantivy": 2.0,
           "writer_p50_vs_tantivy": 1.5, "warm_p50_vs_tantivy": 1.0}
#: The per-size figures of the table, from the ingest report (key, label).
INGEST_FIGURES = (("records_per_s", "ingest records/s"), ("peak_rss_mb", "peak RSS MB (all processes)"),
                  ("rss_after_build_mb", "RSS after build MB"), ("rss_after_open_mb", "RSS after open MB"),
                  ("disk_mb", "disk MB"), ("open_s", "open + first query s"))
#: The latency figures (geometric mean over classes): (label, section of the run figures, key).
LATENCY_FIGURES = (("warm p50 ms", None, "p50_ms"), ("fresh p50 ms", "fresh", "p50_ms"),
                   ("fresh p95 ms", "fresh", "p95_ms"), ("fresh after load p50 ms", "after_load", "p50_ms"),
                   ("fresh with writer p50 ms", "writer", "p50_ms"))


def stem(name: str, size: int, kind: str) -> Path:
    return RESULTS / f"{name}-{size}-{kind}"


def measure_size(corpus: str, size: int, engines: tuple[str, ...], name: str, fresh: int, writer: bool,
                 per_class: int, budget_s: float, rounds: int, fresh_budget_s: float, timeout_s: float,
                 latency_only: bool = False) -> None:
    """Both reports of one size, saved under ``name`` (``latency_only``: the latency report; the
    ingest report saved before for this size is kept)."""
    from benchmarks import ingest, run

    if not latency_only:
        started = time.perf_counter()
        report = ingest.measure(corpus, size, engines, timeout_s)
        report["command"] = "python -m benchmarks.scaling " + " ".join(sys.argv[1:])
        path = stem(name, size, "ingest")
        path.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
        path.with_suffix(".md").write_text(ingest.markdown(report))
        print(f"[{corpus} {size:,}] ingest measured ({time.perf_counter() - started:.0f} s)", flush=True)
    started = time.perf_counter()
    report = run.run_all([(corpus, size)], per_class, engines, budget_s, timeout_s, rounds, fresh, fresh_budget_s,
                         writer)
    report["command"] = "python -m benchmarks.scaling " + " ".join(sys.argv[1:])
    path = stem(name, size, "run")
    path.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    path.with_suffix(".md").write_text(run.markdown(report))
    print(f"[{corpus} {size:,}] latency measured ({time.perf_counter() - started:.0f} s)", flush=True)


def _engine(report: dict[str, Any], engine: str) -> dict[str, Any] | None:
    return next((run for run in report.get("runs", []) if run["engine"] == engine and "error" not in run), None)


def _class_figures(run: dict[str, Any], section: str | None) -> dict[str, Any]:
    found: dict[str, Any] = run.get("fresh", {}).get(section, {}) if section else run.get("classes", {})
    return found


def class_ratios(ours: dict[str, Any], theirs: dict[str, Any], section: str | None, key: str) -> dict[str, float]:
    """Per class both engines answered: our ``key`` over theirs."""
    mine, other = _class_figures(ours, section), _class_figures(theirs, section)
    return {kind: mine[kind][key] / other[kind][key] for kind in CLASSES
            if key in mine.get(kind, {}) and key in other.get(kind, {}) and other[kind][key] > 0}


def geometric_mean(values: list[float]) -> float | None:
    values = [value for value in values if value > 0]
    return math.exp(sum(math.log(value) for value in values) / len(values)) if values else None


def latency_summary(run: dict[str, Any], section: str | None, key: str, classes: list[str]) -> float | None:
    figures = _class_figures(run, section)
    return geometric_mean([figures[kind][key] for kind in classes if key in figures.get(kind, {})])


def size_row(size: int, ingest: dict[str, Any] | None, latency: dict[str, Any] | None) -> dict[str, Any]:
    """One size: per engine its figures, roarsearch's ratios to tantivy, the targets' verdicts."""
    row: dict[str, Any] = {"records": size, "engines": {}, "ratios": {}}
    if ingest:
        row["jsonl_mb"] = ingest["jsonl_mb"]
        for run in ingest["runs"]:
            if "error" not in run:
                row["engines"].setdefault(run["engine"], {}).update(
                    {key: run[key] for key, _ in INGEST_FIGURES if key in run})
    if latency:
        row.setdefault("jsonl_mb", next((run.get("jsonl_mb") for run in latency["runs"] if "jsonl_mb" in run), None))
        ours, theirs = _engine(latency, OURS), _engine(latency, REFERENCE)
        # The classes both answer: a geometric mean over the same classes for every engine.
        shared = [kind for kind in CLASSES if ours and theirs and "p50_ms" in ours["classes"].get(kind, {})
                  and "p50_ms" in theirs["classes"].get(kind, {})]
        for run in latency["runs"]:
            if "classes" not in run:
                continue
            figures = row["engines"].setdefault(run["engine"], {})
            for label, section, key in LATENCY_FIGURES:
                value = latency_summary(run, section, key, shared)
                if value is not None:
                    figures[label] = round(value, 3)
        row["agreement"] = list(latency.get("agreement", [])) + list(latency.get("fresh_agreement", []))
        if ours and theirs:
            row["class_ratios"] = {
                "fresh_p50": class_ratios(ours, theirs, "fresh", "p50_ms"),
                "fresh_p95": class_ratios(ours, theirs, "fresh", "p95_ms"),
                "writer_p50": class_ratios(ours, theirs, "writer", "p50_ms"),
                "warm_p50": class_ratios(ours, theirs, None, "p50_ms")}
    mine, other = row["engines"].get(OURS, {}), row["engines"].get(REFERENCE, {})
    for key in {*mine} & {*other}:
        if other[key]:
            row["ratios"][key] = round(mine[key] / other[key], 3)
    row["verdicts"] = verdicts(row)
    return row


def _verdict(name: str, value: float | None, bound: float, at_least: bool, text: str) -> dict[str, Any]:
    passed = None if value is None else (value >= bound if at_least else value <= bound)
    return {"target": name, "value": value, "bound": bound, "at_least": at_least, "passed": passed, "text": text}


def verdicts(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target checked on one size (``passed`` None when a figure is missing)."""
    mine, ratios = row["engines"].get(OURS, {}), row["ratios"]
    jsonl = row.get("jsonl_mb")
    found = [
        _verdict("ingest records/s vs tantivy", ratios.get("records_per_s"), TARGETS["ingest_vs_tantivy"], True,
                 "×"),
        _verdict("peak RSS (all processes) vs tantivy", ratios.get("peak_rss_mb"), TARGETS["peak_vs_tantivy"], False,
                 "×"),
        _verdict("resident after open vs JSON Lines", mine["rss_after_open_mb"] / jsonl
                 if jsonl and "rss_after_open_mb" in mine else None, TARGETS["resident_vs_jsonl"], False, "×"),
        _verdict("disk vs JSON Lines", mine["disk_mb"] / jsonl if jsonl and "disk_mb" in mine else None,
                 TARGETS["disk_vs_jsonl"], False, "×"),
        _verdict("open + first query, s", mine.get("open_s"), TARGETS["open_first_query_s"], False, " s"),
    ]
    for name, key, bound in (("fresh p50 vs tantivy, every class", "fresh_p50", TARGETS["fresh_p50_vs_tantivy"]),
                             ("fresh p95 vs tantivy, every class", "fresh_p95", TARGETS["fresh_p95_vs_tantivy"]),
                             ("fresh p50 with the writer vs tantivy, every class", "writer_p50",
                              TARGETS["writer_p50_vs_tantivy"]),
                             ("warm p50 vs tantivy, every class", "warm_p50", TARGETS["warm_p50_vs_tantivy"])):
        per_class = row.get("class_ratios", {}).get(key, {})
        worst = max(per_class.values(), default=None)
        verdict = _verdict(name, worst, bound, False, "×")
        verdict["classes"] = len(per_class)
        verdict["over"] = {kind: round(value, 2) for kind, value in sorted(per_class.items(), key=lambda item: -item[1])
                           if value > bound}
        found.append(verdict)
    if "agreement" in row:
        problems = row["agreement"]
        found.append({"target": "every compared answer agrees (warm and fresh)", "value": len(problems), "bound": 0,
                      "at_least": False, "passed": not problems, "text": " disagreements"})
    return found


def verdict_line(size: int, verdict: dict[str, Any]) -> str:
    state = {True: "PASS", False: "FAIL", None: "----"}[verdict["passed"]]
    bound = f"{'>=' if verdict['at_least'] else '<='} {verdict['bound']:g}{verdict['text']}"
    value = verdict["value"]
    measured = "not measured" if value is None else (
        f"{value:,.0f}{verdict['text']}" if verdict["text"] == " disagreements" else f"{value:,.3g}{verdict['text']}")
    if "classes" in verdict:
        measured = f"worst {measured} over {verdict['classes']} classes"
        if verdict["over"]:
            measured += "; over: " + ", ".join(f"{kind} {ratio:.2f}×" for kind, ratio in verdict["over"].items())
    return f"{state} {size:>10,}  {verdict['target']} {bound}: {measured}"


def combine(name: str) -> dict[str, Any]:
    """Every size saved under ``name``: the rows, in size order."""
    base = RESULTS / name
    tails = [path.name[len(base.name) + 1:] for path in base.parent.glob(f"{base.name}-*-*.json")]
    sizes = sorted({int(tail.split("-")[0]) for tail in tails if tail.split("-")[0].isdigit()})
    rows, corpus = [], None
    for size in sizes:
        reports = {}
        for kind in ("ingest", "run"):
            path = stem(name, size, kind).with_suffix(".json")
            reports[kind] = json.loads(path.read_text()) if path.exists() else None
        corpus = corpus or (reports["ingest"] or {}).get("corpus") or \
            next((run["corpus"] for run in (reports["run"] or {}).get("runs", [])), None)
        row = size_row(size, reports["ingest"], reports["run"])
        row["commands"] = {kind: report["command"] for kind, report in reports.items() if report}
        row["sources"] = {kind: report["source"] for kind, report in reports.items() if report}
        rows.append(row)
    return {"name": name, "corpus": corpus, "rows": rows}


def markdown(report: dict[str, Any]) -> str:
    rows = report["rows"]
    engines = sorted({engine for row in rows for engine in row["engines"]}, key=lambda e: (e != OURS, e))
    labels = [*INGEST_FIGURES, *((label, label) for label, _, _ in LATENCY_FIGURES)]
    lines = [f"Scaling of the {report['corpus']} corpus: per size, each engine's figures and roarsearch / tantivy. "
             "p50s: geometric mean over the classes both engines answer. Sources: "
             + ", ".join(f"`{report['name']}-{row['records']}-ingest.md`, `-run.md`" for row in rows) + ".", "",
             "| figure | engine | " + " | ".join(f"{row['records']:,}" for row in rows) + " |",
             "|---|---|" + "---|" * len(rows)]
    for key, label in labels:
        for engine in engines:
            cells = [row["engines"].get(engine, {}).get(key) for row in rows]
            if all(cell is None for cell in cells):
                continue
            lines.append(f"| {label} | {engine} | " + " | ".join("—" if c is None else f"{c:,}" for c in cells) + " |")
        ratios = [row["ratios"].get(key) for row in rows]
        if any(ratio is not None for ratio in ratios):
            lines.append(f"| {label} | roarsearch / tantivy | " +
                         " | ".join("—" if r is None else f"{r:.2f}×" for r in ratios) + " |")
    lines.append("| JSON Lines MB | — | " + " | ".join(f"{row.get('jsonl_mb') or 0:,}" for row in rows) + " |")
    lines += ["", "Targets (roarsearch, every size):", "", "```"]
    lines += [verdict_line(row["records"], verdict) for row in rows for verdict in row["verdicts"]]
    lines += ["```", "", "Commands: " + "; ".join(sorted({f"`{command}`" for row in rows
                                                        for command in row.get("commands", {}).values()})), ""]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from benchmarks.run import COLOURS

    rows = report["rows"]
    panels = [*INGEST_FIGURES, ("warm p50 ms", "warm p50 ms (geo. mean)"), ("fresh p50 ms", "fresh p50 ms (geo. mean)")]
    figure, axes = plt.subplots(3, 3, figsize=(15, 12))
    engines = sorted({engine for row in rows for engine in row["engines"]})
    for axis, (key, label) in zip(axes.flat, panels):
        for engine in engines:
            points = [(row["records"], row["engines"][engine][key]) for row in rows
                      if key in row["engines"].get(engine, {})]
            if points:
                axis.plot(*zip(*points), marker="o", label=engine, color=COLOURS.get(engine))
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(label)
        axis.set_xlabel("records (log)")
    axis = axes.flat[len(panels)]
    for key, label in [*INGEST_FIGURES, ("warm p50 ms", "warm p50"), ("fresh p50 ms", "fresh p50")]:
        points = [(row["records"], row["ratios"][key]) for row in rows if key in row["ratios"]]
        if points:
            axis.plot(*zip(*points), marker="o", label=label)
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_title("roarsearch / tantivy")
    axis.set_xlabel("records (log)")
    axis.legend(fontsize=7)
    axes.flat[0].legend()
    figure.suptitle(f"{report['corpus']}: growth from {rows[0]['records']:,} to {rows[-1]['records']:,} records")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def write(name: str) -> dict[str, Any]:
    report = combine(name)
    if not report["rows"]:
        raise SystemExit(f"no results/{name}-<size>-ingest.json or -run.json yet")
    path = RESULTS / name
    path.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    path.with_suffix(".md").write_text(table)
    written = plot(report, path.with_suffix(".png"))
    print(table)
    print("wrote", path.with_suffix(".json"), path.with_suffix(".md"), written)
    return report


def main() -> None:
    from benchmarks.fresh import FRESH_BUDGET_S
    from benchmarks.run import CLASS_BUDGET_S, TIMED_ROUNDS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="packages")
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="comma-separated record counts")
    parser.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    parser.add_argument("--name", help="result file stem (default scaling-<corpus>)")
    parser.add_argument("--fresh", type=int, default=2_000, help="fresh entries per class and pass")
    parser.add_argument("--fresh-budget", type=float, default=FRESH_BUDGET_S, help="seconds per class and fresh pass")
    parser.add_argument("--no-writer", action="store_true", help="leave out the fresh pass with the writer")
    parser.add_argument("--per-class", type=int, default=30, help="warm queries per class")
    parser.add_argument("--class-budget", type=float, default=CLASS_BUDGET_S)
    parser.add_argument("--rounds", type=int, default=TIMED_ROUNDS)
    parser.add_argument("--timeout", type=float, default=3_600, help="seconds per child process step")
    parser.add_argument("--combine", action="store_true", help="only rebuild the table and plot from saved sizes")
    parser.add_argument("--latency-only", action="store_true",
                        help="measure latency only, keeping each size's saved ingest report (made by benchmarks.ingest "
                             "--name <name>-<size>-ingest)")
    args = parser.parse_args()
    name = args.name or f"scaling-{args.corpus}"
    if not args.combine:
        engines = tuple(args.engines.split(","))
        try:
            for size in (int(size) for size in args.sizes.split(",")):
                measure_size(args.corpus, size, engines, name, args.fresh, not args.no_writer, args.per_class,
                             args.class_budget, args.rounds, args.fresh_budget, args.timeout, args.latency_only)
        except SourceMissing as missing:
            raise SystemExit(f"error: {missing}") from None
    report = write(name)
    failed = [row for row in report["rows"] if any(verdict["passed"] is False for verdict in row["verdicts"])]
    if failed:
        sizes = ", ".join(f"{row['records']:,}" for row in failed)
        print(f"targets missed at {sizes} records", file=sys.stderr)


if __name__ == "__main__":
    main()
