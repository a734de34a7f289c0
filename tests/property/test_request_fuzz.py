"""This module tests the following properties:

- any JSON value in any field of a search request (every key of ``DEFAULTS``, unknown keys, nested
  junk, huge numbers, finite floats, deep lists, lone surrogates) gives a response or a 4xx
  :class:`SearchError` through the library — never another exception — for search, facet value
  search, multi-search, add, delete and settings;
- a response is JSON-encodable as UTF-8 (what the service sends), and an error's ``data`` is too;
- a rejected delete or add changes nothing.

``tests/http/test_fuzz.py`` sends the same bodies (fewer of them) to a real server.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch import Engine, SearchError
from roarsearch.engine.request import DEFAULTS

RECORDS: list[dict[str, Any]] = [
    {"id": 1, "title": "Ada Lovelace", "tags": ["math", "poet"], "n": 3, "price": 9.5, "ok": True,
     "address": {"city": "London", "zip": "N1"}, "_vectors": {"v": [1, 0, 2]}},
    {"id": "b", "title": "Alan Turing", "tags": "solo", "n": -2, "price": None, "ok": False},
    {"id": 3, "title": ["two", "titles"], "n": [1, 2, 3], "address": [{"city": "Paris"}, {"city": "Lyon"}]},
    {"id": 4, "title": "Grace Hopper", "n": 10**18, "price": 1e300, "tags": []},
    {"id": -5, "other": "ünïcödé wörds", "n": "text", "ok": 1},
]
FIELDS = ["title", "tags", "n", "price", "ok", "address", "address.city", "other", "id", "_rank", "*",
          "missing", "titel", ".", "a..b", "_geo", ""]

#: Strings that reach the odd corners: lone surrogates, escapes, operators, long words.
ODD_STRINGS = ["\ud800", "a\udfffb", "\\", '"', "\x00", "ü", "🙂", " ", "-", ":", "-:asc", "title:desc",
               "[0,10)", "(,)", "[1e999,2]", "[", "NaN", "9" * 40, "x" * 300, "AND", "NOT (", 'title = "\ud800"']

#: Integers that no float holds, and one past Python's 4,300-digit printing limit.
HUGE_INTEGERS = [2**63, -(2**63) - 1, 2**64, 10**309, -(10**400)]

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**400), max_value=10**400)
           | st.sampled_from(HUGE_INTEGERS) | st.just(5000).map(lambda digits: 10**digits)
           | st.floats(allow_nan=False, allow_infinity=False)
           | st.text(st.characters(exclude_categories=()), max_size=12) | st.sampled_from(ODD_STRINGS))
json_values = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(st.characters(exclude_categories=()), max_size=6) | st.sampled_from(FIELDS),
                                             children, max_size=4), max_leaves=12)
field_names = st.sampled_from(FIELDS) | st.text(st.characters(exclude_categories=()), max_size=8)
sort_keys = st.builds(lambda minus, name, suffix: minus + name + suffix, st.sampled_from(["", "-", " "]), field_names,
                      st.sampled_from(["", ":asc", ":desc", ":up"]))
intervals = st.builds(lambda a, low, high, b: f"{a}{low},{high}{b}", st.sampled_from("[(x"),
                      st.sampled_from(["", "0", "-1.5", "1e308", "1e999", "abc", "\ud800"]) | st.integers().map(str),
                      st.sampled_from(["", "10", "1e-300", "-0"]) | st.integers().map(str), st.sampled_from("])"))
filters = st.sampled_from([
    'title = "ada"', "n > 1 AND NOT ok = true", "id IN [1, \"b\", 9999999999999999999999]", "address.city EXISTS",
    "missing != 3", "tags = math OR (n <= 1e300)", "id = -5", "title = \"\ud800\"", "((((n > 0))))",
    "n > " + "9" * 400, "price >= 1e-320",
]) | st.text(st.characters(exclude_categories=()), max_size=30)

#: A plausible value for each request field, so that examples get past the first check.
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "collection": st.sampled_from(["c", "nobody", "", "a b", "\ud800"]),
    "query": st.sampled_from(["", "ada", "alan turin", "gracee hoper", "\ud800", "a " * 40, "lovelace turing x"])
    | st.text(st.characters(exclude_categories=()), max_size=20),
    "searchFields": st.lists(field_names, max_size=4),
    "fields": st.lists(field_names, max_size=4),
    "filter": filters,
    "sort": st.lists(sort_keys, max_size=3),
    "skip": st.integers(-2, 6) | st.sampled_from([10**6, 10**6 + 1, 10**30]),
    "count": st.integers(-1, 5) | st.sampled_from([1000, 1001, 1.0, 2.5]),
    "typoTolerance": st.integers(-1, 3),
    "textFacets": st.lists(field_names, max_size=3),
    "facetCount": st.integers(-1, 3) | st.sampled_from([10_000, 10_001]),
    "textFacetFilters": st.dictionaries(field_names, st.lists(scalars, max_size=3), max_size=3),
    "numericFacets": st.dictionaries(field_names, st.lists(intervals, max_size=3), max_size=2),
    "numericFacetFilters": st.dictionaries(field_names, st.lists(intervals, max_size=3), max_size=2),
    "groupBy": field_names | st.none(),
    "groupCount": st.integers(-2, 3) | st.sampled_from([10**30]),
    "groupLimit": st.integers(-1, 3) | st.sampled_from([1000, 1001]),
    "highlightFields": st.lists(field_names, max_size=3),
    "textFacetQuery": st.fixed_dictionaries({}, optional={"query": st.text(max_size=5) | scalars,
                                                          "count": st.integers(-1, 3) | scalars}),
    "geo": st.none() | json_values,
    "vector": st.none() | json_values | st.fixed_dictionaries(
        {"name": st.sampled_from(["v", "w", ""]) | scalars,
         "values": st.lists(st.integers(-3, 3) | scalars, max_size=4) | scalars},
        optional={"k": st.integers(-1, 3) | st.sampled_from([10_000, 10_001]) | scalars, "exact": scalars}),
    "semanticRatio": st.floats(-0.5, 1.5) | scalars,
}
assert set(PLAUSIBLE) == set(DEFAULTS)


@st.composite
def request_bodies(draw: st.DrawFn) -> Any:
    """A search body: mostly a dict of known fields, each plausible or any JSON value; sometimes junk."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values)
    body: dict[Any, Any] = {"collection": "c"}
    for name in draw(st.lists(st.sampled_from(sorted(DEFAULTS)), max_size=6, unique=True)):
        body[name] = draw(PLAUSIBLE[name] if draw(st.integers(0, 3)) else json_values)
    if draw(st.integers(0, 9)) == 0:
        body[draw(st.text(st.characters(exclude_categories=()), max_size=8))] = draw(json_values)
    if draw(st.integers(0, 14)) == 0:
        body["searchFields"] = draw(st.recursive(st.just("title"), lambda inner: st.lists(inner, max_size=1),
                                                 max_leaves=40))
    return body


def new_engine() -> Engine:
    engine = Engine()
    engine.update_settings("c", {"vectors": {"v": {"dimensions": 3}}})
    engine.add_records("c", RECORDS)
    return engine


def snapshot(engine: Engine) -> list[dict[str, Any]]:
    return engine.page_records("c")["records"]


def wire(value: Any) -> None:
    """What the service does with an answer: UTF-8 JSON without NaN."""
    json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")


def answers_or_4xx(call: Any, *arguments: Any) -> Any:
    try:
        result = call(*arguments)
    except SearchError as error:
        assert 400 <= error.status < 500, error
        assert isinstance(error.data, str) and error.data
        wire(error.to_dict())
        return error
    wire(result)
    return result


ENGINE = new_engine()  # searches never write: one engine serves every search example
BEFORE = snapshot(ENGINE)


@given(request_bodies())
def test_any_search_body_answers_or_4xx(body: Any) -> None:
    answers_or_4xx(ENGINE.search, body)


@given(request_bodies(), field_names)
def test_any_facet_value_search_answers_or_4xx(body: Any, facet: str) -> None:
    if isinstance(body, dict) and "textFacetQuery" not in body:
        body["textFacetQuery"] = {"query": "a"}
    answers_or_4xx(ENGINE.search_facet_values, "c", facet, body)


@settings(max_examples=40)
@given(st.lists(request_bodies(), max_size=4) | json_values)
def test_any_multi_search_answers_or_4xx(searches: Any) -> None:
    result = answers_or_4xx(ENGINE.multi_search, searches)
    if isinstance(result, list):
        assert all(isinstance(answer, dict) for answer in result)
    assert snapshot(ENGINE) == BEFORE


@given(st.fixed_dictionaries({}, optional={"ids": st.lists(scalars, max_size=3) | json_values,
                                           "filter": filters | json_values, "clear": st.booleans()}))
def test_any_delete_answers_or_4xx_and_a_rejected_one_deletes_nothing(arguments: dict[str, Any]) -> None:
    engine = new_engine()
    before = snapshot(engine)
    result = answers_or_4xx(lambda: engine.delete_records("c", **arguments))
    if isinstance(result, SearchError):
        assert snapshot(engine) == before
    filter_text = arguments.get("filter")
    if isinstance(filter_text, str) and any("\ud800" <= char <= "\udfff" for char in filter_text):
        assert isinstance(result, SearchError) and snapshot(engine) == before


@settings(max_examples=60)
@given(st.lists(json_values, max_size=3) | json_values)
def test_any_add_answers_or_4xx_and_a_rejected_one_adds_nothing(records: Any) -> None:
    engine = new_engine()
    before = snapshot(engine)
    if isinstance(records, list) and records and isinstance(records[0], dict) and len(records) % 2:
        records[0]["id"] = 77  # some batches pass the id check and reach the values
    result = answers_or_4xx(engine.add_records, "c", records)
    if isinstance(result, SearchError):
        assert snapshot(engine) == before
    else:
        answers_or_4xx(engine.search, {"collection": "c", "query": "a", "textFacets": ["title"]})


@settings(max_examples=60)
@given(st.dictionaries(st.sampled_from(["searchFields", "customRanking", "stopWords", "synonyms", "typoMinWordSize",
                                        "typoDisabledFields", "typoDisabledWords"]) | st.text(max_size=4),
                       json_values, max_size=3) | json_values)
def test_any_settings_update_answers_or_4xx(update: Any) -> None:
    engine = new_engine()
    if not isinstance(answers_or_4xx(engine.update_settings, "c", update), SearchError):
        answers_or_4xx(engine.search, {"collection": "c", "query": "ada"})
