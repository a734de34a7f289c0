"""One collection: its index, its locks, and the search pipeline read top to bottom.

Owns: concurrency (many searches at once; one write at a time; a search sees a batch wholly or
not at all) and the order of the search stages, each in its own module:

    query.context   universe → facet filters → words (typos, prefix) → match set (word dropping)
    facets.counts   text and numeric facets, each disjunctive in its own facet filter
    ranking.ranker  order: explicit sort or relevance bucket sort → page (or facets.groups)
    here            records: projected, with ``_rank`` and ``_highlights``

Writes go through ``storage`` (the write-ahead log) first, then ``index.writer``.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from roarsearch.analysis.analyzer import analyze_fields
from roarsearch.analysis.worker import AnalysisWorker
from roarsearch.errors import NotFoundError, ServiceUnavailableError, StorageError
from roarsearch.facets.counts import numeric_facets, text_facets
from roarsearch.facets.groups import group_results
from roarsearch.facets.value_search import search_facet_values
from roarsearch.index.docstore import pack_records
from roarsearch.index.geo import whole_metres
from roarsearch.index.index import Index
from roarsearch.index.merges import merges_held
from roarsearch.index.state import (
    SavedChunk,
    adopt_saved_chunks,
    adopt_saved_payloads,
    chunk_buffers,
    index_to_state,
    saved_payloads,
)
from roarsearch.index.writer import CollectedAdd, PreparedAdd
from roarsearch.memory import release_free_memory, unmap_unused_soon
from roarsearch.query.context import SearchContext, filter_docs, prepare_search
from roarsearch.query.fields import field_warnings, held_fields
from roarsearch.query.request import SearchRequest
from roarsearch.query.settings import DEFAULT_SETTINGS, Settings, settings_from_dict
from roarsearch.ranking.fusion import FusedRanker, VectorSearch, shown_vectors
from roarsearch.ranking.highlight import Highlighter
from roarsearch.ranking.ranker import Ranker
from roarsearch.schema import ValidatedBatch, first_leaf, project
from roarsearch.storage.shared_analysis import SHARED_ANALYSIS_MIN_RECORDS, SharedAnalyses
from roarsearch.storage.store import CollectionStore

log = logging.getLogger("roarsearch.engine")

#: Add batches of at least this many records are logged in a second thread while this one
#: prepares their indexing (a smaller batch is not worth the thread).
THREADED_LOG_RECORDS = 1_000
#: A bulk add sends a batch's texts to the analysis worker from this many values (fewer analyse
#: faster here than the pipe moves them).
WORKER_MIN_VALUES = 2_000
#: Adds of at least this many records hand free heap pages back afterwards: 1–4 ms of ``malloc_trim``
#: (10 ms at worst, measured at 300k packages) during which other threads' allocations may wait, so
#: not after the small batches a live service takes between searches (snapshots trim too).
RELEASE_MEMORY_RECORDS = 5_000
#: While a bulk add runs, Python's cyclic garbage collector looks at the young objects only once
#: this many more containers live than when it last did (the default is 700). A load allocates
#: a batch's records (~10,000 dicts), its columns and its analysis, holds them for two batches
#: and frees them: with the default, 2,000 young and 17 full collections of a 1M build found
#: nothing to collect and cost its writer's thread 2-4 s of 27.
BULK_GC_THRESHOLD = 100_000
#: A bulk add that wrote at least this share of a collection's records (a first load) ends by
#: merging each field's postings into one chunk, in the background: about 1.5 s at 1M text-heavy
#: records, for 15-40 % off multi-word and typo queries. A smaller load keeps the tiers it made
#: rather than rewrite a collection's postings for it.
SETTLE_LOAD_SHARE = 0.5
#: A collection that has taken no write for this many seconds, with at least
#: :data:`SETTLE_IDLE_CHUNKS` chunks in some field, merges each field's postings into one chunk,
#: in the background (the tiers that writes leave — 4-10 chunks a field — cost each multi-word or
#: typo query a lookup per chunk: at 100,000 package records the load benchmark's mix took 50.4 ms
#: on 6 chunks a field, 41.7 on one, typo searches 20.5 against 13.0). Applies to the writer and
#: to every reader process alike, each merging its own copy; a collection opened with that many
#: chunks settles after this long too.
SETTLE_IDLE_S = 20.0
#: Fewer chunks than this in every field are left as they are: one small batch after a settle
#: (two chunks) would otherwise make each quiet spell rewrite every posting for a few records.
SETTLE_IDLE_CHUNKS = 3


#: The error of any call on a closed engine (a sharded engine says the same, with the same status).
ENGINE_CLOSED = "the engine is closed: open the data directory again to use it"


class _Reading:
    """The read side of a :class:`ReadWriteLock` as a context manager (shared: it holds no state)."""

    __slots__ = ("_lock",)

    def __init__(self, lock: ReadWriteLock) -> None:
        self._lock = lock

    def __enter__(self) -> None:
        self._lock._enter_reading()

    def __exit__(self, *exc: object) -> None:
        self._lock._exit_reading()


class ReadWriteLock:
    """Many readers or one writer; a waiting writer blocks new readers so writes are not starved."""

    def __init__(self) -> None:
        # Readers take the condition's lock itself (a C-level ``with``; the Condition's own
        # __enter__ is Python, twice per search) and wait on the condition only behind a writer.
        self._mutex = threading.Lock()
        self._condition = threading.Condition(self._mutex)
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._reading = _Reading(self)

    def reading(self) -> _Reading:
        """``with lock.reading():`` holds the lock for reading (a plain context object: a search
        takes it once, and a generator-based one cost it a few microseconds)."""
        return self._reading

    def _enter_reading(self) -> None:
        with self._mutex:
            while self._writer or self._writers_waiting:
                self._condition.wait()
            self._readers += 1

    def _exit_reading(self) -> None:
        with self._mutex:
            self._readers -= 1
            if not self._readers and self._writers_waiting:  # only a writer waits for the readers
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


@functools.lru_cache(maxsize=64)
def _path_heads(paths: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Each path with its first key: a path whose first key a record lacks projects nothing, so
    1,000 requested ``fields`` cost one dict lookup each per result, not a path walk."""
    return tuple((path, path.split(".", 1)[0]) for path in paths)


class Collection:
    """A named collection: index + lock + search."""

    def __init__(self, name: str, index: Index | None = None, settings: Settings = DEFAULT_SETTINGS) -> None:
        self.name = name
        self.index = index if index is not None else Index()
        #: Replaced whole by a settings batch: a search reads it once and keeps that value.
        self.settings = settings
        self._configure_vectors()
        #: Set when the collection is dropped: later writes through an old reference are refused.
        self.dropped = False
        #: Set by ``Engine.close`` (under ``write_mutex``): the data directory is released, and a
        #: write through an old reference would append to a log another engine may own by then.
        self.closed = False
        self.lock = ReadWriteLock()
        #: Held for a whole write (log, apply) and for a whole snapshot: writers queue on it while
        #: searches, which only need ``lock.reading()``, keep running during the fsync and snapshot.
        self.write_mutex = threading.Lock()
        self._store: CollectionStore | None = None
        #: Called with a batch's sequence number once it is durable in the log, before it is
        #: applied: the multi-worker service publishes it there, so that its reader processes apply
        #: the batch while this process does (server/workers.py).
        self.on_logged: Callable[[int], None] | None = None
        #: Where this process files each add batch's analysis before announcing it, so that the
        #: service's reader processes apply the batch without analysing it again (writer side), or
        #: looks for it (reader side: :meth:`apply_concurrently`); None: no readers.
        self.shared_analyses: SharedAnalyses | None = None
        #: Background postings merges landed when the last snapshot's state was taken.
        self.merges_saved = 0
        #: When the last batch was applied, and whether a thread waits to settle after it
        #: (:meth:`settle_when_idle`); both under ``_idle_lock``.
        self._last_applied = time.monotonic()
        self._settler_waiting = False
        self._idle_lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.index.docs)

    @property
    def store(self) -> CollectionStore | None:
        """Where the collection is durable (None: in memory only)."""
        return self._store

    @store.setter
    def store(self, store: CollectionStore | None) -> None:
        self._store = store
        self.index.docs.spill = store.spill if store is not None else None
        self.index.scratch.directory = store.directory if store is not None else None

    # ------------------------------------------------------------------ writes

    def apply(self, payload: dict[str, Any], packed_records: list[bytes] | None = None) -> Any:
        """Apply one validated batch to the index (replay and live writes alike); ``packed_records``:
        an add batch's records already msgpack-encoded, if they are."""
        operation = payload["op"]
        if operation == "add":
            self.index.add_records(payload["records"], packed_records)
            return None
        if operation == "delete":
            return self.index.delete_ids(payload["ids"])
        if operation == "clear":
            return self.index.delete_docs(self.index.alive)
        if operation == "settings":
            self.settings = settings_from_dict(payload["settings"])
            self._configure_vectors()
            return None
        raise ValueError(f"unknown batch operation {operation!r}")

    def _configure_vectors(self) -> None:
        """Make the index's vector spaces those the settings declare (a snapshot's are already)."""
        if self.settings.vectors != self.index.vectors.specs():
            self.index.vectors.configure(self.settings.vectors, self.index.alive, self.index.docs.record)
            self.index.advance_generation()

    def settle_when_idle(self) -> None:
        """Merge each field's postings into one chunk once no batch has been applied for
        :data:`SETTLE_IDLE_S` (a batch applied meanwhile postpones it); called after every applied
        batch and when the collection is opened."""
        with self._idle_lock:
            self._last_applied = time.monotonic()
            if self._settler_waiting:
                return
            self._settler_waiting = True
        threading.Thread(target=self._settle_after_idle, name="roarsearch-settle", daemon=True).start()

    def settle_when_idle_if_unsettled(self) -> None:
        """:meth:`settle_when_idle` for a collection just opened, when some field already holds
        :data:`SETTLE_IDLE_CHUNKS` chunks (else its next write arms it)."""
        if self.index.unsettled(SETTLE_IDLE_CHUNKS):
            self.settle_when_idle()

    def _settle_after_idle(self) -> None:
        while self._still_waiting():
            time.sleep(max(self._last_applied + SETTLE_IDLE_S - time.monotonic(), 0.001))
        # Under the write mutex: not in the middle of a bulk load (which settles itself), and
        # never once the engine is closing or the collection gone. The merges run in the fields'
        # own background threads; adds and searches go on meanwhile.
        with self.write_mutex:
            if not (self.closed or self.dropped) and self.index.unsettled(SETTLE_IDLE_CHUNKS):
                self.index.end_bulk_load(settle=True)

    def _still_waiting(self) -> bool:
        """Whether a batch came within the idle time (else this settler is done waiting)."""
        with self._idle_lock:
            if time.monotonic() < self._last_applied + SETTLE_IDLE_S:
                return True
            self._settler_waiting = False
            return False

    def apply_concurrently(self, payload: dict[str, Any], packed_records: list[bytes] | None = None,
                           prepared: PreparedAdd | None = None) -> Any:
        """:meth:`apply` while searches run: an add is prepared (encoded, analysed: most of its
        time) without the write lock and committed under it, so searches wait only for the commit.
        Callers keep other writes out (``write_mutex``, or the follower's one catching-up thread).
        ``prepared``: the add already prepared, if it is (the writer always prepares a batch it
        shares); else a reader prepares it with the writer's analysis when it was filed."""
        if payload["op"] != "add":
            with self.lock.writing():
                result = self.apply(payload, packed_records)
            self.settle_when_idle()
            return result
        if prepared is None:
            ahead = None
            if self._shares(payload):
                assert self.shared_analyses is not None
                ahead = self.index.collect_add(payload["records"], self.index.docs.next_doc)
                ahead.analysed = self.shared_analyses.take(ahead.texts())  # None: analysed while preparing
            prepared = self.index.prepare_add(payload["records"], packed_records, ahead)
        with self.lock.writing():
            self.index.commit_add(prepared)
        self.settle_when_idle()
        return None

    def _shares(self, payload: dict[str, Any]) -> bool:
        """Whether ``payload``'s analysis goes through :attr:`shared_analyses` (an add batch of
        :data:`SHARED_ANALYSIS_MIN_RECORDS` records or more, in the multi-worker service)."""
        return (self.shared_analyses is not None and payload["op"] == "add"
                and len(payload["records"]) >= SHARED_ANALYSIS_MIN_RECORDS)

    def _analysed_and_shared(self, records: list[dict[str, Any]], ahead: CollectedAdd | None) -> CollectedAdd:
        """An add batch collected and analysed (``ahead``, when it still fits the index), its
        analysis filed in :attr:`shared_analyses` for the readers."""
        assert self.shared_analyses is not None
        if ahead is None or ahead.start != self.index.docs.next_doc:
            ahead = self.index.collect_add(records, self.index.docs.next_doc)
        texts = ahead.texts()
        if ahead.analysed is None:
            ahead.analysed = analyze_fields(texts)
        self.shared_analyses.put(texts, ahead.analysed)
        return ahead

    def write(self, payload: dict[str, Any], packed_records: list[bytes] | None = None) -> Any:
        """Make ``payload`` durable (when on disk), then apply it; searches see it whole or not at all.
        ``packed_records``: an add's records already msgpack-encoded (validation encodes them)."""
        with self.write_mutex:
            return self._write_locked(payload, packed_records)

    def write_adds(self, batches: Iterable[ValidatedBatch]) -> int:
        """Add validated batches one after another, each as :meth:`write` would (logged, applied
        whole or not at all), holding ``write_mutex`` throughout; returns the records added.

        Pipelined over two cores: while a batch is logged and applied here, the next one's texts
        are analysed, and their terms mapped to ids, in the analysis worker process
        (``analysis.worker``). Big postings merges wait for the load's end: a load that makes up
        most of the collection then merges each field into one chunk, in the background
        (:data:`SETTLE_LOAD_SHARE`); a smaller one lets the merges it left waiting run.
        An error raised by ``batches`` (a bad batch) comes after every batch before it was
        written, as a sequence of :meth:`write` calls would have left it.
        """
        worker = AnalysisWorker()
        added = 0

        def take_analysis(batch: list[Any]) -> None:
            if batch[3]:  # sent to the worker and not taken back yet
                result = worker.result()
                if result is not None:
                    batch[2].analysed, batch[2].term_ids = result
                batch[3] = False

        def write(batch: list[Any]) -> None:
            nonlocal added
            take_analysis(batch)
            records, packed, ahead, _sent = batch
            self._write_locked({"op": "add", "records": records}, packed, ahead)
            added += len(records)

        # The batch read ahead: [records, packed, collected, sent to the worker].
        pending: list[Any] | None = None
        settle = False
        with self.write_mutex, _fewer_collections():
            self.index.begin_bulk_load()
            try:
                iterator = iter(batches)
                while True:
                    try:
                        item = next(iterator, None)
                        if item is None:
                            break
                        records, packed, by_column = item
                        start = self.index.docs.next_doc + (len(pending[0]) if pending is not None else 0)
                        ahead = self.index.collect_add(records, start, by_column)
                        del item, by_column  # the batch's columns, read: not held while the batch waits
                    except BaseException:
                        if pending is not None:
                            write(pending)
                        raise
                    if pending is not None:  # the worker takes one batch at a time
                        take_analysis(pending)
                    texts = ahead.texts()
                    sent = (sum(map(len, texts.values())) >= WORKER_MIN_VALUES
                            and worker.submit(texts, self.index.lexicon))
                    del texts
                    if pending is not None:
                        write(pending)
                    pending = [records, packed, ahead, sent]
                if pending is not None:
                    write(pending)
                settle = bool(added) and added >= SETTLE_LOAD_SHARE * len(self)
            finally:
                worker.close()
                self.index.end_bulk_load(settle)
        return added

    def _write_locked(self, payload: dict[str, Any], packed_records: list[bytes] | None = None,
                      ahead: CollectedAdd | None = None) -> Any:
        if self.dropped:
            raise NotFoundError(f"collection '{self.name}' not found", field="collection")
        if self.closed:
            raise ServiceUnavailableError(ENGINE_CLOSED)
        # An add's records are encoded once: the log writes those bytes and the doc store keeps them.
        packed = packed_records
        if packed is None and payload["op"] == "add":
            packed = pack_records(payload["records"])
        prepared = None
        if self._shares(payload):
            # Filed before the batch is logged, and so before it is announced: a reader applying
            # it finds the analysis there (or analyses itself, if filing failed).
            ahead = self._analysed_and_shared(payload["records"], ahead)
        if self.store is not None:
            # Raises StorageError, having changed nothing, when it cannot.
            records = ("records", packed) if packed is not None else None
            if payload["op"] == "add" and len(payload["records"]) >= THREADED_LOG_RECORDS:
                prepared = self._log_while_preparing(payload, records, packed, ahead)
            else:
                self._log(payload, records)
        if prepared is None and ahead is not None:
            prepared = self.index.prepare_add(payload["records"], packed, ahead)
        result = self.apply_concurrently(payload, packed, prepared)
        # A snapshot waits for a background postings merge to land (unless the log has grown twice
        # past due): the merge's output and the snapshot's buffers would otherwise share one peak.
        if self.store is not None and self.store.should_snapshot(overdue_only=self.index.merging()):
            try:
                self.take_snapshot(final=False)
            except StorageError as error:
                # The batch is durable in the log and applied: the write succeeded. The snapshot is
                # retried after later writes; until then the log keeps growing (and replays on open).
                log.warning("collection %s: snapshot failed, batches stay in the write-ahead log: %s", self.name, error.data)
        if payload["op"] == "add" and len(payload["records"]) >= RELEASE_MEMORY_RECORDS:
            release_free_memory()  # the batch's temporary arrays, freed in three threads' heaps
        return result

    def _log(self, payload: dict[str, Any], records: tuple[str, list[bytes]] | None) -> None:
        """Make a batch durable in the log, then announce it (:attr:`on_logged`)."""
        assert self.store is not None
        seq = self.store.log(payload, records)
        if self.on_logged is not None:
            try:
                self.on_logged(seq)
            except Exception:  # only an early notice: the publish after the write still follows
                log.exception("collection %s: publishing logged batch %d failed", self.name, seq)

    def _log_while_preparing(self, payload: dict[str, Any], records: tuple[str, list[bytes]] | None,
                             packed: list[bytes] | None, ahead: CollectedAdd | None = None) -> PreparedAdd:
        """Log an add batch (write, fsync: the GIL is released) in a second thread while this one
        prepares its indexing (which changes nothing of the index); the batch is applied only
        once the log holds it, and not at all when logging failed."""
        failure: list[BaseException] = []

        def log_batch() -> None:
            try:
                self._log(payload, records)
            except BaseException as error:  # re-raised below, in the writer's thread
                failure.append(error)

        logger = threading.Thread(target=log_batch, name="roarsearch-log")
        logger.start()
        try:
            prepared = self.index.prepare_add(payload["records"], packed, ahead)
        finally:
            logger.join()
        if failure:
            raise failure[0]
        return prepared

    def write_delete_by_filter(self, request: SearchRequest) -> int:
        """Delete the records the request's filter selects, logged as the record ids it resolved to."""
        with self.write_mutex:
            with self.lock.reading():
                docs = filter_docs(self.index, request)
                record_ids = self.index.docs.record_ids.ids_of(docs)
            found = self._write_locked({"op": "delete", "ids": record_ids})
            return sum(found)

    def take_snapshot(self, final: bool = True) -> None:
        """Write the whole state to a new snapshot and reset the log (caller holds ``write_mutex``).
        ``final=False``: one of the snapshots a run of writes takes as its log grows — derived
        orders a reopen would otherwise compute (numeric sort orders) are saved only if known."""
        assert self.store is not None
        with merges_held(), self.lock.reading():  # searches go on; writers wait on write_mutex
            self.merges_saved = self.index.merges_landed()
            saved_chunks: list[SavedChunk] = []
            state = index_to_state(self.index, sort_orders=final, saved_chunks=saved_chunks)
            if not self.settings.is_default:  # older snapshots lack the key: default settings
                state["settings"] = self.settings.to_dict()
            saved = self.store.snapshot(state, views_of=(saved_payloads(state), *chunk_buffers(saved_chunks)))
        if saved is not None:
            # The stored records and the postings now live in the snapshot's file: read them as
            # views of it (page cache, resident while read) instead of private copies that grow
            # with every record (at 10M text-heavy records, gigabytes of a bulk load's peak).
            with self.lock.writing():
                if saved[0] is not None:
                    adopt_saved_payloads(self.index, state, saved[0])
                adopt_saved_chunks(saved_chunks, saved[1:])
            self.store.spill.restart()  # every part kept there is now read from the snapshot
        del state, saved, saved_chunks
        release_free_memory()  # the packed state's buffers
        unmap_unused_soon()  # the spill file's regions, and an older snapshot's mapping, now unread

    # ------------------------------------------------------------------ search (caller holds lock.reading)

    def _with_settings(self, request: SearchRequest, body: dict[str, Any]) -> tuple[SearchRequest, Settings]:
        """The settings of this search (read once) and the request with their ``searchFields``
        where the body gives none."""
        settings = self.settings
        if settings.search_fields != ("*",) and not body.get("searchFields"):
            request = dataclasses.replace(request, search_fields=settings.search_fields)
        return request, settings

    def _held_paths_only(self, request: SearchRequest) -> SearchRequest:
        """The request with ``highlightFields`` cut to paths some record holds: the others mark
        nothing, and 1,000 of them would cost 1,000 lookups per result."""
        if not request.highlight_fields:
            return request
        held = held_fields(self.index)
        highlight_fields = tuple(path for path in request.highlight_fields if path in held or path == "id")
        if highlight_fields == request.highlight_fields:
            return request
        return dataclasses.replace(request, highlight_fields=highlight_fields)

    def search(
        self,
        request: SearchRequest,
        body: dict[str, Any],
        *,
        kept_words: int | None = None,
        inspect: Callable[[SearchContext, Ranker | FusedRanker, dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Run ``request``. Hooks for ``roarsearch.cluster``: ``kept_words`` forces the number of
        query words kept (word dropping decided over all shards); ``inspect`` is called with the
        context, the ranker and the finished response, and may add private keys to the response."""
        started = time.perf_counter()
        request, settings = self._with_settings(request, body)
        warnings = field_warnings(self.index, request)
        highlighting = bool(request.highlight_fields)
        request = self._held_paths_only(request)
        context = prepare_search(self.index, request, settings, kept_words)
        ranker: Ranker | FusedRanker
        vector_search: VectorSearch | None = None
        if request.vector is not None:
            vector_search = VectorSearch(context)
            context.candidates = vector_search.matches
            context.widen = vector_search.widen
            ranker = vector_search.ranker
        else:
            ranker = Ranker(context)
        highlighter = Highlighter(self.index.lexicon, context.words) if highlighting else None
        if request.group_by is not None:
            results = self._groups(context, ranker, highlighter)
        else:
            results = self._results(ranker.page(context.candidates, request.skip, request.count), request, highlighter)
        if vector_search is not None or self.index.vectors.held:
            shown_vectors(results, request, self.index, vector_search.scores if vector_search is not None else None)
        response = {
            "query": body,
            "results": results,
            "textFacets": text_facets(context),
            "numericFacets": numeric_facets(context),
            "totalHits": len(context.candidates),
            "responseTime": round((time.perf_counter() - started) * 1000),
        }
        if warnings:
            response["warnings"] = warnings
        if inspect is not None:
            inspect(context, ranker, response)
        return response

    def facet_values(self, request: SearchRequest, facet: str, body: dict[str, Any] | None = None, *,
                     kept_words: int | None = None) -> list[dict[str, Any]]:
        """Values of ``facet`` matching the request's facet query, counted over what it selects
        (disjunctive, like facet counts: the facet's own facet filter is left out).
        ``kept_words``: as in :meth:`search`."""
        request, settings = self._with_settings(request, body or {})
        context = prepare_search(self.index, request, settings, kept_words)
        return search_facet_values(self.index.field_columns(facet), context.without_facet_filter(facet),
                                   request.facet_query or "", request.facet_query_count, request.typo_tolerance)

    def _groups(self, context: SearchContext, ranker: Ranker | FusedRanker, highlighter: Highlighter | None) -> list[dict[str, Any]]:
        request = context.request
        assert request.group_by is not None
        group_count = request.count if request.group_count == -1 else request.group_count
        field = request.group_by
        groups = group_results(self.index.field_columns(field), context.candidates, ranker.docs,
                               request.skip, group_count, request.group_limit,
                               lambda doc: first_leaf(self.index.docs.record(doc), field))
        return [{"value": value, "totalHits": total,
                 "results": self._results([(doc, ranker.ranks[doc]) for doc in docs], request, highlighter)}
                for value, total, docs in groups]

    def _results(self, placed: list[tuple[int, float]], request: SearchRequest,
                 highlighter: Highlighter | None) -> list[dict[str, Any]]:
        """The records of one page: projected, with ``_rank``, ``_geoDistance`` and ``_highlights``."""
        heads = None if "*" in request.fields else _path_heads(request.fields)
        around = request.geo.around if request.geo is not None else None
        # Contract §9: with ``around``, every result carries its distance in whole metres (one
        # vectorised measure for the page).
        metres = ([None] * len(placed) if around is None else
                  whole_metres(self.index.geo.distances(np.asarray([doc for doc, _ in placed]), around.lat, around.lng)))
        results = []
        if heads is not None and highlighter is None and all(head == "id" for _path, head in heads):
            # Only the id is shown (a path under ``id`` projects nothing more): it is in the doc
            # store's id list, so the stored record is not decoded at all.
            record_ids = self.index.docs.record_ids
            if around is None:
                # One gather for a page; a handful of docs cost less looked up one by one.
                shown_ids = (record_ids.ids_of([doc for doc, _rank in placed]) if len(placed) > 4
                             else [record_ids[doc] for doc, _rank in placed])
                return [{"id": record_id, "_rank": rank} for record_id, (_doc, rank) in zip(shown_ids, placed)]
            for (doc, rank), distance in zip(placed, metres):
                shown: dict[str, Any] = {"id": record_ids[doc], "_rank": rank}
                if distance is not None:  # a record without ``_geo`` has no distance
                    shown["_geoDistance"] = distance
                results.append(shown)
            return results
        for (doc, rank), distance in zip(placed, metres):
            record = self.index.docs.record(doc)
            shown = record if heads is None else project(record, [path for path, head in heads if head in record])
            shown["_rank"] = rank
            if distance is not None:
                shown["_geoDistance"] = distance
            if highlighter is not None:
                shown["_highlights"] = highlighter.highlights(record, request.highlight_fields)
            results.append(shown)
        return results


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Raise the collector's young-generation threshold to :data:`BULK_GC_THRESHOLD` for a bulk
    add, then put back what it was — unless something changed it meanwhile (an overlapping load
    restores it: the last to end leaves the threshold as it found it)."""
    before = gc.get_threshold()
    raised = (max(before[0], BULK_GC_THRESHOLD), *before[1:])
    gc.set_threshold(*raised)
    try:
        yield
    finally:
        if gc.get_threshold() == raised:
            gc.set_threshold(*before)
