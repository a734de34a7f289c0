"""This module tests the following properties:

- a ShardedEngine of 3 shards (local Ray) answers every ``vector`` search with ``exact: true``
  exactly as one Engine holding the same records: whole responses equal (``responseTime`` aside,
  ``avg`` within float tolerance) — results and their order, ``_rank`` (the fused score, to the
  bit), ``_vectorScore``, ``totalHits``, pages, text facets and numeric stats (disjunctive: a facet
  with its own facet filter counts the keyword matches and the ``k`` nearest with that filter left
  out), groups, ``_geoDistance``, highlights and ``_vectors`` shown when ``fields`` names them;
- vector-only and hybrid (``semanticRatio`` 0, between, 1; word dropping decided over all shards),
  with filters, text and numeric facet filters, geo circles, explicit sorts (``_rank`` keys, ties
  broken by the fused order), groups, for each metric, with many score ties (small integer
  vectors: ties go to the record id), records without a vector or with ``null``, integer and
  string ids, customRanking and synonyms in the settings;
- after upserts that change or remove vectors and deletes by id and by filter;
- errors are the engine's: an undeclared space, a query vector of the wrong length, a record whose
  ``_vectors`` does not fit (``records[i]._vectors.NAME``), changing a space's dimensions while
  records hold vectors, and an unknown collection (404).
"""

from __future__ import annotations

import itertools
import os
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")

from roarsearch import Engine
from roarsearch.cluster import ShardedEngine
from tests.cluster.compare import both

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

DIMENSIONS = 3
WORDS = ["red", "shoe", "shoes", "blue", "boot", "green", "hat", "runner"]
BRANDS = ["acme", "Acme", "zeta", "nova"]
POINTS = [{"lat": 0.0, "lng": 0.0}, {"lat": 1.0, "lng": 1.5}, {"lat": 2.0, "lng": 0.0}, {"lat": 5.0, "lng": 4.0}]
#: Few distinct small vectors: many records share a score (ties go to the record id).
VECTOR = st.lists(st.integers(-2, 2), min_size=DIMENSIONS, max_size=DIMENSIONS).map(
    lambda values: values if any(values) else [1, *values[1:]])
IDS = st.one_of(st.integers(0, 90), st.sampled_from(["a", "b", "k9", "Z", "é", "7"]))
RECORD = st.fixed_dictionaries(
    {"id": IDS, "title": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
     "brand": st.sampled_from(BRANDS)},
    optional={
        "price": st.one_of(st.integers(0, 100), st.lists(st.integers(0, 100), min_size=1, max_size=2)),
        "tags": st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=2),
        "_geo": st.sampled_from(POINTS),
        "_vectors": st.one_of(VECTOR.map(lambda values: {"v": values}), VECTOR.map(lambda values: {"v": values}),
                              VECTOR.map(lambda values: {"v": values}), st.just({"v": None})),
    },
)
WRITE = st.one_of(
    st.tuples(st.just("add"), st.lists(RECORD, min_size=1, max_size=15)),
    st.tuples(st.just("ids"), st.lists(IDS, min_size=1, max_size=6)),
    st.tuples(st.just("filter"), st.sampled_from(["price >= 80", 'brand = "zeta"'])),
)
SETTINGS = st.sampled_from([{}, {}, {"customRanking": ["-price"]}, {"customRanking": ["brand", "id:desc"]},
                            {"synonyms": {"boot": ["hat"]}, "customRanking": ["tags"]}])
AROUND = st.fixed_dictionaries({"lat": st.just(0.0), "lng": st.just(0.0)},
                               optional={"radius": st.sampled_from([200_000, 600_000])})
REQUEST = st.fixed_dictionaries({
    "vector": st.fixed_dictionaries({"name": st.just("v"), "values": VECTOR, "k": st.integers(1, 25),
                                     "exact": st.just(True)}),
    "query": st.sampled_from(["", "", "red", "boot green", "shoe zzz", "zzz", "hat runn", "red shoe", "bot", "shoes"]),
    "filter": st.sampled_from(["", "", "price < 50", "price >= 30", 'NOT brand = "acme"']),
    "sort": st.sampled_from([[], [], ["price"], ["-price"], ["-_rank"], ["_rank"], ["brand", "-_rank"],
                             ["_rank", "price"], ["-id"], ["tags:desc", "price"]]),
    "skip": st.integers(0, 4),
    "count": st.integers(0, 8),
    "textFacets": st.lists(st.sampled_from(["brand", "tags"]), max_size=2, unique=True),
    "fields": st.sampled_from([["*"], ["id"], ["title", "_vectors"], ["_vectors.v", "brand"]]),
}, optional={
    "semanticRatio": st.sampled_from([0, 0.2, 0.5, 1]),
    "textFacetFilters": st.sampled_from([{"brand": ["acme"]}, {"brand": ["zeta", "nova"]}, {"tags": ["x"]}]),
    "numericFacets": st.sampled_from([{"price": ["[0,50)", "[50,100]"]}, {"price": []}]),
    "numericFacetFilters": st.sampled_from([{"price": ["[0,40]"]}, {"price": ["[20,60]", "[90,100]"]}]),
    "highlightFields": st.just(["title"]),
    "facetCount": st.integers(1, 3),
})
GROUPING = st.one_of(st.just({}), st.just({}), st.fixed_dictionaries({
    "groupBy": st.sampled_from(["brand", "price", "tags", "nothing"]),
    "groupCount": st.sampled_from([-1, 1, 2]),
    "groupLimit": st.integers(1, 3),
}))
GEO = st.one_of(st.none(), st.none(), st.fixed_dictionaries({"around": AROUND}))

_names = itertools.count()



def _body(collection: str, request: dict[str, Any], grouping: dict[str, Any], geo: dict[str, Any] | None,
          geo_sort: bool) -> dict[str, Any]:
    body = {"collection": collection, **request, **grouping}
    if geo is not None:
        body["geo"] = geo
        if geo_sort:
            body["sort"] = ["_geoDistance", *body["sort"]]
            body["numericFacets"] = {"_geoDistance": ["[0,150000)", "[150000,700000]"]}
    return body


@settings(max_examples=int(os.environ.get("CLUSTER_EXAMPLES", 40)))
@given(metric=st.sampled_from(["cosine", "dot", "l2"]), collection_settings=SETTINGS,
       records=st.lists(RECORD, min_size=1, max_size=60), writes=st.lists(WRITE, max_size=3),
       requests=st.lists(st.tuples(REQUEST, GROUPING, GEO, st.booleans()), min_size=1, max_size=8))
def test_sharded_vector_searches_equal_single_engine(engines: tuple[ShardedEngine, Engine], metric: str,
                                                     collection_settings: dict[str, Any], records: list[dict[str, Any]],
                                                     writes: list[tuple[str, Any]], requests: list[tuple[Any, ...]]) -> None:
    sharded, single = engines
    collection = f"v{next(_names)}"
    update = {"vectors": {"v": {"dimensions": DIMENSIONS, "metric": metric}}, **collection_settings}
    both(sharded, single, lambda engine: engine.update_settings(collection, update))
    for kind, argument in [("add", records), *writes]:
        if kind == "add":
            both(sharded, single, lambda engine, batch=argument: engine.add_records(collection, batch))
        elif kind == "ids":
            both(sharded, single, lambda engine, ids=argument: engine.delete_records(collection, ids=ids))
        else:
            both(sharded, single, lambda engine, expression=argument: engine.delete_records(collection, filter=expression))
    bodies = [_body(collection, *request) for request in requests]
    for body in bodies:
        answer = both(sharded, single, lambda engine, body=body: engine.search(body))
        assert "status" not in answer, answer  # every generated request is valid
    both(sharded, single, lambda engine: engine.multi_search(bodies[:3]))


#: Larger collections, one per metric, built once from a seeded generator: pages and groups then
#: come from deep in both orders, and shards hold many more matches than a page.
LARGE = {"cosine": {}, "dot": {"customRanking": ["-price"]}, "l2": {"customRanking": ["brand", "id:desc"]}}


@pytest.fixture(scope="module")
def large(engines: tuple[ShardedEngine, Engine]) -> dict[str, str]:
    sharded, single = engines
    chooser = random.Random(20240611)
    names = {}
    for metric, extra in LARGE.items():
        records = []
        for number in range(240):
            record: dict[str, Any] = {"id": number if chooser.random() < 0.8 else f"r{number}",
                                      "title": " ".join(chooser.sample(WORDS, chooser.randint(1, 3))),
                                      "brand": chooser.choice(BRANDS)}
            if chooser.random() < 0.8:
                record["price"] = chooser.randint(0, 100)
            if chooser.random() < 0.5:
                record["tags"] = chooser.sample(["x", "y", "z"], chooser.randint(1, 2))
            if chooser.random() < 0.5:
                record["_geo"] = chooser.choice(POINTS)
            if chooser.random() < 0.85:
                vector = [chooser.randint(-2, 2) for _ in range(DIMENSIONS)]
                record["_vectors"] = {"v": vector if any(vector) else [2, 0, 0]}
            records.append(record)
        names[metric] = f"large{next(_names)}"
        for engine in (sharded, single):
            engine.update_settings(names[metric], {"vectors": {"v": {"dimensions": DIMENSIONS, "metric": metric}}, **extra})
            engine.add_records(names[metric], records)
            engine.delete_records(names[metric], ids=list(range(0, 240, 17)))
    return names


@settings(max_examples=3 * int(os.environ.get("CLUSTER_EXAMPLES", 40)))
@given(metric=st.sampled_from(sorted(LARGE)), request=st.tuples(REQUEST, GROUPING, GEO, st.booleans()))
def test_sharded_vector_searches_over_larger_collections(engines: tuple[ShardedEngine, Engine], large: dict[str, str],
                                                         metric: str, request: tuple[Any, ...]) -> None:
    sharded, single = engines
    body = _body(large[metric], *request)
    body["vector"] = {**body["vector"], "k": body["vector"]["k"] * 4}
    both(sharded, single, lambda engine: engine.search(body))


def test_a_hybrid_page_far_down_both_orders(engines: tuple[ShardedEngine, Engine]) -> None:
    """Many keyword matches, a vector match deep in the keyword order, pages past the first
    hundred, a sort whose ties the fused order breaks: positions summed over the shards."""
    sharded, single = engines
    collection = f"deep{next(_names)}"
    records = [{"id": number if number % 3 else f"s{number}", "title": "red shoe" if number % 4 else "red boot",
                "price": number % 7, "_vectors": {"v": [number % 5 - 2, (number * 7) % 3 - 1, 1]}}
               for number in range(300)]
    for engine in (sharded, single):
        engine.update_settings(collection, {"vectors": {"v": {"dimensions": 3, "metric": "l2"}},
                                            "customRanking": ["-price"]})
        engine.add_records(collection, records)
    vector = {"name": "v", "values": [2, -1, 1], "k": 40, "exact": True}
    for ratio, sort, skip in itertools.product([0, 0.05, 0.5, 0.97, 1], [[], ["price"], ["-_rank"], ["_rank"]], [0, 37, 250]):
        body = {"collection": collection, "query": "red boot", "vector": vector, "semanticRatio": ratio,
                "sort": sort, "skip": skip, "count": 25, "fields": ["id"], "textFacets": ["price"]}
        both(sharded, single, lambda engine, body=body: engine.search(body))
    grouped = {"collection": collection, "query": "red", "vector": vector, "groupBy": "price", "groupLimit": 4,
               "sort": ["-_rank"], "fields": ["id"]}
    both(sharded, single, lambda engine: engine.search(grouped))


def test_vector_errors_equal_single_engine(engines: tuple[ShardedEngine, Engine]) -> None:
    sharded, single = engines
    collection = f"errors{next(_names)}"
    calls: list[Any] = [
        lambda engine: engine.search({"collection": collection, "vector": {"name": "v", "values": [1, 0, 0]}}),
        lambda engine: engine.update_settings(collection, {"vectors": {"v": {"dimensions": 3, "metric": "dot"}}}),
        lambda engine: engine.add_records(collection, [{"id": 1, "_vectors": {"v": [1, 2, 3]}},
                                                       {"id": 2, "_vectors": {"v": [1, 2]}}]),
        lambda engine: engine.add_records(collection, [{"id": 1, "_vectors": {"w": [1, 2, 3]}}]),
        lambda engine: engine.add_records(collection, [{"id": 1, "_vectors": {"v": [1, "a", 3]}}]),
        lambda engine: engine.add_records(collection, [{"id": 1, "title": "a", "_vectors": {"v": [1, 2, 3]}},
                                                       {"id": "b", "_vectors": {"v": None}}]),
        lambda engine: engine.search({"collection": collection, "vector": {"name": "w", "values": [1, 0, 0]}}),
        lambda engine: engine.search({"collection": collection, "vector": {"name": "v", "values": [1, 0]}}),
        lambda engine: engine.search({"collection": collection, "vector": {"name": "v", "values": [1, 0, 0], "k": 0}}),
        lambda engine: engine.search({"collection": collection, "fields": ["_vectors"],
                                      "vector": {"name": "v", "values": [1, 0, 0]}}),
        lambda engine: engine.update_settings(collection, {"vectors": {"v": {"dimensions": 4, "metric": "dot"}}}),
        lambda engine: engine.update_settings(collection, {"vectors": {"v": {"dimensions": 3, "metric": "l2"}}}),
        lambda engine: engine.update_settings(collection, {"vectors": {"v": {"dimensions": 3, "metric": "dot"},
                                                                       "w": {"dimensions": 2}}}),
        lambda engine: engine.search({"collection": collection, "vector": {"name": "w", "values": [1, 0]}}),
        lambda engine: engine.delete_records(collection, ids=[1]),
        lambda engine: engine.update_settings(collection, {"vectors": {"v": {"dimensions": 4, "metric": "l2"}}}),
        lambda engine: engine.search({"collection": collection, "vector": {"name": "v", "values": [1, 0, 0, 1]}}),
        lambda engine: engine.update_settings(collection, {"vectors": None}),
        lambda engine: engine.search({"collection": collection, "vector": {"name": "v", "values": [1, 0, 0, 1]}}),
        lambda engine: engine.search({"collection": f"{collection}-none", "vector": {"name": "v", "values": [1]}}),
    ]
    answers = [both(sharded, single, call) for call in calls]
    statuses = [answer.get("status", 200) if isinstance(answer, dict) else 200 for answer in answers]
    assert statuses == [404, 200, 400, 400, 400, 201, 400, 400, 400, 200, 400, 400, 200, 200, 200, 200, 200, 200,
                        400, 404], statuses
