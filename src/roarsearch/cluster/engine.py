""":class:`ShardedEngine`: the :class:`~roarsearch.engine.engine.Engine` API over N shard actors.

Owns: routing (a record goes to shard ``blake2b(msgpack(id)) mod N``), the two-phase commit of
every write batch across the shards it touches (record batches, settings updates and drops, the
last two over every shard), scatter/gather of searches with the collection-wide facts decided
here (the first-seen order of text fields behind ``*``, the settings' ``searchFields``, the number
of query words kept), the records API (gets routed by id, pages merged by id, collection counts
and fields summed), multi-search, and restarting a dead shard actor (calls meanwhile raise 503).

Write protocol (one batch at a time):

1. validate the whole batch (the engine's own checks: the same 400s);
2. prepare: each touched shard writes the batch durably to its prepare area (not applied);
   a failure anywhere aborts every shard's prepared copy;
3. commit point: one line in the coordinator log (``COMMITS``), fsynced;
4. commit: each shard applies its part through its own write-ahead log. Searches are held
   (a driver read/write lock) from the commit point until every shard has applied, so a search
   sees a batch wholly or not at all. A shard that dies here is restarted and applies the
   committed batch from its prepare area while recovering.

Recovery on open: each shard applies its prepared batches whose transaction is in the log and
discards the others; then the log is folded into ``CLUSTER`` and emptied.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any

import msgpack

from roarsearch.cluster.coordinator import Coordinator
from roarsearch.cluster.merge import merge_counts, merge_facet_values, merge_responses
from roarsearch.cluster.shard import ShardActor
from roarsearch.cluster.shard_vectors import Recipe, widened_facets
from roarsearch.cluster.vector_merge import Placed, groups_of, merge_nearest, order_candidates, page_of, placed_candidates
from roarsearch.engine.collection import ReadWriteLock
from roarsearch.engine.engine import Engine, encode_cursor, run_multi_search
from roarsearch.engine.request import check_collection_id, parse_search_request
from roarsearch.engine.settings import check_space_changes, updated_settings
from roarsearch.errors import (
    BadRequestError,
    InternalError,
    NotFoundError,
    SearchError,
    ServiceUnavailableError,
)
from roarsearch.index.docstore import id_sort_key
from roarsearch.index.vectors import check_record_vectors
from roarsearch.query.filter_parser import parse_filter
from roarsearch.query.plan import resolve_search_fields
from roarsearch.query.request import SearchRequest
from roarsearch.query.settings import Settings, settings_from_dict
from roarsearch.schema import check_record_id, check_unicode, iter_leaves, validate_records

try:
    import ray
    from ray.exceptions import RayActorError, RayTaskError
except ImportError:  # pragma: no cover - the cluster extra is not installed
    ray = None  # type: ignore[assignment, unused-ignore]

log = logging.getLogger("roarsearch.cluster")

#: Facet values and groups asked of each shard: all of them (a shard's local top-k is not enough).
EVERYTHING = 2**31 - 1
#: Searches of one multi-search in flight at once (each mostly waits on its shards).
MULTI_SEARCH_THREADS = 4
#: Seconds to wait for a shard call before it counts as failed.
CALL_TIMEOUT = float(os.environ.get("ROARSEARCH_SHARD_TIMEOUT", "600"))


def shard_of(record_id: int | str, shards: int) -> int:
    """The shard of a record id: stable across processes and machines (never Python's ``hash``)."""
    digest = hashlib.blake2b(msgpack.packb(record_id), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def text_fields_of(records: list[dict[str, Any]]) -> list[str]:
    """Fields holding a string, in order of first appearance record by record (the order of ``*``)."""
    seen: dict[str, None] = {}
    for record in records:
        for path, _element, value in iter_leaves(record):
            if type(value) is str and path not in seen:
                seen[path] = None
    return list(seen)


class ShardedEngine:
    """The :class:`Engine` API with each collection spread over ``shards`` Ray actors.

        >>> with ShardedEngine("./data", shards=4) as engine:          # doctest: +SKIP
        ...     engine.add_records("people", [{"id": 1, "name": "Ada"}])
        ...     engine.search({"collection": "people", "query": "ada"})

    ``address`` connects to a Ray cluster (``"ray://head:10001"`` or ``"auto"``); without it an
    existing Ray connection is reused, else a small local Ray is started (and shut down by
    :meth:`close`). Shard actors reserve no CPU (``num_cpus=0``).
    """

    def __init__(self, path: str | os.PathLike[str], shards: int | None = None, address: str | None = None,
                 *, ray_options: dict[str, Any] | None = None) -> None:
        if ray is None:
            raise InternalError("roarsearch.cluster needs Ray: pip install -e '.[cluster]'")
        if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= 1024):
            raise BadRequestError(f"shards: must be an integer between 1 and 1024, got {shards!r}", field="shards")
        self.path = os.path.abspath(os.fspath(path))
        self._closed = False
        self._coordinator = Coordinator(self.path, shards)
        self.shards = self._coordinator.shards
        self._started_ray = False
        try:
            if not ray.is_initialized():
                options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                           "configure_logging": False}
                if address is None:
                    options.update(num_cpus=2, object_store_memory=256 * 1024 * 1024)
                options.update(ray_options or {})
                ray.init(address=address, **options)
                self._started_ray = True
            self._remote: Any = ray.remote(ShardActor)
            self._rw = ReadWriteLock()
            self._write_lock = threading.RLock()
            self._state_lock = threading.Lock()
            self._restart_locks = [threading.Lock() for _ in range(self.shards)]
            self._restarting: set[int] = set()
            self._recovered: dict[str, dict[int, Any]] = {}
            self._settings_cache: dict[str, tuple[dict[str, Any], Settings]] = {}
            self._actors = [self._start(shard) for shard in range(self.shards)]
            committed = sorted(self._coordinator.committed)
            ray.get([actor.recover.remote(committed) for actor in self._actors], timeout=CALL_TIMEOUT)
            self._coordinator.checkpoint()
        except BaseException:
            self._shutdown()
            raise

    # ------------------------------------------------------------------ actors

    def _start(self, shard: int) -> Any:
        path = self._coordinator.shard_path(shard)
        actor: Any = self._remote.options(num_cpus=0, max_concurrency=8, max_restarts=0).remote(path, shard)
        try:
            ray.get(actor.ping.remote(), timeout=CALL_TIMEOUT)
        except BaseException:
            ray.kill(actor, no_restart=True)  # never leave a half-started shard holding its directory
            raise
        return actor

    def _restart(self, shard: int, dead: Any) -> None:
        """Replace a dead shard actor by a new one over the same directory (idempotent per death).

        Holds the write lock (re-entrant: a writer restarts a shard it needs itself), so a shard never
        resolves its prepared batches while a batch is between prepare and commit."""
        with self._state_lock:
            self._restarting.add(shard)
        try:
            with self._write_lock, self._restart_locks[shard]:
                if self._actors[shard] is not dead:
                    return  # restarted already
                try:
                    ray.kill(dead, no_restart=True)
                except Exception as error:
                    log.debug("shard %d: kill of the dead actor: %s", shard, error)
                actor = self._start(shard)
                try:
                    results = ray.get(actor.recover.remote(sorted(self._coordinator.committed)), timeout=CALL_TIMEOUT)
                except BaseException:
                    ray.kill(actor, no_restart=True)
                    raise
                with self._state_lock:
                    for tx, result in results.items():
                        self._recovered.setdefault(tx, {})[shard] = result
                self._actors[shard] = actor
        finally:
            with self._state_lock:
                self._restarting.discard(shard)

    def _restart_later(self, shard: int, dead: Any) -> None:
        threading.Thread(target=self._restart_quietly, args=(shard, dead), daemon=True).start()

    def _restart_quietly(self, shard: int, dead: Any) -> None:
        try:
            self._restart(shard, dead)
        except Exception as error:
            log.warning("shard %d: restart failed (retried on the next call): %s", shard, error)

    def _check_available(self) -> None:
        if self._closed:
            raise ServiceUnavailableError("the sharded engine is closed")
        with self._state_lock:
            if self._restarting:
                raise ServiceUnavailableError(
                    f"shard {min(self._restarting)} is being restarted from its directory; retry shortly")

    def _gather(self, calls: dict[int, Callable[[Any], Any]], *, restart: str = "later") -> dict[int, Any]:
        """Run one call per shard in parallel; a dead actor is restarted and the call raises 503."""
        self._check_available()
        actors = {shard: self._actors[shard] for shard in calls}
        refs = {shard: calls[shard](actor) for shard, actor in actors.items()}
        results: dict[int, Any] = {}
        dead: list[int] = []
        failure: BaseException | None = None
        for shard, ref in refs.items():
            try:
                results[shard] = ray.get(ref, timeout=CALL_TIMEOUT)
            except RayTaskError as error:
                cause = getattr(error, "cause", None)
                failure = failure or (cause if isinstance(cause, SearchError) else InternalError(f"shard {shard}: {error}"))
            except (RayActorError, ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
                dead.append(shard)
        if dead:
            for shard in dead:
                if restart == "now":
                    self._restart(shard, actors[shard])
                else:
                    self._restart_later(shard, actors[shard])
            raise _Unavailable(dead, results)
        if failure is not None:
            raise failure
        return results

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close every shard (snapshots, locks), release the directory; shut down a Ray we started."""
        if self._closed:
            return
        self._closed = True
        with self._write_lock:
            self._shutdown()

    def _shutdown(self) -> None:
        try:
            for actor in getattr(self, "_actors", []):
                try:
                    ray.get(actor.close.remote(), timeout=CALL_TIMEOUT)
                    ray.kill(actor, no_restart=True)
                except Exception as error:
                    log.warning("a shard could not be closed cleanly (it recovers on the next open): %s", error)
        finally:
            self._coordinator.close()
            if self._started_ray:
                ray.shutdown()

    def __enter__(self) -> ShardedEngine:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def collection_names(self) -> list[str]:
        """Names of the collections that exist (on some shard), sorted."""
        return [entry["collection"] for entry in self.collections()]

    def collections(self) -> list[dict[str, Any]]:
        """Every collection with its record count summed over the shards (as :meth:`Engine.collections`)."""
        with self._rw.reading():
            parts = self._call_all(lambda actor: actor.collections.remote())
        counts: dict[str, int] = {}
        for entries in parts.values():
            for entry in entries:
                counts[entry["collection"]] = counts.get(entry["collection"], 0) + entry["records"]
        return [{"collection": name, "records": counts[name]} for name in sorted(counts)]

    def collection_info(self, collection: str) -> dict[str, Any]:
        """Record count, fields (kinds, records holding each: summed over the shards) and settings."""
        collection_id = check_collection_id(collection, "collectionId")
        with self._rw.reading():
            parts = [part for part in self._call_all(lambda actor: actor.collection_info.remote(collection_id)).values()
                     if part is not None]
        if not parts:
            raise NotFoundError(f"collection '{collection_id}' not found", field="collection")
        fields: dict[str, dict[str, Any]] = {}
        for part in parts:
            for entry in part["fields"]:
                slot = fields.setdefault(entry["field"], {"field": entry["field"], "kinds": set(), "records": 0})
                slot["kinds"].update(entry["kinds"])
                slot["records"] += entry["records"]
        for slot in fields.values():  # the engine's order of kinds
            slot["kinds"] = [kind for kind in ("number", "string", "boolean") if kind in slot["kinds"]]
        return {"collection": collection_id, "records": sum(part["records"] for part in parts),
                "fields": [fields[name] for name in sorted(fields) if fields[name]["records"]],
                "settings": parts[0]["settings"]}

    def drop_collection(self, collection: str) -> dict[str, int]:
        """Remove a collection, its records and settings from every shard, all or nothing, durably:
        a two-phase commit like a record batch (a crash leaves it on every shard or on none)."""
        collection_id = check_collection_id(collection, "collectionId")
        with self._write_lock:
            if collection_id not in self.collection_names():
                raise NotFoundError(f"collection '{collection_id}' not found", field="collection")
            self._write(collection_id, {shard: {"op": "drop"} for shard in range(self.shards)}, [], drop=True)
        return {"status": 200}

    # ------------------------------------------------------------------ settings

    def _settings(self, collection: str) -> Settings:
        """The collection's settings as the driver keeps them (equal to every shard's: contract §7).
        Built once per settings commit (a commit replaces the collection's dict in the coordinator)."""
        current = self._coordinator.settings.get(collection)
        if current is None:
            return settings_from_dict(None)
        cached = self._settings_cache.get(collection)
        if cached is None or cached[0] is not current:
            cached = (current, settings_from_dict(current))
            self._settings_cache[collection] = cached
        return cached[1]

    def get_settings(self, collection: str) -> dict[str, Any]:
        """Every settings key of the collection, with its default where unset (contract §7)."""
        collection_id = check_collection_id(collection, "collectionId")
        if collection_id not in self.collection_names():
            raise NotFoundError(f"collection '{collection_id}' not found", field="collection")
        with self._rw.reading():
            return self._settings(collection_id).to_dict()

    def update_settings(self, collection: str, settings: dict[str, Any]) -> dict[str, Any]:
        """Change the keys ``settings`` names on every shard, all or nothing, durably (a two-phase
        commit whose commit line carries the new settings); creates the collection if needed."""
        collection_id = check_collection_id(collection, "collectionId")
        with self._write_lock:  # read-modify-write, serialised with every other write
            current = self._settings(collection_id)
            updated = updated_settings(current, settings)
            holding: list[set[str]] = []  # spaces whose vectors a live record holds, asked once if needed

            def holds_vectors(name: str) -> bool:
                if not holding:
                    with self._rw.reading():
                        parts = self._call_all(lambda actor: actor.spaces_with_vectors.remote(collection_id))
                    holding.append({space for part in parts.values() for space in part})
                return name in holding[0]

            check_space_changes(current.vectors, updated.vectors, holds_vectors)
            new = updated.to_dict()
            self._write(collection_id, {shard: {"op": "settings", "settings": new} for shard in range(self.shards)},
                        [], settings=new)
        return new

    def check(self) -> dict[str, Any]:
        """Every shard's check, merged: ``collections`` name ``shard-K/collection``."""
        with self._rw.reading():
            parts = self._call_all(lambda actor: actor.check.remote())
        report: dict[str, Any] = {"ok": True, "collections": {}, "problems": []}
        for shard, part in sorted(parts.items()):
            for name, entry in part["collections"].items():
                report["collections"][f"shard-{shard}/{name}"] = entry
            report["problems"].extend(f"shard-{shard}/{problem}" for problem in part["problems"])
        report["ok"] = not report["problems"]
        return report

    def _call_all(self, call: Callable[[Any], Any]) -> dict[int, Any]:
        try:
            return self._gather({shard: call for shard in range(self.shards)})
        except _Unavailable as error:
            raise error.as_503() from None

    # ------------------------------------------------------------------ writes

    def add_records(self, collection: str, records: dict[str, Any] | list[dict[str, Any]]) -> dict[str, int]:
        """Insert or replace records, all or nothing across the shards (``{"status": 201}``)."""
        check_collection_id(collection, "collectionId")
        batch = validate_records(records)
        check_record_vectors(batch, self._settings(collection).vectors)  # the spaces every shard declares
        parts: dict[int, list[dict[str, Any]]] = {}
        for record in batch:
            parts.setdefault(shard_of(record["id"], self.shards), []).append(record)
        self._write(collection, {shard: {"op": "add", "records": part} for shard, part in parts.items()},
                    text_fields_of(batch))
        return {"status": 201}

    def delete_records(self, collection: str, ids: list[int | str] | None = None, filter: str | None = None,
                       clear: bool = False) -> list[dict[str, Any]]:
        """Delete by ids, by filter, or everything (the :meth:`Engine.delete_records` contract)."""
        try:  # the engine's own checks, in its order: an empty engine then says 404 for the collection
            with Engine() as probe:
                probe.delete_records(collection, ids=ids, filter=filter, clear=clear)
        except NotFoundError:
            pass
        if collection not in self.collection_names():
            raise NotFoundError(f"collection '{collection}' not found", field="collection")
        if ids is not None:
            checked = [check_record_id(record_id, f"ids[{position}]") for position, record_id in enumerate(ids)]
            routed: dict[int, list[int]] = {}
            for position, record_id in enumerate(checked):
                routed.setdefault(shard_of(record_id, self.shards), []).append(position)
            found = self._write(collection, {shard: {"op": "delete", "ids": [checked[p] for p in positions]}
                                             for shard, positions in routed.items()}, [])
            hits = [False] * len(checked)
            for shard, positions in routed.items():
                for position, hit in zip(positions, found.get(shard) or [False] * len(positions)):
                    hits[position] = bool(hit)
            return [{"status": 200 if hit else 404, "id": record_id} for record_id, hit in zip(checked, hits)]
        payloads: dict[int, dict[str, Any]]
        if clear:
            payloads = {shard: {"op": "clear"} for shard in range(self.shards)}
        else:
            assert filter is not None
            request = SearchRequest(collection, filter=filter, filter_tree=parse_filter(filter))
            payloads = {shard: {"op": "delete_filter", "request": request} for shard in range(self.shards)}  # type: ignore[dict-item, unused-ignore]
        deleted = self._write(collection, payloads, [])
        return [{"status": 200, "deleted": sum(int(count or 0) for count in deleted.values())}]

    # ------------------------------------------------------------------ records

    def get_records(self, collection: str, ids: list[int | str]) -> list[dict[str, Any]]:
        """The stored records of ``ids`` that exist, in the order asked (each asked of its shard)."""
        try:  # the engine's own checks, in its order
            with Engine() as probe:
                probe.get_records(collection, ids)
        except NotFoundError:
            pass
        checked = [check_record_id(record_id, f"ids[{position}]") for position, record_id in enumerate(ids)]
        routed: dict[int, list[int]] = {shard: [] for shard in range(self.shards)}
        for position, record_id in enumerate(checked):
            routed[shard_of(record_id, self.shards)].append(position)
        with self._rw.reading():
            try:  # every shard is asked: the collection exists where some shard holds it
                parts = self._gather({shard: _get_call(collection, [checked[p] for p in positions])
                                      for shard, positions in routed.items()})
            except _Unavailable as error:
                raise error.as_503() from None
        if all(part is None for part in parts.values()):
            raise NotFoundError(f"collection '{collection}' not found", field="collection")
        found: list[dict[str, Any] | None] = [None] * len(checked)
        for shard, positions in routed.items():
            for position, record in zip(positions, parts[shard] or []):
                found[position] = record
        return [record for record in found if record is not None]

    def page_records(self, collection: str, count: int = 1000, after: str | None = None,
                     filter: str | None = None) -> dict[str, Any]:
        """One page of every record in id order (as :meth:`Engine.page_records`, the same cursors):
        each shard's page after the cursor, merged by id and cut to ``count``."""
        try:  # the engine's own checks, in its order
            with Engine() as probe:
                probe.page_records(collection, count, after, filter)
        except NotFoundError:
            pass
        with self._rw.reading():
            parts = [part for part in
                     self._call_all(lambda actor: actor.page_records.remote(collection, count, after, filter)).values()
                     if part is not None]
        if not parts:
            raise NotFoundError(f"collection '{collection}' not found", field="collection")
        records = sorted((record for part in parts for record in part["records"]), key=lambda record: id_sort_key(record["id"]))
        # More remain when the shards returned more than a page, or one of them has more itself.
        more = len(records) > count or any(part["next"] is not None for part in parts)
        records = records[:count]
        return {"records": records, "next": encode_cursor(records[-1]["id"]) if more and records else None}

    def _write(self, collection: str, payloads: dict[int, dict[str, Any]], fields: list[str], *,
               settings: dict[str, Any] | None = None, drop: bool = False) -> dict[int, Any]:
        """Two-phase commit of one batch over the shards of ``payloads``; their apply results."""
        with self._write_lock:
            tx = uuid.uuid4().hex
            try:
                self._gather({shard: _prepare_call(tx, collection, payload) for shard, payload in payloads.items()})
            except BaseException as error:
                self._abort(tx, list(payloads))
                if isinstance(error, _Unavailable):
                    raise error.as_503() from None
                raise
            with self._rw.writing():
                try:
                    self._coordinator.append_commit(tx, collection, fields, settings=settings, drop=drop)
                except BaseException:
                    self._abort(tx, list(payloads))
                    raise
                results = {shard: self._commit_on(shard, tx) for shard in payloads}
                with self._state_lock:
                    self._recovered.pop(tx, None)
                self._coordinator.committed.discard(tx)
            return results

    def _commit_on(self, shard: int, tx: str) -> Any:
        """Apply a committed batch on one shard; a shard that dies is restarted (now) and applies it
        from its prepare area while recovering."""
        actor = self._actors[shard]
        try:
            return ray.get(actor.commit.remote(tx), timeout=CALL_TIMEOUT)
        except RayTaskError as error:
            cause = getattr(error, "cause", None)
            raise cause if isinstance(cause, SearchError) else InternalError(f"shard {shard}: {error}") from None
        except (RayActorError, ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
            pass
        try:
            self._restart(shard, actor)
        except Exception as error:
            raise ServiceUnavailableError(
                f"shard {shard} died while applying a committed batch; it applies it when restarted ({error})") from None
        with self._state_lock:
            return self._recovered.get(tx, {}).get(shard)

    def _abort(self, tx: str, shards: list[int]) -> None:
        for shard in shards:
            try:
                ray.get(self._actors[shard].abort.remote(tx), timeout=CALL_TIMEOUT)
            except Exception as error:
                log.warning("shard %d: abort of %s failed (discarded when it recovers): %s", shard, tx, error)

    # ------------------------------------------------------------------ search

    def search(self, request: dict[str, Any]) -> dict[str, Any]:
        """Scatter ``request`` to every shard and merge: the single engine's response (contract §10)."""
        started = time.perf_counter()
        parsed = parse_search_request(request)
        with self._rw.reading():
            parsed = self._with_settings(parsed, request)
            widened = self._widened(parsed)
            if parsed.vector is not None:
                merged = self._vector_search(parsed, widened, request)
            else:
                parts = self._scatter(lambda _shard, actor, kept: actor.search.remote(widened, kept))
                if not any(part["exists"] for part in parts):
                    raise NotFoundError(f"collection '{parsed.collection}' not found", field="collection")
                merged = merge_responses(parsed, request, parts)
        merged["responseTime"] = round((time.perf_counter() - started) * 1000)
        return merged

    def _widened(self, parsed: SearchRequest) -> SearchRequest:
        """The request each shard runs: ``*`` resolved over the collection-wide field order, the
        page from the first result, every facet value and every group."""
        fields = self._coordinator.text_fields.get(parsed.collection, [])
        return dataclasses.replace(
            parsed,
            search_fields=tuple(resolve_search_fields(parsed.search_fields, fields)),
            skip=0,
            count=parsed.skip + parsed.count,
            facet_count=EVERYTHING,
            group_count=EVERYTHING if parsed.group_by is not None else parsed.group_count,
            group_limit=max(parsed.group_limit, 1),
        )

    def _vector_search(self, parsed: SearchRequest, widened: SearchRequest, body: dict[str, Any]) -> dict[str, Any]:
        """A ``vector`` request in four steps (:mod:`roarsearch.cluster.vector_merge`): the global
        nearest, counts and candidates, keyword positions (hybrid), the page's records."""
        assert parsed.vector is not None
        try:
            first = self._gather({shard: lambda actor: actor.nearest.remote(widened) for shard in range(self.shards)})
        except _Unavailable as error:
            raise error.as_503() from None
        found = [part for part in first.values() if part["exists"]]
        if not found:
            raise NotFoundError(f"collection '{parsed.collection}' not found", field="collection")
        metric, k = found[0]["metric"], parsed.vector.k
        vector = merge_nearest([part["nearest"] for part in found], k, metric)
        facets = {facet: merge_nearest([part["facets"][facet] for part in found], k, metric)
                  for facet in widened_facets(widened)}
        owner = {id_sort_key(record_id): shard for shard, part in first.items() if part["exists"]
                 for entries in (part["nearest"], *part["facets"].values()) for record_id, _score in entries}
        token = uuid.uuid4().hex
        recipes: dict[int, Recipe] = {}
        rendered_by: set[int] = set()  # shards whose render step ran (they forgot the search then)

        def recipe(shard: int, kept: int | None) -> Recipe:
            held = [(record_id, position) for position, (record_id, _score) in enumerate(vector, 1)
                    if owner[id_sort_key(record_id)] == shard]
            lists = {facet: [record_id for record_id, _score in entries if owner[id_sort_key(record_id)] == shard]
                     for facet, entries in facets.items()}
            recipes[shard] = (widened, kept, held, lists)
            return recipes[shard]

        try:
            parts = self._scatter(lambda shard, actor, kept: actor.vector_search.remote(token, recipe(shard, kept)))
            hybrid = any(part["hybrid"] for part in parts)
            placed = placed_candidates({shard: part["candidates"] for shard, part in enumerate(parts)}, vector)
            if hybrid:
                holding = [shard for shard, part in enumerate(parts) if part["exists"]]
                self._keyword_positions(token, {shard: recipes[shard] for shard in holding}, placed)
            ordered = order_candidates(parsed, placed, hybrid)
            if parsed.group_by is None:
                shown: list[Placed] = page_of(parsed, ordered)
                groups = []
            else:
                groups = groups_of(parsed, ordered, [part["groups"] for part in parts])
                shown = [entry for _value, _total, entries in groups for entry in entries]
            rendered = self._render(token, recipes, shown, rendered_by)
        except _Unavailable as error:
            raise error.as_503() from None
        finally:
            self._forget(token, [shard for shard in range(self.shards) if shard not in rendered_by])
        if parsed.group_by is None:
            results: list[Any] = [rendered[id(entry)] for entry in shown]
        else:
            results = [{"value": value, "totalHits": total, "results": [rendered[id(entry)] for entry in entries]}
                       for value, total, entries in groups]
        return merge_counts(parsed, body, parts, results)

    def _keyword_positions(self, token: str, recipes: dict[int, Recipe], placed: list[Placed]) -> None:
        """The positions step: each keyword match's global position, its own shard's plus every other
        shard's keyword matches before its keyword key (asked of the shards of ``recipes``: those
        holding the collection)."""
        keyed = [entry for entry in placed if entry.keyword_key is not None]
        asked = {shard: [entry for entry in keyed if entry.shard != shard] for shard in recipes}
        asked = {shard: entries for shard, entries in asked.items() if entries}
        counts = self._gather({shard: _counts_call(token, recipes[shard], [entry.keyword_key for entry in entries])
                               for shard, entries in asked.items()})
        for shard, entries in asked.items():
            for entry, before in zip(entries, counts[shard]):
                assert entry.keyword_at is not None
                entry.keyword_at += before

    def _render(self, token: str, recipes: dict[int, Recipe], shown: list[Placed],
                rendered_by: set[int]) -> dict[int, dict[str, Any]]:
        """The render step: the shown records from their shards, with ``_rank`` and ``_vectorScore`` set
        (keyed by ``id()`` of each :class:`Placed`); ``rendered_by`` gets the shards asked."""
        by_shard: dict[int, list[Placed]] = {}
        for entry in shown:
            by_shard.setdefault(entry.shard, []).append(entry)
        rendered_by.update(by_shard)
        parts = self._gather({shard: _render_call(token, recipes[shard], [entry.record_id for entry in entries])
                              for shard, entries in by_shard.items()})
        rendered: dict[int, dict[str, Any]] = {}
        for shard, entries in by_shard.items():
            for entry, result in zip(entries, parts[shard]):
                result["_rank"] = entry.rank
                if entry.vector_score is not None:
                    result["_vectorScore"] = entry.vector_score
                rendered[id(entry)] = result
        return rendered

    def _forget(self, token: str, shards: list[int]) -> None:
        """``shards`` drop a search's kept state (those that ran the render step did then)."""
        for shard in shards:
            actor = self._actors[shard]
            try:
                actor.forget.remote(token)  # fire and forget: nothing waits on it
            except Exception as error:
                log.debug("forgetting search %s: %s", token, error)

    def _with_settings(self, parsed: SearchRequest, body: dict[str, Any]) -> SearchRequest:
        """The request with the settings' ``searchFields`` where the body gives none (as
        ``Collection._with_settings``), so that ``*`` is resolved here over every shard's fields."""
        search_fields = self._settings(parsed.collection).search_fields
        if search_fields != ("*",) and not body.get("searchFields"):
            return dataclasses.replace(parsed, search_fields=search_fields)
        return parsed

    def multi_search(self, searches: Any) -> list[dict[str, Any]]:
        """Up to 100 searches; one answer per search in order: its response, or its Error object."""
        return run_multi_search(self.search, searches, MULTI_SEARCH_THREADS)  # threads overlap the shard round trips

    def _scatter(self, call: Callable[[int, Any, int | None], Any]) -> list[dict[str, Any]]:
        """Two calls per shard when needed: each shard keeps as many words as it can; shards that kept
        fewer than the most any shard kept run again with that number (word dropping is global).
        ``call(shard, actor, kept)`` (``kept`` None: as many as the shard can)."""
        try:
            parts = self._gather({shard: _kept_call(call, shard, None) for shard in range(self.shards)})
            kept = max(part["kept"] for part in parts.values())
            again = [shard for shard, part in parts.items() if part["kept"] != kept]
            if again:
                parts.update(self._gather({shard: _kept_call(call, shard, kept) for shard in again}))
        except _Unavailable as error:
            raise error.as_503() from None
        return [parts[shard] for shard in range(self.shards)]

    def search_facet_values(self, collection: str, facet: str, request: dict[str, Any]) -> dict[str, Any]:
        """Facet value search over every shard: counts summed, ordered by match rank, count, value."""
        if not isinstance(request, dict):
            raise BadRequestError("request body: must be a JSON object", field="body")
        if not isinstance(facet, str) or not facet:
            raise BadRequestError("facetName: must be a non-empty field name", field="facetName")
        check_unicode(facet, "facetName", "facetName")
        body = dict(request)
        body["collection"] = check_collection_id(collection, "collectionId")
        parsed = parse_search_request(body, facet_search=True)
        with self._rw.reading():
            parsed = self._with_settings(parsed, body)
            fields = self._coordinator.text_fields.get(parsed.collection, [])
            widened = dataclasses.replace(parsed, search_fields=tuple(resolve_search_fields(parsed.search_fields, fields)),
                                          facet_query_count=EVERYTHING)
            parts = self._scatter(lambda _shard, actor, kept: actor.facet_values.remote(widened, facet, kept))
            if not any(part["exists"] for part in parts):
                raise NotFoundError(f"collection '{parsed.collection}' not found", field="collection")
        return {"values": merge_facet_values([part["values"] for part in parts], parsed.facet_query_count)}


def _prepare_call(tx: str, collection: str, payload: dict[str, Any]) -> Callable[[Any], Any]:
    return lambda actor: actor.prepare.remote(tx, collection, payload)


def _get_call(collection: str, ids: list[int | str]) -> Callable[[Any], Any]:
    return lambda actor: actor.get_records.remote(collection, ids)


def _kept_call(call: Callable[[int, Any, int | None], Any], shard: int, kept: int | None) -> Callable[[Any], Any]:
    return lambda actor: call(shard, actor, kept)


def _counts_call(token: str, recipe: Recipe, keys: list[Any]) -> Callable[[Any], Any]:
    return lambda actor: actor.keyword_counts.remote(token, recipe, keys)


def _render_call(token: str, recipe: Recipe, record_ids: list[Any]) -> Callable[[Any], Any]:
    return lambda actor: actor.render.remote(token, recipe, record_ids)


class _Unavailable(Exception):
    """Shards whose actor died during a call (being restarted)."""

    def __init__(self, shards: list[int], partial: dict[int, Any]) -> None:
        super().__init__(shards)
        self.shards = shards
        self.partial = partial

    def as_503(self) -> ServiceUnavailableError:
        return ServiceUnavailableError(
            f"shard {self.shards[0]} is being restarted from its directory; retry shortly (no partial answer given)")
