"""tantivy (Rust, through the ``tantivy`` Python package), used the way its documentation recommends.

- Text fields use a registered analyzer ``fold`` (simple tokenizer, lower case, ASCII folding) so
  matching is case- and accent-insensitive like roarsearch's and FTS5's; BM25 ranking.
- Typos: ``fuzzy_term_query`` per word and field with transpositions costing one (OSA distance),
  distance from :func:`typo_distance`; prefixes: ``regex_query`` ``word.*`` on the term dictionary.
- Keyword fields are ``raw`` fast fields (arrays are multi-valued); numbers are fast indexed fields;
  filters are ``range_query`` / ``term_query`` / ``term_set_query`` clauses of a boolean query.
- Facets: one ``aggregate`` call with ``terms`` (size 100) and ``range`` aggregations.
- Grouping: a ``terms`` aggregation with a ``top_hits`` sub-aggregation (3 per group); aggregations
  see no scores, so groups come largest first and hits inside a group by id, not by relevance.
Built with a 2-thread writer and a 256 MB heap, one commit, merges awaited.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import tantivy

from benchmarks.datasets import Corpus
from benchmarks.peers.base import Adapter, Answer, Unsupported, range_label, typo_distance


class TantivyAdapter(Adapter):
    name = "tantivy"

    def attach(self, corpus: Corpus, directory: str) -> None:
        self.corpus = corpus
        self.directory = directory
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("id", stored=True, indexed=True, fast=True)
        for name in corpus.text_fields:
            builder.add_text_field(name, stored=False, tokenizer_name="fold")
        for name in corpus.keyword_fields:
            builder.add_text_field(name, stored=False, tokenizer_name="raw", fast=True)
        for name in corpus.numeric_fields:
            if name in corpus.float_fields:
                builder.add_float_field(name, stored=False, indexed=True, fast=True)
            else:
                builder.add_integer_field(name, stored=False, indexed=True, fast=True)
        self.schema = builder.build()

    def build(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        self.attach(corpus, directory)
        index = self._index()
        writer = index.writer(heap_size=256_000_000, num_threads=2)
        count = 0
        for batch in batches:
            self._add(writer, batch)
            count += len(batch)
        writer.commit()
        writer.wait_merging_threads()
        return count

    def load(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        self.attach(corpus, directory)
        self.index = self._index()
        self.writer = self.index.writer(heap_size=256_000_000, num_threads=2)
        count = 0
        for batch in batches:
            self._add(self.writer, batch)
            count += len(batch)
        self.writer.commit()  # durable; its merges run on in the writer's threads
        self.index.reload()
        self.searcher = self.index.searcher()
        return count

    def _add(self, writer: Any, batch: list[dict[str, Any]]) -> None:
        corpus = self.corpus
        for record in batch:
            fields: dict[str, Any] = {"id": record["id"]}
            for name in (*corpus.text_fields, *corpus.keyword_fields):
                if name in record:
                    fields[name] = record[name]
            for name in corpus.numeric_fields:
                if name in record:
                    fields[name] = float(record[name]) if name in corpus.float_fields else int(record[name])
            writer.add_document(tantivy.Document(**fields))

    def add_live(self, batch: list[dict[str, Any]]) -> None:
        """Each batch committed (durable) and the reader reloaded, so the searches that follow see it."""
        if getattr(self, "writer", None) is None:
            self.writer = self.index.writer(heap_size=256_000_000, num_threads=2)
        self._add(self.writer, batch)
        self.writer.commit()
        self.index.reload()
        self.searcher = self.index.searcher()

    def close(self) -> None:
        self.writer = None

    def _index(self) -> tantivy.Index:
        index = tantivy.Index(self.schema, path=self.directory)
        analyzer = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
                    .filter(tantivy.Filter.lowercase()).filter(tantivy.Filter.ascii_fold()).build())
        index.register_tokenizer("fold", analyzer)
        return index

    def open(self) -> None:
        self.index = self._index()
        self.index.reload()
        self.searcher = self.index.searcher()

    def _query(self, entry: dict[str, Any]) -> Any:
        occur = tantivy.Occur
        clauses = []
        for word in entry["words"]:
            per_field = []
            for name in self.corpus.text_fields:
                if entry["typos"]:
                    per_field.append(tantivy.Query.fuzzy_term_query(
                        self.schema, name, word, distance=typo_distance(word, entry["typos"]),
                        transposition_cost_one=True, prefix=False))
                elif entry["prefix"]:
                    per_field.append(tantivy.Query.regex_query(self.schema, name, re.escape(word) + ".*"))
                else:
                    per_field.append(tantivy.Query.term_query(self.schema, name, word))
            clauses.append((occur.Must, tantivy.Query.boolean_query([(occur.Should, q) for q in per_field])))
        for spec in entry["filters"]:
            name = spec["field"]
            if spec["op"] == "range":
                floating = name in self.corpus.float_fields
                kind = tantivy.FieldType.Float if floating else tantivy.FieldType.Integer
                low = spec["low"] if spec["low"] is not None else (-1e300 if floating else -2**63)
                high = spec["high"] if spec["high"] is not None else (1e300 if floating else 2**63 - 1)
                clauses.append((occur.Must, tantivy.Query.range_query(
                    self.schema, name, kind, float(low) if floating else int(low),
                    float(high) if floating else int(high), include_lower=True,
                    include_upper=spec["high"] is None)))
            elif spec["op"] == "eq":
                clauses.append((occur.Must, tantivy.Query.term_query(self.schema, name, spec["value"])))
            else:
                clauses.append((occur.Must, tantivy.Query.term_set_query(self.schema, name, list(spec["values"]))))
        if not clauses:
            return tantivy.Query.all_query()
        return tantivy.Query.boolean_query(clauses)

    def search(self, kind: str, entry: dict[str, Any]) -> Answer:
        query = self._query(entry)
        # One searcher for the whole answer: the live writer replaces self.searcher after each
        # commit, and a hit's address only means something in the searcher that found it.
        searcher = self.searcher
        if entry["group"]:
            return self._group(entry, query, searcher)
        if entry["sort"]:
            order = tantivy.Order.Desc if entry["sort"]["descending"] else tantivy.Order.Asc
            result = searcher.search(query, limit=entry["count"], offset=entry["skip"], count=True,
                                          order_by_field=entry["sort"]["field"], order=order)
        else:
            result = searcher.search(query, limit=entry["count"], offset=entry["skip"], count=True)
        answer = Answer(result.count, [searcher.doc(address)["id"][0] for _, address in result.hits])
        if entry["facets"]:
            facets = entry["facets"]
            aggregation: dict[str, Any] = {name: {"terms": {"field": name, "size": 100}} for name in facets["text"]}
            # Keyed ranges: tantivy adds buckets for the gaps between requested ranges.
            ranges = [{"key": range_label(low, high),
                       **{key: bound for key, bound in (("from", low), ("to", high)) if bound is not None}}
                      for low, high in facets["ranges"]]
            aggregation["_numeric"] = {"range": {"field": facets["numeric"], "ranges": ranges}}
            aggregation["_stats"] = {"stats": {"field": facets["numeric"]}}
            result_aggregations = searcher.aggregate(query, aggregation)
            for name in facets["text"]:
                answer.facets[name] = {str(bucket["key"]): bucket["doc_count"]
                                       for bucket in result_aggregations[name]["buckets"]}
            buckets = result_aggregations["_numeric"]["buckets"]
            counts = {bucket["key"]: bucket["doc_count"] for bucket in
                      (buckets.values() if isinstance(buckets, dict) else buckets)}
            answer.facets[facets["numeric"]] = {range_label(low, high): counts.get(range_label(low, high), 0)
                                                for low, high in facets["ranges"]}
        return answer

    def _group(self, entry: dict[str, Any], query: Any, searcher: Any) -> Answer:
        name = entry["group"]
        if name in self.corpus.multi_valued:
            raise Unsupported("grouping by an array field is not measured")
        total = searcher.search(query, limit=1, count=True).count
        # Aggregations see no scores: groups come largest first, hits inside a group by id.
        aggregation = {"groups": {"terms": {"field": name, "size": entry["count"]},
                                  "aggs": {"top": {"top_hits": {"size": 3, "sort": [{"id": "asc"}],
                                                                "docvalue_fields": ["id"]}}}}}
        try:
            result = searcher.aggregate(query, aggregation)
        except ValueError as error:
            raise Unsupported(f"terms + top_hits aggregation failed: {error}") from error
        answer = Answer(total, [])
        for bucket in result["groups"]["buckets"]:
            answer.groups[str(bucket["key"])] = bucket["doc_count"]
            answer.ids += [hit["docvalue_fields"]["id"][0] for hit in bucket["top"]["hits"]]
        return answer

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(self.directory, name)) for name in os.listdir(self.directory))
