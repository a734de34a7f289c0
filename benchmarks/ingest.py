"""Ingest figures, engine beside engine: records/s, peak and resident memory, disk, open time.

What's measured, per engine, each in its own processes (so every memory figure is that engine's):
- a *build* process streams the corpus' JSON Lines cache in batches of 10,000 through the engine's
  adapter (``benchmarks.peers``: roarsearch is a durable ``Engine(path)`` loaded with
  ``add_batches`` and closed at the end, its merges awaited by the close; tantivy a 2-thread
  writer with a 256 MB heap, one commit, merges awaited; SQLite FTS5 one transaction, indexes and
  ``optimize`` after the load) and reports records/s over the time spent in the engine: each
  batch is decoded from JSON before the engine is handed it, with the clock stopped (the decode is
  no engine's work), so the timed build is the adds, the final commit or close, and the
  background work the engine still owed, durable on disk (``build_s``; the wall clock with the
  decode is ``wall_s``, its records/s ``records_per_s_with_decode``). roarsearch's analysis worker
  process may go on with the batch it was handed while the clock is stopped; its CPU time is in
  ``cpu_s``, with the build's (all threads, all processes) — reported too, as the machine may be
  shared), the process's peak resident memory (``VmHWM``,
  which starts afresh at exec; read before the reopen below), with any helper process it
  started and reaped during the build counted in (roarsearch's analysis worker: its peak added
  to the process's peak as it was when the worker was reaped, as if both peaked at once; the
  larger of that and the process's own peak — an upper bound of what both held at any one
  time, without adding the worker to the final merge that runs after it is gone), and its
  resident memory after the
  build returned, ``gc.collect()`` ran, and the index was reopened in that same process with one
  query asked (``VmRSS``: what a process that has indexed and now serves its index holds; the
  figure right after the build closed is ``rss_after_close_mb`` in the JSON);
- the parent then sums the bytes of every file the engine left in its directory (disk);
- an *open* process reopens that directory and runs one query (the first ``one_word_medium``
  entry of the corpus' workload): open time is the reopen plus that query, and its resident
  memory after them is "RSS after reopen".
Ratios are to tantivy. Targets, for roarsearch: ingest >= 0.5x tantivy's records/s; peak RSS <=
2x tantivy's; resident after build <= 1.5 GB; disk <= 0.5x the JSON Lines bytes; open + one query
<= 3 s (``benchmarks.scaling`` checks the query-ready index's targets across sizes).

Corpus: ``benchmarks.datasets`` (default ``packages``: Debian package descriptions, about 63,700
real records of ~420 characters of prose, scaled up deterministically to N).

How to run:
    python -m benchmarks.ingest --corpus packages --records 100000
    python -m benchmarks.ingest --corpus packages --records 1000000 --engines roarsearch,tantivy,sqlite-fts5
Writes benchmarks/results/ingest-<corpus>-<records>.json and .md (``--name`` changes the stem).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.core import status_mb
from benchmarks.datasets import CORPORA, SourceMissing, iter_batches, jsonl_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_ENGINES = ("roarsearch", "tantivy", "sqlite-fts5")
BATCH = 10_000
TARGETS = {"ingest_vs_tantivy": 0.5, "peak_vs_tantivy": 2.0, "rss_after_build_mb": 1_500.0,
           "disk_vs_jsonl": 0.5, "open_s": 3.0}


def _cpu_s() -> float:
    """CPU seconds (user + system) of this process, every thread included, and of the helper
    processes it has reaped."""
    own, helpers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + helpers.ru_utime + helpers.ru_stime


def _timed(batches: Iterator[list[dict[str, Any]]], spent: list[float]) -> Iterator[list[dict[str, Any]]]:
    """``batches``, adding the seconds spent reading and decoding them (the whole batch, before the
    engine sees any of it) to ``spent[0]``: the time the build subtracts."""
    while True:
        started = time.perf_counter()
        batch = next(batches, None)
        spent[0] += time.perf_counter() - started
        if batch is None:
            return
        yield batch


def child_build(engine: str, corpus_name: str, records: int, directory: str) -> dict[str, Any]:
    from benchmarks.run import adapter_for

    adapter = adapter_for(engine)
    start_mb = status_mb("VmRSS")
    parse = [0.0]
    cpu_started = _cpu_s()
    started = time.perf_counter()
    built = adapter.build(CORPORA[corpus_name], _timed(iter_batches(jsonl_path(corpus_name, records), BATCH), parse),
                          directory)
    wall_s = time.perf_counter() - started
    build_s = wall_s - parse[0]  # the decode of every batch, clock stopped
    cpu_s = _cpu_s() - cpu_started
    gc.collect()
    closed_mb = status_mb("VmRSS")
    # roarsearch's analysis worker process: its own peak (``VmHWM`` it reported; the kernel's
    # figure for reaped children also counts the parent's memory it was forked from) is added to
    # this process's peak as it was when the worker was reaped, as if both peaked at once; after
    # that only this process holds memory (a first load's final merge). An upper bound of the two
    # processes' resident memory at any one time.
    helper_mb, process_at_helper_exit_mb = _helper_peak_mb(engine)
    process_peak_mb = status_mb("VmHWM")
    peak_mb = max(process_peak_mb, process_at_helper_exit_mb + helper_mb)
    # The process that indexed now serves what it built: reopen it here and ask one query.
    adapter.open()
    adapter.search("one_word_medium", _first_query(corpus_name))
    gc.collect()
    serving_mb = status_mb("VmRSS")
    adapter.close()
    return {"records": built, "build_s": round(build_s, 2), "parse_s": round(parse[0], 2), "wall_s": round(wall_s, 2),
            "records_per_s": round(built / build_s), "records_per_s_with_decode": round(built / wall_s),
            "cpu_s": round(cpu_s, 2), "rss_start_mb": round(start_mb, 1),
            "rss_after_close_mb": round(closed_mb, 1), "rss_after_build_mb": round(serving_mb, 1),
            "peak_rss_mb": round(peak_mb, 1), "process_peak_rss_mb": round(process_peak_mb, 1),
            "helper_peak_rss_mb": round(helper_mb, 1),
            "process_peak_at_helper_exit_rss_mb": round(process_at_helper_exit_mb, 1)}


def _helper_peak_mb(engine: str) -> tuple[float, float]:
    """(the helper processes' peak, this process's peak when it reaped the last of them), in MB."""
    if engine != "roarsearch":
        return 0.0, 0.0
    from roarsearch.analysis.worker import caller_peak_at_close_mb, peak_rss_mb

    return peak_rss_mb(), caller_peak_at_close_mb()


def _first_query(corpus_name: str) -> dict[str, Any]:
    from benchmarks.workloads import load

    return load(corpus_name)["classes"]["one_word_medium"][0]


def child_open(engine: str, corpus_name: str, directory: str) -> dict[str, Any]:
    from benchmarks.run import adapter_for

    entry = _first_query(corpus_name)
    adapter = adapter_for(engine)
    adapter.attach(CORPORA[corpus_name], directory)
    start_mb = status_mb("VmRSS")
    started = time.perf_counter()
    adapter.open()
    opened = time.perf_counter()
    answer = adapter.search("one_word_medium", entry)
    done = time.perf_counter()
    result = {"open_s": round(done - started, 3), "first_query_ms": round((done - opened) * 1000, 1),
              "first_query": " ".join(entry["words"]), "first_query_hits": answer.total,
              "open_rss_start_mb": round(start_mb, 1), "rss_after_open_mb": round(status_mb("VmRSS"), 1)}
    adapter.close()
    return result


def _child(arguments: list[str], timeout_s: float) -> dict[str, Any]:
    from benchmarks.run import child_environment

    try:
        child = subprocess.run([sys.executable, "-m", "benchmarks.ingest", *arguments], capture_output=True,
                               text=True, cwd=ROOT, timeout=timeout_s, env=child_environment())
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    if child.returncode != 0:
        print(child.stderr[-3000:], file=sys.stderr)
        last = child.stderr.strip().splitlines()[-1] if child.stderr.strip() else ""
        return {"error": f"exit {child.returncode}: {last}"}
    return json.loads(child.stdout.strip().splitlines()[-1])


def _disk_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(directory) for name in names)


def measure(corpus: str, records: int, engines: tuple[str, ...], timeout_s: float) -> dict[str, Any]:
    from benchmarks.run import machine, source_commit

    started = time.perf_counter()
    path = jsonl_path(corpus, records)
    jsonl_bytes = path.stat().st_size
    print(f"[{corpus} {records:,}] data {path.name} ({jsonl_bytes / 1e6:.0f} MB, "
          f"{time.perf_counter() - started:.0f} s)", flush=True)
    runs = []
    for engine in engines:
        directory = tempfile.mkdtemp(prefix=f"ingest-{engine}-")
        try:
            started = time.perf_counter()
            run: dict[str, Any] = {"engine": engine,
                                   **_child(["--child-build", engine, "--corpus", corpus, "--records", str(records),
                                             "--directory", directory], timeout_s)}
            if "error" not in run:
                run["disk_mb"] = round(_disk_bytes(directory) / 1e6, 1)
                opened = _child(["--child-open", engine, "--corpus", corpus, "--directory", directory], timeout_s)
                run.update(opened if "error" not in opened else {"open_error": opened["error"]})
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        runs.append(run)
        state = run.get("error") or (f"{run['records_per_s']:,} records/s, peak {run['peak_rss_mb']:,} MB, "
                                     f"disk {run['disk_mb']:,} MB, open {run.get('open_s', '?')} s")
        print(f"[{corpus} {records:,}] {engine}: {state} ({time.perf_counter() - started:.0f} s)", flush=True)
    return {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "command": "python -m benchmarks.ingest " + " ".join(sys.argv[1:]), "source": source_commit(),
            "corpus": corpus, "records": records, "jsonl_mb": round(jsonl_bytes / 1e6, 1), "runs": runs}


def _ratio(value: float | None, reference: float | None) -> str:
    return f"{value / reference:.2f}×" if value is not None and reference else "—"


def markdown(report: dict[str, Any]) -> str:
    runs = report["runs"]
    tantivy = next((run for run in runs if run["engine"] == "tantivy" and "error" not in run), None)
    jsonl_mb = report["jsonl_mb"]
    lines = [f"Machine: {report['machine']}. Date: {report['date']}. Command: `{report['command']}`. "
             f"Source: {report['source']}. {report['corpus']}, {report['records']:,} records, "
             f"JSON Lines {jsonl_mb:,} MB.", "",
             "| engine | records/s | vs tantivy | build s (decode, not counted) | build CPU s | peak RSS MB | vs tantivy | "
             "RSS after build MB | disk MB | vs JSON Lines | open + 1 query s | RSS after reopen MB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        if "error" in run:
            lines.append(f"| {run['engine']} | failed: {run['error'][:80]} |" + " |" * 10)
            continue
        lines.append(
            f"| {run['engine']} | {run['records_per_s']:,} | {_ratio(run['records_per_s'], tantivy and tantivy['records_per_s'])} "
            f"| {run['build_s']:,} ({run['parse_s']:,}) | {run.get('cpu_s', '—')} | {run['peak_rss_mb']:,} "
            f"| {_ratio(run['peak_rss_mb'], tantivy and tantivy['peak_rss_mb'])} | {run['rss_after_build_mb']:,} "
            f"| {run['disk_mb']:,} | {run['disk_mb'] / jsonl_mb:.2f}× | {run.get('open_s', 'failed')} "
            f"| {format(run['rss_after_open_mb'], ',') if 'rss_after_open_mb' in run else '—'} |")
    ours = next((run for run in runs if run["engine"] == "roarsearch" and "error" not in run), None)
    if ours is not None:
        figures = [
            ("ingest records/s vs tantivy", ours["records_per_s"] / tantivy["records_per_s"] if tantivy else None,
             TARGETS["ingest_vs_tantivy"], True, "×"),
            ("peak RSS vs tantivy", ours["peak_rss_mb"] / tantivy["peak_rss_mb"] if tantivy else None,
             TARGETS["peak_vs_tantivy"], False, "×"),
            ("resident after build, MB", ours["rss_after_build_mb"], TARGETS["rss_after_build_mb"], False, ""),
            ("disk vs JSON Lines", ours["disk_mb"] / jsonl_mb, TARGETS["disk_vs_jsonl"], False, "×"),
            ("open + 1 query, s", ours.get("open_s"), TARGETS["open_s"], False, ""),
        ]
        lines += ["", "| roarsearch (target) | measured | target | met |", "|---|---|---|---|"]
        for label, value, target, at_least, unit in figures:
            met = "—" if value is None else "yes" if (value >= target if at_least else value <= target) else "no"
            shown = "—" if value is None else f"{value:,.2f}{unit}" if unit else f"{value:,}"
            lines.append(f"| {label} | {shown} | {'≥' if at_least else '≤'} {target:,}{unit} | {met} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="packages")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--engines", default=",".join(DEFAULT_ENGINES))
    parser.add_argument("--timeout", type=float, default=3_600, help="seconds per child process")
    parser.add_argument("--name", help="result file stem (default ingest-<corpus>-<records>)")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    parser.add_argument("--replot", metavar="NAME", help="rewrite results/NAME.md from results/NAME.json")
    parser.add_argument("--child-build", help=argparse.SUPPRESS)
    parser.add_argument("--child-open", help=argparse.SUPPRESS)
    parser.add_argument("--directory", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_build:
        print(json.dumps(child_build(args.child_build, args.corpus, args.records, args.directory)))
        return
    if args.child_open:
        print(json.dumps(child_open(args.child_open, args.corpus, args.directory)))
        return
    if args.replot:
        stem = RESULTS / args.replot
        stem.with_suffix(".md").write_text(markdown(json.loads(stem.with_suffix(".json").read_text())))
        print("wrote", stem.with_suffix(".md"))
        return
    engines = tuple(args.engines.split(","))
    from benchmarks.run import adapter_for
    for engine in engines:
        adapter_for(engine)  # unknown names fail before any work
    try:
        report = measure(args.corpus, args.records, engines, args.timeout)
    except SourceMissing as missing:
        raise SystemExit(f"error: {missing}") from None
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / (args.name or f"ingest-{args.corpus}-{args.records}")
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    stem.with_suffix(".md").write_text(table)
    print(json.dumps(report) if args.json else table)
    print("wrote", stem.with_suffix(".json"), stem.with_suffix(".md"))


if __name__ == "__main__":
    main()
