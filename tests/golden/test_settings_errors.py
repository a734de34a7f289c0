"""This module tests the following properties of settings validation (contract §7):

- every wrong key or type answers a 400 whose exact message names the key (snapshots below: a
  changed message is a deliberate, reviewed change), and nothing changes: the settings before and
  after a refused update are equal, even when the refused update also held valid keys;
- a refused update of a collection that does not exist does not create it;
- ``null`` resets a key, a named key replaces its old value whole, unnamed keys keep theirs.
"""

from __future__ import annotations

from typing import Any

import pytest

from roarsearch import BadRequestError, Engine, NotFoundError

SETTINGS_ERRORS: list[tuple[Any, str]] = [
    ([], "settings: must be a JSON object, got array"),
    ({"synonym": {}}, "synonym: unknown setting; did you mean 'synonyms'? (settings are searchFields, customRanking, "
                      "stopWords, synonyms, typoMinWordSize, typoDisabledFields, typoDisabledWords, searchPage, vectors)"),
    ({"stopWords": "the"}, "stopWords: must be an array of strings, got string"),
    ({"stopWords": ["the", 3]}, "stopWords[1]: must be a non-empty string, got number"),
    ({"searchFields": [""]}, "searchFields[0]: must be a non-empty string, got string"),
    ({"customRanking": ["name:up"]}, "customRanking[0]: expected 'field', '-field', 'field:asc' or 'field:desc' "
                                     "(not _rank), got 'name:up'"),
    ({"customRanking": ["_rank"]}, "customRanking[0]: expected 'field', '-field', 'field:asc' or 'field:desc' "
                                   "(not _rank), got '_rank'"),
    ({"synonyms": ["tv"]}, 'synonyms: must be an object like {"tv": ["television"]}, got array'),
    ({"synonyms": {"tv": "television"}}, "synonyms.tv: must be an array of strings, got string"),
    ({"synonyms": {"tv": [""]}}, "synonyms.tv[0]: must be a non-empty string, got string"),
    ({"typoMinWordSize": 4}, 'typoMinWordSize: must be an object like {"oneTypo": 4, "twoTypos": 8}, got number'),
    ({"typoMinWordSize": {"one": 3}}, "typoMinWordSize.one: unknown key (expected oneTypo, twoTypos)"),
    ({"typoMinWordSize": {"oneTypo": "3"}}, "typoMinWordSize.oneTypo: must be an integer, got string"),
    ({"typoMinWordSize": {"oneTypo": 0}}, "typoMinWordSize.oneTypo: must be between 1 and 1000, got 0"),
    ({"typoMinWordSize": {"oneTypo": 9}}, "typoMinWordSize: twoTypos (8) must be at least oneTypo (9)"),
    ({"typoDisabledFields": [None]}, "typoDisabledFields[0]: must be a non-empty string, got null"),
    ({"typoDisabledWords": {"a": 1}}, "typoDisabledWords: must be an array of strings, got object"),
    ({"stopWords": ["the"], "customRanking": "population"},
     "customRanking: must be an array of strings, got string"),
    ({"\ud800": 1}, "setting name: is not valid Unicode (a lone surrogate \\ud800 at character 0)"),
    ({"stopWords": ["ok", "\udfff"]}, "stopWords[1]: is not valid Unicode (a lone surrogate \\udfff at character 0)"),
]


@pytest.mark.parametrize(("update", "message"), SETTINGS_ERRORS)
def test_bad_updates_name_the_key_and_change_nothing(update: Any, message: str) -> None:
    engine = Engine()
    engine.update_settings("places", {"stopWords": ["of"], "synonyms": {"nyc": ["new york"]}})
    before = engine.get_settings("places")
    with pytest.raises(BadRequestError) as caught:
        engine.update_settings("places", update)
    assert caught.value.data == message
    assert caught.value.to_dict() == {"status": 400, "data": message}
    assert engine.get_settings("places") == before


def test_a_refused_update_creates_no_collection() -> None:
    engine = Engine()
    with pytest.raises(BadRequestError):
        engine.update_settings("fresh", {"stopWords": 1})
    assert engine.collections() == []
    with pytest.raises(NotFoundError):
        engine.get_settings("fresh")


def test_defaults_replace_whole_and_null_resets() -> None:
    engine = Engine()
    defaults = {"searchFields": ["*"], "customRanking": [], "stopWords": [], "synonyms": {},
                "typoMinWordSize": {"oneTypo": 4, "twoTypos": 8}, "typoDisabledFields": [], "typoDisabledWords": [], "searchPage": {}, "vectors": {}}
    assert engine.update_settings("c", {}) == defaults  # creates the collection, changes nothing
    assert engine.collections() == [{"collection": "c", "records": 0}]
    engine.update_settings("c", {"synonyms": {"tv": ["television"], "nyc": ["new york"]}, "stopWords": ["the"]})
    changed = engine.update_settings("c", {"synonyms": {"sf": ["san francisco"]}, "typoMinWordSize": {"oneTypo": 5}})
    assert changed["synonyms"] == {"sf": ["san francisco"]}  # replaced whole, not merged
    assert changed["stopWords"] == ["the"]
    assert changed["typoMinWordSize"] == {"oneTypo": 5, "twoTypos": 8}
    assert engine.update_settings("c", {"stopWords": None, "synonyms": None, "typoMinWordSize": None}) == defaults
