"""Whoosh (pure Python, ``whoosh-reloaded``), used the way its documentation recommends.

- Text fields: ``RegexTokenizer`` on runs of letters and digits, lower case, ``CharsetFilter``
  with Whoosh's ``accent_map`` (case- and accent-insensitive like the others); BM25F ranking.
- Typos: ``FuzzyTerm`` with its default ``prefixlength=1`` (the first letter must be right — the
  documented way to keep it usable); prefixes: ``Prefix``.
- Keyword fields: ``ID`` (sortable) or comma-separated ``KEYWORD`` for arrays; numbers:
  ``NUMERIC`` (sortable); filters are ``NumericRange`` / ``Term`` queries passed as ``filter=``.
- Facets: ``groupedby`` with ``FieldFacet``s and a ``QueryFacet`` of ``NumericRange``s, counted
  (``maptype=Count``). Grouping: ``groupedby`` a ``FieldFacet`` (documents per group in result order).
It builds at 1,000-3,000 records/s: collections above ``WHOOSH_MAX_RECORDS`` are not built.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from whoosh import fields, index, query, sorting
from whoosh.analysis import CharsetFilter, LowercaseFilter, RegexTokenizer
from whoosh.support.charset import accent_map

from benchmarks.datasets import Corpus
from benchmarks.peers.base import Adapter, Answer, Unsupported, range_label, typo_distance

#: Whoosh takes about a minute per 100k records; larger collections are not built.
WHOOSH_MAX_RECORDS = 100_000


class WhooshAdapter(Adapter):
    name = "whoosh"
    ties_by_id = False
    max_records = WHOOSH_MAX_RECORDS

    def attach(self, corpus: Corpus, directory: str) -> None:
        self.corpus = corpus
        self.directory = directory

    def build(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        self.attach(corpus, directory)
        analyzer = RegexTokenizer(r"[^\W_]+") | LowercaseFilter() | CharsetFilter(accent_map)
        schema: dict[str, Any] = {"id": fields.NUMERIC(stored=True, unique=True, bits=64, sortable=True)}
        for name in corpus.text_fields:
            schema[name] = fields.TEXT(analyzer=analyzer)
        for name in corpus.keyword_fields:
            schema[name] = (fields.KEYWORD(commas=True, lowercase=False) if name in corpus.multi_valued
                            else fields.ID(sortable=True))
        for name in corpus.numeric_fields:
            # Whoosh's float columns fail to write (struct error): floats are indexed, not sortable.
            floating = name in corpus.float_fields
            schema[name] = fields.NUMERIC(float if floating else int, bits=64, sortable=not floating)
        built = index.create_in(directory, fields.Schema(**schema))
        writer = built.writer(limitmb=256, procs=1)
        count = 0
        for batch in batches:
            count += len(batch)
            if count > WHOOSH_MAX_RECORDS:
                writer.cancel()
                raise Unsupported(f"not built above {WHOOSH_MAX_RECORDS:,} records (about a minute per 100k)")
            for record in batch:
                document: dict[str, Any] = {"id": record["id"]}
                for name in corpus.text_fields:
                    value = record.get(name)
                    if value:
                        document[name] = " \n ".join(value) if isinstance(value, list) else value
                for name in corpus.keyword_fields:
                    value = record.get(name)
                    if value:
                        document[name] = ",".join(value) if isinstance(value, list) else value
                for name in corpus.numeric_fields:
                    if name in record:
                        document[name] = record[name]
                writer.add_document(**document)
        writer.commit()
        return count

    def open(self) -> None:
        self.searcher = index.open_dir(self.directory).searcher()

    def close(self) -> None:
        self.searcher.close()

    def _query(self, entry: dict[str, Any]) -> tuple[Any, Any]:
        """(words query, filter query or None). Filters go to ``search(filter=...)``, Whoosh's
        documented way — an ``And`` of a term and a ``NumericRange`` also loses records here (movies,
        "james" AND year in [1990, 2000): 313 instead of 397)."""
        clauses: list[Any] = []
        for word in entry["words"]:
            if entry["typos"]:
                distance = typo_distance(word, entry["typos"])
                per_field = [query.FuzzyTerm(name, word, maxdist=distance) if distance else query.Term(name, word)
                             for name in self.corpus.text_fields]
            elif entry["prefix"]:
                per_field = [query.Prefix(name, word) for name in self.corpus.text_fields]
            else:
                per_field = [query.Term(name, word) for name in self.corpus.text_fields]
            clauses.append(query.Or(per_field))
        filters: list[Any] = []
        for spec in entry["filters"]:
            name = spec["field"]
            if spec["op"] == "range":
                filters.append(query.NumericRange(name, spec["low"], spec["high"], endexcl=spec["high"] is not None))
            elif spec["op"] == "eq":
                filters.append(query.Term(name, spec["value"]))
            else:
                filters.append(query.Or([query.Term(name, value) for value in spec["values"]]))
        words = query.And(clauses) if clauses else query.Every()
        return words, (query.And(filters) if filters else None)

    def search(self, kind: str, entry: dict[str, Any]) -> Answer:
        combined, restrict = self._query(entry)
        sortedby = (sorting.FieldFacet(entry["sort"]["field"], reverse=entry["sort"]["descending"])
                    if entry["sort"] else None)
        if entry["group"]:
            name = entry["group"]
            if name in self.corpus.multi_valued:
                raise Unsupported("grouping by an array field is not measured")
            results = self.searcher.search(combined, limit=None, filter=restrict,
                                           groupedby={"g": sorting.FieldFacet(name)})
            groups = results.groups("g")
            answer = Answer(len(results), [])
            position = {docnum: rank for rank, (_, docnum) in enumerate(results.top_n)}
            best = sorted((value for value in groups if value is not None and value != ""),
                          key=lambda value: position[groups[value][0]])[: entry["count"]]
            for value in best:
                answer.groups[str(value)] = len(groups[value])
                answer.ids += [self.searcher.stored_fields(doc)["id"] for doc in groups[value][:3]]
            return answer
        facets = None
        if entry["facets"]:
            spec = entry["facets"]
            facets = sorting.Facets()
            for name in spec["text"]:
                facets.add_field(name, allow_overlap=name in self.corpus.multi_valued)
            facets.add_facet(spec["numeric"], sorting.QueryFacet(
                {range_label(low, high): query.NumericRange(spec["numeric"], low, high, endexcl=high is not None)
                 for low, high in spec["ranges"]}))
        results = self.searcher.search(combined, limit=entry["skip"] + entry["count"], sortedby=sortedby,
                                       filter=restrict, groupedby=facets, maptype=sorting.Count)
        answer = Answer(len(results), [hit["id"] for hit in results[entry["skip"]:entry["skip"] + entry["count"]]])
        if entry["facets"]:
            spec = entry["facets"]
            for name in [*spec["text"], spec["numeric"]]:
                answer.facets[name] = {str(value): count for value, count in results.groups(name).items()
                                       if value is not None and value != ""}
        return answer

    def size_bytes(self) -> int:
        return sum(os.path.getsize(os.path.join(self.directory, name)) for name in os.listdir(self.directory))
