"""Whoosh (pure Python, ``whoosh-reloaded``): its facets and FuzzyTerm. Slow to build: capped."""

from __future__ import annotations

import os
from typing import Any

from whoosh import fields, index, query, sorting
from whoosh.analysis import StandardAnalyzer

from benchmarks.peers.base import Adapter, Unsupported, Workload

#: Whoosh takes minutes per 100k records; larger collections are not built.
WHOOSH_MAX_RECORDS = 100_000


class WhooshAdapter(Adapter):
    name = "whoosh"

    def build(self, records: list[dict[str, Any]], directory: str) -> None:
        if len(records) > WHOOSH_MAX_RECORDS:
            raise Unsupported(f"not built above {WHOOSH_MAX_RECORDS} records (too slow)")
        self.directory = directory
        schema = fields.Schema(id=fields.NUMERIC(stored=True, unique=True, bits=64),
                               name=fields.TEXT(analyzer=StandardAnalyzer(stoplist=None)),
                               alt=fields.TEXT(analyzer=StandardAnalyzer(stoplist=None)),
                               countryCode=fields.ID(sortable=True), timezone=fields.ID(sortable=True),
                               population=fields.NUMERIC(sortable=True, bits=64))
        self.index = index.create_in(directory, schema)
        writer = self.index.writer(limitmb=256, procs=1)
        for record in records:
            writer.add_document(id=record["id"], name=record["name"], alt=" ".join(record.get("alternateNames", [])),
                                countryCode=record.get("countryCode", ""), timezone=record.get("timezone", ""),
                                population=int(record.get("population", 0)))
        writer.commit()
        self.searcher = self.index.searcher()

    def search(self, kind: str, workload: Workload) -> tuple[int, list[Any]]:
        if workload.group:
            raise Unsupported("no grouped top hits")
        clauses: list[Any] = []
        for position, word in enumerate(workload.words):
            last = position == len(workload.words) - 1
            if workload.typos:
                distance = 2 if len(word) >= 8 and workload.typos > 1 else 1
                per_field = [query.FuzzyTerm(f, word, maxdist=distance) for f in ("name", "alt")]
            elif workload.prefix and last:
                per_field = [query.Prefix(f, word) for f in ("name", "alt")]
            else:
                per_field = [query.Term(f, word) for f in ("name", "alt")]
            clauses.append(query.Or(per_field))
        if workload.population_range:
            low, high = workload.population_range
            clauses.append(query.NumericRange("population", low, high - 1))
        if workload.country:
            clauses.append(query.Term("countryCode", workload.country))
        if workload.countries:
            clauses.append(query.Or([query.Term("countryCode", c) for c in workload.countries]))
        combined = query.And(clauses) if clauses else query.Every()
        facets = [sorting.FieldFacet("countryCode"), sorting.FieldFacet("timezone")] if workload.facets else None
        sortedby = sorting.FieldFacet("population", reverse=True) if workload.sort_population_desc else None
        page = self.searcher.search(combined, limit=workload.skip + workload.count, sortedby=sortedby, groupedby=facets)
        ids = [hit["id"] for hit in page[workload.skip:workload.skip + workload.count]]
        return len(page), ids

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(self.directory, name)) for name in os.listdir(self.directory))
