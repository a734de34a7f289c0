"""``Engine.add_batches`` (the bulk path: the next batch analysed in the analysis worker process
while this one is applied) builds exactly the index that one ``add_records`` per batch builds —
upserts, repeated ids, nested and non-ASCII records, new fields and fields that stop being value
fields on the way included — and keeps each batch all-or-nothing: a bad batch stops the load
after every batch before it was written. A worker that dies or cannot start only makes the load
analyse inline."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import roarsearch.analysis.worker as worker_module
import roarsearch.engine.collection as collection_module
import roarsearch.index.writer as writer_module
from roarsearch import BadRequestError, Engine
from roarsearch.index.integrity import compare_indexes

WORDS = ["alpha", "beta", "gamma", "delta", "Ørsted", "café", "naïve", "zeta", "eta", "theta", "jp東京", "x1"]


@pytest.fixture(autouse=True)
def _small_batches_use_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collection_module, "WORKER_MIN_VALUES", 1)


def _record(rng: random.Random, record_id: int) -> dict:
    record: dict = {"id": record_id, "title": " ".join(rng.choices(WORDS, k=rng.randint(1, 6)))}
    if rng.random() < 0.7:
        record["body"] = " ".join(rng.choices(WORDS, k=rng.randint(0, 30)))
    if rng.random() < 0.5:
        record["tags"] = rng.sample(WORDS, rng.randint(0, 3))
    if rng.random() < 0.5:
        record["price"] = rng.choice([rng.randint(0, 100), rng.random() * 10])
    if rng.random() < 0.2:
        record["meta"] = {"kind": rng.choice(WORDS), "n": rng.randint(0, 5)}
    if rng.random() < 0.3:
        record[f"extra{rng.randint(0, 3)}"] = rng.choice(WORDS)  # fields first seen in later batches
    record["serial"] = f"s{record_id}-{rng.random()}"  # too many distinct values: stops being a value field
    return record


def _batches(seed: int, count: int) -> list[list[dict]]:
    rng = random.Random(seed)
    batches = []
    for _ in range(count):
        size = rng.randint(1, 40)
        # Ids mostly new, some upserts of earlier ones, some repeated inside the batch.
        ids = [rng.randint(0, 60) if rng.random() < 0.3 else rng.randint(0, 10_000) for _ in range(size)]
        batches.append([_record(rng, record_id) for record_id in ids])
    return batches


def _answers(engine: Engine) -> list:
    answers = []
    for query in ("alpha", "orsted cafe", "gamm", "東京", "", "zeta beta"):
        answer = engine.search({"collection": "c", "query": query, "count": 100, "sort": ["id"],
                                "textFacets": ["tags"], "numericFacets": {"price": ["[0,5)", "[5,50]"]}})
        answer.pop("responseTime")
        answers.append(answer)
    return answers


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 100_000), count=st.integers(1, 7), value_limit=st.sampled_from([10, 100_000]))
def test_bulk_add_builds_the_same_index_as_one_add_per_batch(seed: int, count: int, value_limit: int) -> None:
    # A low limit makes fields stop being value fields between a batch's collection (ahead) and its write.
    original, writer_module.AUTO_VALUE_LIMIT = writer_module.AUTO_VALUE_LIMIT, value_limit
    try:
        _compare_bulk_with_one_by_one(_batches(seed, count))
    finally:
        writer_module.AUTO_VALUE_LIMIT = original


def _compare_bulk_with_one_by_one(batches: list[list[dict]]) -> None:
    one_by_one, bulk = Engine(), Engine()
    for batch in batches:
        one_by_one.add_records("c", batch)
    assert bulk.add_batches("c", iter(batches)) == {"status": 201, "records": sum(map(len, batches))}
    assert compare_indexes(bulk._collections["c"].index, one_by_one._collections["c"].index) == []
    assert _answers(bulk) == _answers(one_by_one)


def test_a_bad_batch_stops_the_load_after_the_batches_before_it(tmp_path) -> None:
    good = [[{"id": n * 10 + i, "text": f"word{n}"} for i in range(5)] for n in range(3)]
    bad = [{"id": 100, "text": "fine"}, {"text": "no id"}]
    later = [{"id": 200, "text": "never"}]
    with Engine(str(tmp_path)) as engine:
        with pytest.raises(BadRequestError) as raised:
            engine.add_batches("c", iter(good + [bad, later]))
        assert raised.value.data.startswith("batches[3].records[1].id: is required")
        assert engine.search({"collection": "c", "count": 0})["totalHits"] == 15
    with Engine(str(tmp_path)) as engine:  # and durably so
        ids = sorted(hit["id"] for hit in engine.search({"collection": "c", "count": 100})["results"])
        assert ids == [n * 10 + i for n in range(3) for i in range(5)]


def test_a_generator_that_fails_midway_keeps_the_batches_before(tmp_path) -> None:
    def batches():
        yield [{"id": 1, "text": "one"}]
        yield [{"id": 2, "text": "two"}]
        raise OSError("the input file went away")

    engine = Engine()
    with pytest.raises(OSError):
        engine.add_batches("c", batches())
    assert sorted(hit["id"] for hit in engine.search({"collection": "c"})["results"]) == [1, 2]


def test_a_worker_that_dies_leaves_the_load_to_analyse_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    real_submit = worker_module.AnalysisWorker.submit
    submitted = []

    def submit_then_kill(self: worker_module.AnalysisWorker, texts: dict) -> bool:
        sent = real_submit(self, texts)
        submitted.append(sent)
        if len(submitted) == 2 and self._process is not None:
            self._process.kill()  # mid-load: its reply never comes
        return sent

    monkeypatch.setattr(worker_module.AnalysisWorker, "submit", submit_then_kill)
    batches = _batches(5, 6)
    bulk, one_by_one = Engine(), Engine()
    bulk.add_batches("c", batches)
    for batch in batches:
        one_by_one.add_records("c", batch)
    assert submitted[:2] == [True, True] and not any(submitted[3:])  # not used again after it failed
    assert compare_indexes(bulk._collections["c"].index, one_by_one._collections["c"].index) == []


def test_a_worker_that_cannot_start_leaves_the_load_to_analyse_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module.sys, "executable", os.path.join(os.sep, "no", "such", "python"))
    engine = Engine()
    engine.add_batches("c", _batches(9, 3))
    assert engine.search({"collection": "c", "count": 0})["totalHits"] > 0


def test_the_worker_analyses_as_the_writer_does() -> None:
    texts = {"title": ["Ørsted café", "naïve\x00nul", "", "東京 tokyo"], "body": ["a b a", "x"]}
    helper = worker_module.AnalysisWorker()
    try:
        assert helper.submit(texts)
        analysed = helper.result()
    finally:
        helper.close()
    assert analysed is not None and worker_module.peak_rss_mb() > 0
    expected = worker_module.analyze_fields(texts)
    assert analysed.keys() == expected.keys()
    for path, (terms, token_terms, value_index, position) in expected.items():
        got = analysed[path]
        assert got[0] == terms
        for mine, theirs in zip(got[1:], (token_terms, value_index, position)):
            assert mine.tolist() == theirs.tolist()


def test_every_batch_is_collected_once_and_analysed_in_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch read ahead is collected for the doc ids it will get, so nothing is redone here."""
    inline = []
    real_analyze, real_collect = writer_module.analyze_fields, writer_module.collect_add
    monkeypatch.setattr(writer_module, "analyze_fields", lambda texts: inline.append("analyse") or real_analyze(texts))

    def collect(index, records, start=None, by_column=None):  # type: ignore[no-untyped-def]
        if start is None:
            inline.append("collect")
        if by_column is None:  # validation read the batch field by field: collecting reads the same
            inline.append("columns read again")
        return real_collect(index, records, start, by_column)

    monkeypatch.setattr(writer_module, "collect_add", collect)
    batches = [[{"id": n * 100 + i, "text": f"word{i} batch{n}", "n": i} for i in range(30)] for n in range(6)]
    engine = Engine()
    engine.add_batches("c", batches)
    assert inline == []
    assert engine.search({"collection": "c", "query": "batch3", "count": 0})["totalHits"] == 30


def test_no_batch_or_a_bad_first_batch_creates_no_collection() -> None:
    engine = Engine()
    assert engine.add_batches("c", iter([])) == {"status": 201, "records": 0}
    with pytest.raises(BadRequestError):
        engine.add_batches("c", [[{"title": "no id"}]])
    assert engine.collection_names() == []
