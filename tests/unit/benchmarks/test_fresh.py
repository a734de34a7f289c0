"""First-run (fresh) passes of benchmarks.run: the fresh sets (distinct, deterministic, none of the
warm workload's), each entry asked once, the writer's rate, the fresh answers compared, and the
scaling report's ratios and target verdicts. Tiny corpora; no timing assertions beyond the writer's
schedule."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tantivy", reason="needs the bench extra: pip install -e '.[bench]'")

from benchmarks import fresh, run, scaling  # after the skip: benchmarks.run imports the peers
from benchmarks.datasets import MOVIES, real_movies
from benchmarks.workloads import BASE_RECORDS, CLASSES, _passes, _Pools, entry_key, load, make_fresh
from roarsearch.analysis.analyzer import analyze

PER_CLASS = 40


@pytest.fixture(scope="module")
def movies() -> list[dict[str, Any]]:
    return real_movies()


def test_the_fresh_set_is_distinct_deterministic_and_not_the_warm_workload(movies: list[dict[str, Any]]) -> None:
    warm = {entry_key(entry) for entries in load("movies")["classes"].values() for entry in entries}
    pools = _Pools(MOVIES, movies)
    first = make_fresh(MOVIES, movies, 200, exclude=warm, pools=pools)
    small = make_fresh(MOVIES, movies, 20, exclude=warm, pools=pools)
    assert small == make_fresh(MOVIES, movies, 20, exclude=warm, pools=_Pools(MOVIES, movies))
    assert make_fresh(MOVIES, movies, 20, seed=12, exclude=warm, pools=pools)["classes"] != small["classes"]
    keys = [entry_key(entry) for kind in CLASSES for entry in first["classes"][kind]]
    assert len(keys) == len(set(keys))  # no entry twice, within a class or across classes
    assert not set(keys) & warm
    for kind in CLASSES:
        entries = first["classes"][kind]
        assert first["counts"][kind] == len(entries) <= 300
        assert all(set(entry) == set(load("movies")["classes"][kind][0]) for entry in entries)
    # Large pools give the whole count; the ~200 most common words run out.
    assert first["counts"]["typo1_one_word"] == first["counts"]["facets"] == first["counts"]["browse_sort"] == 200
    assert first["counts"]["one_word_common"] < 200
    # Each class keeps its character.
    assert all(entry["typos"] == 2 for entry in first["classes"]["typo2_one_word"])
    assert all(entry["prefix"] and len(entry["words"][0]) == 3 for entry in first["classes"]["prefix3"])
    assert all(entry["facets"] for entry in first["classes"]["facets"])
    assert all(1_000 <= entry["skip"] <= 10_000 for entry in first["classes"]["deep_page"])
    # Entries with words and filters match some base record whole: no engine drops words.
    base = movies[:BASE_RECORDS]

    def words(value: Any) -> list[str]:
        return analyze(" ".join(value) if isinstance(value, list) else str(value or ""))

    for kind in ("filter_range", "filter_equal", "filter_in"):
        for entry in first["classes"][kind][:50]:
            assert any(all(any(word in words(record.get(field)) for field in MOVIES.text_fields)
                           for word in entry["words"]) and all(_passes(record, spec) for spec in entry["filters"])
                       for record in base), entry
    low_high = [(e["filters"][0]["low"], e["filters"][0]["high"]) for e in first["classes"]["filter_range"]]
    assert all(high is None or low < high for low, high in low_high)


def test_the_passes_get_disjoint_thirds_of_the_drawn_set() -> None:
    counts = fresh.prepare_sets("movies", PER_CLASS)
    seen: set[str] = set()
    for pass_ in fresh.PASSES:
        for kind in CLASSES:
            entries = fresh.entries("movies", PER_CLASS, pass_, kind)
            assert len(entries) == counts[pass_][kind] <= PER_CLASS
            keys = {entry_key(entry) for entry in entries}
            assert len(keys) == len(entries) and not keys & seen
            seen |= keys
    assert fresh.prepare_sets("movies", PER_CLASS) == counts  # cached


class Recording:
    """An adapter wrapper that records every entry it is asked."""

    def __init__(self, adapter: Any) -> None:
        self.adapter = adapter
        self.asked: list[tuple[str, str]] = []

    def search(self, kind: str, entry: dict[str, Any]) -> Any:
        self.asked.append((kind, entry_key(entry)))
        return self.adapter.search(kind, entry)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.adapter, name)


def test_a_fresh_pass_asks_each_entry_once_after_settling_on_warm_entries() -> None:
    fresh.prepare_sets("movies", PER_CLASS)
    session = run.EngineSession("sqlite-fts5", "movies", 1_500, per_class=3, budget_s=5, rounds=1,
                                fresh=PER_CLASS, fresh_budget_s=60)
    session.build()
    session.reopen()
    recording = Recording(session.adapter)
    session.adapter = recording  # type: ignore[assignment]
    warm = {entry_key(entry) for entry in load("movies")["classes"]["one_word_rare"][:3]}
    session.fresh_pass("fresh", "one_word_rare")
    entries = [entry_key(entry) for entry in fresh.entries("movies", PER_CLASS, "fresh", "one_word_rare")]
    timed = [key for _, key in recording.asked if key not in warm]
    assert timed == entries  # each once, in order
    assert {key for _, key in recording.asked} - set(entries) <= warm  # the settle asked warm entries only
    figures = session.result["fresh"]["fresh"]["one_word_rare"]
    assert figures["measured"] == len(entries) == len(figures["answers"]["totals"])
    session.fresh_pass("fresh", "typo1_one_word")  # FTS5 has no typos: unsupported, not faked
    assert "unsupported" in session.result["fresh"]["fresh"]["typo1_one_word"]
    session.finish()


def test_the_writer_adds_at_the_rate_asked() -> None:
    batches: list[list[dict[str, Any]]] = []
    records = ({"id": k} for k in itertools.count())
    writer = fresh.LiveWriter(batches.append, records, rate=1_000, batch=100).start()
    time.sleep(1.05)
    figures = writer.stop()
    added = sum(len(batch) for batch in batches)
    assert all(len(batch) == 100 for batch in batches)
    assert figures["added"] == added and 1_000 <= added <= 1_200  # batches due at 0, 0.1, ..., 1.0 s
    assert 900 <= figures["records_per_s"] <= 1_150
    assert [record["id"] for batch in batches for record in batch] == list(range(added))


def test_a_writer_that_cannot_keep_up_reports_what_it_managed() -> None:
    def slow(batch: list[dict[str, Any]]) -> None:
        time.sleep(0.25)

    writer = fresh.LiveWriter(slow, ({"id": k} for k in itertools.count()), rate=1_000, batch=100).start()
    time.sleep(1.0)
    figures = writer.stop()
    assert figures["records_per_s"] < 600 and figures["batch_add_p50_ms"] >= 250


def test_writer_records_are_the_corpus_with_new_ids(tmp_path: Path) -> None:
    path = tmp_path / "tiny.jsonl"
    path.write_text("".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in range(3)))
    got = list(itertools.islice(fresh.writer_records(path, id_base=1_000), 7))
    assert [record["id"] for record in got] == list(range(1_000, 1_007))
    assert [record["name"] for record in got] == ["n0", "n1", "n2", "n0", "n1", "n2", "n0"]


def test_fresh_passes_with_the_writer_end_to_end() -> None:
    runs = run.run_corpus(("roarsearch", "sqlite-fts5", "tantivy"), "movies", 1_500, per_class=2, budget_s=5,
                          timeout_s=300, rounds=1, fresh=PER_CLASS, fresh_budget_s=30, writer=True,
                          writer_batch=100)
    counts = fresh.prepare_sets("movies", PER_CLASS)
    for result in runs:
        assert "error" not in result, result.get("error")
        assert set(result["fresh"]) == set(fresh.PASSES)
        for pass_ in fresh.PASSES:
            figures = result["fresh"][pass_]["one_word_medium"]
            assert figures["measured"] == counts[pass_]["one_word_medium"] == len(figures["answers"]["totals"])
        assert "close_s" in result and "open_s" in result
    writers = {result["engine"]: result["writer"] for result in runs}
    assert all(figures["added"] > 0 and "error" not in figures for figures in writers.values())
    # After the catch-up every engine holds the same records: the writer entries' answers are compared.
    finals = [result["fresh"]["writer"]["one_word_medium"]["final"]["totals"] for result in runs]
    assert finals[0] == finals[1] == finals[2]
    assert not fresh.growing_totals(runs)
    problems = run.fresh_agreement(runs)
    # Single words are never dropped (the corpus here is smaller than the fresh sets' 10,000-record base).
    assert not [problem for problem in problems if "one_word" in problem], problems


def _latency(engine: str, p50: float, fresh_p50: float, fresh_p95: float, writer_p50: float) -> dict[str, Any]:
    classes = {kind: {"p50_ms": p50, "p95_ms": p50 * 2, "p99_ms": p50 * 3} for kind in CLASSES}
    sections = {name: {kind: {"p50_ms": value, "p95_ms": p95, "measured": 10} for kind in CLASSES}
                for name, value, p95 in (("fresh", fresh_p50, fresh_p95), ("after_load", fresh_p50, fresh_p95),
                                         ("writer", writer_p50, fresh_p95))}
    return {"engine": engine, "corpus": "packages", "records": 1_000, "jsonl_mb": 100.0, "classes": classes,
            "fresh": sections}


def test_the_scaling_report_computes_ratios_and_verdicts() -> None:
    ingest = {"corpus": "packages", "records": 1_000, "jsonl_mb": 100.0, "runs": [
        {"engine": "roarsearch", "records_per_s": 60_000, "peak_rss_mb": 300.0, "rss_after_build_mb": 200.0,
         "rss_after_open_mb": 20.0, "disk_mb": 60.0, "open_s": 0.5},
        {"engine": "tantivy", "records_per_s": 100_000, "peak_rss_mb": 100.0, "rss_after_build_mb": 80.0,
         "rss_after_open_mb": 30.0, "disk_mb": 30.0, "open_s": 0.1}]}
    ours = _latency("roarsearch", p50=1.0, fresh_p50=1.0, fresh_p95=3.0, writer_p50=1.4)
    ours["classes"]["facets"]["p50_ms"] = 2.5  # one class over the warm bound
    latency = {"runs": [ours, _latency("tantivy", p50=1.0, fresh_p50=1.0, fresh_p95=1.0, writer_p50=1.0)],
               "agreement": [], "fresh_agreement": ["fresh: packages 1,000, facets: totals differ"]}
    row = scaling.size_row(1_000, ingest, latency)
    assert row["ratios"]["records_per_s"] == 0.6 and row["ratios"]["peak_rss_mb"] == 3.0
    assert row["class_ratios"]["warm_p50"]["facets"] == 2.5 and row["class_ratios"]["fresh_p95"]["group"] == 3.0
    verdicts = {verdict["target"]: verdict for verdict in row["verdicts"]}
    assert verdicts["ingest records/s vs tantivy"]["passed"] is True  # 0.6 >= 0.5
    assert verdicts["peak RSS (all processes) vs tantivy"]["passed"] is False  # 3.0 > 2
    assert verdicts["resident after open vs JSON Lines"]["value"] == 0.2
    assert verdicts["resident after open vs JSON Lines"]["passed"] is True
    assert verdicts["disk vs JSON Lines"]["passed"] is False  # 0.6 > 0.5
    assert verdicts["open + first query, s"]["passed"] is True
    assert verdicts["fresh p50 vs tantivy, every class"]["passed"] is True  # 1.0 <= 1.0
    assert verdicts["fresh p95 vs tantivy, every class"]["passed"] is False  # 3.0 > 2
    assert verdicts["fresh p50 with the writer vs tantivy, every class"]["passed"] is True  # 1.4 <= 1.5
    warm = verdicts["warm p50 vs tantivy, every class"]
    assert warm["passed"] is False and warm["over"] == {"facets": 2.5} and warm["classes"] == len(CLASSES)
    assert verdicts["every compared answer agrees (warm and fresh)"]["passed"] is False
    lines = [scaling.verdict_line(1_000, verdict) for verdict in row["verdicts"]]
    assert lines[0].startswith("PASS") and "0.6×" in lines[0]
    assert any(line.startswith("FAIL") and "facets 2.50×" in line for line in lines)
    # A size without a latency report: its latency targets are not measured, not passed.
    partial = scaling.size_row(1_000, ingest, None)
    assert {v["target"]: v["passed"] for v in partial["verdicts"]}["warm p50 vs tantivy, every class"] is None


def test_fresh_answers_that_differ_are_reported() -> None:
    def engine(name: str, totals: list[int], final: list[int]) -> dict[str, Any]:
        answers = {"totals": totals}
        section = {"one_word_rare": {"answers": answers, "measured": len(totals)}}
        return {"engine": name, "corpus": "movies", "records": 10, "classes": {},
                "fresh": {"fresh": section, "after_load": section,
                          "writer": {"one_word_rare": {"answers": answers, "final": {"totals": final},
                                                       "measured": len(totals)}}}}

    runs = [engine("roarsearch", [1, 2, 5], [1, 2, 4]), engine("tantivy", [1, 1, 4], [1, 2, 4])]
    problems = run.fresh_agreement(runs)
    assert any(problem.startswith("fresh:") and "one_word_rare" in problem for problem in problems)
    assert any(problem.startswith("fresh after load:") for problem in problems)
    # The writer pass: final answers agree, but roarsearch counted more during the pass than after it.
    writer = [problem for problem in problems if problem.startswith("fresh with writer:")]
    assert len(writer) == 1 and "roarsearch counted more" in writer[0]


def test_the_fresh_table_puts_each_pass_under_its_own_header() -> None:
    def figures(p50: float) -> dict[str, Any]:
        return {"p50_ms": p50, "p95_ms": p50 * 2, "measured": 5}

    passes = {"fresh": 1.0, "after_load": 2.0, "writer": 3.0}
    runs = [{"engine": "roarsearch", "corpus": "movies", "records": 10,
             "classes": {"one_word_rare": {"p50_ms": 0.5, "p95_ms": 0.6, "p99_ms": 0.7}},
             "fresh": {name: {"one_word_rare": figures(p50)} for name, p50 in passes.items()}}]
    table = fresh.markdown({"runs": runs, "fresh": 5, "fresh_budget_s": 1.0}).splitlines()
    header = next(line for line in table if line.startswith("| class |")).split(" | ")
    row = next(line for line in table if line.startswith("| one_word_rare | roarsearch")).split(" | ")
    for name, label in (("fresh", "fresh p50 / p95"), ("after_load", "after load p50 / p95"),
                        ("writer", "with writer p50 / p95")):
        assert row[header.index(label)].startswith(f"{passes[name]:.2f} / {passes[name] * 2:.2f}"), (name, row)


@pytest.mark.parametrize("engine", ["tantivy", "sqlite-fts5", "roarsearch"])
def test_searches_beside_the_live_writer_see_each_batch(engine: str, tmp_path: Path) -> None:
    from benchmarks.datasets import CORPORA, iter_batches, jsonl_path

    adapter = run.adapter_for(engine)
    adapter.load(CORPORA["movies"], iter_batches(jsonl_path("movies", 1_500)), str(tmp_path))
    entry = load("movies")["classes"]["one_word_common"][0]
    before = adapter.search("one_word_common", entry).total
    writer = fresh.LiveWriter(adapter.add_live, fresh.writer_records(jsonl_path("movies", 1_500)),
                              rate=2_000, batch=20).start()
    answers = []
    # Pages read while commits replace what is searched, until ten batches have landed: how fast
    # they land depends on the machine and the build (a durable batch each), so the test waits for
    # them rather than timing them (a generous deadline only stops a writer that never runs). A
    # pause between searches leaves the writer thread the GIL, as a service's idle moments do: a
    # thread searching without pause starves it in the pure Python build.
    deadline = time.perf_counter() + 60.0
    while (writer.added < 200 or len(answers) < 10) and time.perf_counter() < deadline:
        answers.append(adapter.search("one_word_common", {**entry, "count": 50}))
        time.sleep(0.002)
    figures = writer.stop()
    assert "error" not in figures and figures["added"] >= 200
    totals = [answer.total for answer in answers]
    assert totals == sorted(totals) and totals[0] >= before  # records only come
    assert adapter.search("one_word_common", entry).total > before  # the writer's copies hold the word too
    adapter.close()
