"""The peers run: engines built one after the other in their own processes, then timed side by side
(each class's timed passes alternating between the engines, on one CPU), figures pooled over the rounds. Tiny
corpus; no timing assertions."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("tantivy", reason="needs the bench extra: pip install -e '.[bench]'")

from benchmarks import run  # after the skip: benchmarks.run imports the peers
from benchmarks.workloads import CLASSES

ENGINES = ("roarsearch", "sqlite-fts5")


def test_engines_are_timed_in_alternating_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[tuple[str, str, str]] = []
    ask = run.EngineChild.ask

    def recording_ask(child: run.EngineChild, step: str, kind: str = "") -> None:
        steps.append((child.engine, step, kind))
        ask(child, step, kind)

    monkeypatch.setattr(run.EngineChild, "ask", recording_ask)
    runs = run.run_corpus(ENGINES, "movies", 1_500, per_class=2, budget_s=5, timeout_s=300, rounds=4)

    first = CLASSES[0]
    assert [step for step in steps if step[2] == first] == [
        ("roarsearch", "warm-up", first), ("sqlite-fts5", "warm-up", first),
        ("roarsearch", "timed", first), ("sqlite-fts5", "timed", first),
        ("sqlite-fts5", "timed", first), ("roarsearch", "timed", first),
        ("roarsearch", "timed", first), ("sqlite-fts5", "timed", first),
        ("sqlite-fts5", "timed", first), ("roarsearch", "timed", first)]
    assert [(engine, step) for engine, step, _ in steps[-2:]] == [("roarsearch", "finish"), ("sqlite-fts5", "finish")]
    assert [result["engine"] for result in runs] == list(ENGINES)
    # Every engine's searches ran on the one timing CPU.
    assert all(result["timed_cpus"] == [run.timing_cpu()] for result in runs)
    for result in runs:
        assert "error" not in result and result["records"] == 1_500 and result["peak_rss_mb"] > 0
        assert list(result["classes"]) == [kind for kind in CLASSES if kind in result["classes"]]
        keyword = result["classes"]["one_word_rare"]
        # Four timed passes pooled; the answers (compared between engines) come from the warm-up pass.
        assert keyword["measured"] == 4 * 2 and len(keyword["totals"]) == 2
        assert keyword["p50_ms"] > 0 and keyword["cold_measured"] == 2


def test_a_child_that_dies_is_reported_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    real_command = run.EngineChild.__init__

    def dying_child(child: run.EngineChild, engine: str, *arguments: Any) -> None:
        real_command(child, engine, *arguments)
        if engine == "sqlite-fts5":
            child.process.kill()

    monkeypatch.setattr(run.EngineChild, "__init__", dying_child)
    runs = run.run_corpus(ENGINES, "movies", 1_500, per_class=1, budget_s=5, timeout_s=300, rounds=1)
    assert runs[1]["engine"] == "sqlite-fts5" and runs[1]["error"].startswith("exit ")
    assert "error" not in runs[0] and runs[0]["classes"]["one_word_rare"]["measured"] == 1


def test_the_report_names_its_rounds() -> None:
    report = run.run_all([("movies", 1_500)], per_class=1, engines=("roarsearch",), budget_s=5, timeout_s=300,
                         rounds=2)
    assert report["timed_rounds"] == 2
    assert report["runs"][0]["classes"]["one_word_rare"]["measured"] == 2
