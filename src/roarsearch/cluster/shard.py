"""One shard: an :class:`~roarsearch.engine.engine.Engine` in a Ray actor, with a prepare area
for two-phase commit, answering the partial searches that :mod:`roarsearch.cluster.merge` merges.

Owns: the shard side of contract §10 —

- ``prepare`` writes a batch to ``<shard>/twophase/<tx>.msgpack`` (fsynced, renamed into place)
  without applying it; ``commit`` applies it through the collection's own write-ahead log, then
  removes the prepared file; ``abort`` removes it; ``recover`` resolves every prepared batch left
  by a crash (committed in the coordinator log → applied, otherwise discarded). Re-applying a
  batch is harmless (an add is an upsert, a delete of ids or a clear is idempotent).
- ``search`` runs the engine's own pipeline (``Collection.search``) on a request whose page,
  facet counts and groups are widened by the driver (and whose ``searchFields`` the driver has
  resolved, the settings' included), and adds per result the values the merge needs: the
  explicit sort keys (by contract sort semantics, comparable across shards; ``_geoDistance`` as
  the exact distance, ``id`` as the id), the packed relevance cost behind ``_rank``, the
  settings' ``customRanking`` keys (already oriented) and the record id; per numeric facet the
  sum and number of values (``avg`` = sum / number of values).
- a ``vector`` search takes four steps (:mod:`roarsearch.cluster.shard_vectors`): ``nearest``,
  ``vector_search``, ``keyword_counts`` (hybrid only) and ``render``; the shard keeps each
  search's state between its steps by the driver's token (at most :data:`PARTIALS_KEPT`; one
  pushed out is computed again from the recipe every step carries).
- records and collections: ``get_records`` aligned to the ids asked, ``page_records``,
  ``collections`` and ``collection_info`` of this shard (``None`` where it lacks the collection:
  a collection exists where some shard holds it); settings and drops arrive as prepared batches.

Plain Python (no Ray import): the driver wraps :class:`ShardActor` with ``ray.remote``.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import OrderedDict
from typing import Any

import msgpack
import numpy as np

from roarsearch.analysis.analyzer import analyze
from roarsearch.cluster.coordinator import FILES, write_durably
from roarsearch.cluster.merge import oriented
from roarsearch.cluster.partial import SortPart, field_sort_part, numeric_sums, relevance_cost, resolved_body
from roarsearch.cluster.shard_vectors import Recipe, VectorPartial, nearest_lists
from roarsearch.engine.collection import Collection
from roarsearch.engine.engine import Engine
from roarsearch.errors import DirectoryLockedError, NotFoundError
from roarsearch.facets.value_search import _number_matches, _string_matches
from roarsearch.query.context import SearchContext, filter_docs, prepare_search
from roarsearch.query.fields import held_fields
from roarsearch.query.plan import allowed_typos
from roarsearch.query.request import SearchRequest, SortKey
from roarsearch.ranking.fusion import FusedRanker
from roarsearch.ranking.ranker import Ranker

PREPARED_DIR = "twophase"
#: Vector searches a shard keeps between their steps (more in flight at once: the oldest are
#: computed again when their next step comes).
PARTIALS_KEPT = 32
#: Seconds a restarted shard waits for its killed predecessor to release the directory lock.
LOCK_WAIT_SECONDS = 30.0

#: (explicit sort parts, relevance cost, oriented customRanking parts, record id)
MergeKey = tuple[list[Any], int, list[Any], Any]


class ShardActor:
    """An engine over one shard directory. Every method is called by the driver through Ray."""

    def __init__(self, path: str, shard: int) -> None:
        self.path = path
        self.shard = shard
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                self.engine = Engine(path)
                break
            except DirectoryLockedError:  # a killed predecessor's process is still going away
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.prepared_path = os.path.join(path, PREPARED_DIR)
        os.makedirs(self.prepared_path, exist_ok=True)
        #: The vector searches between their steps, by the driver's token (newest last).
        self._partials: OrderedDict[str, tuple[Collection, VectorPartial]] = OrderedDict()
        self._partials_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle

    def ping(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.engine.close()

    def collections(self) -> list[dict[str, Any]]:
        return self.engine.collections()

    def check(self) -> dict[str, Any]:
        return self.engine.check()

    # ------------------------------------------------------------------ two-phase commit

    def _prepared_file(self, tx: str) -> str:
        return os.path.join(self.prepared_path, f"{tx}.msgpack")

    def prepare(self, tx: str, collection: str, payload: dict[str, Any]) -> None:
        """Make the batch durable here without applying it (a delete by filter is resolved to ids now)."""
        if payload["op"] == "delete_filter":
            target = self._existing(collection)
            ids: list[Any] = []
            if target is not None:
                with target.lock.reading():
                    docs = filter_docs(target.index, payload["request"])
                    ids = target.index.docs.record_ids.ids_of(docs)
            payload = {"op": "delete", "ids": ids, "count": True}
        data = msgpack.packb({"tx": tx, "collection": collection, "payload": payload}, use_bin_type=True)
        write_durably(self._prepared_file(tx), data)

    def commit(self, tx: str) -> Any:
        """Apply a prepared batch (its result: found flags, a deleted count, or None)."""
        path = self._prepared_file(tx)
        result = self._apply(path)
        os.remove(path)
        return result

    def abort(self, tx: str) -> None:
        path = self._prepared_file(tx)
        if os.path.exists(path):
            os.remove(path)
            FILES.fsync_dir(self.prepared_path)

    def recover(self, committed: list[str]) -> dict[str, Any]:
        """Resolve every batch left prepared: committed ones are applied, the others discarded.
        Returns the results of the batches applied, by transaction id."""
        done = set(committed)
        results: dict[str, Any] = {}
        for name in sorted(os.listdir(self.prepared_path)):
            path = os.path.join(self.prepared_path, name)
            tx = name.split(".")[0]
            if name.endswith(".msgpack") and tx in done:
                results[tx] = self._apply(path)
            os.remove(path)
        FILES.fsync_dir(self.prepared_path)
        return results

    def _apply(self, path: str) -> Any:
        with open(path, "rb") as handle:
            entry = msgpack.unpackb(handle.read(), raw=False, strict_map_key=False)
        payload = entry["payload"]
        if payload["op"] == "add":
            return self.engine._collection(entry["collection"], create=True).write(payload)
        target = self._existing(entry["collection"])
        if payload["op"] == "delete":
            found = [False] * len(payload["ids"]) if target is None else target.write({"op": "delete", "ids": payload["ids"]})
            return sum(found) if payload.get("count") else found
        if payload["op"] == "clear":
            return 0 if target is None else target.write({"op": "clear"})
        if payload["op"] == "settings":  # the whole new settings: re-applying it is harmless
            return self.engine._collection(entry["collection"], create=True).write(payload)
        if payload["op"] == "drop":  # idempotent: a shard without the collection has nothing to drop
            return None if target is None else self.engine.drop_collection(entry["collection"])
        raise ValueError(f"unknown batch operation {payload['op']!r}")

    def _existing(self, collection: str) -> Collection | None:
        try:
            return self.engine._collection(collection)
        except NotFoundError:
            return None

    # ------------------------------------------------------------------ records and collections

    def get_records(self, collection: str, ids: list[Any]) -> list[dict[str, Any] | None] | None:
        """The stored record of each id asked (``None`` where absent), aligned; ``None`` without the collection."""
        target = self._existing(collection)
        if target is None:
            return None
        with target.lock.reading():
            docstore = target.index.docs
            found: list[dict[str, Any] | None] = []
            for record_id in ids:
                doc = docstore.doc_of(record_id)
                # 1 and "1" are different ids (as Engine.get_records tells them apart)
                same = doc is not None and isinstance(record_id, str) == isinstance(docstore.record_ids[doc], str)
                found.append(docstore.record(doc) if same and doc is not None else None)
            return found

    def page_records(self, collection: str, count: int, after: str | None,
                     filter: str | None = None) -> dict[str, Any] | None:
        return None if self._existing(collection) is None else self.engine.page_records(collection, count, after, filter)

    def collection_info(self, collection: str) -> dict[str, Any] | None:
        """``Engine.collection_info`` of this shard, but listing fields no record here holds now too:
        a field's ``string``/``boolean`` kinds are those it ever held (as the engine's), so the
        driver needs them from every shard that ever held the field, then drops fields held nowhere."""
        target = self._existing(collection)
        if target is None:
            return None
        with target.lock.reading():
            index = target.index
            alive = index.alive
            fields = []
            for path, columns in sorted(index.columns.items()):
                kinds = []
                if columns.numeric is not None and columns.numeric.docs & alive:
                    kinds.append("number")
                if columns.has_text:
                    kinds.append("string")
                if columns.has_bool:
                    kinds.append("boolean")
                fields.append({"field": path, "kinds": kinds, "records": len(columns.exists & alive)})
            return {"collection": target.name, "records": len(alive), "fields": fields,
                    "settings": target.settings.to_dict()}

    # ------------------------------------------------------------------ search

    def search(self, request: SearchRequest, kept_words: int | None) -> dict[str, Any]:
        """The partial answer of this shard (see :func:`roarsearch.cluster.merge.merge_responses`)."""
        target = self._existing(request.collection)
        exists = target is not None
        if target is None:
            target = Collection(request.collection)
        extra: dict[str, Any] = {}

        def inspect(context: SearchContext, ranker: Ranker | FusedRanker, response: dict[str, Any]) -> None:
            index = context.index
            extra["kept"] = len(context.words)
            extra["held"] = sorted(held_fields(index))  # warnings are decided over all shards

            shown = (response["results"] if request.group_by is None else
                     [result for group in response["results"] for result in group["results"]])
            docs = [index.docs.doc_for(result["id"]) for result in shown]
            around = request.geo.around if request.geo is not None else None
            # Exact distances (ties in whole metres are broken by them), one vectorised measure.
            exact = ({} if around is None else
                     dict(zip(docs, index.geo.distances(np.asarray(docs, dtype=np.int64), around.lat, around.lng).tolist())))
            custom = context.settings.custom_keys
            # Engine's customRanking measures _geoDistance only under an explicit sort (ranking.sort).
            custom_origin = around is not None and bool(request.sort)

            def part(sort_key: SortKey, doc: int, record_id: Any, geo: bool) -> SortPart:
                return field_sort_part(index, sort_key.field, doc, sort_key.descending, record_id,
                                       exact.get(doc, math.nan) if geo else None)

            def key(result: dict[str, Any]) -> MergeKey:
                record_id = result["id"]
                doc = index.docs.doc_for(record_id)
                cost = relevance_cost(result["_rank"])
                parts = [cost if sort_key.field == "_rank" else part(sort_key, doc, record_id, around is not None)
                         for sort_key in request.sort]
                ties = [oriented(part(sort_key, doc, record_id, custom_origin), sort_key.descending)
                        for sort_key in custom]
                return (parts, cost, ties, record_id)

            if request.group_by is None:
                extra["keys"] = [key(result) for result in response["results"]]
            else:
                extra["keys"] = [[key(result) for result in group["results"]] for group in response["results"]]
            extra["sums"] = numeric_sums(context)

        with target.lock.reading():
            response = target.search(request, resolved_body(), kept_words=kept_words, inspect=inspect)
        return {"exists": exists, "response": response, **extra}

    def spaces_with_vectors(self, collection: str) -> list[str]:
        """The vector spaces of which some live record here holds a vector (a settings update may
        not change their dimensions or metric)."""
        target = self._existing(collection)
        if target is None:
            return []
        with target.lock.reading():
            index = target.index
            return [name for name in index.vectors.spaces if index.vectors.holds_vectors(name, index.alive)]

    # ------------------------------------------------------------------ vector search (shard_vectors)

    def nearest(self, request: SearchRequest) -> dict[str, Any]:
        """The nearest step of a vector search: this shard's nearest lists (``exists`` False without the collection)."""
        target = self._existing(request.collection)
        if target is None:
            return {"exists": False}
        with target.lock.reading():
            return {"exists": True, **nearest_lists(target.index, request)}

    def vector_search(self, token: str, recipe: Recipe) -> dict[str, Any]:
        """The matches step: counts and the page's candidates; the search is kept for the next steps."""
        target = self._existing(recipe[0].collection)
        exists = target is not None
        collection = target if target is not None else Collection(recipe[0].collection)
        with collection.lock.reading():
            partial = VectorPartial(collection, recipe)
            answer = partial.answer()
        with self._partials_lock:
            self._partials[token] = (collection, partial)
            while len(self._partials) > PARTIALS_KEPT:
                self._partials.popitem(last=False)
        return {"exists": exists, **answer}

    def keyword_counts(self, token: str, recipe: Recipe, keys: list[tuple[Any, ...]]) -> list[int]:
        """The positions step (hybrid): per keyword key, the keyword matches here that precede it."""
        collection, partial = self._partial(token, recipe, keep=True)
        with collection.lock.reading():
            return partial.keyword_counts(keys)

    def render(self, token: str, recipe: Recipe, record_ids: list[Any]) -> list[dict[str, Any]]:
        """The render step: the page's records held here, in the order asked; the search is then forgotten."""
        collection, partial = self._partial(token, recipe, keep=False)
        with collection.lock.reading():
            return partial.render(record_ids)

    def forget(self, token: str) -> None:
        """Drop a kept search (the driver gave up on it)."""
        with self._partials_lock:
            self._partials.pop(token, None)

    def _partial(self, token: str, recipe: Recipe, *, keep: bool) -> tuple[Collection, VectorPartial]:
        with self._partials_lock:
            kept = self._partials.get(token) if keep else self._partials.pop(token, None)
        if kept is not None:
            return kept
        # Pushed out by newer searches: computed again (no write lands between the driver's steps).
        target = self._existing(recipe[0].collection)
        collection = target if target is not None else Collection(recipe[0].collection)
        with collection.lock.reading():
            partial = VectorPartial(collection, recipe)
        if keep:
            with self._partials_lock:
                self._partials[token] = (collection, partial)
        return collection, partial

    def facet_values(self, request: SearchRequest, facet: str, kept_words: int | None) -> dict[str, Any]:
        """Every value of ``facet`` matching the facet query, as ``(match rank, value, count)``: the
        rank (how closely the value matches, the first order key) depends on the value alone, so
        the driver can sum counts and order exactly as ``facets.value_search`` does."""
        target = self._existing(request.collection)
        if target is None:
            return {"exists": False, "kept": 0, "values": []}
        entries: list[tuple[Any, ...]] = []
        with target.lock.reading():
            with_settings, settings = target._with_settings(request, resolved_body())
            context = prepare_search(target.index, with_settings, settings, kept_words)
            columns = target.index.field_columns(facet)
            candidates = context.without_facet_filter(facet)
            if columns is not None and candidates:
                wanted = " ".join(analyze(request.facet_query or ""))
                budget = allowed_typos(wanted, request.typo_tolerance) if wanted and " " not in wanted else 0
                if columns.values is not None:
                    entries.extend(_string_matches(columns, candidates, wanted, budget, 2**31 - 1))
                entries.extend(_number_matches(columns, candidates, wanted, 2**31 - 1))
        return {"exists": True, "kept": len(context.words),
                "values": [(entry[0], entry[-2], entry[-1]) for entry in entries]}
