"""``roarsearch demo``: the bundled movies, indexed into a local data directory, behind the search page.

Owns the first minute of a new user: load the 17,472 films that the ``bokeh-sampledata`` PyPI
package ships (see :mod:`roarsearch.datasets`) into ``DATA/default``, collection ``movies``, in
batches with a progress bar — or reuse them when an earlier run already did — then serve the HTTP
API and the search page on 127.0.0.1 with a generated admin key and a generated search-only key, and
print the page's address (search key in the URL fragment, which browsers never send to a server).

Invariants: a run never re-imports a complete collection; a collection left short by an interrupted
run is completed (adding an existing id replaces the record, so importing again is safe); the
service is started by the same code path as ``roarsearch serve`` (engines opened before the port is
bound, clean stop on SIGINT/SIGTERM), so the demo behaves exactly like the real service.

Called by ``roarsearch.cli.main``, which adds :func:`add_arguments` to its ``demo`` subcommand and
calls :func:`run`.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import time
from typing import Any

from roarsearch.server.config import DEFAULT_APP, DEFAULT_DATA, DEFAULT_MAX_BODY_BYTES

COLLECTION = "movies"
#: Records per ``add_records`` call: big enough that per-call overhead vanishes, small enough that
#: the progress bar moves several times a second.
BATCH_SIZE = 2_000
DEFAULT_PORT = 7700


#: The films' settings: the fields searched and how the search page shows them (``searchPage``):
#: the page itself knows nothing of films.
MOVIES_SETTINGS: dict[str, Any] = {
    "searchFields": ["title", "director", "cast", "writers"],
    "searchPage": {
        "title": "title",
        "subtitle": "year",
        "placeholder": "Search titles, directors, cast — typos welcome (godfathr, spielbrg)",
        "facts": [{"field": "mpaaRating", "badge": True}, {"field": "runtime", "format": "{} min"},
                  {"field": "tomatoMeter", "format": "Tomatometer {}%"}, {"field": "genres"}],
        "lines": [{"field": "director", "label": "Directed by"}, {"field": "cast", "label": "With", "limit": 5}],
        "textFacets": [{"field": "genres", "label": "Genre"}, {"field": "mpaaRating", "label": "MPAA rating"},
                       {"field": "languages", "label": "Language"}],
        "numericFacets": [
            {"field": "year", "label": "Year", "ranges": [
                {"range": "[1900,1950)", "label": "Before 1950"}, {"range": "[1950,1970)", "label": "1950s–60s"},
                {"range": "[1970,1980)", "label": "1970s"}, {"range": "[1980,1990)", "label": "1980s"},
                {"range": "[1990,2000)", "label": "1990s"}, {"range": "[2000,2010)", "label": "2000s"},
                {"range": "[2010,)", "label": "2010 and later"}]},
            {"field": "tomatoMeter", "label": "Tomatometer", "ranges": [
                {"range": "[90,100]", "label": "90–100% (acclaimed)"}, {"range": "[75,90)", "label": "75–89%"},
                {"range": "[60,75)", "label": "60–74% (fresh)"}, {"range": "[0,60)", "label": "Below 60% (rotten)"}]},
        ],
        "sort": [{"sort": "-year", "label": "Newest first"}, {"sort": "year", "label": "Oldest first"},
                 {"sort": "-tomatoMeter", "label": "Best reviewed"}],
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``demo`` subcommand's options."""
    parser.add_argument("--data", default=DEFAULT_DATA, help="data directory (default: %(default)s)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default: %(default)s; 0: any free port)")
    parser.add_argument("--no-serve", action="store_true", help="only load the data set, then exit")


def load(data: str) -> int:
    """Index the movies into ``DATA/default`` unless they are all there already; returns the record count."""
    from tqdm import tqdm

    from roarsearch import Engine
    from roarsearch.datasets import load_movies

    records = load_movies()
    with Engine(os.path.join(data, DEFAULT_APP)) as engine:
        current = engine.get_settings(COLLECTION) if COLLECTION in engine.collection_names() else {}
        if any(current.get(key) != value for key, value in MOVIES_SETTINGS.items()):
            engine.update_settings(COLLECTION, MOVIES_SETTINGS)  # also on reuse, once: the page reads them
        present = _record_count(engine)
        if present >= len(records):
            print(f"reusing {present:,} movies already indexed in {data}", flush=True)
            return present
        if present:
            print(f"{present:,} of {len(records):,} movies indexed by an interrupted run; importing again", flush=True)
        started = time.perf_counter()
        # disable=None: a bar on a terminal, nothing in logs and tests.
        with tqdm(total=len(records), unit=" movies", desc="indexing", disable=None) as progress:
            for start in range(0, len(records), BATCH_SIZE):
                batch = records[start:start + BATCH_SIZE]
                engine.add_records(COLLECTION, batch)
                progress.update(len(batch))
        print(f"indexed {len(records):,} movies from bokeh-sampledata in {time.perf_counter() - started:.1f} s "
              f"into {data}", flush=True)
        return len(records)


def _record_count(engine: Any) -> int:
    if COLLECTION not in engine.collection_names():
        return 0
    return int(engine.search({"collection": COLLECTION, "count": 0})["totalHits"])


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def page_address(host: str, port: int, search_key: str) -> str:
    """The page's address; key and collection ride in the fragment, read by ``static/app.js``."""
    shown_host = f"[{host}]" if ":" in host else host
    return f"http://{shown_host}:{port}/#key={search_key}&collection={COLLECTION}"


def run(args: argparse.Namespace) -> int:
    """Load (or reuse) the movies; unless ``--no-serve``, serve them until SIGINT/SIGTERM."""
    load(args.data)
    if args.no_serve:
        return 0
    from roarsearch.cli.main import serve

    port = args.port or _free_port(args.host)  # --port 0: the address printed must name the real port
    # ROARSEARCH_API_KEY, when set, is the admin key (serve reads it); otherwise one is made for this run.
    configured_admin = os.environ.get("ROARSEARCH_API_KEY")
    admin = configured_admin or secrets.token_urlsafe(24)
    search = secrets.token_urlsafe(16)
    print(f"\nsearch page:     {page_address(args.host, port, search)}")
    print(f"search-only key: {search}")
    print(f"admin key:       {admin}{' (from ROARSEARCH_API_KEY)' if configured_admin else ''}")
    print("Ctrl-C stops the server; run again to reuse the data.\n", flush=True)
    serve_args = argparse.Namespace(
        data=args.data, host=args.host, port=port, apps=[DEFAULT_APP],
        api_keys=[] if configured_admin else [admin], search_keys=[search],
        cors_origins=None, max_body_bytes=DEFAULT_MAX_BODY_BYTES,
    )
    return serve(serve_args)
