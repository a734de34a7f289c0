"""One collection: its index, its lock, and the search pipeline that reads as the data flow.

Owns: concurrency (many searches at once; one write at a time; a search sees a batch wholly or
not at all) and the order of the search stages:

    universe (alive docs) → filter → facet filters → words → match set (drop-words fallback)
    → facets (each disjunctive in its own filter) → order (relevance bucket sort or explicit
    sort) → groups → page → records (projected, ranked, highlighted)

Each stage lives in its own module; this file only wires them.
"""

from __future__ import annotations

import importlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyroaring import BitMap

from roarsearch.engine.request import SearchRequest
from roarsearch.errors import BadRequestError, StorageError
from roarsearch.index.index import Index, index_to_state
from roarsearch.storage.store import CollectionStore
from roarsearch.query.match import WordMatcher, match_words
from roarsearch.query.plan import WordPlan, plan_words, resolve_search_fields
from roarsearch.ranking.bucket_sort import RelevanceRules, bucket_sort, pack_costs
from roarsearch.ranking.highlight import Highlighter
from roarsearch.ranking.sort import sort_page
from roarsearch.schema import project


log = logging.getLogger("roarsearch.engine")


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
        #: Held for a whole write (log, apply) and for a whole snapshot: writers queue on it while
        #: searches, which only need ``lock.reading()``, keep running during the fsync and snapshot.
        self.write_mutex = threading.Lock()
        self.store: CollectionStore | None = None

    def __len__(self) -> int:
        return len(self.index.docs)

    # ------------------------------------------------------------------ writes

    def apply(self, payload: dict[str, Any]) -> Any:
        """Apply one validated batch to the index (replay and live writes alike)."""
        operation = payload["op"]
        if operation == "add":
            self.index.add_records(payload["records"])
            return None
        if operation == "delete":
            return self.index.delete_ids(payload["ids"])
        if operation == "clear":
            return self.index.delete_docs(self.index.alive.copy())
        raise ValueError(f"unknown batch operation {operation!r}")

    def write(self, payload: dict[str, Any]) -> Any:
        """Make ``payload`` durable (when on disk), then apply it; searches see it whole or not at all."""
        with self.write_mutex:
            return self._write_locked(payload)

    def _write_locked(self, payload: dict[str, Any]) -> Any:
        if self.store is not None:
            self.store.log(payload)  # raises StorageError, having changed nothing, when it cannot
        with self.lock.writing():
            result = self.apply(payload)
        if self.store is not None and self.store.should_snapshot():
            try:
                self.take_snapshot()
            except StorageError as error:
                # The batch is durable in the log and applied: the write succeeded. The snapshot is
                # retried after later writes; until then the log keeps growing (and replays on open).
                log.warning("collection %s: snapshot failed, batches stay in the write-ahead log: %s", self.name, error.data)
        return result

    def write_delete_by_filter(self, filter_text: str) -> int:
        """Delete the records a filter selects, logged as the record ids it resolved to."""
        with self.write_mutex:
            with self.lock.reading():
                docs = self.filter_docs(filter_text, self.index.alive)
                record_ids = [self.index.docs.record_ids[doc] for doc in docs]
            found = self._write_locked({"op": "delete", "ids": record_ids})
            return sum(found)

    def take_snapshot(self) -> None:
        """Write the whole state to a new snapshot and reset the log (caller holds ``write_mutex``)."""
        assert self.store is not None
        with self.lock.reading():  # searches go on; writers wait on write_mutex
            self.store.snapshot(index_to_state(self.index))

    # ------------------------------------------------------------------ search (caller holds lock.reading)

    def filter_docs(self, filter_text: str, universe: BitMap) -> BitMap:
        """Docs of ``universe`` selected by a filter expression (all of them for an empty one)."""
        return self._apply_filter(self._parse_filter(filter_text), universe)

    def _parse_filter(self, filter_text: str) -> Any:
        if not filter_text.strip():
            return None
        parse_filter = _stage("roarsearch.query.filter_parser", "parse_filter", "filter")
        return parse_filter(filter_text)

    def _apply_filter(self, node: Any, universe: BitMap) -> BitMap:
        if node is None:
            return universe
        evaluate_filter = _stage("roarsearch.query.execute", "evaluate_filter", "filter")
        return evaluate_filter(node, self.index, universe)

    def search(self, request: SearchRequest, body: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        index = self.index
        # 1. The filter expression (parsed once; evaluated where it is needed).
        filter_node = self._parse_filter(request.filter)
        # 2. Facet filters, one bitmap per field so that each facet can leave its own out.
        facet_filters = _facet_filter_docs(index, request)

        def narrow(docs: BitMap) -> BitMap:
            for selected in facet_filters.values():
                docs = docs & selected
            return self._apply_filter(filter_node, docs)

        # 3. Words → match set within the filters (dropping words from the end while nothing matches).
        fields = resolve_search_fields(request.search_fields, index.text_fields())
        words = plan_words(index.lexicon, request.query, request.typo_tolerance)
        matcher = WordMatcher(index, fields)
        candidates, kept_words = match_words(matcher, words, index.alive, narrow)
        relevance = RelevanceRules(matcher, kept_words)
        universe_cache: list[BitMap] = []

        def universe() -> BitMap:
            """The words' docs passing the filter expression, before any facet filter."""
            if not universe_cache:
                word_docs, _ = match_words(matcher, kept_words, index.alive)
                universe_cache.append(self._apply_filter(filter_node, word_docs))
            return universe_cache[0]

        # 4. Facets over the match set, each disjunctive in its own filter.
        text_facets, numeric_facets = self._facets(request, universe, facet_filters, candidates)
        # 5. Order, page, groups.
        ranked = bool(kept_words)

        def rank_page(docs: BitMap, skip: int, count: int) -> list[tuple[int, float]]:
            if request.sort:
                page = sort_page(index, docs, request.sort, relevance if ranked else None, skip, count)
                return [(doc, 1.0 - cost / float(1 << 32)) for doc, cost in page]
            return [(doc, pack_costs(*costs) if ranked else 1.0)
                    for doc, costs in bucket_sort(docs, relevance.rules(), index.docs, skip, count)]

        highlighter = Highlighter(index.lexicon, kept_words) if request.highlight_fields else None
        if request.group_by is not None:
            group_results = _stage("roarsearch.facets.groups", "group_results", "groupBy")
            group_count = request.count if request.group_count == -1 else request.group_count
            ranks: dict[int, float] = {}

            def rank_docs(docs: BitMap, skip: int, count: int) -> list[int]:
                page = rank_page(docs, skip, count)
                ranks.update(page)
                return [doc for doc, _ in page]

            groups = group_results(index.field_columns(request.group_by), candidates, rank_docs,
                                   request.skip, group_count, request.group_limit)
            results: list[dict[str, Any]] = [
                {"value": value, "totalHits": total,
                 "results": [self._result(doc, ranks[doc], request, highlighter) for doc in docs]}
                for value, total, docs in groups
            ]
        else:
            results = [self._result(doc, rank, request, highlighter)
                       for doc, rank in rank_page(candidates, request.skip, request.count)]
        return {
            "query": body,
            "results": results,
            "textFacets": text_facets,
            "numericFacets": numeric_facets,
            "totalHits": len(candidates),
            "responseTime": int(round((time.perf_counter() - started) * 1000)),
        }

    def facet_values(self, request: SearchRequest, facet: str) -> list[dict[str, Any]]:
        """Values of ``facet`` matching the request's facet query, counted over what it selects."""
        search_facet_values = _stage("roarsearch.facets.value_search", "search_facet_values", "textFacetQuery")
        index = self.index
        filter_node = self._parse_filter(request.filter)
        facet_filters = _facet_filter_docs(index, request)

        def narrow(docs: BitMap) -> BitMap:
            for field, selected in facet_filters.items():
                if field != facet:  # disjunctive, as for facet counts
                    docs = docs & selected
            return self._apply_filter(filter_node, docs)

        fields = resolve_search_fields(request.search_fields, index.text_fields())
        words = plan_words(index.lexicon, request.query, request.typo_tolerance)
        candidates, _ = match_words(WordMatcher(index, fields), words, index.alive, narrow)
        return search_facet_values(index.field_columns(facet), candidates, request.facet_query or "",
                                   request.facet_query_count, request.typo_tolerance)

    def _facets(
        self,
        request: SearchRequest,
        universe: Callable[[], BitMap],
        facet_filters: dict[str, BitMap],
        candidates: BitMap,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if not request.text_facets and not request.numeric_facets:
            return [], []

        def disjunctive(field: str) -> BitMap:
            """The match set with every facet filter but ``field``'s own."""
            if field not in facet_filters:
                return candidates
            docs = universe()
            for other, other_docs in facet_filters.items():
                if other != field:
                    docs = docs & other_docs
            return docs

        index = self.index
        if request.text_facets:
            count_text_facet = _stage("roarsearch.facets.text", "count_text_facet", "textFacets")
        if request.numeric_facets:
            numeric_facet = _stage("roarsearch.facets.numeric", "numeric_facet", "numericFacets")
            parse_interval = _stage("roarsearch.facets.numeric", "parse_interval", "numericFacets")
        text_facets = [
            {"field": field, "values": count_text_facet(index.field_columns(field), disjunctive(field), request.facet_count)}
            for field in request.text_facets
        ]
        numeric_facets = []
        for field, intervals in request.numeric_facets.items():
            parsed = [parse_interval(text, f"numericFacets.{field}[{position}]") for position, text in enumerate(intervals)]
            numeric_facets.append(numeric_facet(field, index.field_columns(field), disjunctive(field), parsed))
        return text_facets, numeric_facets

    def _result(self, doc: int, rank: float, request: SearchRequest, highlighter: "Highlighter | None") -> dict[str, Any]:
        record = self.index.docs.record(doc)
        if "*" not in request.fields:
            shown = project(record, list(request.fields))
        else:
            shown = record
        shown["_rank"] = rank
        if highlighter is not None:
            shown["_highlights"] = highlighter.highlights(record, request.highlight_fields)
        return shown


def _stage(module: str, name: str, request_field: str) -> Any:
    """A pipeline stage from its module, or a 400 saying the request field is not served yet.

    Stages are imported where they are used so that a build lacking one answers requests that do
    not need it, and refuses the others clearly rather than with an internal error.
    """
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise BadRequestError(f"{request_field}: is not implemented in this build", field=request_field) from exc


def _facet_filter_docs(index: Index, request: SearchRequest) -> dict[str, BitMap]:
    """Per field, the docs its textFacetFilters and numericFacetFilters entries select (ANDed)."""
    if not request.text_facet_filters and not request.numeric_facet_filters:
        return {}
    text_facet_filter_docs = _stage("roarsearch.facets.filters", "text_facet_filter_docs", "textFacetFilters")
    numeric_facet_filter_docs = _stage("roarsearch.facets.filters", "numeric_facet_filter_docs", "numericFacetFilters")

    selected: dict[str, BitMap] = {}
    for field, values in request.text_facet_filters.items():
        if values:
            selected[field] = text_facet_filter_docs(index, field, values)
    for field, intervals in request.numeric_facet_filters.items():
        if intervals:
            docs = numeric_facet_filter_docs(index, field, intervals, f"numericFacetFilters.{field}")
            selected[field] = selected[field] & docs if field in selected else docs
    return selected
