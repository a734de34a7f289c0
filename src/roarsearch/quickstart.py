"""``python -m roarsearch.quickstart [QUERY]``: index the bundled movies data set and search it.

What a new user runs first: it loads the 17,472 films that the ``bokeh-sampledata`` package ships
(see :mod:`roarsearch.datasets`) into an in-memory engine, reports how fast that went, and prints
the best matches for a few queries (or for the one given), typos included.
"""

from __future__ import annotations

import sys
import time

from roarsearch.datasets import load_movies
from roarsearch.engine.engine import Engine

DEFAULT_QUERIES = ["star wars", "godfathr", "tom hanks", "spirited awy"]


def main(argv: list[str] | None = None) -> int:
    queries = (argv if argv is not None else sys.argv[1:]) or DEFAULT_QUERIES
    records = load_movies()
    engine = Engine()
    started = time.perf_counter()
    for start in range(0, len(records), 10_000):
        engine.add_records("movies", records[start:start + 10_000])
    elapsed = time.perf_counter() - started
    print(f"indexed {len(records):,} movies from bokeh-sampledata in {elapsed:.2f} s "
          f"({len(records) / elapsed:,.0f} records/s)\n")
    for query in queries:
        response = engine.search({
            "collection": "movies", "query": query, "count": 5,
            "searchFields": ["title", "cast", "director"], "textFacets": [],
        })
        print(f"{query!r}: {response['totalHits']} hits in {response['responseTime']} ms")
        for result in response["results"]:
            cast = ", ".join(result.get("cast", [])[:3])
            print(f"  {result.get('year', '?')}  {result['title']}  — {cast}")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
