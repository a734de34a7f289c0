"""This module tests the following properties:

- any string whatsoever given as a filter yields a tree, None, or a 400 — never another exception;
- so do random mutations (insert, delete, swap characters) of valid expressions;
- random filter trees evaluated by the engine select exactly the records a brute-force evaluator
  over the raw records selects (arrays, missing fields, mixed types, folding).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch import BadRequestError, Engine
from roarsearch.analysis.normalize import fold
from roarsearch.query.filter_parser import parse_filter
from roarsearch.schema import iter_leaves

VALID = [
    'price >= 10 AND (stock > 0 OR digital = 1) AND NOT name = "T Shirt"',
    "a IN [1, \"b c\", x] OR b EXISTS",
    "NOT NOT (x != y) and z <= -3.5e2",
    't NOT IN [a] AND "f g" = true',
]


def _parses_or_400(text: str) -> None:
    try:
        parse_filter(text)
    except BadRequestError as error:
        assert error.status == 400 and error.data.startswith("filter: ")


@given(st.text(max_size=200))
def test_any_text_gives_tree_or_400(text: str) -> None:
    _parses_or_400(text)


@given(st.sampled_from(VALID), st.lists(st.tuples(st.sampled_from(["insert", "delete", "swap"]),
                                                  st.integers(0, 80), st.sampled_from(list('()[]",=!<>aN OT\\'))),
                                        max_size=6))
def test_mutated_expressions_give_tree_or_400(text: str, edits: list[tuple[str, int, str]]) -> None:
    chars = list(text)
    for kind, position, char in edits:
        position %= max(len(chars), 1)
        if kind == "insert":
            chars.insert(position, char)
        elif kind == "delete" and chars:
            del chars[position]
        elif kind == "swap" and len(chars) > 1:
            other = (position + 1) % len(chars)
            chars[position], chars[other] = chars[other], chars[position]
    _parses_or_400("".join(chars))


# ---------------------------------------------------------------- evaluation against a model

FIELDS = ["n", "s", "b", "t"]
VALUES: list[Any] = [0, 1, 2, 2.5, -1, "a", "A", "á", "b", "10", True, False]


def values_of(record: dict[str, Any], field: str) -> list[Any]:
    return [value for path, _, value in iter_leaves(record) if path == field]


def model_equal(record: dict[str, Any], field: str, literal: Any) -> bool:
    for value in values_of(record, field):
        if isinstance(literal, bool):
            if isinstance(value, bool) and value is literal:
                return True
        elif isinstance(literal, (int, float)):
            if isinstance(value, bool):
                if float(literal) == float(value):
                    return True
            elif isinstance(value, (int, float)) and float(value) == float(literal):
                return True
            elif isinstance(value, str) and len(value) <= 256 and fold(value) == fold(_text(literal)):
                return True
        else:
            if isinstance(value, str) and len(value) <= 256 and fold(value) == fold(literal):
                return True
    return False


def _text(number: Any) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def literal_source(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + value + '"'


def build(draw: Any, depth: int) -> tuple[str, Any]:
    choice = draw(st.integers(0, 5 if depth < 3 else 2))
    field = draw(st.sampled_from(FIELDS))
    if choice == 0:
        value = draw(st.sampled_from(VALUES))
        op = draw(st.sampled_from(["=", "!="]))
        positive = lambda r: model_equal(r, field, value)  # noqa: E731
        return f"{field} {op} {literal_source(value)}", (positive if op == "=" else lambda r: not positive(r))
    if choice == 1:
        bound = draw(st.sampled_from([0, 1, 2, 2.5, -1]))
        op = draw(st.sampled_from([">", ">=", "<", "<="]))
        compare = {">": float.__gt__, ">=": float.__ge__, "<": float.__lt__, "<=": float.__le__}[op]
        return f"{field} {op} {bound}", lambda r: any(
            isinstance(v, (int, float)) and not isinstance(v, bool) and compare(float(v), float(bound))
            for v in values_of(r, field))
    if choice == 2:
        return f"{field} EXISTS", lambda r: bool(values_of(r, field))
    if choice == 3:
        text, model = build(draw, depth + 1)
        return f"NOT ({text})", lambda r: not model(r)
    left_text, left = build(draw, depth + 1)
    right_text, right = build(draw, depth + 1)
    if choice == 4:
        return f"({left_text}) AND ({right_text})", lambda r: left(r) and right(r)
    return f"({left_text}) OR ({right_text})", lambda r: left(r) or right(r)


RECORD = st.fixed_dictionaries({}, optional={
    "n": st.one_of(st.sampled_from([0, 1, 2, 2.5, -1]), st.lists(st.sampled_from([0, 1, 2, 2.5]), max_size=3)),
    "s": st.one_of(st.sampled_from(["a", "A", "á", "b", "10"]), st.lists(st.sampled_from(["a", "b", "10"]), max_size=2)),
    "b": st.booleans(),
    "t": st.sampled_from([1, "a", True, [1, "a"], None]),
})


@settings(max_examples=300)
@given(st.lists(RECORD, min_size=1, max_size=12), st.data())
def test_filters_match_brute_force(records: list[dict[str, Any]], data: Any) -> None:
    rows = [{"id": i, **record} for i, record in enumerate(records)]
    rows.append({"id": 999, "n": 1, "s": "a", "b": True, "t": 1})  # every field is known
    engine = Engine()
    engine.add_records("c", rows)
    text, model = build(data.draw, 0)
    got = [r["id"] for r in engine.search({"collection": "c", "filter": text, "count": 1000})["results"]]
    assert got == [row["id"] for row in rows if model(row)], text
