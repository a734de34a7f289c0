"""A hybrid search without a sort or groups fuses only the keyword matches its page can hold (the
first skip + count + k of the keyword order, and the vector matches further down at their exact
keyword places, found by :meth:`Ranker.places` splitting only the buckets that hold them). This
module tests the following properties:

- every page (skips and counts, ratios 0 to 1, filters, many ties in relevance and vector score,
  more keyword matches than the ranker scores at once, a customRanking, record ids out of doc
  order) equals the page of the same request sorted by ``-_rank`` — the fused order itself, which
  is computed from every keyword match — with the same ``_rank``, ``_vectorScore`` and totalHits;
- the same with the bucket walk forced for every candidate set (no set scored at once).
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from roarsearch import Engine
from roarsearch.ranking import ranker

WORDS = ["red", "fox", "blue", "green", "runs", "quick", "brown", "dog"]


def _engine(seed: int, custom: bool, shuffled_ids: bool) -> Engine:
    generator = random.Random(seed)
    engine = Engine()
    settings: dict[str, Any] = {"vectors": {"v": {"dimensions": 3, "metric": "cosine"}}}
    if custom:
        settings["customRanking"] = ["-stars"]
    engine.update_settings("c", settings)
    ids: list[Any] = list(range(3_000))
    if shuffled_ids:  # record id order differs from doc order
        generator.shuffle(ids)
        ids = [f"k{number}" if number % 3 == 0 else number for number in ids]
    records = []
    for record_id in ids:
        record: dict[str, Any] = {"id": record_id, "text": " ".join(generator.choices(WORDS, k=generator.randint(1, 5))),
                                  "stars": generator.randint(0, 3), "bucket": generator.randint(0, 9)}
        if generator.random() < 0.8:  # few distinct vectors: score ties
            record["_vectors"] = {"v": [generator.randint(-2, 2), generator.randint(-2, 2), 1]}
        records.append(record)
    for start in range(0, len(records), 500):
        engine.add_records("c", records[start:start + 500])
    return engine


def _bodies(seed: int) -> list[dict[str, Any]]:
    generator = random.Random(seed)
    bodies = []
    for _ in range(60):
        body: dict[str, Any] = {
            "collection": "c", "query": " ".join(generator.sample(WORDS, generator.randint(1, 2))),
            "vector": {"name": "v", "values": [generator.randint(-2, 2), generator.randint(-2, 2), 1],
                       "k": generator.choice([1, 10, 100, 400]), "exact": True},
            "semanticRatio": generator.choice([0, 0.2, 0.5, 0.9, 1]),
            "skip": generator.choice([0, 0, 3, 37, 250]), "count": generator.choice([1, 10, 30]),
            "fields": ["id"]}
        if generator.random() < 0.4:
            body["filter"] = f"bucket < {generator.randint(1, 9)}"
        bodies.append(body)
    return bodies


def _check(engine: Engine, seed: int) -> None:
    for body in _bodies(seed):
        paged = engine.search(body)
        fused = engine.search({**body, "sort": ["-_rank"]})
        assert paged["results"] == fused["results"], body
        assert paged["totalHits"] == fused["totalHits"]


@pytest.mark.parametrize(("seed", "custom", "shuffled_ids"), [(1, False, False), (2, True, False), (3, False, True),
                                                             (4, True, True)])
def test_a_page_equals_the_whole_fused_order(seed: int, custom: bool, shuffled_ids: bool) -> None:
    _check(_engine(seed, custom, shuffled_ids), seed)


@pytest.mark.parametrize(("seed", "custom", "shuffled_ids"), [(5, False, False), (6, True, True)])
def test_the_bucket_walk_places_like_the_whole_order(seed: int, custom: bool, shuffled_ids: bool,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranker, "SCORE_ALL_BELOW", 0)
    _check(_engine(seed, custom, shuffled_ids), seed)
