"""One collection: its index, its lock, and the search pipeline that reads as the data flow.

Owns: concurrency (many searches at once; one write at a time; a search sees a batch wholly or
not at all) and the order of the search stages:

    universe (alive docs) → filters → words → match set (drop-words fallback) → facets
    → order (relevance bucket sort, or explicit sort) → groups → page → records

Each stage lives in its own module; this file only wires them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyroaring import BitMap

from roarsearch.engine.request import SearchRequest
from roarsearch.errors import BadRequestError
from roarsearch.index.index import Index
from roarsearch.query.match import WordMatcher, match_words
from roarsearch.query.plan import plan_words, resolve_search_fields
from roarsearch.ranking.bucket_sort import RelevanceRules, bucket_sort, pack_costs
from roarsearch.schema import RecordId, project


class ReadWriteLock:
    """Many readers or one writer; a waiting writer blocks new readers so writes are not starved."""

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._condition:
            while self._writer or self._writers_waiting:
                self._condition.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._condition:
                self._readers -= 1
                if not self._readers:
                    self._condition.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._condition:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._condition.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._condition:
                self._writer = False
                self._condition.notify_all()


class Collection:
    """A named collection: index + lock + search."""

    def __init__(self, name: str, index: Index | None = None) -> None:
        self.name = name
        self.index = index if index is not None else Index()
        self.lock = ReadWriteLock()

    def __len__(self) -> int:
        return len(self.index.docs)

    # ------------------------------------------------------------------ writes (caller holds lock.writing)

    def apply_add(self, records: list[dict[str, Any]]) -> None:
        self.index.add_records(records)

    def apply_delete_ids(self, record_ids: list[RecordId]) -> list[bool]:
        return self.index.delete_ids(record_ids)

    def apply_delete_docs(self, docs: BitMap) -> int:
        return self.index.delete_docs(docs)

    # ------------------------------------------------------------------ search (caller holds lock.reading)

    def filter_docs(self, filter_text: str, universe: BitMap) -> BitMap:
        """Docs of ``universe`` selected by a filter expression (all of them for an empty one)."""
        if not filter_text.strip():
            return universe
        try:
            from roarsearch.query.execute import evaluate_filter
            from roarsearch.query.filter_parser import parse_filter
        except ImportError as exc:  # pragma: no cover - until the filter modules land
            raise BadRequestError("filter: filter expressions are not implemented yet", field="filter") from exc
        node = parse_filter(filter_text)
        if node is None:
            return universe
        return evaluate_filter(node, self.index, universe)

    def search(self, request: SearchRequest, body: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        _reject_unimplemented(request)
        index = self.index
        universe = self.filter_docs(request.filter, index.alive)

        fields = resolve_search_fields(request.search_fields, index.text_fields())
        words = plan_words(index.lexicon, request.query, request.typo_tolerance)
        matcher = WordMatcher(index, fields)
        candidates, kept_words = match_words(matcher, words, universe)
        rules = RelevanceRules(matcher, kept_words)

        page = bucket_sort(candidates, rules.rules(), index.docs, request.skip, request.count)
        results = [self._result(doc, costs, request, bool(kept_words)) for doc, costs in page]
        return {
            "query": body,
            "results": results,
            "textFacets": [],
            "numericFacets": [],
            "totalHits": len(candidates),
            "responseTime": int(round((time.perf_counter() - started) * 1000)),
        }

    def _result(self, doc: int, costs: tuple[int, ...], request: SearchRequest, ranked: bool) -> dict[str, Any]:
        record = self.index.docs.record(doc)
        if "*" not in request.fields:
            record = project(record, list(request.fields))
        record["_rank"] = pack_costs(*costs) if ranked else 1.0
        return record


def _reject_unimplemented(request: SearchRequest) -> None:
    """A request using a feature this build cannot serve gets a 400 that says so, never a wrong answer."""
    pending = {
        "sort": bool(request.sort),
        "textFacets": bool(request.text_facets),
        "textFacetFilters": bool(request.text_facet_filters),
        "numericFacets": bool(request.numeric_facets),
        "numericFacetFilters": bool(request.numeric_facet_filters),
        "groupBy": request.group_by is not None,
        "highlightFields": bool(request.highlight_fields),
    }
    for name, used in pending.items():
        if used:
            raise BadRequestError(f"{name}: is not implemented yet", field=name)
