"""This module tests the following properties:

- every kind of malformed filter gives a 400 whose message (snapshotted here) has the position,
  what was found and what was expected;
- the size and depth limits are enforced with their own messages.
"""

from __future__ import annotations

import pytest

from roarsearch import BadRequestError, Engine

CASES = [
    ("a >", "filter: at position 3: expected a value after '>', found end of input"),
    ("a > b", "filter: at position 4: expected a number after '>', found word 'b'"),
    ('a < "5"', "filter: at position 4: expected a number after '<', found string \"5\""),
    ("(a = 1", "filter: at position 6: expected ')' to close the '(' at position 0, found end of input"),
    ("a = 1)", "filter: at position 5: expected end of input (this ')' closes nothing), found ')'"),
    ("AND", "filter: at position 0: expected a field name, found 'AND'"),
    ('a = "x', "filter: at position 4: expected a closing '\"' for the string that starts here, found end of input"),
    ("a ~ 1", "filter: at position 2: expected an operator (=, !=, >, >=, <, <=, IN or EXISTS) after field 'a', found word '~'"),
    ("a = 1 b = 2", "filter: at position 6: expected AND, OR or end of input, found word 'b'"),
    ("a IN [1 2]", "filter: at position 8: expected ',' or ']' in the IN list, found word '2'"),
    ("a IN 1", "filter: at position 5: expected '[' after IN, found word '1'"),
    ("()", "filter: at position 1: expected a condition inside the parentheses, found ')'"),
    ("a = AND", "filter: at position 4: expected a value after '=', found 'AND'"),
    ("a = 1 OR", "filter: at position 8: expected a field name, found end of input"),
    ("12 = 1", "filter: at position 0: expected a field name, found word '12'"),
    ("a ! 1", "filter: at position 2: expected a field, a value, an operator or a parenthesis, found '!'"),
    ("(" * 65 + "a = 1" + ")" * 65, "filter: at position 64: expressions may nest at most 64 levels deep"),
    ("NOT " * 65 + "a = 1", "filter: at position 256: expressions may nest at most 64 levels deep"),
    ("a = 1 OR " * 2000 + "a = 1", "filter: must be at most 16384 bytes (16 KiB)"),
]


@pytest.fixture(scope="module")
def engine() -> Engine:
    engine = Engine()
    engine.add_records("shop", [{"id": 1, "price": 5, "a": 1, "name": "T Shirt"}])
    return engine


@pytest.mark.parametrize(("expression", "message"), CASES)
def test_filter_error_messages(engine: Engine, expression: str, message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        engine.search({"collection": "shop", "filter": expression})
    assert caught.value.data == message
    assert caught.value.status == 400
