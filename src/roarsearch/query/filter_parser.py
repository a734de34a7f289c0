"""Filter expressions → :mod:`roarsearch.query.ast` trees. Grammar only: no index, no schema.

Grammar (keywords in any case; NOT binds tighter than AND, AND tighter than OR)::

    expression := or
    or         := and ( "OR" and )*
    and        := unary ( "AND" unary )*
    unary      := "NOT" unary | "(" expression ")" | condition
    condition  := field ( op value | ["NOT"] "IN" "[" [ value ( "," value )* [","] ] "]"
                        | ["NOT"] "EXISTS" )
    op         := "=" | "!=" | ">" | ">=" | "<" | "<="
    field      := bare word | double-quoted string
    value      := number | double-quoted string | bare word | "true" | "false"

A bare word is a run of characters other than whitespace, quotes, parentheses, brackets, commas
and ``= ! < >``; one that reads as a number (``12``, ``-3.5``, ``1e6``) is a number. Strings take
``\\"`` and ``\\\\`` escapes. ``> >= < <=`` need a number. Limits: 16 KiB of UTF-8 and 64 levels of
nesting (parentheses and NOT). Every failure is a :class:`BadRequestError` whose message gives the
0-based character position, what was found and what was expected; nothing else can escape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rapidfuzz import process

from roarsearch.errors import BadRequestError
from roarsearch.query.ast import And, Compare, Exists, FilterNode, In, Literal, Not, Or, Span
from roarsearch.schema import check_unicode

MAX_FILTER_BYTES = 16 * 1024
MAX_DEPTH = 64
COMPARISONS = ("=", "!=", ">", ">=", "<", "<=")
RANGE_COMPARISONS = (">", ">=", "<", "<=")
KEYWORDS = {"and", "or", "not", "in", "exists", "true", "false"}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<op>!=|>=|<=|=|>|<)
  | (?P<punct>[()\[\],])
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<open_string>"(?:[^"\\]|\\.)*\\?$)
  | (?P<word>[^\s"()\[\],=!<>]+)
  | (?P<bad>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # op, punct, string, word, end
    text: str
    start: int
    end: int

    def describe(self) -> str:
        if self.kind == "end":
            return "end of input"
        if self.kind == "string":
            return f"string {self.text}"
        if self.kind == "word":
            return f"'{self.text}'" if self.text.lower() in KEYWORDS else f"word '{self.text}'"
        return f"'{self.text}'"

    def keyword(self) -> str | None:
        return self.text.lower() if self.kind == "word" and self.text.lower() in KEYWORDS else None


def _error(position: int, message: str) -> BadRequestError:
    return BadRequestError(f"filter: at position {position}: {message}", field="filter")


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "bad"
        if kind == "space":
            continue
        if kind == "open_string":
            raise _error(match.start(), "expected a closing '\"' for the string that starts here, found end of input")
        if kind == "bad":
            raise _error(match.start(), f"expected a field, a value, an operator or a parenthesis, found '{match.group()}'")
        tokens.append(_Token(kind, match.group(), match.start(), match.end()))
    tokens.append(_Token("end", "", len(text), len(text)))
    return tokens


def _unquote(token: _Token) -> str:
    body = token.text[1:-1]
    return re.sub(r"\\(.)", r"\1", body, flags=re.DOTALL)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.index = 0
        self.depth = 0

    @property
    def current(self) -> _Token:
        return self.tokens[self.index]

    def advance(self) -> _Token:
        token = self.tokens[self.index]
        if token.kind != "end":
            self.index += 1
        return token

    def at_keyword(self, word: str) -> bool:
        return self.current.keyword() == word

    def expect_punct(self, text: str, context: str) -> _Token:
        token = self.current
        if token.kind != "punct" or token.text != text:
            raise _error(token.start, f"expected '{text}' {context}, found {token.describe()}")
        return self.advance()

    def enter(self, position: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _error(position, f"expressions may nest at most {MAX_DEPTH} levels deep")

    # expression := or
    def parse(self) -> FilterNode:
        node = self.parse_or()
        token = self.current
        if token.kind != "end":
            expected = "AND, OR or end of input" if token.text != ")" else "end of input (this ')' closes nothing)"
            raise _error(token.start, f"expected {expected}, found {token.describe()}")
        return node

    def parse_or(self) -> FilterNode:
        children = [self.parse_and()]
        while self.at_keyword("or"):
            self.advance()
            children.append(self.parse_and())
        if len(children) == 1:
            return children[0]
        return Or(tuple(children), Span(children[0].span.start, children[-1].span.end))

    def parse_and(self) -> FilterNode:
        children = [self.parse_unary()]
        while self.at_keyword("and"):
            self.advance()
            children.append(self.parse_unary())
        if len(children) == 1:
            return children[0]
        return And(tuple(children), Span(children[0].span.start, children[-1].span.end))

    def parse_unary(self) -> FilterNode:
        token = self.current
        if token.keyword() == "not":
            self.advance()
            self.enter(token.start)
            child = self.parse_unary()
            self.depth -= 1
            return Not(child, Span(token.start, child.span.end))
        if token.kind == "punct" and token.text == "(":
            self.advance()
            self.enter(token.start)
            if self.current.kind == "punct" and self.current.text == ")":
                raise _error(self.current.start, "expected a condition inside the parentheses, found ')'")
            inner = self.parse_or()
            closing = self.expect_punct(")", f"to close the '(' at position {token.start}")
            self.depth -= 1
            return _respan(inner, Span(token.start, closing.end))
        return self.parse_condition()

    def parse_field(self) -> tuple[str, _Token]:
        token = self.current
        if token.kind == "string":
            self.advance()
            name = _unquote(token)
            if not name:
                raise _error(token.start, "expected a field name, found an empty string")
            return name, token
        if token.kind == "word" and token.keyword() is None and not _NUMBER.fullmatch(token.text):
            self.advance()
            return token.text, token
        raise _error(token.start, f"expected a field name, found {token.describe()}")

    def parse_condition(self) -> FilterNode:
        field, field_token = self.parse_field()
        token = self.current
        negated = False
        if token.keyword() == "not":
            following = self.tokens[self.index + 1]
            if following.keyword() in ("in", "exists"):
                self.advance()
                negated = True
                token = self.current
        if token.keyword() == "exists":
            self.advance()
            node: FilterNode = Exists(field, Span(field_token.start, token.end))
        elif token.keyword() == "in":
            self.advance()
            node = self.parse_in(field, field_token)
        elif token.kind == "op":
            self.advance()
            value = self.parse_value(f"after '{token.text}'")
            if token.text in RANGE_COMPARISONS and value.kind != "number":
                raise _error(value.span.start, f"expected a number after '{token.text}', found {_describe_literal(value)}")
            node = Compare(field, token.text, value, Span(field_token.start, value.span.end))
        else:
            raise _error(
                token.start,
                f"expected an operator (=, !=, >, >=, <, <=, IN or EXISTS) after field '{field}', found {token.describe()}",
            )
        if negated:
            return Not(node, Span(field_token.start, node.span.end))
        return node

    def parse_in(self, field: str, field_token: _Token) -> FilterNode:
        self.expect_punct("[", "after IN")
        values: list[Literal] = []
        while not (self.current.kind == "punct" and self.current.text == "]"):
            values.append(self.parse_value("in the IN list"))
            if self.current.kind == "punct" and self.current.text == ",":
                self.advance()
                continue
            if not (self.current.kind == "punct" and self.current.text == "]"):
                raise _error(self.current.start, f"expected ',' or ']' in the IN list, found {self.current.describe()}")
        closing = self.advance()
        return In(field, tuple(values), Span(field_token.start, closing.end))

    def parse_value(self, context: str) -> Literal:
        token = self.current
        span = Span(token.start, token.end)
        if token.kind == "string":
            self.advance()
            return Literal(_unquote(token), "string", span)
        if token.kind == "word":
            keyword = token.keyword()
            if keyword in ("true", "false"):
                self.advance()
                return Literal(keyword == "true", "bool", span)
            if keyword is not None:
                raise _error(token.start, f"expected a value {context}, found {token.describe()}")
            self.advance()
            if _NUMBER.fullmatch(token.text):
                number = float(token.text)
                if number != number or number in (float("inf"), float("-inf")):
                    raise _error(token.start, f"expected a finite number {context}, found word '{token.text}'")
                return Literal(int(number) if number.is_integer() and abs(number) < 2**63 else number, "number", span)
            return Literal(token.text, "word", span)
        raise _error(token.start, f"expected a value {context}, found {token.describe()}")


def _describe_literal(value: Literal) -> str:
    if value.kind == "string":
        return f'string "{value.value}"'
    if value.kind == "bool":
        return f"'{str(value.value).lower()}'"
    return f"word '{value.value}'"


def _respan(node: FilterNode, span: Span) -> FilterNode:
    # Parenthesised expressions keep their inner node; only the span widens to include "(" ")".
    if isinstance(node, Compare):
        return Compare(node.field, node.op, node.value, span)
    if isinstance(node, In):
        return In(node.field, node.values, span)
    if isinstance(node, Exists):
        return Exists(node.field, span)
    if isinstance(node, Not):
        return Not(node.child, span)
    if isinstance(node, And):
        return And(node.children, span)
    return Or(node.children, span)


def parse_filter(text: str) -> FilterNode | None:
    """Parse a filter expression; ``None`` for an empty one; a 400 for anything malformed.

    >>> parse_filter('price >= 10 AND NOT name = "T Shirt"').__class__.__name__
    'And'
    """
    if not isinstance(text, str):
        raise BadRequestError("filter: must be a string", field="filter")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILTER_BYTES:
        raise BadRequestError(f"filter: must be at most {MAX_FILTER_BYTES} bytes (16 KiB)", field="filter")
    check_unicode(text, "filter", "filter")  # a lone surrogate matches nothing: with != a delete would take all
    if not text.strip():
        return None
    try:
        return _Parser(text).parse()
    except RecursionError as exc:  # defensive: MAX_DEPTH keeps recursion far below the limit
        raise BadRequestError(f"filter: nested deeper than {MAX_DEPTH} levels", field="filter") from exc


def suggest_field(name: str, known: Iterable[str]) -> str | None:
    """The known field closest to ``name``, when one is close enough to be a likely typo."""
    match = process.extractOne(name, list(known), score_cutoff=70)
    return None if match is None else str(match[0])
