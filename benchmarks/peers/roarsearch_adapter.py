"""roarsearch through its public API (CONTRACT §1–§4): a durable ``Engine(path)``, built in batches
of 10,000, closed (snapshot written) and reopened, so disk size and search figures are those of a
collection a user reopens.

A request that roarsearch answers with a 400 saying a feature is not there yet becomes
:class:`Unsupported` ("not yet supported"), never a made-up answer.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from benchmarks.datasets import Corpus
from benchmarks.peers.base import Adapter, Answer, Unsupported, range_label
from roarsearch import Engine
from roarsearch.errors import BadRequestError


def _literal(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def filter_expression(filters: list[dict[str, Any]]) -> str:
    """Workload filters in the contract's filter language, joined with AND."""
    parts = []
    for spec in filters:
        name = spec["field"]
        if spec["op"] == "range":
            bounds = []
            if spec["low"] is not None:
                bounds.append(f"{name} >= {_literal(spec['low'])}")
            if spec["high"] is not None:
                bounds.append(f"{name} < {_literal(spec['high'])}")
            parts.append(" AND ".join(bounds))
        elif spec["op"] == "eq":
            parts.append(f"{name} = {_literal(spec['value'])}")
        else:
            parts.append(f"{name} IN [" + ", ".join(_literal(value) for value in spec["values"]) + "]")
    return " AND ".join(parts)


class RoarsearchAdapter(Adapter):
    name = "roarsearch"
    ties_by_id = True

    def attach(self, corpus: Corpus, directory: str) -> None:
        self.corpus = corpus
        self.directory = directory

    def build(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        self.attach(corpus, directory)
        with Engine(directory) as engine:
            # The bulk path: each batch durable and all-or-nothing as add_records makes it, the
            # next one analysed meanwhile in the analysis worker process (the other core).
            added: int = engine.add_batches(corpus.name, batches)["records"]
        return added

    def load(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        self.attach(corpus, directory)
        self.engine = Engine(directory)  # kept open: its merges run on while searches come
        added: int = self.engine.add_batches(corpus.name, batches)["records"]
        return added

    def open(self) -> None:
        self.engine = Engine(self.directory)

    def add_live(self, batch: list[dict[str, Any]]) -> None:
        self.engine.add_records(self.corpus.name, batch)

    def close(self) -> None:
        self.engine.close()

    def request(self, entry: dict[str, Any]) -> dict[str, Any]:
        words = " ".join(entry["words"])
        if words and not entry["prefix"]:
            words += " "  # a trailing space ends the last word: no search-as-you-type prefix
        body: dict[str, Any] = {"collection": self.corpus.name, "query": words,
                                "searchFields": list(self.corpus.text_fields), "typoTolerance": entry["typos"],
                                "count": entry["count"], "skip": entry["skip"], "fields": ["id"]}
        if entry["filters"]:
            body["filter"] = filter_expression(entry["filters"])
        if entry["sort"]:
            body["sort"] = [("-" if entry["sort"]["descending"] else "") + entry["sort"]["field"]]
        if entry["facets"]:
            facets = entry["facets"]
            body["textFacets"] = facets["text"]
            body["numericFacets"] = {facets["numeric"]: [range_label(low, high) for low, high in facets["ranges"]]}
        if entry["group"]:
            body["groupBy"] = entry["group"]
            body["groupLimit"] = 3
        return body

    def search(self, kind: str, entry: dict[str, Any]) -> Answer:
        try:
            response = self.engine.search(self.request(entry))
        except BadRequestError as error:
            message = str(error.data if hasattr(error, "data") else error)
            if "not" in message.lower() and ("implemented" in message.lower() or "yet" in message.lower()):
                raise Unsupported(f"not yet supported: {message}") from error
            raise
        answer = Answer(response["totalHits"], [])
        if entry["group"]:
            answer.groups = {str(group["value"]): group["totalHits"] for group in response["results"]}
            answer.ids = [hit["id"] for group in response["results"] for hit in group["results"]]
        else:
            answer.ids = [hit["id"] for hit in response["results"]]
        for facet in response.get("textFacets", []):
            answer.facets[facet["field"]] = {str(item["value"]): item["count"] for item in facet["values"]}
        for facet in response.get("numericFacets", []):
            answer.facets[facet["field"]] = {item["range"]: item["count"] for item in facet["ranges"]}
        return answer

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(root, name))
                   for root, _, names in os.walk(self.directory) for name in names)
