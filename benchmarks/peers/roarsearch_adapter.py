"""roarsearch through its public API (in memory for latency; on disk for size)."""

from __future__ import annotations

import os
from typing import Any

from benchmarks.peers.base import Adapter, Workload
from roarsearch import Engine


class RoarsearchAdapter(Adapter):
    name = "roarsearch"

    def build(self, records: list[dict[str, Any]], directory: str) -> None:
        self.directory = directory
        self.engine = Engine(directory)
        for start in range(0, len(records), 10_000):
            self.engine.add_records("places", records[start:start + 10_000])
        self.engine.close()  # snapshot: what a user reopens
        self.engine = Engine(directory)

    def search(self, kind: str, workload: Workload) -> tuple[int, list[Any]]:
        words = list(workload.words)
        body: dict[str, Any] = {"collection": "places", "query": " ".join(words), "searchFields": ["name", "alternateNames"],
                                "typoTolerance": 2 if workload.typos else 0, "count": workload.count,
                                "skip": workload.skip, "fields": ["name"]}
        if not workload.prefix and words and not workload.typos:
            body["query"] += " "  # a trailing space: the last word is complete (no prefix expansion)
        filters = []
        if workload.population_range:
            low, high = workload.population_range
            filters.append(f"population >= {low} AND population < {high}")
        if workload.country:
            filters.append(f'countryCode = "{workload.country}"')
        if workload.countries:
            filters.append("countryCode IN [" + ", ".join(f'"{c}"' for c in workload.countries) + "]")
        if filters:
            body["filter"] = " AND ".join(filters)
        if workload.sort_population_desc:
            body["sort"] = ["-population"]
        if workload.facets:
            body["textFacets"] = ["countryCode", "timezone"]
            body["numericFacets"] = {"population": ["[0,10000)", "[10000,100000)", "[100000,)"]}
        if workload.group:
            body["groupBy"] = "countryCode"
            body["groupLimit"] = 3
        response = self.engine.search(body)
        if workload.group:
            return response["totalHits"], [g["value"] for g in response["results"]]
        return response["totalHits"], [r["id"] for r in response["results"]]

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(root, name))
                   for root, _, names in os.walk(self.directory) for name in names)
