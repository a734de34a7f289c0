"""This module tests the following properties:

- precedence NOT > AND > OR, parentheses, keywords in any case, all value kinds, IN/NOT IN,
  EXISTS/NOT EXISTS, quoted field names, escapes;
- spans point at the source text;
- evaluation semantics on a real index: equality across types and folding, != and NOT include
  records lacking the field, ranges need a numeric value, arrays match on any element.
"""

from __future__ import annotations

from roarsearch import Engine
from roarsearch.query.ast import And, Compare, Exists, In, Literal, Not, Or, Span
from roarsearch.query.filter_parser import parse_filter


def test_precedence_and_case() -> None:
    tree = parse_filter("a = 1 or b = 2 AND not c = 3")
    assert isinstance(tree, Or)
    assert isinstance(tree.children[1], And)
    assert isinstance(tree.children[1].children[1], Not)
    grouped = parse_filter("(a = 1 OR b = 2) and c = 3")
    assert isinstance(grouped, And) and isinstance(grouped.children[0], Or)


def test_values_and_spans() -> None:
    text = '"my field" = "say \\"hi\\"" AND n >= -2.5e1 AND ok = TRUE AND w != bare-word'
    tree = parse_filter(text)
    assert isinstance(tree, And)
    first, second, third, fourth = tree.children
    quoted_end = text.index(" AND")
    assert first == Compare("my field", "=", Literal('say "hi"', "string", Span(13, quoted_end)), Span(0, quoted_end))
    start = text.index("-2.5e1")
    assert second.value == Literal(-25, "number", Span(start, start + 6))
    assert third.value.kind == "bool" and third.value.value is True
    start = text.index("bare-word")
    assert fourth.op == "!=" and fourth.value == Literal("bare-word", "word", Span(start, start + 9))


def test_in_exists_and_negations() -> None:
    assert [v.value for v in parse_filter("t IN [a, 3,]").values] == ["a", 3]  # trailing comma allowed
    tree = parse_filter('t NOT IN [a, "b c"]')
    assert isinstance(tree, Not) and isinstance(tree.child, In)
    assert [v.value for v in tree.child.values] == ["a", "b c"]
    tree = parse_filter("t NOT EXISTS")
    assert isinstance(tree, Not) and isinstance(tree.child, Exists)
    assert parse_filter("   ") is None


def records_engine() -> Engine:
    engine = Engine()
    engine.add_records("c", [
        {"id": 1, "brand": "Acmé", "price": 10, "tags": ["red", "big"], "digital": True},
        {"id": 2, "brand": "acme", "price": 25.5, "tags": ["blue"], "digital": False},
        {"id": 3, "brand": "Other", "price": [5, 50], "code": "10"},
        {"id": 4, "title": "no brand, no price"},
    ])
    return engine


def matching(engine: Engine, expression: str) -> list[int]:
    return [r["id"] for r in engine.search({"collection": "c", "filter": expression, "count": 100})["results"]]


def test_evaluation_semantics() -> None:
    engine = records_engine()
    assert matching(engine, 'brand = "ACME"') == [1, 2]               # case and accents folded
    assert matching(engine, "brand != acme") == [3, 4]                 # != includes records lacking the field
    assert matching(engine, "NOT price > 20") == [1, 4]                # 3 has 50 > 20 (any element)
    assert matching(engine, "price > 20") == [2, 3]
    assert matching(engine, "price >= 10 AND price <= 10") == [1, 3]   # 3: 5 <= 10 and 50 >= 10
    assert matching(engine, "tags = RED") == [1]
    assert matching(engine, "tags IN [blue, big]") == [1, 2]
    assert matching(engine, "digital = true") == [1]
    assert matching(engine, "digital = 0") == [2]                      # booleans compare as 0/1
    assert matching(engine, "code = 10") == [3]                        # a number matches the string "10"
    assert matching(engine, "price EXISTS") == [1, 2, 3]
    assert matching(engine, "NOT brand EXISTS OR price < 6") == [3, 4]
    assert matching(engine, "(brand = acme OR brand = other) AND NOT tags = blue") == [1, 3]
