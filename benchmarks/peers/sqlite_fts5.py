"""SQLite FTS5 (standard library): bm25() ranking, filters in SQL, facets by GROUP BY over the match set."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from benchmarks.peers.base import Adapter, Unsupported, Workload


class SqliteFts5Adapter(Adapter):
    name = "sqlite-fts5"

    def build(self, records: list[dict[str, Any]], directory: str) -> None:
        self.path = os.path.join(directory, "places.db")
        self.db = sqlite3.connect(self.path, check_same_thread=False)
        self.db.executescript("""
            PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;
            CREATE TABLE places(id INTEGER PRIMARY KEY, name TEXT, alt TEXT, countryCode TEXT, timezone TEXT, population INTEGER);
            CREATE VIRTUAL TABLE places_fts USING fts5(name, alt, content='places', content_rowid='id',
                                                       tokenize='unicode61 remove_diacritics 2');
            CREATE INDEX places_country ON places(countryCode);
            CREATE INDEX places_population ON places(population);
        """)
        rows = [(r["id"], r["name"], " ".join(r.get("alternateNames", [])), r.get("countryCode"), r.get("timezone"),
                 r.get("population", 0)) for r in records]
        with self.db:
            self.db.executemany("INSERT INTO places VALUES (?,?,?,?,?,?)", rows)
            self.db.execute("INSERT INTO places_fts(places_fts) VALUES ('rebuild')")

    def _match(self, workload: Workload) -> str:
        terms = []
        for index, word in enumerate(workload.words):
            token = '"' + word.replace('"', '""') + '"'
            if workload.prefix and index == len(workload.words) - 1:
                token += "*"
            terms.append(token)
        return " AND ".join(terms)

    def search(self, kind: str, workload: Workload) -> tuple[int, list[Any]]:
        if workload.typos:
            raise Unsupported("FTS5 has no typo tolerance")
        if workload.group:
            raise Unsupported("no grouped top hits")
        where, params = [], []
        if workload.words:
            where.append("p.id IN (SELECT rowid FROM places_fts WHERE places_fts MATCH ?)")
            params.append(self._match(workload))
        if workload.population_range:
            where.append("p.population >= ? AND p.population < ?")
            params += list(workload.population_range)
        if workload.country:
            where.append("p.countryCode = ?")
            params.append(workload.country)
        if workload.countries:
            where.append(f"p.countryCode IN ({','.join('?' * len(workload.countries))})")
            params += list(workload.countries)
        clause = ("WHERE " + " AND ".join(where)) if where else ""
        total = self.db.execute(f"SELECT count(*) FROM places p {clause}", params).fetchone()[0]
        if workload.words and not workload.sort_population_desc:
            # bm25 ranking over the match set, filters applied in the same query
            match = self._match(workload)
            extra = (" AND " + " AND ".join(where[1:])) if len(where) > 1 else ""
            sql = (f"SELECT p.id FROM places_fts f JOIN places p ON p.id = f.rowid WHERE places_fts MATCH ?{extra} "
                   "ORDER BY bm25(places_fts) LIMIT ? OFFSET ?")
            ids = [row[0] for row in self.db.execute(sql, [match, *params[1:], workload.count, workload.skip])]
        else:
            order = "ORDER BY p.population DESC" if workload.sort_population_desc else "ORDER BY p.id"
            ids = [row[0] for row in self.db.execute(
                f"SELECT p.id FROM places p {clause} {order} LIMIT ? OFFSET ?", [*params, workload.count, workload.skip])]
        if workload.facets:
            for column in ("countryCode", "timezone"):
                self.db.execute(f"SELECT {column}, count(*) c FROM places p {clause} GROUP BY {column} ORDER BY c DESC LIMIT 100",
                                params).fetchall()
            self.db.execute(f"SELECT min(population), max(population), avg(population), "
                            f"sum(population < 10000), sum(population >= 10000 AND population < 100000), "
                            f"sum(population >= 100000) FROM places p {clause}", params).fetchone()
        return total, ids

    def size_bytes(self) -> int:
        return sum(os.path.getsize(self.path + suffix) for suffix in ("", "-wal") if os.path.exists(self.path + suffix))
