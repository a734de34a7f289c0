"""``roarsearch demo``: the bundled movies, indexed into a local data directory, behind the search page.

Owns the first minute of a new user: load the 17,472 films that the ``bokeh-sampledata`` PyPI
package ships (see :mod:`roarsearch.datasets`) into ``DATA/default`` with a progress bar — or reuse
them when an earlier run already did — then serve the HTTP API and the search page on 127.0.0.1
with a generated admin key and a generated search-only key, and print the address to open.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time

COLLECTION = "movies"
BATCH = 2_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", default="./roarsearch-data", help="data directory (default: %(default)s)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7700)
    parser.add_argument("--no-serve", action="store_true", help="load the data set and exit")


def load(data: str) -> int:
    """Index the movies unless the data directory already holds them; returns the record count."""
    from roarsearch import Engine
    from roarsearch.datasets import load_movies

    with Engine(os.path.join(data, "default")) as engine:
        if COLLECTION in engine.collections():
            count = engine.search({"collection": COLLECTION, "count": 0})["totalHits"]
            if count:
                print(f"reusing {count:,} movies already in {data}")
                return int(count)
        records = load_movies()
        progress = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            progress = tqdm(total=len(records), unit=" movies", file=sys.stderr)
        started = time.perf_counter()
        for start in range(0, len(records), BATCH):
            engine.add_records(COLLECTION, records[start:start + BATCH])
            if progress is not None:
                progress.update(min(BATCH, len(records) - start))
        if progress is not None:
            progress.close()
        print(f"indexed {len(records):,} movies from bokeh-sampledata in {time.perf_counter() - started:.1f} s")
        return len(records)


def run(args: argparse.Namespace) -> int:
    load(args.data)
    if args.no_serve:
        return 0
    import uvicorn

    from roarsearch.server.app import create_app
    from roarsearch.server.config import ServerConfig

    admin = os.environ.get("ROARSEARCH_API_KEY") or secrets.token_urlsafe(24)
    search = secrets.token_urlsafe(16)
    config = ServerConfig(data=args.data, apps=("default",), admin_keys=(admin,), search_keys=(search,))
    address = f"http://{args.host}:{args.port}/#key={search}&collection={COLLECTION}"
    print(f"search page: {address}")
    print(f"search-only key: {search}")
    print(f"admin key: {admin}", flush=True)
    uvicorn.run(create_app(config), host=args.host, port=args.port, log_level="warning")
    return 0
