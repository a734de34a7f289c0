"""The public entry point: :class:`Engine`, a set of collections with add, delete and search.

Owns: the library API of contract §1 — argument checking, collection lookup and creation, and
routing each call to its collection under the right lock. Requests and responses are the wire's
JSON-compatible dicts, so the HTTP service is a thin shell around this class.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import gc
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from types import TracebackType
from typing import Any

import numpy as np
from pyroaring import BitMap

from roarsearch.engine.collection import ENGINE_CLOSED, Collection
from roarsearch.engine.request import check_collection_id, parse_search_request
from roarsearch.engine.settings import check_space_changes, updated_settings
from roarsearch.errors import BadRequestError, NotFoundError, SearchError, ServiceUnavailableError
from roarsearch.index.bitmaps import array_from_bitmap
from roarsearch.index.docstore import id_sort_key
from roarsearch.index.integrity import compare_indexes, rebuild_index
from roarsearch.index.state import index_from_state
from roarsearch.index.vectors import check_record_vectors
from roarsearch.memory import unmap_unused, unmap_unused_soon
from roarsearch.query.context import filter_docs
from roarsearch.query.filter_parser import parse_filter
from roarsearch.query.request import SearchRequest
from roarsearch.query.settings import settings_from_dict
from roarsearch.schema import ValidatedBatch, check_record_id, check_unicode, preview, validate_and_pack_records
from roarsearch.storage.fs import FileSystem
from roarsearch.storage.store import DataDirectory

#: Most searches in one multi-search, ids in one get, records in one page.
MAX_MULTI_SEARCH = 100
MAX_GET_IDS = 1000
MAX_PAGE = 1000
#: Threads of a multi-search (1: sequential). Measured in benchmarks/multi_search.py: see docs/benchmarks.md.
MULTI_SEARCH_THREADS = 1


def encode_cursor(record_id: int | str) -> str:
    """A page cursor: the last id returned, as URL-safe base64 of its JSON."""
    return base64.urlsafe_b64encode(json.dumps(record_id).encode()).decode().rstrip("=")


def decode_cursor(cursor: Any) -> int | str:
    """The record id a cursor names, or a 400."""
    if not isinstance(cursor, str) or not cursor:
        raise BadRequestError("after: must be a cursor from a previous page", field="after")
    try:
        record_id = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise BadRequestError(f"after: {cursor!r} is not a cursor from a previous page", field="after") from None
    if isinstance(record_id, bool) or not isinstance(record_id, (int, str)):
        raise BadRequestError(f"after: {cursor!r} is not a cursor from a previous page", field="after")
    return record_id



def run_multi_search(search: Callable[[Any], dict[str, Any]], searches: Any, threads: int) -> list[dict[str, Any]]:
    """Up to :data:`MAX_MULTI_SEARCH` searches (a list, or ``{"searches": [...]}``), one answer per
    search in order: its response, or its Error object (one bad search never fails the others)."""
    if isinstance(searches, dict) and set(searches) == {"searches"}:
        searches = searches["searches"]
    if not isinstance(searches, list):
        raise BadRequestError("searches: must be an array of search requests", field="searches")
    if len(searches) > MAX_MULTI_SEARCH:
        raise BadRequestError(f"searches: at most {MAX_MULTI_SEARCH} searches, got {len(searches)}", field="searches")

    def one(request: Any) -> dict[str, Any]:
        try:
            return search(request)
        except SearchError as error:
            return error.to_dict()

    if threads > 1 and len(searches) > 1:
        with ThreadPoolExecutor(min(threads, len(searches))) as pool:
            return list(pool.map(one, searches))
    return [one(request) for request in searches]

class Engine:
    """An embedded search engine holding named collections.

    ``Engine()`` keeps everything in memory. ``Engine(path)`` keeps a data directory: every write
    batch is appended to the collection's write-ahead log and fsynced before the call returns, so
    an acknowledged write survives a crash or power cut; snapshots keep opening fast. One open
    engine owns a directory at a time (a second one gets :class:`DirectoryLockedError`).

    Thread-safe: searches run concurrently, writes are serialised per collection, and a search
    sees a write batch wholly or not at all.

        >>> with Engine() as engine:
        ...     engine.add_records("people", {"id": 2, "fName": "Alan", "lName": "Turing"})
        ...     [r["id"] for r in engine.search({"collection": "people", "query": "turin"})["results"]]
        {'status': 201}
        [2]
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, *, filesystem: FileSystem | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._collections: dict[str, Collection] = {}
        self._collections_lock = threading.Lock()
        self._closed = False
        self._directory: DataDirectory | None = None
        if self.path is not None:
            self._directory = DataDirectory(self.path, filesystem)
            try:
                for name in self._directory.collection_names():
                    self._collections[name] = self._open_collection(name)
            except BaseException:
                self._directory.close()
                raise
            # The loaded indexes are young to the cyclic collector: the first collections after
            # opening would walk them (a term list alone holds hundreds of thousands of strings:
            # 4 ms a time on places at 1M, inside whichever searches come first). Promoted now,
            # once for every collection opened.
            gc.collect(1)

    def _open_collection(self, name: str) -> Collection:
        """Load a collection from its snapshot and replay its log (no re-analysis of snapshotted records)."""
        assert self._directory is not None
        store = self._directory.collection(name)
        state, batches = store.open()
        collection = Collection(name, index_from_state(state) if state is not None else None,
                                settings_from_dict(state.get("settings")) if state is not None else settings_from_dict(None))
        collection.store = store
        for _seq, payload in batches:
            collection.apply(payload)
        collection.settle_when_idle_if_unsettled()
        return collection

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Snapshot collections with logged batches and release the data directory. Idempotent."""
        with self._collections_lock:  # no collection is made or opened from here on
            if self._closed:
                return
            self._closed = True
            collections = list(self._collections.values())
        try:
            for collection in collections:
                with collection.write_mutex:  # a write in flight ends first; later ones are refused
                    if self._directory is not None:
                        # Merges still running finish first, and a snapshot keeps what they merged.
                        merges = collection.index.wait_for_merges()
                        if collection.store is not None and (collection.store.wal.records
                                                             or merges != collection.merges_saved):
                            collection.take_snapshot()
                        if collection.store is not None:
                            collection.store.spill.close()
                    collection.closed = True
        finally:
            if self._directory is not None:
                self._directory.close()
            unmap_unused()

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ collections

    def _check_open(self) -> None:
        """Every call on a closed engine is a 503 (as on a closed sharded engine): its directory may
        belong to another engine by now, and its memory no longer follows that directory."""
        if self._closed:
            raise ServiceUnavailableError(ENGINE_CLOSED)

    def collection_names(self) -> list[str]:
        """Names of the collections that exist (have had an add or a settings update), sorted."""
        with self._collections_lock:
            self._check_open()
            return sorted(self._collections)

    def collections(self) -> list[dict[str, Any]]:
        """Every collection with its record count: ``[{"collection": "movies", "records": 17472}, ...]``."""
        with self._collections_lock:
            self._check_open()
            found = sorted(self._collections.items())
        return [{"collection": name, "records": len(collection)} for name, collection in found]

    def collection_info(self, collection: str) -> dict[str, Any]:
        """A collection's record count, its fields (kinds and how many records hold each) and its settings."""
        target = self._collection(collection)
        with target.lock.reading():
            index = target.index
            alive = index.alive
            fields = []
            for path in sorted(index.columns):
                columns = index.columns[path]
                held = len(columns.exists & alive)
                if not held:
                    continue
                kinds = []
                if columns.numeric is not None and columns.numeric.docs & alive:
                    kinds.append("number")
                if columns.has_text:
                    kinds.append("string")
                if columns.has_bool:
                    kinds.append("boolean")
                fields.append({"field": path, "kinds": kinds, "records": held})
            return {"collection": target.name, "records": len(alive), "fields": fields,
                    "settings": target.settings.to_dict()}

    def drop_collection(self, collection: str) -> dict[str, int]:
        """Remove a collection, its records and its settings, durably: ``{"status": 200}``.

        On disk its folder is first renamed to a hidden name (one atomic, fsynced rename: a crash
        after it never brings the collection back, a crash before it keeps it whole), then deleted.
        """
        collection_id = check_collection_id(collection, "collectionId")
        with self._collections_lock:
            self._check_open()
            target = self._collections.get(collection_id)
            if target is None:
                raise NotFoundError(f"collection '{collection_id}' not found", field="collection")
            with target.write_mutex:
                if self._directory is not None:
                    self._directory.drop_collection(collection_id)
                target.dropped = True
                if target.store is not None:
                    target.store.spill.close()
                del self._collections[collection_id]
        unmap_unused_soon()  # its mappings, once searches still reading it are done
        return {"status": 200}

    # ------------------------------------------------------------------ settings

    def get_settings(self, collection: str) -> dict[str, Any]:
        """Every settings key of the collection, with its default where unset (contract §7)."""
        return self._collection(collection).settings.to_dict()

    def update_settings(self, collection: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Change the keys ``settings`` names (``None`` resets one), all or nothing, durably; creates
        the collection if needed. Returns every key, as :meth:`get_settings`."""
        check_collection_id(collection, "collectionId")
        updated_settings(self._collection(collection).settings if self._exists(collection) else
                         settings_from_dict(None), settings)  # validate before creating anything
        target = self._collection(collection, create=True)
        with target.write_mutex:  # read-modify-write of the settings, serialised with other writes
            new = updated_settings(target.settings, settings)
            index = target.index
            check_space_changes(target.settings.vectors, new.vectors,
                                lambda name: index.vectors.holds_vectors(name, index.alive))
            target._write_locked({"op": "settings", "settings": new.to_dict()})
        return new.to_dict()

    def _exists(self, collection: str) -> bool:
        with self._collections_lock:
            return collection in self._collections

    # ------------------------------------------------------------------ records

    def get_records(self, collection: str, ids: list[int | str]) -> list[dict[str, Any]]:
        """The stored records of ``ids`` that exist, in the order asked."""
        if not isinstance(ids, (list, tuple)):
            raise BadRequestError("ids: must be an array of record ids", field="ids")
        if len(ids) > MAX_GET_IDS:
            raise BadRequestError(f"ids: at most {MAX_GET_IDS} ids, got {len(ids)}", field="ids")
        checked = [check_record_id(record_id, f"ids[{position}]") for position, record_id in enumerate(ids)]
        target = self._collection(collection)
        with target.lock.reading():
            docstore = target.index.docs
            found = []
            for record_id in checked:
                doc = docstore.doc_of(record_id)
                if doc is not None and (isinstance(record_id, str) == isinstance(docstore.record_ids[doc], str)):
                    found.append(docstore.record(doc))
            return found

    def page_records(self, collection: str, count: int = 1000, after: str | None = None,
                     filter: str | None = None) -> dict[str, Any]:
        """One page of every record in id order: ``{"records": [...], "next": cursor or None}``.

        The cursor names the last id returned; the next page holds the ids strictly greater, so
        writes between pages never make a page lose or repeat a record that stayed in place.
        ``filter``: only the records passing this expression are paged (a tenant token's rule).
        """
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PAGE:
            raise BadRequestError(f"count: must be an integer between 1 and {MAX_PAGE}, got {preview(count, 40)}", field="count")
        after_key = None if after is None else id_sort_key(decode_cursor(after))
        tree = None if filter is None else parse_filter(filter)
        target = self._collection(collection)
        with target.lock.reading():
            docstore = target.index.docs
            if tree is None or filter is None:
                docs = array_from_bitmap(BitMap(docstore.alive))
            else:
                docs = array_from_bitmap(BitMap(filter_docs(target.index, SearchRequest(collection, filter=filter,
                                                                                          filter_tree=tree))))
            rank = docstore.id_rank()
            if rank is None:
                ordered = docs.tolist()
            else:  # ranks are distinct (deletes leave gaps): scatter by rank in O(n) rather than sort per page
                ranks = rank[docs]
                by_rank = np.full(int(ranks.max()) + 1 if len(ranks) else 0, -1, dtype=np.int64)
                by_rank[ranks] = docs
                ordered = by_rank[by_rank >= 0].tolist()
            record_ids = docstore.record_ids
            start = 0 if after_key is None else bisect.bisect_right(
                ordered, after_key, key=lambda doc: id_sort_key(record_ids[doc]))  # type: ignore[arg-type]
            page = ordered[start:start + count]
            records = [docstore.record(doc) for doc in page]
            more = start + count < len(ordered)
        return {"records": records, "next": encode_cursor(records[-1]["id"]) if more and records else None}

    def _collection(self, name: Any, *, create: bool = False) -> Collection:
        collection_id = check_collection_id(name, "collectionId")
        with self._collections_lock:
            self._check_open()
            collection = self._collections.get(collection_id)
            if collection is None:
                if not create:
                    raise NotFoundError(f"collection '{collection_id}' not found", field="collection")
                collection = Collection(collection_id)
                if self._directory is not None:
                    collection.store = self._directory.collection(collection_id)
                    _state, batches = collection.store.open()
                    for _ in batches:
                        pass
                self._collections[collection_id] = collection
            return collection

    # ------------------------------------------------------------------ writes

    def add_records(self, collection: str, records: dict[str, Any] | list[dict[str, Any]]) -> dict[str, int]:
        """Insert or replace records (one dict or a list), all or nothing.

        Returns ``{"status": 201}``. Raises :class:`BadRequestError` naming the first bad record's
        index and field; nothing of the batch is applied then.
        """
        check_collection_id(collection, "collectionId")
        batch, packed, _ = validate_and_pack_records(records)
        target = self._collection(collection, create=True)
        check_record_vectors(batch, target.settings.vectors)
        target.write({"op": "add", "records": batch}, packed)
        return {"status": 201}

    def add_batches(self, collection: str, batches: Iterable[dict[str, Any] | list[dict[str, Any]]]) -> dict[str, int]:
        """Add many batches in a row — a bulk load — faster than one :meth:`add_records` per batch.

        Each batch is validated, made durable and applied whole or not at all, exactly as
        :meth:`add_records` would; meanwhile the next batch's texts are analysed in a helper
        process on another core. Batches may come from a generator (read lazily, one ahead).

        Returns ``{"status": 201, "records": added}``. A bad batch raises
        :class:`BadRequestError` naming it (``batches[3].records[17].id: ...``) after every batch
        before it was written; nothing of it or of later batches is.
        """
        check_collection_id(collection, "collectionId")

        def validated() -> Iterator[ValidatedBatch]:
            for number, records in enumerate(batches):
                try:  # read field by field: the columns validated are those the index collects
                    validated_batch = validate_and_pack_records(records, columns=True)
                    existing = self._collections.get(collection)
                    check_record_vectors(validated_batch[0], existing.settings.vectors if existing is not None else ())
                    yield validated_batch
                except BadRequestError as error:
                    raise BadRequestError(f"batches[{number}].{error.data} (batches before it were added)",
                                          field=error.field) from None

        checked = validated()
        first = next(checked, None)  # a first batch that fails creates no collection
        if first is None:
            return {"status": 201, "records": 0}
        target = self._collection(collection, create=True)
        return {"status": 201, "records": target.write_adds(chain([first], checked))}

    def delete_records(
        self,
        collection: str,
        ids: list[int | str] | None = None,
        filter: str | None = None,
        clear: bool = False,
    ) -> list[dict[str, Any]]:
        """Delete by ids (one result per id, 200 or 404, in order), by filter, or everything.

        Exactly one selector is required; none is a 400, so nothing is deleted by accident.
        """
        chosen = [name for name, used in (("ids", ids is not None), ("filter", filter is not None), ("clear", bool(clear))) if used]
        if not chosen:
            raise BadRequestError(
                "delete: give record ids, a filter, or clear=true; nothing was deleted", field="ids"
            )
        if len(chosen) > 1:
            raise BadRequestError(f"delete: give only one of ids, filter or clear, got {' and '.join(chosen)}", field=chosen[1])
        if ids is not None:
            if not isinstance(ids, (list, tuple)):
                raise BadRequestError("ids: must be an array of record ids", field="ids")
            if not ids:
                raise BadRequestError("ids: must not be empty", field="ids")
            checked = [check_record_id(record_id, f"ids[{position}]") for position, record_id in enumerate(ids)]
        if filter is not None and not isinstance(filter, str):
            raise BadRequestError("filter: must be a string", field="filter")
        if filter is not None and not filter.strip():
            raise BadRequestError("filter: must not be empty (use clear=true to delete everything)", field="filter")
        selection = None if filter is None else SearchRequest(collection, filter=filter, filter_tree=parse_filter(filter))
        target = self._collection(collection)
        if ids is not None:
            found = target.write({"op": "delete", "ids": checked})
            return [{"status": 200 if hit else 404, "id": record_id} for record_id, hit in zip(checked, found)]
        if clear:
            deleted = target.write({"op": "clear"})
        else:
            assert selection is not None
            deleted = target.write_delete_by_filter(selection)
        return [{"status": 200, "deleted": deleted}]

    # ------------------------------------------------------------------ search

    def search(self, request: dict[str, Any]) -> dict[str, Any]:
        """Run a search request (contract §3) and return the response (contract §4)."""
        parsed = parse_search_request(request)
        # The parsed id is valid: an open collection is a dict lookup (no second check, no lock).
        target = None if self._closed else self._collections.get(parsed.collection)
        if target is None:
            target = self._collection(parsed.collection)  # its 404
        with target.lock.reading():
            return target.search(parsed, request)

    def multi_search(self, searches: Any) -> list[dict[str, Any]]:
        """Run up to 100 searches; one answer per search in order: its response, or its Error object."""
        return run_multi_search(self.search, searches, MULTI_SEARCH_THREADS)

    def search_facet_values(self, collection: str, facet: str, request: dict[str, Any]) -> dict[str, Any]:
        """Facet value search (contract §5): values of ``facet`` matching ``textFacetQuery.query``.

        ``request`` is a search body (its ``collection`` may be omitted: ``collection`` wins); the
        values are counted over the records that the rest of the body selects.
        """
        if not isinstance(request, dict):
            raise BadRequestError("request body: must be a JSON object", field="body")
        if not isinstance(facet, str) or not facet:
            raise BadRequestError("facetName: must be a non-empty field name", field="facetName")
        check_unicode(facet, "facetName", "facetName")
        body = dict(request)
        body["collection"] = check_collection_id(collection, "collectionId")
        parsed = parse_search_request(body, facet_search=True)
        target = self._collection(parsed.collection)
        with target.lock.reading():
            return {"values": target.facet_values(parsed, facet, body)}

    def check(self, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
        """Verify every collection: rebuild its index from the stored records and compare.

        Returns ``{"ok": bool, "collections": {name: {"records": n, "problems": [...]}}, "problems": [...]}``;
        every difference is listed (capped at 100 per collection). ``progress(done, total,
        collection)`` is called as records are rebuilt (``total``: the records of every collection).
        """
        report: dict[str, Any] = {"ok": True, "collections": {}, "problems": []}
        names = self.collection_names()
        total = sum(len(self._collection(name).index.docs) for name in names)
        done = 0
        for name in names:
            collection = self._collection(name)
            with collection.write_mutex, collection.lock.reading():
                problems = self._verify_files(name, collection)
                before = done

                def rebuilt(records: int, before: int = before, name: str = name) -> None:
                    if progress is not None:
                        progress(before + records, total, name)

                problems += compare_indexes(collection.index, rebuild_index(collection.index, rebuilt))
                done = before + len(collection.index.docs)
                report["collections"][name] = {"records": len(collection.index.docs), "problems": problems}
            report["problems"].extend(f"{name}: {problem}" for problem in problems)
        if progress is not None:
            progress(total, total, "")
        report["ok"] = not report["problems"]
        return report

    def _verify_files(self, name: str, collection: Collection) -> list[str]:
        """Problems re-reading collection ``name``'s files (checksums)."""
        return collection.store.verify() if collection.store is not None else []
