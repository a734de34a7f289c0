"""First-run (fresh) query passes of ``benchmarks.run --fresh N``, and the writer that adds records
while one of them runs.

Owns: the fresh query sets on disk (three disjoint sets per class, one per pass, each entry asked
once in the whole run), the live writer thread, and the fresh figures' tables and checks.
Callers: ``benchmarks.run`` (the engine's child process and the parent), ``benchmarks.scaling``,
the tests.

The three passes, each over its own set, in this order in an engine's process:
- ``after_load``: right after the bulk load returned (durable), with no idle time — the engine's
  background work (merges) still running — after one warm-workload query per class;
- ``fresh``: after the warm passes (the process already warmed by the saved workload's queries,
  none of which is in a fresh set), each class's pass preceded by the warm pass's settle;
- ``writer``: as ``fresh``, while a thread of the same process adds new records at
  :data:`WRITER_RATE` records/s in batches of :data:`WRITER_BATCH` (one batch every second; each
  batch durable and visible to the searches that follow: tantivy commits it and reloads its
  reader, SQLite commits one transaction, roarsearch's ``add_records`` returns). Batches of 100
  every 0.1 s (``--writer-batch 100``) are one choice away; tantivy's 2-thread writer then
  manages ~570 records/s on a 10,000-record collection here (a commit takes ~100 ms), below the
  rate asked, so the default is the batch size every engine keeps up with.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.datasets import CACHE, CORPORA, real_records
from benchmarks.workloads import CLASSES, FRESH_SEED, analyzer_fingerprint, entry_key, load, make_fresh

PASSES = ("after_load", "fresh", "writer")
PASS_LABELS = {"after_load": "fresh after load", "fresh": "fresh", "writer": "fresh with writer"}
#: Records per second the writer adds, and per batch (so one batch every second).
WRITER_RATE = 1_000
WRITER_BATCH = 1_000
#: Ids of the writer's records: above every corpus id at every size (movies at 10M stay below 2e11).
WRITER_ID_BASE = 10**12
#: Seconds per class and pass before its remaining fresh entries are skipped (the number measured
#: is reported).
FRESH_BUDGET_S = 60.0


def sets_directory(corpus: str, per_class: int, seed: int = FRESH_SEED) -> Path:
    """Where the fresh sets are cached (named after the analyzer's fingerprint: see
    :func:`benchmarks.workloads.analyzer_fingerprint`)."""
    return CACHE / f"fresh-{corpus}-{per_class}-s{seed}-a{analyzer_fingerprint()}"


def prepare_sets(corpus: str, per_class: int, seed: int = FRESH_SEED) -> dict[str, dict[str, int]]:
    """Write (once; cached in ``benchmarks/.cache/``) the fresh sets of ``corpus``: one JSON file per
    pass and class, ``per_class`` entries each where the class's pool allows; returns the counts
    (pass → class → entries). Entry ``i`` of the drawn set goes to pass ``i % 3``, so a class
    whose pool runs short is short in every pass alike."""
    directory = sets_directory(corpus, per_class, seed)
    counts_path = directory / "counts.json"
    if counts_path.exists():
        counts: dict[str, dict[str, int]] = json.loads(counts_path.read_text())
        return counts
    saved = load(corpus)["classes"]
    exclude = {entry_key(entry) for entries in saved.values() for entry in entries}
    drawn = make_fresh(CORPORA[corpus], real_records(corpus), per_class * len(PASSES), seed, exclude)["classes"]
    partial = directory.with_name(directory.name + f".{os.getpid()}.tmp")
    partial.mkdir(parents=True, exist_ok=True)
    counts = {}
    for number, pass_ in enumerate(PASSES):
        for kind in CLASSES:
            entries = drawn[kind][number::len(PASSES)]
            counts.setdefault(pass_, {})[kind] = len(entries)
            (partial / f"{pass_}-{kind}.json").write_text(json.dumps(entries, ensure_ascii=False), encoding="utf-8")
    (partial / "counts.json").write_text(json.dumps(counts))
    try:
        partial.rename(directory)  # atomic: a half-written set is never read
    except OSError:  # another process wrote it meanwhile
        for path in partial.iterdir():
            path.unlink()
        partial.rmdir()
    return counts


def entries(corpus: str, per_class: int, pass_: str, kind: str, seed: int = FRESH_SEED) -> list[dict[str, Any]]:
    """The fresh entries of one pass and class (read when the pass starts: the sets are never all in memory)."""
    path = sets_directory(corpus, per_class, seed) / f"{pass_}-{kind}.json"
    found: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return found


def writer_records(jsonl: Path, id_base: int = WRITER_ID_BASE) -> Iterator[dict[str, Any]]:
    """New records for the writer: the corpus' records in file order (again from the start when it
    runs out), each with a new id ``id_base + k``. The same sequence for every engine."""
    k = 0
    while True:
        with open(jsonl, encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                record["id"] = id_base + k
                k += 1
                yield record


class LiveWriter:
    """A thread that adds ``batch`` records every ``batch / rate`` seconds through ``add`` until
    stopped. The schedule is fixed in advance (batch ``k`` is due at ``k * batch / rate`` s): a batch
    that took too long makes the next ones start at once until the writer is back on time, so the
    rate over the pass is the one asked unless the engine cannot keep up (then ``records_per_s``
    says what it managed). Decoding the records is the writer's own work, done before each add."""

    def __init__(self, add: Callable[[list[dict[str, Any]]], None], records: Iterator[dict[str, Any]],
                 rate: float = WRITER_RATE, batch: int = WRITER_BATCH) -> None:
        self.add, self.records, self.rate, self.batch = add, records, rate, batch
        self.added = 0
        self.batches = 0
        self.add_seconds: list[float] = []
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-writer", daemon=True)

    def start(self) -> LiveWriter:
        self.started = time.perf_counter()
        self._thread.start()
        return self

    def _run(self) -> None:
        if hasattr(os, "sched_setaffinity"):  # the searching thread is pinned to one CPU; the writer is not
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        try:
            while not self._stop.is_set():
                due = self.started + self.batches * self.batch / self.rate
                if self._stop.wait(max(0.0, due - time.perf_counter())):
                    break
                records = [next(self.records) for _ in range(self.batch)]
                began = time.perf_counter()
                self.add(records)
                self.add_seconds.append(time.perf_counter() - began)
                self.added += len(records)
                self.batches += 1
        except Exception as error:  # reported with the pass's figures
            self.error = f"{type(error).__name__}: {error}"[:500]

    def stop(self) -> dict[str, Any]:
        """Stop after the batch being added (if any); the writer's figures."""
        self._stop.set()
        self._thread.join()
        seconds = time.perf_counter() - self.started
        ordered = sorted(self.add_seconds)
        figures: dict[str, Any] = {
            "added": self.added, "seconds": round(seconds, 2), "records_per_s": round(self.added / seconds, 1),
            "asked_records_per_s": self.rate, "batch": self.batch,
            "batch_add_p50_ms": round(ordered[len(ordered) // 2] * 1000, 2) if ordered else None,
            "batch_add_max_ms": round(ordered[-1] * 1000, 2) if ordered else None}
        if self.error:
            figures["error"] = self.error
        return figures


def reference_ratios(runs: list[dict[str, Any]], key: str, reference: str = "tantivy",
                     section: str | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """Each engine's ``key`` over ``reference``'s, per "corpus size", engine and class (lower is
    better); ``section`` names a pass of ``run["fresh"]`` (else the warm class figures)."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for corpus, size in sorted({(run["corpus"], run["records"]) for run in runs}):
        at_size = [run for run in runs if run["corpus"] == corpus and run["records"] == size and "classes" in run]

        def figures(run: dict[str, Any]) -> dict[str, Any]:
            found: dict[str, Any] = run.get("fresh", {}).get(section, {}) if section else run["classes"]
            return found

        base = next((run for run in at_size if run["engine"] == reference), None)
        if base is None:
            continue
        for run in at_size:
            if run["engine"] == reference:
                continue
            for kind, mine in figures(run).items():
                theirs = figures(base).get(kind, {})
                if key in mine and key in theirs and theirs[key] > 0:
                    table.setdefault(f"{corpus} {size}", {}).setdefault(run["engine"], {})[kind] = \
                        round(mine[key] / theirs[key], 3)
    return table


def fresh_runs(runs: list[dict[str, Any]], pass_: str, answers: str = "answers") -> list[dict[str, Any]]:
    """``runs`` with the answers of one fresh pass as their classes, for ``benchmarks.run.agreement``
    (``answers="final"``: the writer pass's entries asked again once every engine holds the same records)."""
    picked = []
    for run in runs:
        section = run.get("fresh", {}).get(pass_)
        if not section:
            continue
        classes = {kind: figures[answers] for kind, figures in section.items() if answers in figures}
        picked.append({"engine": run["engine"], "corpus": run["corpus"], "records": run["records"], "classes": classes})
    return picked


def growing_totals(runs: list[dict[str, Any]]) -> list[str]:
    """The writer only adds records: an answer during the writer pass can count no more than the same
    entry asked after the writer stopped. One line per engine and class where that fails."""
    problems = []
    for run in runs:
        for kind, figures in run.get("fresh", {}).get("writer", {}).items():
            during, final = figures.get("answers", {}).get("totals", []), figures.get("final", {}).get("totals", [])
            wrong = [i for i, (a, b) in enumerate(zip(during, final)) if a > b]
            if wrong:
                i = wrong[0]
                problems.append(f"{run['corpus']} {run['records']:,}, {kind}: {run['engine']} counted more during "
                                f"the writer pass than after it on {len(wrong)} entries; entry {i}: {during[i]} > {final[i]}")
    return problems


def strip_answers(runs: list[dict[str, Any]]) -> None:
    """Drop the fresh passes' answers once compared (thousands per class: the report keeps figures)."""
    for run in runs:
        for section in run.get("fresh", {}).values():
            for figures in section.values():
                figures.pop("answers", None)
                figures.pop("final", None)


def _pair(figures: dict[str, Any] | None, prefix: str = "") -> str:
    if not figures:
        return "—"
    if "unsupported" in figures:
        return "unsupported"
    if "error" in figures:
        return "error"
    if f"{prefix}p50_ms" not in figures:
        return "—"
    return f"{figures[f'{prefix}p50_ms']:.2f} / {figures[f'{prefix}p95_ms']:.2f} (n={figures[f'{prefix}measured' if prefix else 'measured']})"


def markdown(report: dict[str, Any]) -> str:
    """The fresh table of every corpus and size: per class and engine, warm p50/p95/p99 beside the
    fresh passes' p50/p95, with ratios to tantivy's."""
    runs = report["runs"]
    ratios = report.get("fresh_ratios", {})
    lines = ["", "## Fresh (first-run) queries beside warm ones", "",
             f"Each fresh entry asked once in the engine's process (up to {report.get('fresh')} per class and pass, "
             f"{report.get('fresh_budget_s')} s per class and pass; n = entries measured). "
             "*After load*: right after the bulk load returned, background work still running. *Fresh*: after the "
             "warm passes. *With writer*: while a thread adds "
             f"{WRITER_RATE:,} new records/s ({report.get('writer_batch', WRITER_BATCH):,} per batch, each batch durable "
             "and visible). "
             "Ratios: engine / tantivy (below 1: faster than tantivy).", ""]
    for corpus, size in sorted({(run["corpus"], run["records"]) for run in runs}):
        at_size = [run for run in runs if run["corpus"] == corpus and run["records"] == size and "classes" in run]
        key = f"{corpus} {size}"
        lines += [f"### {corpus}, {size:,} records: fresh and warm", "",
                  "| class | engine | warm p50 / p95 / p99 | fresh p50 / p95 | after load p50 / p95 | with writer p50 / p95 "
                  "| warm p50 ratio | fresh p50 ratio | fresh p95 ratio | after load p50 ratio | writer p50 ratio |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for kind in CLASSES:
            for run in at_size:
                warm = run["classes"].get(kind, {})
                warm_cell = (f"{warm['p50_ms']:.2f} / {warm['p95_ms']:.2f} / {warm['p99_ms']:.2f}"
                             if "p50_ms" in warm else _pair(warm))
                fresh = run.get("fresh", {})
                # In the header's order: after the warm passes, after the load, with the writer.
                cells = [_pair(fresh.get(pass_, {}).get(kind)) for pass_ in ("fresh", "after_load", "writer")]

                def ratio(name: str, engine: str = run["engine"], key: str = key, kind: str = kind) -> str:
                    value = ratios.get(name, {}).get(key, {}).get(engine, {}).get(kind)
                    return "—" if value is None else f"{value:.2f}"

                lines.append(f"| {kind} | {run['engine']} | {warm_cell} | " + " | ".join(cells) + " | " +
                             " | ".join(ratio(name) for name in ("warm_p50", "fresh_p50", "fresh_p95",
                                                                 "after_load_p50", "writer_p50")) + " |")
        writers = [f"{run['engine']} {run['writer']['records_per_s']:,} records/s "
                   f"(batch add p50 {run['writer']['batch_add_p50_ms']} ms, max {run['writer']['batch_add_max_ms']} ms)"
                   + (f", error {run['writer']['error']}" if "error" in run["writer"] else "")
                   for run in at_size if "records_per_s" in run.get("writer", {})]
        unsupported = [f"{run['engine']} ({run['writer']['unsupported']})" for run in at_size
                       if "unsupported" in run.get("writer", {})]
        if writers or unsupported:
            lines += ["", "Writer: " + "; ".join(writers) + ("; no live writer: " + ", ".join(unsupported) if unsupported else "")
                      + "."]
        lines.append("")
    problems = report.get("fresh_agreement", [])
    lines += [f"Fresh answers: {'every compared answer agrees.' if not problems else f'{len(problems)} disagreements:'}", ""]
    lines += [f"- {problem}" for problem in problems]
    return "\n".join(lines) + "\n"
