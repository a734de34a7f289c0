"""This module tests the following properties:

- with an empty query or a one-word query,
- text facet counts, order (count desc, then numbers < booleans < strings, folded then raw) and
  facetCount equal a brute-force count over the raw records, for arrays, missing fields, mixed types;
- facet filters select what the model selects, and facet counts are disjunctive (a facet's own
  filter entry is left out when it is counted, every other filter applies);
- numeric facet stats and range counts equal the model's;
- groupBy returns the groups the model forms (records lacking the field in the null group, arrays
  by their first element), in order of their best record, with exact totals, groupLimit records each, skip counting
  groups.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch import Engine
from roarsearch.analysis.normalize import fold
from roarsearch.schema import iter_leaves
from tests.unit.facets.test_groups import group_key, group_value

CATS = ["red", "Red", "blue", "rouge", "réd", "green"]
RECORD = st.fixed_dictionaries({}, optional={
    "cat": st.one_of(st.sampled_from(CATS), st.lists(st.sampled_from(CATS), max_size=3), st.none()),
    "num": st.one_of(st.integers(0, 6), st.lists(st.integers(0, 6), max_size=3), st.sampled_from([2.5, -1.0])),
    "flag": st.booleans(),
    "mix": st.sampled_from([1, "1", True, "x", 2]),
})
INTERVALS = st.sampled_from(["[0,2)", "[2,4]", "(3,)", "[*,1]", "(0,6)", "[5,5]"])


def leaves(record: dict[str, Any], field: str) -> list[Any]:
    return [value for path, _, value in iter_leaves(record) if path == field]


def in_interval(value: float, text: str) -> bool:
    low_text, high_text = text[1:-1].split(",")
    low = None if low_text in ("", "*") else float(low_text)
    high = None if high_text in ("", "*") else float(high_text)
    if low is not None and (value < low if text[0] == "[" else value <= low):
        return False
    if high is not None and (value > high if text[-1] == "]" else value >= high):
        return False
    return True


def numbers(record: dict[str, Any], field: str) -> list[float]:
    return [float(v) for v in leaves(record, field) if isinstance(v, (int, float)) and not isinstance(v, bool)]


def text_match(record: dict[str, Any], field: str, wanted: Any) -> bool:
    for value in leaves(record, field):
        if isinstance(wanted, bool):
            if value is wanted:
                return True
        elif isinstance(wanted, (int, float)):
            if isinstance(value, bool):
                if float(value) == float(wanted):
                    return True
            elif isinstance(value, (int, float)) and float(value) == float(wanted):
                return True
            elif isinstance(value, str) and fold(value) == fold(str(int(wanted)) if float(wanted).is_integer() else str(wanted)):
                return True
        elif isinstance(value, str) and fold(value) == fold(wanted):
            return True
    return False


def facet_model(records: list[dict[str, Any]], field: str, limit: int) -> list[dict[str, Any]]:
    counts: dict[tuple[Any, ...], list[Any]] = {}
    for record in records:
        distinct: dict[tuple[Any, ...], Any] = {}
        for value in leaves(record, field):
            if isinstance(value, bool):
                key = (1, "true" if value else "false", str(value))
            elif isinstance(value, (int, float)):
                key = (0, float(value), "")
                value = int(value) if float(value).is_integer() else value
            else:
                key = (2, fold(value), value)
            distinct[key] = value
        for key, value in distinct.items():
            counts.setdefault(key, [value, 0])[1] += 1
    ordered = sorted(counts.items(), key=lambda item: (-item[1][1], item[0]))
    return [{"value": value, "count": count} for _, (value, count) in ordered[:limit]]


@settings(max_examples=250)
@given(
    records=st.lists(RECORD, min_size=1, max_size=15),
    facets=st.lists(st.sampled_from(["cat", "num", "flag", "mix"]), min_size=1, max_size=3, unique=True),
    limit=st.integers(1, 6),
    text_filters=st.dictionaries(st.sampled_from(["cat", "mix", "flag", "num"]),
                                 st.lists(st.sampled_from(["red", "BLUE", 1, True, "x"]), min_size=1, max_size=2), max_size=2),
    numeric_filters=st.dictionaries(st.just("num"), st.lists(INTERVALS, min_size=1, max_size=2), max_size=1),
    numeric_facets=st.lists(INTERVALS, max_size=3),
    query=st.sampled_from(["", "", "red", "blue"]),
)
def test_facets_match_model(records, facets, limit, text_filters, numeric_filters, numeric_facets, query) -> None:
    rows = [{"id": i, **record} for i, record in enumerate(records)]
    rows.append({"id": 99, "cat": "seed", "num": 0, "flag": False, "mix": "seed"})  # every field known
    engine = Engine()
    engine.add_records("c", rows)
    response = engine.search({
        "collection": "c", "query": query, "searchFields": ["cat"], "textFacets": facets, "facetCount": limit, "textFacetFilters": text_filters,
        "numericFacetFilters": numeric_filters, "numericFacets": {"num": numeric_facets}, "count": 100,
    })

    def passes(record: dict[str, Any], skip: tuple[str, str] | None = None) -> bool:
        """Whether ``record`` passes the query and every facet filter but ``skip`` (kind, field): a
        facet leaves out only its own filter of its own kind."""
        # A one-word query over "cat" matches records holding the word (no value extends "red"/"blue").
        if query and not any(fold(value) == query for value in leaves(record, "cat") if isinstance(value, str)):
            return False
        for field, values in text_filters.items():
            if ("text", field) != skip and not any(text_match(record, field, v) for v in values):
                return False
        for field, intervals in numeric_filters.items():
            if ("numeric", field) != skip and not any(in_interval(n, i) for n in numbers(record, field) for i in intervals):
                return False
        return True

    selected = [row for row in rows if passes(row)]
    if query:  # relevance may reorder equal matches (exact case first): compare the sets
        assert sorted(r["id"] for r in response["results"]) == sorted(row["id"] for row in selected)
    else:
        assert [r["id"] for r in response["results"]] == [row["id"] for row in selected]
    assert response["totalHits"] == len(selected)
    for facet in response["textFacets"]:
        pool = [row for row in rows if passes(row, ("text", facet["field"]))]
        assert facet["values"] == facet_model(pool, facet["field"], limit), facet["field"]
    (numeric,) = response["numericFacets"]
    pool = [row for row in rows if passes(row, ("numeric", "num"))]
    values = [n for row in pool for n in numbers(row, "num")]
    having = [row for row in pool if numbers(row, "num")]
    assert numeric["stats"]["count"] == len(having)
    if values:
        assert numeric["stats"]["min"] == min(values) and numeric["stats"]["max"] == max(values)
        assert abs(numeric["stats"]["avg"] - sum(values) / len(values)) < 1e-9
    else:
        assert numeric["stats"] == {"min": None, "max": None, "avg": None, "count": 0}
    assert [r["count"] for r in numeric["ranges"]] == [
        sum(1 for row in pool if any(in_interval(n, text) for n in numbers(row, "num"))) for text in numeric_facets]


@settings(max_examples=200)
@given(records=st.lists(RECORD, min_size=1, max_size=15), field=st.sampled_from(["cat", "num", "flag"]),
       skip=st.integers(0, 3), group_count=st.integers(1, 4), group_limit=st.integers(1, 3))
def test_groups_match_model(records, field, skip, group_count, group_limit) -> None:
    rows = [{"id": i, **record} for i, record in enumerate(records)]
    engine = Engine()
    engine.add_records("c", rows)
    response = engine.search({"collection": "c", "groupBy": field, "skip": skip, "groupCount": group_count,
                              "groupLimit": group_limit, "count": 100})
    # Model: browse order is id order; a record's group is its first element (whatever kinds an
    # array mixes), or the null group when it lacks the field.
    groups: dict[Any, list[int]] = {}
    order: list[Any] = []
    for row in rows:  # rows are in id order
        kind, value = group_key(row, field)
        key = (kind, type(value).__name__, value)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(row["id"])
    assert response["totalHits"] == len(rows)
    got = [(g["totalHits"], [r["id"] for r in g["results"]]) for g in response["results"]]
    expected_keys = order[skip:skip + group_count]
    assert got == [(len(groups[k]), groups[k][:group_limit]) for k in expected_keys]
    assert [g["value"] for g in response["results"]] == [group_value((k[0], k[2])) for k in expected_keys]
