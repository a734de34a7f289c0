"""One shard: an :class:`~roarsearch.engine.engine.Engine` in a Ray actor, with a prepare area
for two-phase commit, answering the partial searches that :mod:`roarsearch.cluster.merge` merges.

Owns: the shard side of contract §10 —

- ``prepare`` writes a batch to ``<shard>/twophase/<tx>.msgpack`` (fsynced, renamed into place)
  without applying it; ``commit`` applies it through the collection's own write-ahead log, then
  removes the prepared file; ``abort`` removes it; ``recover`` resolves every prepared batch left
  by a crash (committed in the coordinator log → applied, otherwise discarded). Re-applying a
  batch is harmless (an add is an upsert, a delete of ids or a clear is idempotent).
- ``search`` runs the engine's own pipeline (``Collection.search``) on a request whose page,
  facet counts and groups are widened by the driver, and adds per result the values the merge
  needs: the explicit sort keys (by contract sort semantics, comparable across shards), the
  packed relevance cost behind ``_rank`` and the record id; per numeric facet the sum and number
  of values (``avg`` = sum / number of values).

Plain Python (no Ray import): the driver wraps :class:`ShardActor` with ``ray.remote``.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any

import msgpack
import numpy as np

from roarsearch.analysis.analyzer import analyze
from roarsearch.cluster.coordinator import FILES, write_durably
from roarsearch.engine.collection import Collection
from roarsearch.engine.engine import Engine
from roarsearch.errors import DirectoryLockedError, NotFoundError
from roarsearch.facets.numeric import _candidate_values
from roarsearch.facets.value_search import _number_matches, _string_matches
from roarsearch.index.index import Index
from roarsearch.query.context import SearchContext, filter_docs, prepare_search
from roarsearch.query.fields import held_fields
from roarsearch.query.plan import allowed_typos
from roarsearch.query.request import SearchRequest
from roarsearch.ranking.ranker import Ranker

PREPARED_DIR = "twophase"
#: Seconds a restarted shard waits for its killed predecessor to release the directory lock.
LOCK_WAIT_SECONDS = 30.0

SortPart = tuple[int, Any]
MergeKey = tuple[list[Any], int, Any]  # (explicit sort parts, relevance cost, record id)


def relevance_cost(rank: float) -> int:
    """The packed cost behind ``_rank`` (exact: ``_rank`` is ``1 - cost / 2**32``)."""
    return round((1.0 - rank) * float(1 << 32))


def field_sort_part(index: Index, field: str, doc: int, descending: bool) -> SortPart:
    """(class, value) of ``doc`` for one sort key, as ``ranking.sort`` orders it, but comparable
    across shards: class 0/1 = number/string (swapped when descending), 2 = missing; a string
    is ``(folded, raw)``; an array gives its smallest value ascending, its largest descending."""
    columns = index.field_columns(field)
    if columns is None:
        return (2, 0)
    part: SortPart = (2, 0)
    if columns.values is not None:
        docs, value_ids = columns.values.pairs()
        lo, hi = np.searchsorted(docs, doc, side="left"), np.searchsorted(docs, doc, side="right")
        if hi > lo:
            folded = columns.values.folded
            keys = [(folded[value_id], str(columns.values.values[value_id])) for value_id in value_ids[lo:hi].tolist()]
            part = (0 if descending else 1, max(keys) if descending else min(keys))
    if columns.numeric is not None:
        source = columns.numeric.maximum.data if descending else columns.numeric.minimum.data
        if doc < source.size and not math.isnan(float(source[doc])):
            part = (1 if descending else 0, float(source[doc]))
    return part


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

    # ------------------------------------------------------------------ lifecycle

    def ping(self) -> int:
        return os.getpid()

    def close(self) -> None:
        self.engine.close()

    def collections(self) -> list[str]:
        return [entry["collection"] for entry in self.engine.collections()]

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
                    ids = [target.index.docs.record_ids[doc] for doc in docs]
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
        raise ValueError(f"unknown batch operation {payload['op']!r}")

    def _existing(self, collection: str) -> Collection | None:
        try:
            return self.engine._collection(collection)
        except NotFoundError:
            return None

    # ------------------------------------------------------------------ search

    def search(self, request: SearchRequest, body: dict[str, Any], kept_words: int | None) -> dict[str, Any]:
        """The partial answer of this shard (see :func:`roarsearch.cluster.merge.merge_responses`)."""
        target = self._existing(request.collection)
        exists = target is not None
        if target is None:
            target = Collection(request.collection)
        extra: dict[str, Any] = {}

        def inspect(context: SearchContext, ranker: Ranker, response: dict[str, Any]) -> None:
            index = context.index
            extra["kept"] = len(context.words)
            extra["held"] = sorted(held_fields(index))  # warnings are decided over all shards

            def key(result: dict[str, Any]) -> MergeKey:
                record_id = result["id"]
                doc = index.docs.doc_of[record_id]
                parts = [relevance_cost(result["_rank"]) if sort_key.field == "_rank"
                         else field_sort_part(index, sort_key.field, doc, sort_key.descending)
                         for sort_key in request.sort]
                return (parts, relevance_cost(result["_rank"]), record_id)

            if request.group_by is None:
                extra["keys"] = [key(result) for result in response["results"]]
            else:
                extra["keys"] = [[key(result) for result in group["results"]] for group in response["results"]]
            sums = []
            for field in request.numeric_facets:
                columns = index.columns.get(field)
                candidates = context.without_facet_filter(field)
                if columns is None or columns.numeric is None or not candidates:
                    sums.append((0.0, 0))
                    continue
                values, _docs = _candidate_values(columns, candidates, context.masks)
                sums.append((float(values.sum()), int(values.size)))
            extra["sums"] = sums

        with target.lock.reading():
            response = target.search(request, body, kept_words=kept_words, inspect=inspect)
        return {"exists": exists, "response": response, **extra}

    def facet_values(self, request: SearchRequest, facet: str, kept_words: int | None) -> dict[str, Any]:
        """Every value of ``facet`` matching the facet query, as ``(match rank, value, count)``: the
        rank (how closely the value matches, the first order key) depends on the value alone, so
        the driver can sum counts and order exactly as ``facets.value_search`` does."""
        target = self._existing(request.collection)
        if target is None:
            return {"exists": False, "kept": 0, "values": []}
        entries: list[tuple[Any, ...]] = []
        with target.lock.reading():
            with_settings, settings = target._with_settings(request, {})
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
