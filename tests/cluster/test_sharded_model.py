"""This module tests the following properties:

- a ShardedEngine of 3 shards (local Ray) answers every search exactly as one Engine holding the
  same records: whole responses equal (``responseTime`` aside, ``avg`` within float tolerance) —
  results and their order, ``_rank``, pages, ``totalHits``, text facets (disjunctive, cut to
  ``facetCount`` after summing complete counts), numeric stats and ranges, groups, highlights,
  word dropping decided over all shards, the first-seen order of fields behind ``*``;
- after random writes: add batches with upserts, deletes by ids (hits and misses), by filter, clear;
- bad requests raise the same error (status and message) in both;
- the rest of the Engine API too, after random writes that also update settings (customRanking,
  synonyms, stopWords, typo settings, searchFields; bad updates give the same 400) and drop the
  collection: geo searches (``around`` with and without radius, polygons, ``_geoDistance`` in
  sort, as a numeric facet and on results, over points with exact ties), get_records,
  page_records walked to the end, collections, collection_info, get_settings and multi_search
  (a bad search among good ones) all equal one Engine's.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")

from roarsearch import Engine, SearchError
from roarsearch.cluster import ShardedEngine
from tests.cluster.compare import both

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

WORDS = ["star", "stars", "start", "wars", "trek", "galaxy", "galactic", "river", "rover", "quest"]
CATS = ["red", "Red", "blue", "réd", "green"]
IDS = st.one_of(st.integers(0, 30), st.sampled_from(["a", "b", "k9", "Z", "é"]))
TEXT = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join)
RECORD = st.fixed_dictionaries(
    {"id": IDS, "kind": st.sampled_from(["a", "b", "c"])},
    optional={
        "title": TEXT,
        "body": st.one_of(TEXT, st.lists(TEXT, min_size=1, max_size=2)),
        "meta": st.fixed_dictionaries({"note": TEXT}),
        "cat": st.one_of(st.sampled_from(CATS), st.lists(st.sampled_from(CATS), min_size=1, max_size=3)),
        "num": st.one_of(st.integers(0, 6), st.floats(0, 6, allow_nan=False).map(lambda x: round(x, 2)),
                         st.lists(st.integers(0, 6), min_size=1, max_size=3)),
        "mix": st.one_of(st.integers(-3, 3), st.sampled_from(["x", "Y", "é", "b"]), st.booleans()),
        "flag": st.booleans(),
    },
)
WRITE = st.one_of(
    st.tuples(st.just("add"), st.lists(RECORD, min_size=1, max_size=12)),
    st.tuples(st.just("add"), st.lists(RECORD, min_size=1, max_size=12)),
    st.tuples(st.just("ids"), st.lists(IDS, min_size=1, max_size=4)),
    st.tuples(st.just("filter"), st.sampled_from(["num >= 4", 'cat = "red"', "flag = true", "mix EXISTS"])),
    st.tuples(st.just("clear"), st.just(None)),
)
QUERIES = ["", "", "star", "sta", "star wars", "galaxy rivr", "strs ", "galactik", "quest trek", "rover st", "zzz",
           "wars zzz", "trek star galaxy", "river quest zzz"]
SORTS = [[], [], ["num"], ["-num"], ["mix"], ["-mix"], ["kind", "-_rank"], ["-_rank"], ["_rank", "title"],
         ["-title", "num"], ["cat:desc"]]
REQUEST = st.fixed_dictionaries({
    "query": st.sampled_from(QUERIES),
    "filter": st.sampled_from(["", "num >= 3", 'NOT cat = "red"', "cat IN [red, blue]", "flag = true",
                               "mix EXISTS", 'mix != "x"']),
    "typoTolerance": st.sampled_from([0, 1, 1, 2]),
    "searchFields": st.sampled_from([["*"], ["*"], ["title"], ["meta.note", "*"], ["body", "title"], ["nope"]]),
    "fields": st.sampled_from([["*"], ["title"], ["kind", "num"]]),
    "sort": st.sampled_from(SORTS),
    "skip": st.integers(0, 4),
    "count": st.integers(0, 7),
    "textFacets": st.lists(st.sampled_from(["cat", "num", "flag", "mix", "kind"]), max_size=3, unique=True),
    "facetCount": st.integers(1, 4),
    "textFacetFilters": st.sampled_from([{}, {}, {"cat": ["red"]}, {"cat": ["blue", "green"]}, {"flag": [True]}]),
    "numericFacets": st.sampled_from([{}, {"num": ["[0,2)", "(3,)"]}, {"num": []}, {"mix": ["[*,0]"]}]),
    "numericFacetFilters": st.sampled_from([{}, {}, {"num": ["[2,4]"]}, {"num": ["[*,1]", "[5,5]"]}]),
    "highlightFields": st.sampled_from([[], [], ["title"]]),
})
GROUPING = st.one_of(st.just({}), st.fixed_dictionaries({
    "groupBy": st.sampled_from(["kind", "num", "mix", "flag", "cat"]),
    "groupCount": st.sampled_from([-1, 1, 2]),
    "groupLimit": st.integers(1, 3),
}))
BAD = [{"count": 5000}, {"filter": "num >"}, {"sort": "num"}, {"typoTolerance": 3}, {"textFacets": "cat"}, {"bogus": 1}]

_names = itertools.count()



def _same(sharded: dict[str, Any], single: dict[str, Any]) -> None:
    sharded, single = dict(sharded), dict(single)
    sharded.pop("responseTime"), single.pop("responseTime")
    for mine, theirs in zip(sharded["numericFacets"], single["numericFacets"]):
        a, b = mine["stats"].pop("avg"), theirs["stats"].pop("avg")
        assert (a is None and b is None) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12), (a, b)
    assert sharded == single


def _apply(engine: Any, collection: str, write: tuple[str, Any]) -> Any:
    kind, argument = write
    try:
        if kind == "add":
            return engine.add_records(collection, argument)
        if kind == "ids":
            return engine.delete_records(collection, ids=argument)
        if kind == "filter":
            return engine.delete_records(collection, filter=argument)
        return engine.delete_records(collection, clear=True)
    except SearchError as error:
        return error.to_dict()


@settings(max_examples=int(__import__("os").environ.get("CLUSTER_EXAMPLES", 40)))
@given(writes=st.lists(WRITE, min_size=1, max_size=5), requests=st.lists(st.tuples(REQUEST, GROUPING), min_size=1, max_size=6),
       bad=st.sampled_from(BAD))
def test_sharded_answers_equal_single_engine(engines: tuple[ShardedEngine, Engine], writes: list[tuple[str, Any]],
                                             requests: list[tuple[dict[str, Any], dict[str, Any]]],
                                             bad: dict[str, Any]) -> None:
    sharded, single = engines
    collection = f"c{next(_names)}"
    writes = [("add", writes[0][1])] + writes[1:] if writes[0][0] == "add" else [("add", [{"id": 0, "kind": "a"}])] + writes
    for write in writes:
        assert _apply(sharded, collection, write) == _apply(single, collection, write)
    for request, grouping in requests:
        body = {"collection": collection, **request, **grouping}
        _same(sharded.search(body), single.search(body))
    for request, _grouping in requests[:2]:
        for facet in ("cat", "num", "mix"):
            facet_body = {**request, "textFacetQuery": {"query": request["query"][:3] or "r", "count": 3}}
            facet_body.pop("highlightFields")
            assert sharded.search_facet_values(collection, facet, facet_body) == \
                single.search_facet_values(collection, facet, facet_body)
    body = {"collection": collection, **bad}
    try:
        mine: Any = sharded.search(body)
    except SearchError as error:
        mine = error.to_dict()
    try:
        theirs: Any = single.search(body)
    except SearchError as error:
        theirs = error.to_dict()
    if "status" in mine or "status" in theirs:
        assert mine == theirs
    else:
        _same(mine, theirs)
    with pytest.raises(SearchError) as missing:
        sharded.search({"collection": f"{collection}-none"})
    assert missing.value.status == 404


# ---------------------------------------------------------------- the rest of the API, settings, geo

#: Few points, several records each: ties in distance (broken by exact distance, then the request).
POINTS = [{"lat": 48.8566, "lng": 2.3522}, {"lat": 48.8606, "lng": 2.3376}, {"lat": 48.8530, "lng": 2.3499},
          {"lat": 48.9, "lng": 2.4}, {"lat": -33.86, "lng": 151.21}]
GEO_RECORD = RECORD.flatmap(lambda record: st.one_of(
    st.just(record), st.sampled_from(POINTS).map(lambda point: {**record, "_geo": point})))
SETTINGS = st.sampled_from([
    {"customRanking": ["-num"]}, {"customRanking": ["kind", "-mix"]}, {"customRanking": ["id:desc"]},
    {"customRanking": None}, {"stopWords": ["wars", "the"]}, {"synonyms": {"trek": ["galaxy"], "quest": ["star wars"]}},
    {"typoMinWordSize": {"oneTypo": 3, "twoTypos": 5}}, {"typoDisabledFields": ["title"]},
    {"typoDisabledWords": ["galactik", "rivr"]}, {"searchFields": ["meta.note", "*"]}, {"searchFields": ["body"]},
    {"searchFields": None, "stopWords": None}, {"bogus": 1}, {"customRanking": "num"}, {"customRanking": ["_rank"]},
])
API_WRITE = st.one_of(
    st.tuples(st.just("add"), st.lists(GEO_RECORD, min_size=1, max_size=12)),
    st.tuples(st.just("add"), st.lists(GEO_RECORD, min_size=1, max_size=12)),
    st.tuples(st.just("ids"), st.lists(IDS, min_size=1, max_size=4)),
    st.tuples(st.just("filter"), st.sampled_from(["num >= 4", 'cat = "red"'])),
    st.tuples(st.just("settings"), SETTINGS),
    st.tuples(st.just("settings"), SETTINGS),
    st.tuples(st.just("drop"), st.none()),
)
AROUND = st.fixed_dictionaries({"lat": st.just(48.8566), "lng": st.just(2.3522)},
                               optional={"radius": st.sampled_from([0, 1200, 1500, 6000, 1e7])})
GEO = st.one_of(
    st.none(),
    st.fixed_dictionaries({"around": AROUND}),
    st.fixed_dictionaries({"around": AROUND}),
    st.just({"polygon": [{"lat": 48.84, "lng": 2.33}, {"lat": 48.87, "lng": 2.33}, {"lat": 48.87, "lng": 2.36},
                         {"lat": 48.84, "lng": 2.36}]}),
)
GEO_SORTS = [["_geoDistance"], ["-_geoDistance"], ["_geoDistance", "-num"], ["kind", "_geoDistance"], ["-id"], ["id"]]


@settings(max_examples=int(__import__("os").environ.get("CLUSTER_EXAMPLES", 40)))
@given(writes=st.lists(API_WRITE, min_size=1, max_size=6),
       requests=st.lists(st.tuples(REQUEST, GROUPING, GEO, st.sampled_from(GEO_SORTS + [None]),
                                   st.booleans()), min_size=1, max_size=5),
       ids=st.lists(IDS, max_size=6), page=st.integers(1, 9))
def test_sharded_api_equals_single_engine(engines: tuple[ShardedEngine, Engine], writes: list[tuple[str, Any]],
                                          requests: list[tuple[Any, ...]], ids: list[Any], page: int) -> None:
    sharded, single = engines
    collection = f"api{next(_names)}"
    for kind, argument in [("add", [{"id": 0, "kind": "a", "_geo": POINTS[0]}])] + writes:
        if kind == "settings":
            both(sharded, single, lambda engine, update=argument: engine.update_settings(collection, update))
        elif kind == "drop":
            both(sharded, single, lambda engine: engine.drop_collection(collection))
        else:
            assert _apply(sharded, collection, (kind, argument)) == _apply(single, collection, (kind, argument))
    bodies = []
    for request, grouping, geo, geo_sort, distance_facet in requests:
        body = {"collection": collection, **request, **grouping}
        if body["searchFields"] == ["*"]:
            del body["searchFields"]  # the settings' searchFields apply
        if geo is not None:
            body["geo"] = geo
            if geo_sort is not None:
                body["sort"] = geo_sort
            if distance_facet:
                body["numericFacets"] = {"_geoDistance": ["[0,1000)", "[1000,5000]"]}
        bodies.append(body)
        both(sharded, single, lambda engine, body=body: engine.search(body))
    both(sharded, single, lambda engine: engine.multi_search(bodies + [{"collection": collection, "count": -1}]))
    both(sharded, single, lambda engine: engine.get_settings(collection))
    both(sharded, single, lambda engine: engine.get_records(collection, ids))
    both(sharded, single, lambda engine: engine.collection_info(collection))
    both(sharded, single, lambda engine: engine.collections())
    cursor = None
    for _ in range(60 // page + 2):  # walk every page (at most 60 records exist)
        answer = both(sharded, single, lambda engine, after=cursor: engine.page_records(collection, page, after))
        if "records" not in answer or answer["next"] is None:
            break
        cursor = answer["next"]
    else:
        raise AssertionError("the pages never ended")
