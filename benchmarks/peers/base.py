"""The one small interface every engine adapter implements, and the workload classes.

An adapter builds an index of place records and answers a workload class with ``(totalHits,
ids)``; a class the engine cannot do raises :class:`Unsupported` — it is reported, never faked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CLASSES = (
    "one_word", "two_words", "typo1", "typo2", "prefix", "filter_range", "filter_equal", "filter_in",
    "facets", "browse_sort", "deep_page", "group",
)
#: Classes whose totals must agree between engines that support them (exact semantics).
EXACT = ("one_word", "two_words", "filter_range", "filter_equal", "filter_in", "browse_sort", "deep_page")


class Unsupported(Exception):
    """The engine has no such feature."""


@dataclass(frozen=True)
class Workload:
    """One query of a class: words, optional filters, sort, page, facets."""

    words: tuple[str, ...] = ()
    prefix: bool = False
    typos: int = 0
    population_range: tuple[int, int] | None = None
    country: str | None = None
    countries: tuple[str, ...] = ()
    sort_population_desc: bool = False
    skip: int = 0
    count: int = 30
    facets: bool = False
    group: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Adapter:
    name = "engine"

    def build(self, records: list[dict[str, Any]], directory: str) -> None:
        raise NotImplementedError

    def search(self, kind: str, workload: Workload) -> tuple[int, list[Any]]:
        raise NotImplementedError

    def size_bytes(self) -> int:
        return 0
