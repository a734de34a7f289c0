"""Filter trees → bitmaps of matching docs, inside a universe.

Owns: the meaning of each filter node, evaluated on the bitmaps and sorted columns that a
:class:`FieldReader` (the collection's index) hands out:

- ``f = v``: a number matches numeric values equal to it (booleans count as 0/1) and strings
  spelling it; a string or bare word matches string values equal to it case- and
  accent-insensitively (and numbers, when it spells one); ``true``/``false`` match booleans.
  An array field matches when any element does.
- ``f != v`` is ``NOT (f = v)``: records lacking the field match it.
- ``> >= < <=`` match records having a numeric value in range; records lacking one never match.
- ``IN [...]`` is an OR of equalities; ``EXISTS`` is "has a non-null value".
- ``NOT x`` is ``universe - x``; AND intersects (stopping at empty), OR unions.
- A field no record holds has no values: ``f = v`` and ranges match nothing, so ``!=`` and
  ``NOT`` match every record (contract §3: the answer never depends on which records exist;
  the response's ``warnings`` name such fields, see :mod:`roarsearch.query.fields`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from pyroaring import AbstractBitMap

from roarsearch.index.bitmaps import union_all
from roarsearch.query.ast import And, Compare, Exists, FilterNode, In, Literal, Not, Or
from roarsearch.query.filter_parser import _NUMBER


class FieldReader(Protocol):
    def known_fields(self) -> Collection[str]: ...
    def equal_number(self, field: str, value: float) -> AbstractBitMap: ...
    def equal_text(self, field: str, text: str) -> AbstractBitMap: ...
    def equal_bool(self, field: str, value: bool) -> AbstractBitMap: ...
    def number_range(self, field: str, low: float | None, low_inclusive: bool,
                     high: float | None, high_inclusive: bool, within: AbstractBitMap | None = None) -> AbstractBitMap: ...
    def exists(self, field: str) -> AbstractBitMap: ...
    def single_valued_numbers(self, field: str) -> bool: ...


def _equal(reader: FieldReader, field: str, literal: Literal) -> AbstractBitMap:
    value = literal.value
    if literal.kind == "bool":
        return reader.equal_bool(field, bool(value))
    if literal.kind == "number":
        text = reader.equal_text(field, _source_text(literal))
        return reader.equal_number(field, float(value)) | text
    parts = [reader.equal_text(field, str(value))]
    if _NUMBER.fullmatch(str(value)):
        parts.append(reader.equal_number(field, float(str(value))))
    return union_all(parts)


def _source_text(literal: Literal) -> str:
    value = literal.value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _range(reader: FieldReader, node: Compare, universe: AbstractBitMap) -> AbstractBitMap:
    bound = float(node.value.value)
    if node.op == ">":
        return reader.number_range(node.field, bound, False, None, False, universe)
    if node.op == ">=":
        return reader.number_range(node.field, bound, True, None, False, universe)
    if node.op == "<":
        return reader.number_range(node.field, None, False, bound, False, universe)
    return reader.number_range(node.field, None, False, bound, True, universe)


class Between:
    """``field`` within both bounds of two range comparisons ANDed on a field that holds one number
    per record: one slice of the column's value order, where the two comparisons apart each
    select a wide set (``size >= 5000`` and ``size < 9000`` over a million records) to intersect."""

    __slots__ = ("field", "low", "low_inclusive", "high", "high_inclusive")

    def __init__(self, field: str, low: float, low_inclusive: bool, high: float, high_inclusive: bool) -> None:
        self.field = field
        self.low = low
        self.low_inclusive = low_inclusive
        self.high = high
        self.high_inclusive = high_inclusive


def _is_range(node: FilterNode) -> bool:
    return isinstance(node, Compare) and node.op in ("<", "<=", ">", ">=") and node.value.kind == "number"


def _joined_ranges(children: tuple[FilterNode, ...], reader: FieldReader) -> list[FilterNode | Between]:
    """``children`` with each lower and upper bound on the same single-valued numeric field
    joined into one :class:`Between` (on a field of arrays the two may hold for different elements,
    so they stay apart)."""
    lows: dict[str, Compare] = {}
    highs: dict[str, Compare] = {}
    for child in children:
        if _is_range(child):
            assert isinstance(child, Compare)
            (lows if child.op in (">", ">=") else highs).setdefault(child.field, child)
    joinable = [field for field in lows if field in highs and reader.single_valued_numbers(field)]
    if not joinable:
        return list(children)
    joined: list[FilterNode | Between] = []
    for child in children:
        if isinstance(child, Compare) and child.field in joinable:
            low, high = lows[child.field], highs[child.field]
            if child is low:
                joined.append(Between(child.field, float(low.value.value), low.op == ">=",
                                      float(high.value.value), high.op == "<="))
                continue
            if child is high:
                continue
        joined.append(child)
    return joined


def evaluate_filter(node: FilterNode, reader: FieldReader, universe: AbstractBitMap) -> AbstractBitMap:
    """Docs of ``universe`` selected by ``node`` (always a subset of ``universe``)."""
    return _evaluate(node, reader, universe)


def _evaluate(node: FilterNode | Between, reader: FieldReader, universe: AbstractBitMap) -> AbstractBitMap:
    if isinstance(node, Between):
        return reader.number_range(node.field, node.low, node.low_inclusive, node.high, node.high_inclusive,
                                   universe) & universe
    if isinstance(node, Compare):
        if node.op in ("=", "!="):
            matched = _equal(reader, node.field, node.value) & universe
            return universe - matched if node.op == "!=" else matched
        return _range(reader, node, universe) & universe
    if isinstance(node, In):
        return union_all([_equal(reader, node.field, value) for value in node.values]) & universe
    if isinstance(node, Exists):
        return reader.exists(node.field) & universe
    if isinstance(node, Not):
        return universe - _evaluate(node.child, reader, universe)
    if isinstance(node, And):
        result = universe
        for child in _joined_ranges(node.children, reader):
            result = _evaluate(child, reader, result)  # each child narrows what the next one sees
            if not result:
                break
        return result
    if isinstance(node, Or):
        return union_all([_evaluate(child, reader, universe) for child in node.children])
    raise TypeError(f"not a filter node: {node!r}")  # unreachable: the parser builds only the above
