"""This module tests the following properties:

- random sequences of add, upsert, delete-by-id, clear and search leave the engine answering
  exactly as the brute-force reference model: same totalHits, same ids in the same order, for
  random queries (with typos, prefixes, several words, words that match nothing), random
  searchFields, skip and count;
- delete results (200/404 per id, in order) agree with the model.

The vocabulary is tiny so that shared words, near-misses (one or two edits apart), duplicate ids
and upserts really happen.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from roarsearch import Engine
from tests.property.oracle import ReferenceModel

VOCABULARY = ["lovelace", "lovelase", "loveless", "ada", "adam", "turing", "touring", "alan", "alanis",
              "grace", "hopper", "hoper", "école", "ecole", "naïve", "1984", "1985", "東京", "straße", "strasse"]
IDS = st.one_of(st.integers(min_value=-5, max_value=30), st.sampled_from(["a", "b", "k9", "Z"]))
TEXT = st.lists(st.sampled_from(VOCABULARY), min_size=0, max_size=5).map(" ".join)
FIELDS = ["title", "body", "tags", "meta.note"]


def records_strategy() -> st.SearchStrategy[list[dict[str, Any]]]:
    record = st.fixed_dictionaries(
        {"id": IDS},
        optional={
            "title": TEXT,
            "body": st.one_of(TEXT, st.none()),
            "tags": st.lists(TEXT, max_size=3),
            "meta": st.fixed_dictionaries({}, optional={"note": TEXT, "n": st.integers(0, 9)}),
            "year": st.integers(1900, 2030),
        },
    )
    return st.lists(record, min_size=1, max_size=6)


def query_strategy() -> st.SearchStrategy[str]:
    word = st.one_of(
        st.sampled_from(VOCABULARY),
        st.sampled_from(VOCABULARY).map(lambda w: w[: max(1, len(w) // 2)]),  # prefixes
        st.sampled_from(["lovelance", "turnig", "hoppper", "gracee", "zzz", "adaa", "ecol", "1984"]),
    )
    return st.tuples(st.lists(word, min_size=0, max_size=3).map(" ".join), st.sampled_from(["", " "])).map("".join)


class EngineMatchesModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.engine = Engine()
        self.model = ReferenceModel()
        self.collection_exists = False

    @rule(records=records_strategy())
    def add(self, records: list[dict[str, Any]]) -> None:
        assert self.engine.add_records("c", records) == {"status": 201}
        self.model.add(records)
        self.collection_exists = True

    @precondition(lambda self: self.collection_exists)
    @rule(ids=st.lists(IDS, min_size=1, max_size=4))
    def delete_ids(self, ids: list[Any]) -> None:
        results = self.engine.delete_records("c", ids=ids)
        # A repeated id in one request: the first deletes it, the rest find nothing.
        expected = self.model.delete(ids)
        assert [r["status"] for r in results] == [200 if hit else 404 for hit in expected]
        assert [r["id"] for r in results] == ids

    @precondition(lambda self: self.collection_exists and len(self.model.records) > 8)
    @rule()
    def clear(self) -> None:
        deleted = self.engine.delete_records("c", clear=True)
        assert deleted == [{"status": 200, "deleted": len(self.model.records)}]
        self.model.records.clear()

    @precondition(lambda self: self.collection_exists)
    @rule(query=query_strategy(),
          fields=st.one_of(st.just(["*"]), st.lists(st.sampled_from(FIELDS), min_size=1, max_size=3, unique=True)),
          typos=st.integers(0, 2), skip=st.integers(0, 3), count=st.integers(1, 8))
    def search(self, query: str, fields: list[str], typos: int, skip: int, count: int) -> None:
        body = {"collection": "c", "query": query, "searchFields": fields, "typoTolerance": typos,
                "skip": skip, "count": count}
        response = self.engine.search(body)
        total, ids = self.model.search(query, fields, typos, skip, count)
        got = [result["id"] for result in response["results"]]
        assert (response["totalHits"], got) == (total, ids), (body, self.model.records)
        ranks = [result["_rank"] for result in response["results"]]
        assert ranks == sorted(ranks, reverse=True)
        assert response["query"] is body

    @invariant()
    def browse_counts_everything(self) -> None:
        if self.collection_exists:
            assert self.engine.search({"collection": "c", "count": 0})["totalHits"] == len(self.model.records)


TestEngineMatchesModel = EngineMatchesModel.TestCase


#: A smaller vocabulary for ranking: records then share words, so order rules really get exercised.
DENSE = VOCABULARY[:10]
WORD_OR_PREFIX = st.sampled_from(DENSE).flatmap(
    lambda word: st.integers(1, len(word)).map(lambda cut: word[:cut])
)
TYPO_WORDS = st.sampled_from(["lovelance", "turnig", "hoppper", "gracee", "adaa", "ecol", "alnis", "tourng"])


@settings(max_examples=300)
@given(
    titles=st.lists(st.lists(st.sampled_from(DENSE), min_size=1, max_size=5), min_size=6, max_size=14),
    tags=st.lists(st.lists(st.sampled_from(DENSE), max_size=3), max_size=14),
    ids=st.lists(IDS, min_size=14, max_size=14, unique=True),
    queries=st.lists(st.lists(st.one_of(WORD_OR_PREFIX, TYPO_WORDS), min_size=1, max_size=3), min_size=3, max_size=6),
    typos=st.integers(0, 2),
    fields=st.sampled_from([["*"], ["title"], ["tags", "title"], ["title", "tags"]]),
)
def test_ranked_pages_match_model(titles, tags, ids, queries, typos, fields) -> None:
    records = [{"id": ids[i], "title": " ".join(words)} for i, words in enumerate(titles)]
    for i, words in enumerate(tags):
        if i < len(records):
            records[i]["tags"] = [" ".join(words[:2]), " ".join(words[2:])]
    engine, model = Engine(), ReferenceModel()
    engine.add_records("c", records)
    model.add(records)
    for words in queries:
        query = " ".join(words)
        body = {"collection": "c", "query": query, "searchFields": fields, "typoTolerance": typos, "count": 20}
        response = engine.search(body)
        total, expected = model.search(query, fields, typos, 0, 20)
        assert (response["totalHits"], [r["id"] for r in response["results"]]) == (total, expected), body


SORT_KEYS = st.lists(
    st.sampled_from(["year", "-year", "title", "-title", "tags:desc", "tags:asc", "meta.n", "-meta.n",
                     "flag", "-flag", "_rank", "-_rank", "mixed", "-mixed"]),
    min_size=1, max_size=3, unique=True,
)


@settings(max_examples=200)
@given(
    rows=st.lists(
        st.fixed_dictionaries({"id": IDS}, optional={
            "title": st.lists(st.sampled_from(DENSE), min_size=1, max_size=3).map(" ".join),
            "tags": st.lists(st.sampled_from(DENSE), max_size=3),
            "year": st.integers(1990, 1995),
            "meta": st.fixed_dictionaries({}, optional={"n": st.lists(st.integers(0, 5), max_size=3)}),
            "flag": st.booleans(),
            "mixed": st.one_of(st.integers(0, 3), st.sampled_from(["b", "A", "a", "É", "é"]),
                               st.lists(st.one_of(st.integers(0, 3), st.sampled_from(["b", "A", "a", "É"])),
                                        min_size=1, max_size=3)),
        }),
        min_size=1, max_size=14,
    ),
    query=st.one_of(st.just(""), WORD_OR_PREFIX,
                    st.lists(st.one_of(WORD_OR_PREFIX, TYPO_WORDS), min_size=2, max_size=3).map(" ".join)),
    sort=st.one_of(SORT_KEYS, SORT_KEYS.map(lambda keys: ["-_rank", *[k for k in keys if "_rank" not in k]]),
                   SORT_KEYS.map(lambda keys: [*[k for k in keys if "_rank" not in k], "_rank"])),
    skip=st.integers(0, 5),
    count=st.integers(1, 10),
)
def test_sorted_pages_match_model(rows, query, sort, skip, count) -> None:
    engine, model = Engine(), ReferenceModel()
    engine.add_records("c", rows)
    model.add(rows)
    body = {"collection": "c", "query": query, "sort": sort, "skip": skip, "count": count}
    response = engine.search(body)
    total, expected = model.search(query, ["*"], 1, skip, count, sort=sort)
    assert (response["totalHits"], [r["id"] for r in response["results"]]) == (total, expected), body
