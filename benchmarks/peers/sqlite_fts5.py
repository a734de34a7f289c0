"""SQLite FTS5 (standard library ``sqlite3``), used the way its documentation recommends.

- Text: one FTS5 table over the text fields (``unicode61 remove_diacritics 2``: case and accent
  folding), rowid = record id; ranking by ``bm25()``; a prefix is ``"word"*``.
- Values: a ``docs`` table with one column per single-valued keyword and numeric field (indexed),
  and a ``vals(field, value, id)`` table for array fields; filters are SQL in the same statement.
- Facets: ``GROUP BY`` over the match set; numeric ranges with ``sum(CASE ...)`` in one pass.
- Grouping: ``row_number() OVER (PARTITION BY value ORDER BY bm25)`` keeps 3 per group; group
  sizes by ``GROUP BY``.
- Typos: FTS5 has no fuzzy matching (the spellfix1 extension is not in the standard library) →
  unsupported.
Built in one transaction, secondary indexes created after the load.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from typing import Any

from benchmarks.datasets import Corpus
from benchmarks.peers.base import Adapter, Answer, Unsupported, range_label


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class SqliteFts5Adapter(Adapter):
    name = "sqlite-fts5"
    ties_by_id = True

    def attach(self, corpus: Corpus, directory: str) -> None:
        self.corpus = corpus
        self.path = os.path.join(directory, f"{corpus.name}.db")
        self.single = [f for f in corpus.keyword_fields if f not in corpus.multi_valued] + list(corpus.numeric_fields)

    def build(self, corpus: Corpus, batches: Iterable[list[dict[str, Any]]], directory: str) -> int:
        self.attach(corpus, directory)
        db = sqlite3.connect(self.path)
        columns = ", ".join(_quote(f) for f in self.single)
        text_columns = ", ".join(_quote(f) for f in corpus.text_fields)
        db.executescript(f"""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
            CREATE TABLE docs(id INTEGER PRIMARY KEY, {columns});
            CREATE TABLE vals(field TEXT NOT NULL, value TEXT NOT NULL, id INTEGER NOT NULL);
            CREATE VIRTUAL TABLE fts USING fts5({text_columns}, tokenize='unicode61 remove_diacritics 2');
        """)
        count = 0
        marks = ",".join("?" * (len(self.single) + 1))
        text_marks = ",".join("?" * (len(corpus.text_fields) + 1))
        with db:
            for batch in batches:
                db.executemany(f"INSERT INTO docs VALUES ({marks})",
                               [(r["id"], *(r.get(f) for f in self.single)) for r in batch])
                db.executemany(f"INSERT INTO fts(rowid, {text_columns}) VALUES ({text_marks})",
                               [(r["id"], *(self._text(r.get(f)) for f in corpus.text_fields)) for r in batch])
                db.executemany("INSERT INTO vals VALUES (?,?,?)",
                               [(f, value, r["id"]) for r in batch for f in corpus.multi_valued
                                for value in sorted(set(r.get(f, [])))])
                count += len(batch)
        with db:
            for f in self.single:
                db.execute(f"CREATE INDEX docs_{f} ON docs({_quote(f)})")
            db.execute("CREATE INDEX vals_field_value ON vals(field, value, id)")
            db.execute("CREATE INDEX vals_id ON vals(id, field)")
            db.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        return count

    @staticmethod
    def _text(value: Any) -> str | None:
        if isinstance(value, list):
            return " \n ".join(value)
        return value

    def open(self) -> None:
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        self.live: sqlite3.Connection | None = None

    def add_live(self, batch: list[dict[str, Any]]) -> None:
        """One transaction per batch, on the writer thread's own connection (WAL: searches on the
        other connection go on, and see each batch once it is committed)."""
        if self.live is None:
            self.live = sqlite3.connect(self.path, check_same_thread=False)
            self.live.execute("PRAGMA synchronous=NORMAL")
        self._insert(self.live, batch)

    def _insert(self, db: sqlite3.Connection, batch: list[dict[str, Any]]) -> None:
        corpus = self.corpus
        text_columns = ", ".join(_quote(f) for f in corpus.text_fields)
        marks = ",".join("?" * (len(self.single) + 1))
        text_marks = ",".join("?" * (len(corpus.text_fields) + 1))
        with db:
            db.executemany(f"INSERT INTO docs VALUES ({marks})",
                           [(r["id"], *(r.get(f) for f in self.single)) for r in batch])
            db.executemany(f"INSERT INTO fts(rowid, {text_columns}) VALUES ({text_marks})",
                           [(r["id"], *(self._text(r.get(f)) for f in corpus.text_fields)) for r in batch])
            db.executemany("INSERT INTO vals VALUES (?,?,?)",
                           [(f, value, r["id"]) for r in batch for f in corpus.multi_valued
                            for value in sorted(set(r.get(f, [])))])

    def close(self) -> None:
        if getattr(self, "live", None) is not None:
            self.live.close()
        self.db.close()

    def _match(self, entry: dict[str, Any]) -> str:
        terms = []
        for word in entry["words"]:
            terms.append('"' + word.replace('"', '""') + '"' + ("*" if entry["prefix"] else ""))
        return " AND ".join(terms)

    def _filters(self, entry: dict[str, Any]) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        params: list[Any] = []
        for spec in entry["filters"]:
            name = spec["field"]
            if spec["op"] == "range":
                if spec["low"] is not None:
                    where.append(f"d.{_quote(name)} >= ?")
                    params.append(spec["low"])
                if spec["high"] is not None:
                    where.append(f"d.{_quote(name)} < ?")
                    params.append(spec["high"])
                continue
            values = [spec["value"]] if spec["op"] == "eq" else list(spec["values"])
            marks = ",".join("?" * len(values))
            if name in self.corpus.multi_valued:
                where.append(f"d.id IN (SELECT id FROM vals WHERE field = ? AND value IN ({marks}))")
                params += [name, *values]
            else:
                where.append(f"d.{_quote(name)} IN ({marks})")
                params += values
        return where, params

    def search(self, kind: str, entry: dict[str, Any]) -> Answer:
        if entry["typos"]:
            raise Unsupported("FTS5 has no typo tolerance")
        where, params = self._filters(entry)
        if entry["words"]:
            source = "fts JOIN docs d ON d.id = fts.rowid"
            where.insert(0, "fts MATCH ?")
            params.insert(0, self._match(entry))
            relevance = "bm25(fts)"
        else:
            source, relevance = "docs d", "d.id"
        clause = ("WHERE " + " AND ".join(where)) if where else ""
        total = self.db.execute(f"SELECT count(*) FROM {source} {clause}", params).fetchone()[0]
        if entry["sort"]:
            order = f"d.{_quote(entry['sort']['field'])} {'DESC' if entry['sort']['descending'] else 'ASC'}, {relevance}, d.id"
        else:
            order = f"{relevance}, d.id"
        answer = Answer(total, [])
        if entry["group"]:
            self._group(entry, source, clause, params, relevance, answer)
            return answer
        answer.ids = [row[0] for row in self.db.execute(
            f"SELECT d.id FROM {source} {clause} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, entry["count"], entry["skip"]])]
        if entry["facets"]:
            self._facets(entry["facets"], source, clause, params, answer)
        return answer

    def _facets(self, facets: dict[str, Any], source: str, clause: str, params: list[Any], answer: Answer) -> None:
        matches = f"SELECT d.id AS id FROM {source} {clause}"
        for name in facets["text"]:
            if name in self.corpus.multi_valued:
                sql = (f"WITH m AS MATERIALIZED ({matches}) SELECT v.value, count(*) c FROM m JOIN vals v ON v.id = m.id "
                       f"AND v.field = ? GROUP BY v.value ORDER BY c DESC, v.value LIMIT 100")
                rows = self.db.execute(sql, [*params, name]).fetchall()
            else:
                sql = (f"SELECT d.{_quote(name)} v, count(*) c FROM {source} {clause} "
                       f"{'AND' if clause else 'WHERE'} d.{_quote(name)} IS NOT NULL GROUP BY v ORDER BY c DESC, v LIMIT 100")
                rows = self.db.execute(sql, params).fetchall()
            answer.facets[name] = {str(value): count for value, count in rows}
        column = f"d.{_quote(facets['numeric'])}"
        cases = []
        for low, high in facets["ranges"]:
            bounds = [f"{column} >= {low}" if low is not None else f"{column} IS NOT NULL"]
            if high is not None:
                bounds.append(f"{column} < {high}")
            cases.append(f"sum(CASE WHEN {' AND '.join(bounds)} THEN 1 ELSE 0 END)")
        row = self.db.execute(f"SELECT min({column}), max({column}), avg({column}), count({column}), "
                              f"{', '.join(cases)} FROM {source} {clause}", params).fetchone()
        answer.facets[facets["numeric"]] = {range_label(low, high): count or 0
                                            for (low, high), count in zip(facets["ranges"], row[4:])}

    def _group(self, entry: dict[str, Any], source: str, clause: str, params: list[Any], relevance: str,
               answer: Answer) -> None:
        name = entry["group"]
        if name in self.corpus.multi_valued:
            raise Unsupported("grouping by an array field is not measured")
        # bm25() is only allowed in the row context of the MATCH: materialise it, then window over it.
        sql = (f"WITH m AS MATERIALIZED (SELECT d.{_quote(name)} AS g, d.id AS id, {relevance} AS score "
               f"FROM {source} {clause}), "
               "r AS (SELECT g, id, score, row_number() OVER (PARTITION BY g ORDER BY score, id) AS rn, "
               "count(*) OVER (PARTITION BY g) AS n, min(score) OVER (PARTITION BY g) AS best "
               "FROM m WHERE g IS NOT NULL) "
               "SELECT g, id, n FROM r WHERE rn <= 3 ORDER BY best, g, rn")
        for value, doc, size in self.db.execute(sql, params):
            key = str(value)
            if key not in answer.groups:
                if len(answer.groups) == entry["count"]:
                    break
                answer.groups[key] = size
            answer.ids.append(doc)

    def size_bytes(self) -> int:
        return sum(os.path.getsize(self.path + suffix) for suffix in ("", "-wal") if os.path.exists(self.path + suffix))
