"""This module tests the following properties:

- the library API of contract §1–§4: add one record or a list, upsert, integer and string ids,
  delete by ids (200/404 in order), by filter and clear; the response shape; projection with
  dotted paths; `id` and `_rank` on every result; `query` echo; exact totals;
- matching: AND across words, last word as prefix, typos by length (4/8), numbers exact, words
  dropped from the end (never the first);
- ranking golden cases for each rule; explicit sort with missing values last both ways;
- highlighting marks exact, typo and prefix matches and escapes HTML;
- concurrent searches and writes never fail and a search sees a batch wholly or not at all.
"""

from __future__ import annotations

import threading

import pytest

from roarsearch import Engine


def ids(response: dict) -> list:
    return [result["id"] for result in response["results"]]


@pytest.fixture()
def people() -> Engine:
    engine = Engine()
    engine.add_records("people", [
        {"id": 1, "fName": "Ada", "lName": "Lovelace", "born": 1815, "field": "math"},
        {"id": 2, "fName": "Alan", "lName": "Turing", "born": 1912, "field": "cs"},
        {"id": 3, "fName": "Grace", "lName": "Hopper", "born": 1906, "field": "cs"},
        {"id": 4, "fName": "Ada", "lName": "Yonath", "born": 1939},
    ])
    return engine


def test_add_shapes_and_upsert(people: Engine) -> None:
    assert people.add_records("people", {"id": 5, "fName": "Edsger"}) == {"status": 201}
    assert people.add_records("people", {"id": 5, "fName": "Edsger", "lName": "Dijkstra"}) == {"status": 201}
    response = people.search({"collection": "people", "query": "dijkstra"})
    assert response["totalHits"] == 1 and response["results"][0]["lName"] == "Dijkstra"
    assert people.search({"collection": "people"})["totalHits"] == 5


def test_string_and_integer_ids_order(people: Engine) -> None:
    people.add_records("people", [{"id": "b", "fName": "Ada"}, {"id": "a", "fName": "Ada"}, {"id": -7, "fName": "Ada"}])
    assert ids(people.search({"collection": "people", "query": "ada"})) == [-7, 1, 4, "a", "b"]


def test_response_shape(people: Engine) -> None:
    body = {"collection": "people", "query": "ada", "fields": ["lName"]}
    response = people.search(body)
    assert set(response) == {"query", "results", "textFacets", "numericFacets", "totalHits", "responseTime"}
    assert response["query"] is body
    assert isinstance(response["responseTime"], int)
    assert response["results"] == [
        {"id": 1, "lName": "Lovelace", "_rank": 1.0},
        {"id": 4, "lName": "Yonath", "_rank": 1.0},
    ]


def test_projection_of_nested_paths() -> None:
    engine = Engine()
    engine.add_records("c", {"id": 1, "address": {"city": "Paris", "zip": "75001"}, "tags": [{"k": "x", "v": 1}]})
    result = engine.search({"collection": "c", "query": "paris", "fields": ["address.city", "tags.k"]})["results"][0]
    assert result == {"id": 1, "address": {"city": "Paris"}, "tags": [{"k": "x"}], "_rank": 1.0}


def test_delete_by_ids_filterless_and_clear(people: Engine) -> None:
    assert people.delete_records("people", ids=[1, 99, "x"]) == [
        {"status": 200, "id": 1}, {"status": 404, "id": 99}, {"status": 404, "id": "x"}]
    assert people.search({"collection": "people", "query": "ada"})["totalHits"] == 1
    assert people.delete_records("people", clear=True) == [{"status": 200, "deleted": 3}]
    assert people.search({"collection": "people"})["totalHits"] == 0


def test_and_prefix_and_drop_words(people: Engine) -> None:
    assert ids(people.search({"collection": "people", "query": "ada yonath"})) == [4]
    assert ids(people.search({"collection": "people", "query": "ada yon"})) == [4]       # last word as prefix
    assert ids(people.search({"collection": "people", "query": "ada zzz"})) == [1, 4]    # zzz dropped
    assert ids(people.search({"collection": "people", "query": "zzz ada"})) == []        # first word never dropped


def test_typo_thresholds() -> None:
    engine = Engine()
    engine.add_records("w", [{"id": 1, "t": "cat"}, {"id": 2, "t": "lamp"}, {"id": 3, "t": "elephant"},
                             {"id": 4, "t": "1984"}])

    def search(q: str, tolerance: int = 1) -> list:
        return ids(engine.search({"collection": "w", "query": q + " ", "typoTolerance": tolerance}))

    assert search("cot") == []                 # under 4 letters: no typo
    assert search("lamb") == [2]               # 4 letters: one typo
    assert search("lbmb") == []                # ... but not two
    assert search("elephnat") == [3]           # a swap is one typo
    assert search("elefamt", 2) == []          # 7 letters: one typo at most
    assert search("elefhant", 2) == [3]        # 8 letters: two typos (ph→fh counts 1; here 1)
    assert search("eleefhant", 2) == [3]       # two typos on a 9-letter word
    assert search("lamb", 0) == []             # typoTolerance 0
    assert search("1985") == []                # numbers match exactly


def test_ranking_rules_golden() -> None:
    engine = Engine()
    engine.add_records("r", [
        {"id": 1, "title": "the quick brown fox", "body": ""},
        {"id": 2, "title": "brown things", "body": "quick"},     # words in different fields
        {"id": 3, "title": "quick brown", "body": ""},            # adjacent, in order
        {"id": 4, "title": "brown quick", "body": ""},            # adjacent, reversed
        {"id": 5, "title": "quikc brown", "body": ""},            # one typo
        {"id": 6, "title": "", "body": "quick brown"},            # later attribute
        {"id": 7, "title": "quickly brown", "body": ""},          # prefix only... not last word
    ])
    # typo first, then proximity (in order before reversed before apart), attribute, id.
    assert ids(engine.search({"collection": "r", "query": "quick brown", "searchFields": ["title", "body"]})) == [
        1, 3, 6, 4, 2, 5]
    # exact before prefix for the last word
    assert ids(engine.search({"collection": "r", "query": "brown quick", "searchFields": ["title"]}))[:2] == [4, 1]


def test_sort_keys_missing_last_both_ways(people: Engine) -> None:
    people.add_records("people", {"id": 6, "fName": "Nobody"})
    assert ids(people.search({"collection": "people", "sort": ["born"]})) == [1, 3, 2, 4, 6]
    assert ids(people.search({"collection": "people", "sort": ["-born"]})) == [4, 2, 3, 1, 6]
    assert ids(people.search({"collection": "people", "sort": ["born:desc"]})) == [4, 2, 3, 1, 6]
    assert ids(people.search({"collection": "people", "sort": ["field", "-born"]})) == [2, 3, 1, 4, 6]
    assert ids(people.search({"collection": "people", "sort": ["-born"], "skip": 3, "count": 1})) == [1]


def test_highlights_escape_and_mark() -> None:
    engine = Engine()
    engine.add_records("h", {"id": 1, "title": "<b>Lovelace</b> & Babbage", "tags": ["analytical engine", "x"]})
    result = engine.search({"collection": "h", "query": "lovlace babb", "highlightFields": ["title", "tags"]})["results"][0]
    assert result["_highlights"] == {
        "title": "&lt;b&gt;<em>Lovelace</em>&lt;/b&gt; &amp; <em>Babbage</em>",
        "tags": ["analytical engine", "x"],
    }


def test_concurrent_searches_see_whole_batches() -> None:
    engine = Engine()
    engine.add_records("c", {"id": 0, "t": "seed"})
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        for batch in range(40):
            engine.add_records("c", [{"id": batch * 10 + i + 1, "t": "word"} for i in range(10)])
        stop.set()

    def reader() -> None:
        try:
            while not stop.is_set():
                total = engine.search({"collection": "c", "query": "word", "count": 0})["totalHits"]
                assert total % 10 == 0, total  # never half a batch
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=reader) for _ in range(3)] + [threading.Thread(target=writer)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert engine.search({"collection": "c", "query": "word"})["totalHits"] == 400


def test_exact_values_indexed_on_first_use_then_maintained() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "tag": "B"}, {"id": 2, "tag": ["a", "c"]}, {"id": 3}])
    assert ids(engine.search({"collection": "c", "sort": ["tag"]})) == [2, 1, 3]   # builds the column
    engine.add_records("c", [{"id": 4, "tag": "A"}, {"id": 1, "tag": "z"}])         # maintained by writes
    # "A" and "a" fold alike: they tie, and the next key (relevance, then id) decides.
    assert ids(engine.search({"collection": "c", "sort": ["tag"]})) == [2, 4, 1, 3]
    assert ids(engine.search({"collection": "c", "sort": ["-tag"]})) == [1, 2, 4, 3]
    assert engine.check()["ok"]
