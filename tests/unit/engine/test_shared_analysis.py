"""This module tests the following properties of the analyses the service's writer shares with its
readers (``storage/shared_analysis.py``, ``Collection.apply_concurrently``):

- a reader that takes each add batch's analysis from the writer's folder answers every search
  exactly as the writer does, and as a reader that analyses every batch itself (non-ASCII text,
  lists, nested fields, replacements, deletes between adds);
- it takes the writer's analysis for every add batch announced after it loaded, and analyses
  itself, with the same answers, when the files are gone, damaged or filed for other texts;
- the digest tells apart any two different sets of texts, and a filed analysis reads back equal;
- a writer that cannot file an analysis still writes the batch (readers analyse it), and the folder
  keeps only the newest analyses; a batch of fewer than ``SHARED_ANALYSIS_MIN_RECORDS`` records is
  neither filed nor looked for.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch import Engine
from roarsearch.analysis.analyzer import analyze_fields
from roarsearch.engine.follower import FollowerEngine
from roarsearch.server.workers import committed_positions
from roarsearch.storage import shared_analysis
from roarsearch.storage.follow import CommitBoard
from roarsearch.storage.shared_analysis import SharedAnalyses, decode_analysis, encode_analysis, texts_digest

WORDS = ["alpha", "beta", "Gamma", "café", "naïve", "straße", "東京", "delta", "x-ray", "ÉCOLE"]


def records(start: int, count: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed + start)
    made = []
    for i in range(start, start + count):
        words = rng.choice(WORDS, size=int(rng.integers(1, 12))).tolist()
        made.append({"id": i, "title": " ".join(words), "tags": words[:3], "n": int(rng.integers(0, 9)),
                     "meta": {"note": f"{words[-1]} note {i}"}})
    return made


class Service:
    """A writer filing analyses, and two readers: one taking them, one analysing for itself."""

    def __init__(self, path: Path) -> None:
        self.folder = path / "analyses"
        self.folder.mkdir()
        self.writer = Engine(path / "data")
        self.writer.add_records("c", records(0, 20))
        self.writer._collections["c"].shared_analyses = SharedAnalyses(str(self.folder))
        self.board = CommitBoard(str(path / "board"), create=True)
        self.publish()
        self.shared = SharedAnalyses(str(self.folder))
        self.taking = FollowerEngine(path / "data", CommitBoard(str(path / "board")), shared_analyses=self.shared)
        self.analysing = FollowerEngine(path / "data", CommitBoard(str(path / "board")))

    def publish(self) -> None:
        self.board.publish(committed_positions(self.writer), 0)

    def same(self, body: dict[str, Any]) -> dict[str, Any]:
        self.publish()
        answers = []
        for engine in (self.writer, self.taking, self.analysing):
            if isinstance(engine, FollowerEngine):
                engine.catch_up()
            answer = engine.search(body)
            answer.pop("responseTime")
            answers.append(answer)
        assert answers[1] == answers[0]
        assert answers[2] == answers[0]
        return answers[0]

    def close(self) -> None:
        for engine in (self.writer, self.taking, self.analysing):
            engine.close()


@pytest.fixture
def service(tmp_path: Path) -> Any:
    made = Service(tmp_path)
    yield made
    made.close()


QUERIES = [{"collection": "c", "query": query, "count": 100, "sort": ["id"], "textFacets": ["tags"]}
           for query in ("alpha", "cafe", "東京", "strasse beta", "note", "ecole gamma", "")]


def test_reader_takes_the_writers_analysis_and_answers_alike(service: Service) -> None:
    for batch in range(6):
        service.writer.add_records("c", records(100 * batch, 80, seed=batch))
        if batch == 3:
            service.writer.add_records("c", records(5, 70, seed=99))  # replacements
            service.writer.delete_records("c", [7, 101, 205])
        for query in QUERIES:
            service.same(query)
    assert service.shared.taken == 7  # every add batch announced after the readers loaded
    assert service.shared.missed == 0
    assert service.same({**QUERIES[0], "query": "", "count": 1000})["totalHits"] == 6 * 80 - 3  # the first batch replaces the 20 first records


def test_reader_analyses_itself_when_the_files_are_gone_or_damaged(service: Service) -> None:
    service.writer.add_records("c", records(100, 80, seed=1))
    for name in os.listdir(service.folder):
        os.unlink(service.folder / name)
    service.same(QUERIES[0])
    service.writer.add_records("c", records(200, 80, seed=2))
    for name in os.listdir(service.folder):
        (service.folder / name).write_bytes(b"\x93not an analysis")
    service.same(QUERIES[1])
    service.writer.add_records("c", records(300, 80, seed=3))
    # A well-formed analysis of other texts, under this batch's name: its fields do not match.
    other = {"elsewhere": ["some other text"]}
    for name in os.listdir(service.folder):
        (service.folder / name).write_bytes(encode_analysis(analyze_fields(other)))
    for query in QUERIES:
        service.same(query)
    service.writer.add_records("c", records(400, 80, seed=4))
    # This batch's own analysis, its terms as bytes: well-formed msgpack, not an analysis.
    for name in os.listdir(service.folder):
        body = msgpack.unpackb((service.folder / name).read_bytes(), raw=False)
        for parts in body.values():
            parts[0] = [term.encode() for term in parts[0]]
        (service.folder / name).write_bytes(msgpack.packb(body, use_bin_type=True))
    for query in QUERIES:
        service.same(query)
    assert (service.shared.taken, service.shared.missed) == (0, 4)


def test_writer_goes_on_when_it_cannot_file(service: Service, caplog: pytest.LogCaptureFixture) -> None:
    os.rmdir(service.folder)
    with caplog.at_level(logging.WARNING, logger="roarsearch"):
        service.writer.add_records("c", records(100, 80))
        service.writer.add_records("c", records(200, 80))
    assert sum("readers analyse batches themselves" in message for message in caplog.messages) == 1
    assert service.same(QUERIES[0])["totalHits"] > 0
    assert (service.shared.taken, service.shared.missed) == (0, 2)


def test_folder_keeps_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared_analysis, "SHARED_ANALYSES_KEPT", 4)
    shared = SharedAnalyses(str(tmp_path))
    batches = [{"title": [f"text {number}"]} for number in range(10)]
    for texts in batches:
        shared.put(texts, analyze_fields(texts))
    shared.put(batches[6], analyze_fields(batches[6]))  # filed again: stays, once
    assert sorted(os.listdir(tmp_path)) == sorted(texts_digest(texts) + ".analysis" for texts in batches[6:])
    assert shared.take(batches[9]) is not None
    assert shared.take(batches[0]) is None


texts_strategy = st.dictionaries(st.text(max_size=4), st.lists(st.text(max_size=6), max_size=4), max_size=3)


@settings(max_examples=300, deadline=None)
@given(texts_strategy, texts_strategy)
def test_digest_tells_texts_apart(first: dict[str, list[str]], second: dict[str, list[str]]) -> None:
    assert (texts_digest(first) == texts_digest(second)) == (list(first.items()) == list(second.items()))


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["a", "b.c", "d"]), st.lists(st.text(max_size=40), min_size=1, max_size=6),
                       max_size=3))
def test_filed_analysis_reads_back_equal(texts: dict[str, list[str]]) -> None:
    analysed = analyze_fields(texts)
    back = decode_analysis(encode_analysis(analysed), texts)
    assert back is not None and back.keys() == analysed.keys()
    for path, parts in analysed.items():
        assert back[path][0] == parts[0]
        for ours, theirs in zip(parts[1:], back[path][1:]):
            assert theirs.dtype == ours.dtype and np.array_equal(theirs, ours)
            assert theirs.flags.writeable


def test_small_batches_are_left_to_each_reader(service: Service) -> None:
    small = shared_analysis.SHARED_ANALYSIS_MIN_RECORDS - 1
    service.writer.add_records("c", records(100, small))
    assert service.same(QUERIES[0])["totalHits"] > 0
    assert os.listdir(service.folder) == []
    assert (service.shared.taken, service.shared.missed) == (0, 0)
    service.writer.add_records("c", records(200, small + 1))
    service.same(QUERIES[1])
    assert len(os.listdir(service.folder)) == 1
    assert (service.shared.taken, service.shared.missed) == (1, 0)
