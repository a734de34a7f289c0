"""This module tests the following properties (contract §7 "Collection settings"):

- ``synonyms`` are one-way: the left word or phrase also matches the right phrases, never the
  reverse; a multi-word right phrase matches only as adjacent words in that order;
- a synonym match ranks like an exact match (the same ``_rank``; ``id`` breaks the tie), above a
  typo match;
- ``stopWords`` are ignored in queries whatever their case, unless every word of the query is one;
- ``typoMinWordSize`` moves both thresholds: ``oneTypo`` 3 gives 3-letter words a typo,
  ``twoTypos`` 5 gives 5-letter words a second one, and a larger ``twoTypos`` takes it away;
- ``searchFields`` from settings is used only when a request gives none, and its order is the
  attribute priority.
"""

from __future__ import annotations

from typing import Any

from roarsearch import Engine


def ids(response: dict[str, Any]) -> list[Any]:
    return [result["id"] for result in response["results"]]


def _synonym_engine() -> Engine:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "t": "television set"}, {"id": 2, "t": "tv set"}, {"id": 3, "t": "new york pizza"},
        {"id": 4, "t": "york new pizza"}, {"id": 5, "t": "new big york"}, {"id": 6, "t": "nyc"},
        {"id": 7, "t": "televisoin"},
    ])
    engine.update_settings("c", {"synonyms": {"tv": ["television"], "nyc": ["new york"]}})
    return engine


def test_synonyms_are_one_way_and_phrases_match_adjacent_words_in_order() -> None:
    engine = _synonym_engine()
    search = lambda query: ids(engine.search({"collection": "c", "query": query}))  # noqa: E731
    assert search("tv ") == [1, 2]
    assert search("television ") == [1, 7]          # not "tv": one-way (7 is a typo match)
    assert search("nyc ") == [3, 6]                 # not "york new", not "new big york"
    assert 6 not in search("new york ")             # one-way


def test_a_synonym_match_ranks_like_an_exact_match() -> None:
    engine = _synonym_engine()
    engine.add_records("c", {"id": 0, "t": "televisoin set"})  # a typo match of "television"
    engine.update_settings("c", {"synonyms": {"tv": ["television", "televisoin"], "nyc": ["new york"]}})
    results = engine.search({"collection": "c", "query": "tv "})["results"]
    ranks = {result["id"]: result["_rank"] for result in results}
    assert ranks[1] == ranks[2] == ranks[0] == ranks[7]   # synonyms and the word itself: all exact
    assert [result["id"] for result in results] == [0, 1, 2, 7]
    typo = engine.search({"collection": "c", "query": "television "})["results"]
    typo_ranks = {result["id"]: result["_rank"] for result in typo}
    assert typo_ranks[1] > typo_ranks[0]                  # without the synonym, 0 is only a typo match
    assert [result["id"] for result in typo] == [1, 0, 7]


def test_stop_words_are_ignored_whatever_their_case_unless_every_word_is_one() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "t": "pizza"}, {"id": 2, "t": "the pizza of rome"}, {"id": 3, "t": "pasta"}])
    search = lambda query: ids(engine.search({"collection": "c", "query": query}))  # noqa: E731
    assert search("THE pizza Of ") == [2]
    engine.update_settings("c", {"stopWords": ["The", "of"]})
    assert search("THE pizza Of ") == [1, 2]
    assert search("the of ") == [2]      # every word is a stop word: they are searched
    assert search("the of pasta ") == [3]


def test_typo_min_word_size_moves_both_thresholds() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "t": "cat"}, {"id": 2, "t": "apple"}, {"id": 3, "t": "lovelace"}])
    search = lambda query: ids(engine.search({"collection": "c", "query": query, "typoTolerance": 2}))  # noqa: E731
    assert (search("cta "), search("aqxle "), search("lovxlaxe ")) == ([], [], [3])
    engine.update_settings("c", {"typoMinWordSize": {"oneTypo": 3, "twoTypos": 5}})
    assert (search("cta "), search("aqxle "), search("lovxlaxe ")) == ([1], [2], [3])
    engine.update_settings("c", {"typoMinWordSize": {"oneTypo": 4, "twoTypos": 9}})
    assert (search("cta "), search("aqxle "), search("lovxlaxe "), search("lovxlace ")) == ([], [], [], [3])


def test_settings_search_fields_apply_only_without_request_search_fields_and_set_priority() -> None:
    engine = Engine()
    engine.add_records("c", [{"id": 1, "a": "lamp", "b": "desk"}, {"id": 2, "a": "desk", "b": "lamp"}])
    search = lambda **body: ids(engine.search({"collection": "c", "query": "lamp ", **body}))  # noqa: E731
    assert search() == [1, 2]
    engine.update_settings("c", {"searchFields": ["b", "a"]})
    assert search() == [2, 1]
    assert search(searchFields=["a", "b"]) == [1, 2]
    assert search(searchFields=["a"]) == [1]
    engine.update_settings("c", {"searchFields": ["b"]})
    assert search() == [2]
