"""This module tests the following properties of collection settings (contract §7):

- with random settings — synonyms (one- and multi-word on both sides), stop words, customRanking
  (numbers, strings, missing values, both directions), typoMinWordSize, typoDisabledFields and
  typoDisabledWords, searchFields — the engine answers random queries exactly as the brute-force
  model (``tests/property/oracle.py``): same totalHits, same ids in the same order;
- changing settings applies from the next search on, without re-adding records (the same engine
  answers under new settings as the model does);
- with an explicit ``sort``, customRanking breaks the ties left by sort keys and relevance.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from roarsearch import Engine
from tests.property.oracle import ReferenceModel

VOCABULARY = ["new", "york", "nyc", "city", "tv", "television", "the", "of", "parks", "park", "lovelace",
              "lovelase", "sf"]
TEXT = st.lists(st.one_of(st.sampled_from(VOCABULARY), st.sampled_from(["new york", "big apple", "san francisco"])),
               min_size=0, max_size=4).map(" ".join)
PHRASE = st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=2).map(" ".join)


def records_strategy() -> st.SearchStrategy[list[dict[str, Any]]]:
    record = st.fixed_dictionaries(
        {"id": st.integers(0, 25)},
        optional={
            "name": TEXT,
            "alt": st.lists(TEXT, max_size=2),
            "note": TEXT,
            "population": st.one_of(st.integers(0, 5), st.sampled_from(["many", "few"])),
            "rating": st.integers(0, 3),
        },
    )
    return st.lists(record, min_size=2, max_size=14)


#: Rules whose words the records and queries really hold, and random ones.
KNOWN_SYNONYMS = st.sampled_from([{"nyc": ["new york"]}, {"new york": ["nyc", "big apple"]},
                                  {"sf": ["san francisco", "sanfrancisco"]}, {"tv": ["television"]},
                                  {"park": ["parks"], "big apple": ["nyc"]}, {"san francisco": ["sf"], "nyc": ["new york city"]}])
SYNONYMS = st.one_of(KNOWN_SYNONYMS, KNOWN_SYNONYMS,
                     st.dictionaries(PHRASE, st.lists(PHRASE, min_size=1, max_size=2), max_size=3))

SETTINGS = st.fixed_dictionaries({}, optional={
    "synonyms": SYNONYMS,
    "stopWords": st.lists(st.sampled_from(["the", "of", "city", "new"]), max_size=2),
    "customRanking": st.lists(st.sampled_from(["-population", "population", "rating:desc", "name", "-rating"]),
                              min_size=1, max_size=2, unique=True),
    "typoMinWordSize": st.sampled_from([{"oneTypo": 3, "twoTypos": 5}, {"oneTypo": 6, "twoTypos": 12},
                                        {"oneTypo": 4, "twoTypos": 8}]),
    "typoDisabledFields": st.lists(st.sampled_from(["name", "alt", "note"]), max_size=2),
    "typoDisabledWords": st.lists(st.sampled_from(["parks", "lovelase", "york"]), max_size=2),
    "searchFields": st.sampled_from([["note", "name"], ["name"], ["*"]]),
})


def query_strategy() -> st.SearchStrategy[str]:
    word = st.one_of(st.sampled_from(VOCABULARY), st.sampled_from(["nyc", "sf", "tv", "new york", "big apple",
                                                                  "san francisco", "park"]),
                     st.sampled_from(["nyc", "new york", "sf"]),
                     st.sampled_from(["yrok", "pars", "lovelacr", "sanfransisco", "televison", "ny", "par", "zzz"]))
    return st.tuples(st.lists(word, min_size=0, max_size=3).map(" ".join), st.sampled_from(["", " "])).map("".join)


def check(engine: Engine, model: ReferenceModel, wire: dict[str, Any], query: str, tolerance: int,
          sort: list[str] | None = None) -> None:
    body: dict[str, Any] = {"collection": "c", "query": query, "typoTolerance": tolerance, "count": 50}
    if sort:
        body["sort"] = sort
    response = engine.search(body)
    total, ids = model.search(query, typo_tolerance=tolerance, count=50, sort=sort, settings=wire)
    got = [result["id"] for result in response["results"]]
    assert (response["totalHits"], got) == (total, ids), (query, wire, sort)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=records_strategy(), wire=SETTINGS, queries=st.lists(query_strategy(), min_size=1, max_size=4),
       tolerance=st.integers(0, 2))
@example(records=[{"id": 1, "name": "new york"}, {"id": 2, "name": "nyc"}], wire={"synonyms": {"nyc": ["new york"]}},
         queries=["nyc"], tolerance=1)
@example(records=[{"id": 1, "name": "nyc bar"}, {"id": 2, "name": "new york"}, {"id": 3, "note": "new and york"}],
         wire={"synonyms": {"new york": ["nyc"]}, "customRanking": ["-id"]}, queries=["new york", "new yor"],
         tolerance=1)
@example(records=[{"id": 0, "note": "new", "alt": ["nyc"]}, {"id": 1, "rating": 0, "alt": ["new nyc"]}],
         wire={"synonyms": {"nyc": ["new york"]}}, queries=["new nyc"], tolerance=0)
def test_settings_match_the_model(records: list[dict[str, Any]], wire: dict[str, Any], queries: list[str],
                                  tolerance: int) -> None:
    engine, model = Engine(), ReferenceModel()
    engine.add_records("c", records)
    model.add(records)
    for query in queries:  # default settings first, then the same records under new settings
        check(engine, model, {}, query, tolerance)
    engine.update_settings("c", wire)
    for query in queries:
        check(engine, model, wire, query, tolerance)
        check(engine, model, wire, query, tolerance, sort=["rating"])


@settings(max_examples=60, deadline=None)
@given(records=records_strategy(), ranking=SETTINGS.filter(lambda wire: "customRanking" in wire))
def test_browse_lists_records_in_custom_ranking_order(records: list[dict[str, Any]], ranking: dict[str, Any]) -> None:
    engine, model = Engine(), ReferenceModel()
    engine.add_records("c", records)
    model.add(records)
    wire = {"customRanking": ranking["customRanking"]}
    engine.update_settings("c", wire)
    for skip in (0, 3):
        response = engine.search({"collection": "c", "skip": skip, "count": 5})
        total, ids = model.search("", skip=skip, count=5, settings=wire)
        assert (response["totalHits"], [r["id"] for r in response["results"]]) == (total, ids)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), ranking=st.sampled_from([["-population"], ["population", "-rating"],
                                                             ["rating:desc", "name"]]))
def test_custom_ranking_top_k_on_large_buckets(seed: int, ranking: list[str]) -> None:
    """Buckets much larger than the page take the top-k path; the order must not change."""
    import random

    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for record_id in rng.sample(range(1000), 300):
        record: dict[str, Any] = {"id": record_id, "name": rng.choice(["park", "parks", "paris", "new york", "nyc park"])}
        if rng.random() < 0.8:
            record["population"] = rng.choice([rng.randint(0, 20), "many", "few", [3, rng.randint(0, 40)]])
        if rng.random() < 0.7:
            record["rating"] = rng.randint(0, 3)
        records.append(record)
    engine, model = Engine(), ReferenceModel()
    engine.add_records("c", records)
    model.add(records)
    wire = {"customRanking": ranking}
    engine.update_settings("c", wire)
    for query in ("", "par", "park "):
        for skip in (0, 4, 30):
            response = engine.search({"collection": "c", "query": query, "skip": skip, "count": 6})
            total, ids = model.search(query, skip=skip, count=6, settings=wire)
            assert (response["totalHits"], [r["id"] for r in response["results"]]) == (total, ids), (query, skip)
