"""This module tests the following properties of the sharded engine's approximate vector search
(each shard holds more than ``ANN_MIN_VECTORS`` vectors, so each searches its own HNSW graph):

- recall@10 against the exact answer (``exact: true``, which equals one engine's) stays at or
  above 0.9 with no filter and a filter passing 90 % of the records (both search the graphs: the
  candidates outnumber ``EXACT_MAX_CANDIDATES`` on each shard), and with filters passing 50 %,
  10 % and 1 % (fewer candidates a shard: its exact search over them);
- every record returned passes the filter, and ``_vectorScore`` is the exact score of the record
  (the merge of the shards' lists orders by it);
- each shard did search a graph: reopened after the engine closed, every shard's space holds one.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")
if importlib.util.find_spec("usearch") is None:  # found, not imported: usearch loaded before Ray aborts ray.init
    pytest.skip("pip install -e '.[vectors]'", allow_module_level=True)

from roarsearch import Engine
from roarsearch.cluster import ShardedEngine
from roarsearch.index.vectors import ANN_MIN_VECTORS, EXACT_MAX_CANDIDATES

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

SHARDS = 2
DIMENSIONS = 12
RECORDS = SHARDS * ANN_MIN_VECTORS + 8_000  # ids spread over the shards by hash: each holds over the threshold
FILTERS = {"none": None, "90%": "bucket < 90", "50%": "bucket < 50", "10%": "bucket < 10", "1%": "bucket < 1"}
QUERIES = 40


def _vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """Points around 64 centres: neighbourhoods dense enough for recall to mean something."""
    centres = rng.normal(size=(64, DIMENSIONS))
    return (centres[rng.integers(0, 64, count)] + 0.35 * rng.normal(size=(count, DIMENSIONS))).astype(np.float32)


@pytest.fixture(scope="module")
def sharded(ray_session: Any) -> Iterator[tuple[ShardedEngine, str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(3)
    vectors = _vectors(rng, RECORDS)
    buckets = rng.integers(0, 100, RECORDS)
    with tempfile.TemporaryDirectory() as directory:
        engine = ShardedEngine(os.path.join(directory, "sharded"), shards=SHARDS)
        try:
            engine.update_settings("c", {"vectors": {"v": {"dimensions": DIMENSIONS, "metric": "cosine"}}})
            for start in range(0, RECORDS, 10_000):
                engine.add_records("c", [{"id": position, "bucket": int(buckets[position]),
                                          "_vectors": {"v": vectors[position].tolist()}}
                                         for position in range(start, min(RECORDS, start + 10_000))])
            yield engine, directory, vectors, buckets
        finally:
            engine.close()


def _cosine(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    return (vectors.astype(np.float64) @ query) / (np.linalg.norm(vectors.astype(np.float64), axis=1)
                                                   * np.linalg.norm(query))


def test_sharded_approximate_search_keeps_recall_and_the_filter(
        sharded: tuple[ShardedEngine, str, np.ndarray, np.ndarray]) -> None:
    engine, _, vectors, buckets = sharded
    queries = _vectors(np.random.default_rng(8), QUERIES).astype(np.float64)
    for name, condition in FILTERS.items():
        found = exact_found = 0
        for query in queries:
            body: dict[str, Any] = {"collection": "c", "fields": ["id", "bucket"], "count": 10,
                                    "vector": {"name": "v", "values": query.tolist(), "k": 10}}
            if condition is not None:
                body["filter"] = condition
            approximate = engine.search(body)["results"]
            exact = engine.search({**body, "vector": {**body["vector"], "exact": True}})["results"]
            assert len(approximate) == len(exact) == 10
            scores = _cosine(vectors[[result["id"] for result in approximate]], query)
            assert [result["_vectorScore"] for result in approximate] == pytest.approx(scores.tolist(), abs=1e-5)
            assert scores.tolist() == sorted(scores.tolist(), reverse=True)
            if condition is not None:
                share = int(condition.split("<")[1])
                assert all(result["bucket"] < share and buckets[result["id"]] < share for result in approximate)
            found += len({result["id"] for result in approximate} & {result["id"] for result in exact})
            exact_found += len(exact)
        assert found / exact_found >= 0.9, f"recall@10 {found / exact_found:.3f} with filter {name}"


def test_every_shard_searched_a_graph(sharded: tuple[ShardedEngine, str, np.ndarray, np.ndarray]) -> None:
    engine, directory, _, _ = sharded
    engine.close()
    for shard in range(SHARDS):
        with Engine(os.path.join(directory, "sharded", f"shard-{shard}")) as opened:
            space = opened._collection("c").index.vectors.spaces["v"]
            assert space.graph is not None
            assert len(space.docs) * 0.9 > EXACT_MAX_CANDIDATES >= len(space.docs) * 0.5  # as the docstring says
