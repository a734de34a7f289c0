"""Filter expression trees: frozen dataclasses with source spans, and no behaviour.

Owns: the shapes that :mod:`roarsearch.query.filter_parser` produces and
:mod:`roarsearch.query.execute` evaluates. Every node carries the ``Span`` of the text it came from
so that errors found after parsing (an unknown field) can still point at the input.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """Character offsets ``[start, end)`` into the filter text."""

    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Literal:
    """A value: ``kind`` is "number", "string" (double-quoted), "word" (bare) or "bool"."""

    value: float | int | str | bool
    kind: str
    span: Span


@dataclass(frozen=True, slots=True)
class Compare:
    """``field op value`` with op one of ``= != > >= < <=``."""

    field: str
    op: str
    value: Literal
    span: Span


@dataclass(frozen=True, slots=True)
class In:
    """``field IN [v, ...]`` (or ``NOT IN``, parsed as ``Not(In(...))``)."""

    field: str
    values: tuple[Literal, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Exists:
    """``field EXISTS``: the record has a non-null value in the field."""

    field: str
    span: Span


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[FilterNode, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[FilterNode, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Not:
    child: FilterNode
    span: Span


FilterNode = Compare | In | Exists | And | Or | Not


def fields_of(node: FilterNode) -> list[tuple[str, Span]]:
    """Every field the expression names, with where it appears, in source order."""
    found: list[tuple[str, Span]] = []
    stack: list[FilterNode] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (Compare, In, Exists)):
            found.append((current.field, current.span))
        elif isinstance(current, Not):
            stack.append(current.child)
        else:
            stack.extend(reversed(current.children))
    return sorted(found, key=lambda item: item[1].start)
