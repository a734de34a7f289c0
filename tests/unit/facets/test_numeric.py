"""This module tests the following properties:

- ``parse_interval`` reads every documented spelling (brackets, open ends empty or ``*``,
  whitespace, negative, decimal and exponent numbers) into the bounds it names, and any other
  text is either an interval or a ``BadRequestError`` naming ``where`` — never another exception;
- ``interval_docs`` and the range counts of ``numeric_facet`` equal a brute-force check of every
  value of every record (a record counts once per range, whatever its number of values in it);
- stats: count = candidate records with a number, min/max/avg over all their values (each array
  element counts), null without values; retired docs never count.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap

from roarsearch.errors import BadRequestError
from roarsearch.facets.numeric import Interval, interval_docs, numeric_facet, parse_interval
from roarsearch.index.index import Index
from roarsearch.schema import iter_leaves

SPELLINGS = [
    ("[0,100)", Interval(0.0, True, 100.0, False, "[0,100)")),
    ("(0,100]", Interval(0.0, False, 100.0, True, "(0,100]")),
    (" [ -1.5 , 2e3 ] ", Interval(-1.5, True, 2000.0, True, " [ -1.5 , 2e3 ] ")),
    ("(.5,5.)", Interval(0.5, False, 5.0, False, "(.5,5.)")),
    ("[10,)", Interval(10.0, True, None, False, "[10,)")),
    ("(,5]", Interval(None, False, 5.0, True, "(,5]")),
    ("[*,5]", Interval(None, True, 5.0, True, "[*,5]")),
    ("[10,*)", Interval(10.0, True, None, False, "[10,*)")),
    ("[*,*]", Interval(None, True, None, True, "[*,*]")),
    ("[3,3]", Interval(3.0, True, 3.0, True, "[3,3]")),
    ("[+1E-2,1]", Interval(0.01, True, 1.0, True, "[+1E-2,1]")),
]


@pytest.mark.parametrize(("text", "expected"), SPELLINGS)
def test_spellings(text: str, expected: Interval) -> None:
    assert parse_interval(text, "numericFacets.p[0]") == expected


@pytest.mark.parametrize("text", ["", "0,1", "[0,1", "0,1]", "[0;1]", "[0,1,2]", "[a,1]", "[1,b)", "[5,1]",
                                  "[nan,1]", "[inf,)", "[1e999,2]", "[0x10,20]", "{0,1}", "[1 2,3]"])
def test_malformed_is_a_bad_request_naming_where(text: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        parse_interval(text, "numericFacetFilters.p[2]")
    assert caught.value.data.startswith("numericFacetFilters.p[2]: ")


@given(st.text(alphabet="[](),*-+.eE0123456789 ax", max_size=12))
def test_any_text_parses_or_is_a_bad_request(text: str) -> None:
    try:
        interval = parse_interval(text, "numericFacets.p[0]")
    except BadRequestError as error:
        assert error.data.startswith("numericFacets.p[0]: ")
    else:
        assert interval.low is None or interval.high is None or interval.low <= interval.high


NUMBER = st.one_of(st.integers(-5, 5), st.sampled_from([0.5, -2.5, 1e9]))
RECORDS = st.lists(st.fixed_dictionaries({"id": st.integers(0, 10)}, optional={
    "p": st.one_of(NUMBER, st.lists(NUMBER, max_size=3), st.just("7"), st.booleans(), st.none())}),
    min_size=1, max_size=20)
BOUND = st.one_of(st.none(), st.integers(-6, 6))
INTERVAL = st.tuples(st.sampled_from("[("), BOUND, BOUND, st.sampled_from("])")).filter(
    lambda parts: parts[1] is None or parts[2] is None or parts[1] <= parts[2]).map(
    lambda parts: f"{parts[0]}{'' if parts[1] is None else parts[1]},{'*' if parts[2] is None else parts[2]}{parts[3]}")


def numbers_of(record: dict[str, Any]) -> list[float]:
    return [float(value) for path, _, value in iter_leaves(record)
            if path == "p" and isinstance(value, (int, float)) and not isinstance(value, bool)]


def inside(value: float, interval: Interval) -> bool:
    if interval.low is not None and not (value >= interval.low if interval.low_inclusive else value > interval.low):
        return False
    return interval.high is None or (value <= interval.high if interval.high_inclusive else value < interval.high)


@given(records=RECORDS, deleted=st.lists(st.integers(0, 10), max_size=3), texts=st.lists(INTERVAL, max_size=4),
       pick=st.data())
def test_facet_matches_model(records, deleted, texts, pick) -> None:
    index = Index()
    index.add_records(records)
    index.delete_ids(deleted)
    alive = sorted(index.alive)
    candidates = BitMap(pick.draw(st.lists(st.sampled_from(alive), unique=True)) if alive else [])
    intervals = [parse_interval(text, "numericFacets.p[0]") for text in texts]
    columns = index.field_columns("p")
    facet = numeric_facet("p", columns, candidates, intervals)

    values = {doc: numbers_of(index.docs.record(doc)) for doc in candidates}
    flat = [value for doc_values in values.values() for value in doc_values]
    assert facet["field"] == "p"
    assert facet["stats"]["count"] == sum(1 for doc_values in values.values() if doc_values)
    if flat:
        assert facet["stats"]["min"] == min(flat) and facet["stats"]["max"] == max(flat)
        assert facet["stats"]["avg"] == pytest.approx(sum(flat) / len(flat))
    else:
        assert facet["stats"] == {"min": None, "max": None, "avg": None, "count": 0}
    assert facet["ranges"] == [
        {"range": interval.text, "count": sum(1 for doc_values in values.values() if any(inside(v, interval) for v in doc_values))}
        for interval in intervals
    ]
    for interval in intervals:  # interval_docs: every doc with a value inside (retired ones too)
        assert interval_docs(columns, interval) & index.alive == BitMap(
            doc for doc in index.alive if any(inside(v, interval) for v in numbers_of(index.docs.record(doc))))


def test_integral_stats_are_ints_and_missing_field_has_null_stats() -> None:
    index = Index()
    index.add_records([{"id": 1, "p": [2, 4.0]}, {"id": 2, "p": 6}, {"id": 3, "q": "x"}])
    facet = numeric_facet("p", index.field_columns("p"), index.alive, [parse_interval("[4,)", "w")])
    assert facet == {"field": "p", "stats": {"min": 2, "max": 6, "avg": 4.0, "count": 2},
                     "ranges": [{"range": "[4,)", "count": 2}]}
    assert isinstance(facet["stats"]["min"], int)
    assert numeric_facet("q", index.field_columns("q"), index.alive, []) == {
        "field": "q", "stats": {"min": None, "max": None, "avg": None, "count": 0}, "ranges": []}
    assert numeric_facet("zz", None, index.alive, [parse_interval("[0,1]", "w")])["ranges"] == [{"range": "[0,1]", "count": 0}]
