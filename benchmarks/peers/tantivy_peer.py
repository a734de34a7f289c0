"""tantivy (Rust, via the ``tantivy`` package): fuzzy term queries for typos, its aggregations for facets."""

from __future__ import annotations

import json
import os
from typing import Any

import tantivy

from benchmarks.peers.base import Adapter, Unsupported, Workload


class TantivyAdapter(Adapter):
    name = "tantivy"

    def build(self, records: list[dict[str, Any]], directory: str) -> None:
        self.directory = directory
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        builder.add_text_field("name", stored=False)
        builder.add_text_field("alt", stored=False)
        builder.add_text_field("countryCode", stored=False, tokenizer_name="raw", fast=True)
        builder.add_text_field("timezone", stored=False, tokenizer_name="raw", fast=True)
        builder.add_integer_field("population", stored=False, indexed=True, fast=True)
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=directory)
        writer = self.index.writer(heap_size=256_000_000, num_threads=2)
        for record in records:
            writer.add_document(tantivy.Document(
                id=record["id"], name=record["name"], alt=" ".join(record.get("alternateNames", [])),
                countryCode=record.get("countryCode", ""), timezone=record.get("timezone", ""),
                population=int(record.get("population", 0))))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def _query(self, workload: Workload) -> Any:
        Occur = tantivy.Occur
        clauses = []
        for index, word in enumerate(workload.words):
            last = index == len(workload.words) - 1
            per_field = []
            for field in ("name", "alt"):
                if workload.typos:
                    distance = 2 if len(word) >= 8 and workload.typos > 1 else (1 if len(word) >= 4 else 0)
                    per_field.append(tantivy.Query.fuzzy_term_query(self.schema, field, word, distance=distance,
                                                                    transposition_cost_one=True, prefix=workload.prefix and last))
                elif workload.prefix and last:
                    per_field.append(tantivy.Query.regex_query(self.schema, field, word + ".*"))
                else:
                    per_field.append(tantivy.Query.term_query(self.schema, field, word))
            clauses.append((Occur.Must, tantivy.Query.boolean_query([(Occur.Should, q) for q in per_field])))
        if workload.population_range:
            low, high = workload.population_range
            clauses.append((Occur.Must, tantivy.Query.range_query(self.schema, "population", tantivy.FieldType.Integer, low, high - 1)))
        if workload.country:
            clauses.append((Occur.Must, tantivy.Query.term_query(self.schema, "countryCode", workload.country)))
        if workload.countries:
            clauses.append((Occur.Must, tantivy.Query.term_set_query(self.schema, "countryCode", list(workload.countries))))
        if not clauses:
            return tantivy.Query.all_query()
        return tantivy.Query.boolean_query(clauses)

    def search(self, kind: str, workload: Workload) -> tuple[int, list[Any]]:
        if workload.group:
            raise Unsupported("terms + top_hits dropped hits inside groups (ANCHORS); not measured as grouping")
        query = self._query(workload)
        if workload.sort_population_desc:
            result = self.searcher.search(query, limit=workload.count, offset=workload.skip, count=True,
                                          order_by_field="population", order=tantivy.Order.Desc)
        else:
            result = self.searcher.search(query, limit=workload.count, offset=workload.skip, count=True)
        if workload.facets:
            aggregation = {"country": {"terms": {"field": "countryCode", "size": 100}},
                           "timezone": {"terms": {"field": "timezone", "size": 100}},
                           "population": {"range": {"field": "population", "ranges": [
                               {"to": 10000}, {"from": 10000, "to": 100000}, {"from": 100000}]}},
                           "stats": {"stats": {"field": "population"}}}
            self.searcher.aggregate(query, aggregation)
        ids = [self.searcher.doc(address)["id"][0] for _, address in result.hits]
        return result.count, ids

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(self.directory, name)) for name in os.listdir(self.directory))


__all__ = ["TantivyAdapter", "json"]
