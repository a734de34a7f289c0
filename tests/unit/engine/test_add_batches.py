"""``Engine.add_batches`` (the bulk path: the next batch analysed in the analysis worker process
while this one is applied) builds exactly the index that one ``add_records`` per batch builds —
upserts, repeated ids, nested and non-ASCII records, new fields and fields that stop being value
fields on the way included — and keeps each batch all-or-nothing: a bad batch stops the load
after every batch before it was written. A worker that dies or cannot start only makes the load
analyse inline."""

from __future__ import annotations

import os
import random

import numpy as np
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

    def submit_then_kill(self: worker_module.AnalysisWorker, texts: dict, lexicon: object = None) -> bool:
        sent = real_submit(self, texts, lexicon)
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
        result = helper.result()
    finally:
        helper.close()
    assert result is not None and worker_module.peak_rss_mb() > 0
    # This process's peak when it reaped the helper: what it held at most while the helper lived.
    assert 0 < worker_module.caller_peak_at_close_mb() <= worker_module._own_peak_kib() / 1024
    analysed, term_ids = result
    assert term_ids is None  # no lexicon to map to
    expected = worker_module.analyze_fields(texts)
    assert analysed.keys() == expected.keys()
    for path, (terms, *arrays) in expected.items():
        got = analysed[path]
        assert got[0] == terms
        for mine, theirs in zip(got[1:], arrays, strict=True):
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


@settings(max_examples=40, deadline=None)
@given(vocabulary=st.lists(st.sampled_from(WORDS + [f"w{n}" for n in range(40)]), unique=True, max_size=30),
       copied=st.integers(0, 30), batch=st.lists(st.sampled_from(WORDS + [f"w{n}" for n in range(60)]), unique=True))
def test_ids_from_a_copy_of_the_lexicon_plan_as_the_lexicon_does(vocabulary: list[str], copied: int,
                                                                 batch: list[str]) -> None:
    """Ids looked up in a mirror of the lexicon's first terms (the worker's), the misses looked up
    here, are the ids the lexicon alone plans — however far behind the mirror is."""
    from roarsearch.index.lexicon import Lexicon

    lexicon = Lexicon()
    lexicon.intern_many(vocabulary)
    mirror = worker_module.TermMirror()
    mirror.extend(0, lexicon.terms_since(0, min(copied, len(lexicon))))
    known = mirror.term_ids({"f": (batch, None, None, None, None)})["f"]  # type: ignore[dict-item]
    with_known, without = lexicon.plan_ids(batch, known=known), lexicon.plan_ids(batch)
    assert with_known[0].tolist() == without[0].tolist() and with_known[1:] == without[1:]
    # A copy claiming ids the lexicon has not given (never, by construction) is not trusted.
    if batch:
        wrong = np.full(len(batch), len(lexicon) + 5, dtype=np.int64)
        assert lexicon.plan_ids(batch, known=wrong)[0].tolist() == without[0].tolist()


def test_the_worker_maps_terms_to_the_lexicons_ids_as_it_grows() -> None:
    from roarsearch.index.lexicon import Lexicon

    lexicon, other = Lexicon(), Lexicon()
    lexicon.intern_many(["alpha", "beta"])
    other.intern_many(["zeta"])
    helper = worker_module.AnalysisWorker()
    try:
        assert helper.submit({"t": ["beta gamma alpha"]}, lexicon)
        result = helper.result()
        assert result is not None and result[0]["t"][0] == ["beta", "gamma", "alpha"]
        assert result[1] is not None and result[1]["t"].tolist() == [1, -1, 0]
        lexicon.intern_many(["gamma", "delta"])  # the next request copies the terms added since
        assert helper.submit({"t": ["delta gamma"], "u": ["zeta alpha"]}, lexicon)
        result = helper.result()
        assert result is not None and result[1] is not None
        assert result[1]["t"].tolist() == [3, 2] and result[1]["u"].tolist() == [-1, 0]
        assert helper.submit({"t": ["zeta alpha"]}, other)  # another lexicon: copied anew
        result = helper.result()
        assert result is not None and result[1] is not None and result[1]["t"].tolist() == [0, -1]
    finally:
        helper.close()


def test_a_mirror_sent_out_of_step_is_emptied_never_used() -> None:
    mirror = worker_module.TermMirror()
    mirror.extend(0, ["a", "b"])
    with pytest.raises(ValueError):
        mirror.extend(5, ["c"])
    assert mirror.term_ids({"f": (["a", "b"], None, None, None, None)})["f"].tolist() == [-1, -1]  # type: ignore[dict-item]


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 100_000), threshold=st.sampled_from([1, 30, 80]), cap=st.sampled_from([3, 1 << 19]))
def test_a_bulk_add_onto_a_collection_uses_the_workers_ids_and_builds_the_same_index(
        seed: int, threshold: int, cap: int) -> None:
    """Onto records already there (the mirror starts as a copy of a whole lexicon), with some
    batches too small for the worker (analysed here, so the mirror lags) and a mirror capped short:
    the same index as one add per batch, and the worker's ids did spare lookups here."""
    from roarsearch.index.lexicon import Lexicon

    batches = _batches(seed, 6)
    known_given = []
    real_plan = Lexicon.plan_ids

    def plan(self: Lexicon, terms: list[str], known: np.ndarray | None = None):  # type: ignore[no-untyped-def]
        known_given.append(None if known is None else bool((known >= 0).any()))
        return real_plan(self, terms, known)

    original = (collection_module.WORKER_MIN_VALUES, worker_module.MIRROR_MAX_TERMS, Lexicon.plan_ids)
    collection_module.WORKER_MIN_VALUES, worker_module.MIRROR_MAX_TERMS, Lexicon.plan_ids = threshold, cap, plan
    try:
        one_by_one, bulk = Engine(), Engine()
        for engine in (one_by_one, bulk):
            engine.add_records("c", [{"id": 0, "title": "alpha beta gamma"}, {"id": 1, "body": "delta zeta"}])
        for batch in batches:
            one_by_one.add_records("c", batch)
        known_given.clear()
        bulk.add_batches("c", iter(batches))
    finally:
        collection_module.WORKER_MIN_VALUES, worker_module.MIRROR_MAX_TERMS, Lexicon.plan_ids = original
    assert compare_indexes(bulk._collections["c"].index, one_by_one._collections["c"].index) == []
    assert _answers(bulk) == _answers(one_by_one)
    if threshold == 1:  # every batch went to the worker, which held the lexicon's first terms
        assert None not in known_given
        if cap > 3:  # (a mirror of 3 terms may hold none of a batch's)
            assert all(known_given)


def test_a_first_load_ends_with_one_postings_chunk_per_field_and_a_small_one_keeps_its_tiers() -> None:
    batches = _batches(21, 12)
    bulk, one_by_one = Engine(), Engine()
    bulk.add_batches("c", iter(batches))
    for batch in batches:
        one_by_one.add_records("c", batch)
    index = bulk._collections["c"].index
    index.wait_for_merges()
    assert {path: len(postings._chunks) for path, postings in index.postings.items()} == dict.fromkeys(index.postings, 1)
    assert max(len(postings._chunks) for postings in one_by_one._collections["c"].index.postings.values()) > 1
    assert compare_indexes(index, one_by_one._collections["c"].index) == []
    assert _answers(bulk) == _answers(one_by_one)
    # A load of a few records onto many keeps the chunks it made (no rewrite of the whole field).
    for batch in batches:
        bulk.add_records("c", [{**record, "id": record["id"] + 20_000} for record in batch])
    before = len(index.postings["title"]._chunks)
    bulk.add_batches("c", [[{"id": 50_000, "title": "alpha"}], [{"id": 50_001, "title": "beta"}]])
    index.wait_for_merges()
    assert len(index.postings["title"]._chunks) >= before > 1


@pytest.mark.parametrize("onto", [0, 2000])
def test_a_bulk_load_leaves_big_merges_to_its_end(monkeypatch: pytest.MonkeyPatch, onto: int) -> None:
    """Merges above the load's limit wait (searches meanwhile read more chunks and answer the
    same); at the end a first load merges each field into one chunk, and a load onto a larger
    collection lets the waiting merges run until the tiers are settled."""
    import roarsearch.index.index as index_module
    import roarsearch.index.merges as merges_module

    monkeypatch.setattr(merges_module, "BACKGROUND_MERGE_TOKENS", 16)
    monkeypatch.setattr(index_module, "BULK_LOAD_MERGE_TOKENS", 64)
    rng = random.Random(onto)
    earlier = [[_record(rng, 100_000 + n * 40 + i) for i in range(40)] for n in range(onto // 40)]
    batches = _batches(33, 24)
    bulk, one_by_one = Engine(), Engine()
    for batch in earlier:
        bulk.add_records("c", batch)
        one_by_one.add_records("c", batch)
    most_chunks = []

    def feed():  # type: ignore[no-untyped-def]
        for number, batch in enumerate(batches):
            yield batch
            one_by_one.add_records("c", batch)
            if number == 16:  # batches 0..15 written (16 waits ahead): the same answers as one add each
                index = bulk._collections["c"].index
                index.wait_for_merges()
                most_chunks.append(max(len(postings._chunks) for postings in index.postings.values()))
                expected = Engine()
                for earlier_batch in earlier + batches[:16]:
                    expected.add_records("c", earlier_batch)
                assert _answers(bulk) == _answers(expected)

    bulk.add_batches("c", feed())
    index = bulk._collections["c"].index
    index.wait_for_merges()
    assert most_chunks[0] > max(len(postings._chunks) for postings in one_by_one._collections["c"].index.postings.values())
    chunks = {path: len(postings._chunks) for path, postings in index.postings.items()}
    if onto:
        assert all(merges_module.due_merge(postings._chunks) is None for postings in index.postings.values())
        assert max(chunks.values()) > 1
    else:
        assert chunks == dict.fromkeys(index.postings, 1)
    assert compare_indexes(index, one_by_one._collections["c"].index) == []
    assert _answers(bulk) == _answers(one_by_one)


def test_a_durable_first_load_reopens_settled(tmp_path) -> None:
    batches = _batches(8, 10)
    with Engine(str(tmp_path)) as engine:
        engine.add_batches("c", iter(batches))
        expected = _answers(engine)
    with Engine(str(tmp_path)) as engine:
        index = engine._collections["c"].index
        assert all(len(postings._chunks) == 1 for postings in index.postings.values())
        assert _answers(engine) == expected


def test_a_bulk_add_collects_garbage_less_often_and_restores_the_collector() -> None:
    """While a load runs, the young-generation threshold is raised; it is put back afterwards,
    after a failed load too, and left alone when something else changed it meanwhile."""
    import gc

    before = gc.get_threshold()
    seen = []

    def batches(fail: bool = False, retune: bool = False):  # type: ignore[no-untyped-def]
        for number in range(3):
            seen.append(gc.get_threshold()[0])
            if retune and number == 2:
                gc.set_threshold(5_000, *before[1:])
            yield [{"id": number * 10 + i, "t": f"word{i}"} for i in range(10)]
        if fail:
            raise OSError("input went away")

    try:
        Engine().add_batches("c", batches())
        assert min(seen[1:]) >= collection_module.BULK_GC_THRESHOLD  # (the first batch is read before the load starts)
        assert gc.get_threshold() == before
        with pytest.raises(OSError):
            Engine().add_batches("c", batches(fail=True))
        assert gc.get_threshold() == before
        Engine().add_batches("c", batches(retune=True))
        assert gc.get_threshold() == (5_000, *before[1:])  # someone else's setting: kept
    finally:
        gc.set_threshold(*before)
