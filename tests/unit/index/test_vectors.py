"""This module tests the following properties of the vector index and fusion:

- approximate search (the HNSW graph, built once a space holds ``ANN_MIN_VECTORS`` vectors) never
  returns a doc outside the candidates, keeps recall@10 ≥ 0.95 against exact search with no filter
  and with filters passing 50 %, 10 % and 1 %, and a very selective filter is answered exactly;
- the graph survives a snapshot round trip (opened as a view, not rebuilt, with its search breadth
  set again) and is copied before an
  add changes it; an index without usearch answers exactly;
- declaring, removing and declaring again a space drops and re-indexes the stored vectors;
- reciprocal rank fusion orders as contract §11 says, for r = 0, r = 1 and in between.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pyroaring import BitMap

from roarsearch import Engine
from roarsearch.index import vectors
from roarsearch.index.state import index_from_state, index_to_state
from roarsearch.ranking.fusion import fuse

pytest.importorskip("usearch")


def clustered(n: int, dimensions: int, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dimensions))
    return (centres[rng.integers(0, 40, n)] + 0.35 * rng.standard_normal((n, dimensions))).astype(np.float32)


@pytest.fixture
def small_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors, "ANN_MIN_VECTORS", 1_000)
    monkeypatch.setattr(vectors, "EXACT_MAX_CANDIDATES", 300)
    monkeypatch.setattr(vectors, "ANN_MAX_COUNT", 2_000)


def engine_with(rows: np.ndarray, metric: str = "cosine") -> Engine:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"v": {"dimensions": rows.shape[1], "metric": metric}}})
    for start in range(0, len(rows), 1_000):
        engine.add_records("c", [{"id": i, "bucket": i % 100, "_vectors": {"v": rows[i].tolist()}}
                                 for i in range(start, min(len(rows), start + 1_000))])
    return engine


def ids(engine: Engine, query: np.ndarray, exact: bool, filter_text: str = "", k: int = 10) -> list[Any]:
    body = {"collection": "c", "fields": ["id"], "count": k, "filter": filter_text,
            "vector": {"name": "v", "values": query.tolist(), "k": k, "exact": exact}}
    return [shown["id"] for shown in engine.search(body)["results"]]


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_approximate_search_keeps_recall_and_never_breaks_a_filter(small_thresholds: None, metric: str) -> None:
    rows = clustered(4_000, 24)
    engine = engine_with(rows, metric)
    space = engine._collection("c").index.vectors.spaces["v"]
    assert space.graph is not None and len(space.graph_docs) == 4_000
    queries = clustered(40, 24, seed=9)
    for filter_text, passing in (("", 100), ("bucket < 50", 50), ("bucket < 10", 10), ("bucket < 1", 1)):
        hits = total = 0
        for query in queries:
            approximate = ids(engine, query, False, filter_text)
            exact = ids(engine, query, True, filter_text)
            assert all(record_id % 100 < passing for record_id in approximate)
            hits += len(set(approximate) & set(exact))
            total += len(exact)
        assert hits / total >= 0.95, (metric, filter_text, hits / total)


def test_a_selective_filter_is_answered_exactly(small_thresholds: None) -> None:
    rows = clustered(4_000, 16)
    engine = engine_with(rows)
    for query in clustered(10, 16, seed=5):
        assert ids(engine, query, False, "bucket < 2") == ids(engine, query, True, "bucket < 2")


def test_the_graph_round_trips_through_a_snapshot_as_a_view(small_thresholds: None) -> None:
    rows = clustered(2_000, 16)
    engine = engine_with(rows)
    index = engine._collection("c").index
    state = index_to_state(index)
    graph = state["vectors"]["spaces"]["v"]["graph"]
    loaded = index_from_state({**state, "vectors": {**state["vectors"], "spaces": {
        "v": {**state["vectors"]["spaces"]["v"], "graph": memoryview(bytes(graph))}}}})
    space = loaded.vectors.spaces["v"]
    assert space.graph_buffer is not None and len(space.graph_docs) == 2_000
    assert space.graph.expansion_search == vectors.ANN_EXPANSION_SEARCH  # the saved graph does not keep it
    # The loaded graph answers as the one it was saved from (the graph itself is built with every
    # core, so which near neighbours an approximate search finds varies from build to build).
    built = index.vectors.spaces["v"]
    for row in (17, 400, 1_999):
        found, _scores = space.nearest(loaded.alive, rows[row], 5, None, exact=False)
        expected, _ = built.nearest(index.alive, rows[row], 5, None, exact=False)
        assert found.tolist() == expected.tolist() and found.size == 5
    space.add(np.asarray([5_000]), rows[:1])  # an add copies the viewed graph first
    assert space.graph_buffer is None and 5_000 in space.graph_docs
    assert space.graph.expansion_search == vectors.ANN_EXPANSION_SEARCH


def test_without_usearch_every_search_is_exact(monkeypatch: pytest.MonkeyPatch, small_thresholds: None) -> None:
    monkeypatch.setattr(vectors, "GraphIndex", None)
    rows = clustered(1_500, 8)
    engine = engine_with(rows)
    assert engine._collection("c").index.vectors.spaces["v"].graph is None
    query = rows[3]
    assert ids(engine, query, False) == ids(engine, query, True)


def test_removing_and_declaring_a_space_again() -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"v": {"dimensions": 2, "metric": "l2"}}})
    engine.add_records("c", [{"id": 1, "_vectors": {"v": [0, 0]}}, {"id": 2, "_vectors": {"v": [5, 5]}}])
    engine.update_settings("c", {"vectors": {}})
    assert engine.check()["ok"]
    engine.update_settings("c", {"vectors": {"v": {"dimensions": 2, "metric": "l2"}}})
    found = engine.search({"collection": "c", "vector": {"name": "v", "values": [4, 4]}})
    assert [shown["id"] for shown in found["results"]] == [2, 1]
    engine.update_settings("c", {"vectors": None})
    engine.update_settings("c", {"vectors": {"v": {"dimensions": 3, "metric": "l2"}}})  # the stored ones do not fit
    assert engine.search({"collection": "c", "vector": {"name": "v", "values": [4, 4, 4]}})["totalHits"] == 0
    assert engine.check()["ok"]


def test_fusion_orders() -> None:
    keyword = np.asarray([10, 11, 12])
    vector = np.asarray([12, 13, 10])
    docs, scores = fuse(keyword, vector, 0.0, None)
    assert docs.tolist() == [10, 11, 12, 13]  # keyword order, then the vector-only match
    docs, scores = fuse(keyword, vector, 1.0, None)
    assert docs.tolist() == [12, 13, 10, 11]  # vector order, then the keyword-only match
    docs, scores = fuse(keyword, vector, 0.5, None)
    assert docs.tolist() == [10, 12, 11, 13]  # 11 and 13 tie at 0.5 / 62: the keyword order decides
    assert scores[0] == pytest.approx(0.5 / 61 + 0.5 / 63)
    tied, _ = fuse(np.asarray([1]), np.asarray([2]), 0.5, None)
    assert tied.tolist() == [1, 2]  # equal scores: the keyword order first


def test_exact_shortlist_is_independent_of_rounding() -> None:
    space = vectors.VectorSpace("v", 3, "dot")
    rows = np.asarray([[1e6, 1.0, 0.0], [1e6, 1.0 + 2**-20, 0.0], [0.0, 0.0, 1.0]] * 2000, dtype=np.float32)
    space.add(np.arange(len(rows)), rows)
    found, scores = space.nearest(BitMap(range(len(rows))), np.asarray([1.0, 1.0, 0.0]), 1, None)
    assert found.tolist() == [1] and scores[0] == float(np.float32(1e6)) + float(np.float32(1.0 + 2**-20))


def test_importing_roarsearch_does_not_load_usearch() -> None:
    """usearch's C++ runtime, once loaded, makes a later ``ray.init`` abort (the sharded engine and
    ``serve --shards`` start Ray after importing roarsearch): it is imported on first need only."""
    import subprocess
    import sys

    script = ("import sys\nfrom roarsearch import Engine\nengine = Engine()\n"
              "engine.add_records('c', [{'id': 1, 'title': 'a'}])\n"
              "assert not any(name.split('.')[0] == 'usearch' for name in sys.modules), sorted(sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
