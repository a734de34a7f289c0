"""The typed search request: what the engine boundary hands to every stage, parsed once.

Owns: the shapes of a validated request (:class:`SearchRequest`, :class:`SortKey`), with every
default applied, the filter expression already parsed into a tree and the facet intervals into
:class:`Interval` objects. Validation of the wire dict lives in :mod:`roarsearch.engine.request`,
which builds these; the stages below the engine only read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roarsearch.query.ast import FilterNode
from roarsearch.query.geo import GeoQuery
from roarsearch.query.intervals import Interval
from roarsearch.query.vector import VectorQuery


@dataclass(frozen=True, slots=True)
class SortKey:
    """One sort key: a field path (or ``_rank``) and a direction."""

    field: str
    descending: bool


@dataclass(slots=True)
class SearchRequest:
    """A validated search request with every default applied. Never changed once made (a changed
    copy is made with ``dataclasses.replace``); not frozen because a frozen dataclass of 22 fields
    costs every search 1.5 microseconds more to make."""

    collection: str
    query: str = ""
    search_fields: tuple[str, ...] = ("*",)
    fields: tuple[str, ...] = ("*",)
    filter: str = ""
    filter_tree: FilterNode | None = None
    sort: tuple[SortKey, ...] = ()
    skip: int = 0
    count: int = 30
    typo_tolerance: int = 1
    text_facets: tuple[str, ...] = ()
    facet_count: int = 100
    text_facet_filters: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    numeric_facets: dict[str, tuple[Interval, ...]] = field(default_factory=dict)
    numeric_facet_filters: dict[str, tuple[Interval, ...]] = field(default_factory=dict)
    group_by: str | None = None
    group_count: int = -1
    group_limit: int = 3
    highlight_fields: tuple[str, ...] = ()
    facet_query: str | None = None
    facet_query_count: int = 100
    geo: GeoQuery | None = None
    #: The ``vector`` part (contract §11), and the weight of its order against the words' one.
    vector: VectorQuery | None = None
    semantic_ratio: float = 0.5
