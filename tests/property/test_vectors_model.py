"""This module tests the following properties:

- a ``vector`` search with ``exact: true`` — alone or hybrid with query words, with a filter, a
  text facet filter, a geo circle, an explicit sort (``_rank`` keys included), groups and pages —
  gives what a brute-force model gives (tests/property/oracle.py): the k nearest among the records
  passing every filter, reciprocal rank fusion of the keyword and vector orders, ``_rank`` (the
  fused score), ``_vectorScore``, ``totalHits``, and disjunctive facet counts (a facet with its own
  filter counts the keyword matches and the k nearest with that filter left out);
- for each metric (cosine, dot, l2), with records lacking a vector or holding ``null``;
- upserts and deletes keep the vector matches exact.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roarsearch import Engine
from tests.property.oracle import ReferenceModel, fused, id_key, nearest, query_words, sort_key

WORDS = ["red", "shoe", "blue", "boot", "green", "hat", "runner"]
BRANDS = ["acme", "zeta", "nova"]
DIMENSIONS = 4
COMPONENT = st.integers(-3, 3)


@st.composite
def records(draw: Any) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 30))
    rows = []
    for record_id in range(count):
        row: dict[str, Any] = {"id": record_id,
                               "title": " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))),
                               "brand": draw(st.sampled_from(BRANDS))}
        if draw(st.booleans()):
            row["price"] = draw(st.integers(0, 100))
        if draw(st.booleans()):
            row["_geo"] = {"lat": draw(st.sampled_from([0.0, 1.0, 2.0, 5.0])), "lng": draw(st.sampled_from([0.0, 1.5, 4.0]))}
        kind = draw(st.sampled_from(["vector", "vector", "vector", "null", "none"]))
        if kind == "vector":
            values = draw(st.lists(COMPONENT, min_size=DIMENSIONS, max_size=DIMENSIONS))
            if not any(values):
                values[0] = 1  # a cosine vector must have a norm
            row["_vectors"] = {"v": values}
        elif kind == "null":
            row["_vectors"] = {"v": None}
        rows.append(row)
    return rows


@st.composite
def requests(draw: Any) -> dict[str, Any]:
    query_vector = draw(st.lists(COMPONENT, min_size=DIMENSIONS, max_size=DIMENSIONS))
    if not any(query_vector):
        query_vector[-1] = 2
    body: dict[str, Any] = {"collection": "c",
                            "vector": {"name": "v", "values": query_vector, "k": draw(st.integers(1, 15)), "exact": True},
                            "textFacets": ["brand"], "fields": ["id"],
                            "skip": draw(st.integers(0, 4)), "count": draw(st.integers(1, 12))}
    query = draw(st.sampled_from(["", "", "red", "boot green", "shoe zzz", "zzz", "hat runn"]))
    if query:
        body["query"] = query
    if draw(st.booleans()):
        body["semanticRatio"] = draw(st.sampled_from([0, 0.25, 0.5, 0.8, 1]))
    body["filter"] = draw(st.sampled_from(["", "price < 50", "price >= 30"]))
    if draw(st.booleans()):
        body["textFacetFilters"] = {"brand": draw(st.lists(st.sampled_from(BRANDS), min_size=1, max_size=2, unique=True))}
    if draw(st.booleans()):
        body["geo"] = {"around": {"lat": 0.0, "lng": 0.0, "radius": draw(st.sampled_from([200_000, 500_000]))}}
    body["sort"] = draw(st.sampled_from([[], [], ["price"], ["-price"], ["-_rank"], ["_rank"], ["brand", "-_rank"]]))
    if draw(st.booleans()):
        body["groupBy"] = "brand"
    return body


def haversine(lat1: float, lng1: float, lat2: float, lng2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lng2 - lng1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * 6_371_008.8 * math.asin(min(1.0, math.sqrt(a)))


def passes(record: dict[str, Any], body: dict[str, Any], facet_left_out: str | None = None) -> bool:
    """The filter, the facet filters (but ``facet_left_out``'s) and the geo circle."""
    price = record.get("price")
    if body["filter"] == "price < 50" and not (price is not None and price < 50):
        return False
    if body["filter"] == "price >= 30" and not (price is not None and price >= 30):
        return False
    wanted = body.get("textFacetFilters", {}).get("brand")
    if wanted and facet_left_out != "brand" and record["brand"] not in wanted:
        return False
    if "geo" in body:
        around = body["geo"]["around"]
        point = record.get("_geo")
        if point is None or haversine(around["lat"], around["lng"], point["lat"], point["lng"]) > around["radius"]:
            return False
    return True


def matches(model: ReferenceModel, body: dict[str, Any], metric: str,
            facet_left_out: str | None = None) -> tuple[list[tuple[Any, float]], dict[Any, float]]:
    """The matches in fused order with their ``_rank``, and each vector match's score."""
    pool = [record for record in model.records.values() if passes(record, body, facet_left_out)]
    vector = body["vector"]
    near = nearest(pool, "v", vector["values"], metric, vector["k"])
    scores = dict(near)
    query = body.get("query", "")
    if not query_words(query, []):
        return [(record_id, 1.0 / (60 + position)) for position, (record_id, _) in enumerate(near, 1)], scores
    if facet_left_out is not None:
        # Word dropping is decided once, with every filter (contract §4); the facet counts the
        # docs holding the words kept then (the last one no longer typed as a prefix if it was dropped).
        matches(model, body, metric)
        query = model.kept_query(query)
    _total, keyword = model.search(query, universe={record["id"] for record in pool}, count=10**9)
    return fused(keyword, [record_id for record_id, _ in near], body.get("semanticRatio", 0.5)), scores


def ordered(model: ReferenceModel, placed: list[tuple[Any, float]], sort: list[str]) -> list[tuple[Any, float]]:
    """An explicit sort over the fused order, which breaks its ties (``-_rank`` is the fused order)."""
    if not sort:
        return placed
    plain = [key for key in sort if key.lstrip("-") != "_rank"]

    def key(item: tuple[int, tuple[Any, float]]) -> tuple[Any, ...]:
        position, (record_id, _rank) = item
        values = iter(sort_key(model.records[record_id], plain))
        parts = []
        for text in sort:
            if text == "-_rank":
                parts.append(position)
            elif text == "_rank":
                parts.append(-position)
            else:
                parts.append(next(values))
        return (*parts, position)

    return [item for _position, item in sorted(enumerate(placed), key=key)]


def check(engine: Engine, model: ReferenceModel, body: dict[str, Any], metric: str) -> None:
    response = engine.search(body)
    placed, scores = matches(model, body, metric)
    placed = ordered(model, placed, body["sort"])
    assert response["totalHits"] == len(placed)
    rank_of = dict(placed)
    skip, count = body["skip"], body["count"]
    if "groupBy" in body:
        groups: dict[str, list[Any]] = {}
        for record_id, _rank in placed:
            groups.setdefault(model.records[record_id]["brand"], []).append(record_id)
        expected_groups = [(value, len(ids), ids[:3]) for value, ids in list(groups.items())[skip:skip + count]]
        got_groups = [(group["value"], group["totalHits"], [shown["id"] for shown in group["results"]])
                      for group in response["results"]]
        assert got_groups == expected_groups
        shown_results = [shown for group in response["results"] for shown in group["results"]]
    else:
        assert [shown["id"] for shown in response["results"]] == [record_id for record_id, _ in placed[skip:skip + count]]
        shown_results = response["results"]
    for shown in shown_results:
        assert shown["_rank"] == pytest.approx(rank_of[shown["id"]], rel=1e-12, abs=0)
        if shown["id"] in scores:
            assert shown["_vectorScore"] == pytest.approx(scores[shown["id"]], rel=1e-12, abs=1e-12)
        else:
            assert "_vectorScore" not in shown
    # Facets: disjunctive in their own facet filter.
    facet_left_out = "brand" if body.get("textFacetFilters") else None
    counted, _ = matches(model, body, metric, facet_left_out) if facet_left_out else (placed, None)
    counts: dict[str, int] = {}
    for record_id, _rank in counted:
        brand = model.records[record_id]["brand"]
        counts[brand] = counts.get(brand, 0) + 1
    expected_values = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    assert [(value["value"], value["count"]) for value in response["textFacets"][0]["values"]] == expected_values


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rows=records(), bodies=st.lists(requests(), min_size=1, max_size=4))
def test_exact_vector_and_hybrid_search_equal_the_model(metric: str, rows: list[dict[str, Any]],
                                                          bodies: list[dict[str, Any]]) -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"v": {"dimensions": DIMENSIONS, "metric": metric}}})
    engine.add_records("c", rows)
    model = ReferenceModel()
    model.add(rows)
    for body in bodies:
        check(engine, model, body, metric)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rows=records(), later=records(), deleted=st.lists(st.integers(0, 29), max_size=8), body=requests())
def test_upserts_and_deletes_keep_vector_matches_exact(rows: list[dict[str, Any]], later: list[dict[str, Any]],
                                                       deleted: list[int], body: dict[str, Any]) -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"v": {"dimensions": DIMENSIONS, "metric": "l2"}}})
    model = ReferenceModel()
    engine.add_records("c", rows)
    model.add(rows)
    upserts = later[: len(later) // 2 + 1]
    engine.add_records("c", upserts)
    model.add(upserts)
    if deleted:
        engine.delete_records("c", ids=deleted)
        model.delete(deleted)
    if not model.records:
        return
    check(engine, model, body, "l2")
    assert engine.check()["ok"]


def test_ties_go_to_record_id() -> None:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"v": {"dimensions": 2, "metric": "dot"}}})
    engine.add_records("c", [{"id": record_id, "_vectors": {"v": [1, 1]}} for record_id in (5, 3, 9, 1)])
    response = engine.search({"collection": "c", "vector": {"name": "v", "values": [2, 0], "k": 3}})
    assert [shown["id"] for shown in response["results"]] == [1, 3, 5]
    assert id_key(1) < id_key(3)
