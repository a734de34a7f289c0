"""The command line (contract §6): ``serve``, ``import``, ``search``, ``check``, ``demo``.

``python -m roarsearch`` and the ``roarsearch`` script are this program. Exit status: 0 on success,
1 on failure, 2 on bad usage. Each application lives in ``DATA/ID``; the first ``--app`` is the
default (``default`` when none is named).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import secrets
import signal
import sys
from collections.abc import Iterator
from typing import Any

DEFAULT_DATA = "./roarsearch-data"


class UsageError(Exception):
    """Bad usage: exit status 2."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="roarsearch", description="An embedded search engine and its HTTP service.")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="serve the HTTP API")
    serve.add_argument("--data", default=DEFAULT_DATA, help="data directory (default: %(default)s)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=7700)
    serve.add_argument("--app", action="append", dest="apps", help="application id (repeatable; the first is the default)")
    serve.add_argument("--api-key", action="append", dest="api_keys", help="admin key (also ROARSEARCH_API_KEY)")
    serve.add_argument("--search-key", action="append", dest="search_keys",
                       help="search-only key, repeatable (also ROARSEARCH_SEARCH_KEYS, comma-separated)")
    serve.add_argument("--cors-origin", action="append", dest="cors_origins", help="allowed browser origin (default: any)")
    serve.add_argument("--max-body-bytes", type=int, default=100 * 1024 * 1024)

    importer = commands.add_parser("import", help="load JSON Lines, a JSON array or CSV into a collection")
    importer.add_argument("collection")
    importer.add_argument("file")
    importer.add_argument("--data", default=DEFAULT_DATA)
    importer.add_argument("--app", default="default")
    importer.add_argument("--batch-size", type=int, default=10_000)
    importer.add_argument("--format", choices=["jsonl", "json", "csv"], help="default: from the file extension")

    search = commands.add_parser("search", help="search a collection and print the results")
    search.add_argument("collection")
    search.add_argument("query", nargs="?", default="")
    search.add_argument("--data", default=DEFAULT_DATA)
    search.add_argument("--app", default="default")
    search.add_argument("--filter", default="")
    search.add_argument("--sort", action="append", default=[])
    search.add_argument("--facet", action="append", default=[], dest="facets")
    search.add_argument("--fields", action="append", default=[])
    search.add_argument("--count", type=int, default=10)
    search.add_argument("--skip", type=int, default=0)
    search.add_argument("--json", action="store_true", help="print the raw JSON response")

    check = commands.add_parser("check", help="verify a data directory (checksums, index against records)")
    check.add_argument("--data", default=DEFAULT_DATA)
    check.add_argument("--app", action="append", dest="apps", help="only these applications (default: all found)")

    demo = commands.add_parser("demo", help="load the bundled movies data set and open the search page")
    try:
        from roarsearch import demo as demo_module
    except ImportError:
        demo.set_defaults(demo_missing=True)
    else:
        demo_module.add_arguments(demo)
    return parser


# ---------------------------------------------------------------------- serve

def _keys(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    admin = list(args.api_keys or [])
    if os.environ.get("ROARSEARCH_API_KEY"):
        admin.append(os.environ["ROARSEARCH_API_KEY"])
    search = list(args.search_keys or [])
    search += [key.strip() for key in os.environ.get("ROARSEARCH_SEARCH_KEYS", "").split(",") if key.strip()]
    generated = not admin
    if generated:
        admin.append(secrets.token_urlsafe(24))
    return tuple(admin), tuple(search), generated


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from roarsearch.server.app import create_app
    from roarsearch.server.config import ServerConfig

    admin, search, generated = _keys(args)
    apps = tuple(args.apps or ["default"])
    config = ServerConfig(data=args.data, apps=apps, admin_keys=admin, search_keys=search,
                          cors_origins=tuple(args.cors_origins or ["*"]), max_body_bytes=args.max_body_bytes)
    if generated:
        print(f"no admin key configured; generated one for this run: {admin[0]}", flush=True)

    class ReadyServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises SIGINT/SIGTERM after a graceful shutdown, which would end the process
            # with a signal status; a clean stop (in-flight requests done, engines closed) exits 0.
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit:
                print(f"roarsearch ready on http://{args.host}:{args.port} apps={','.join(apps)} data={args.data}",
                      flush=True)

    server = ReadyServer(uvicorn.Config(create_app(config), host=args.host, port=args.port,
                                        log_level="warning", lifespan="on"))
    server.run()  # uvicorn stops on SIGINT/SIGTERM after in-flight requests; lifespan closes engines
    return 0 if server.started else 1


# ---------------------------------------------------------------------- import

def _rows(path: str, kind: str) -> Iterator[tuple[int, Any]]:
    """(line number, record) pairs; a line that does not parse raises UsageError naming it."""
    if kind == "json":
        with open(path, encoding="utf-8") as handle:
            try:
                data = json.load(handle)
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}: line {error.lineno}: malformed JSON: {error.msg}") from error
        if not isinstance(data, list):
            raise ValueError(f"{path}: a JSON file must hold an array of records")
        for index, record in enumerate(data, start=1):
            yield index, record
    elif kind == "csv":
        with open(path, encoding="utf-8", newline="") as handle:
            for line, row in enumerate(csv.DictReader(handle), start=2):
                yield line, {key: _csv_value(value) for key, value in row.items() if key and value not in (None, "")}
    else:
        with open(path, encoding="utf-8") as handle:
            for line, text in enumerate(handle, start=1):
                if text.strip():
                    try:
                        yield line, json.loads(text)
                    except json.JSONDecodeError as error:
                        raise ValueError(f"{path}: line {line}: malformed JSON: {error.msg}") from error


def _csv_value(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def import_file(args: argparse.Namespace) -> int:
    from roarsearch import Engine, SearchError

    kind = args.format or {".csv": "csv", ".json": "json"}.get(os.path.splitext(args.file)[1].lower(), "jsonl")
    if not os.path.exists(args.file):
        raise UsageError(f"{args.file}: no such file")
    progress = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        progress = tqdm(unit=" records", file=sys.stderr)
    imported = 0
    with Engine(os.path.join(args.data, args.app)) as engine:
        batch: list[Any] = []
        lines: list[int] = []

        def flush() -> None:
            nonlocal imported
            try:
                engine.add_records(args.collection, batch)
            except SearchError as error:
                where = error.data
                if where.startswith("records["):
                    index = int(where[len("records["):where.index("]")])
                    where = f"line {lines[index]}: {where}"
                raise ValueError(f"{args.file}: {where}; nothing of this batch was written "
                                 f"({imported} records before it were)") from error
            imported += len(batch)
            if progress is not None:
                progress.update(len(batch))
            batch.clear()
            lines.clear()

        for line, record in _rows(args.file, kind):
            batch.append(record)
            lines.append(line)
            if len(batch) >= args.batch_size:
                flush()
        if batch:
            flush()
    if progress is not None:
        progress.close()
    print(f"imported {imported} records into {args.collection}")
    return 0


# ---------------------------------------------------------------------- search

def search(args: argparse.Namespace) -> int:
    from roarsearch import Engine

    body: dict[str, Any] = {"collection": args.collection, "query": args.query, "count": args.count, "skip": args.skip}
    if args.filter:
        body["filter"] = args.filter
    if args.sort:
        body["sort"] = args.sort
    if args.facets:
        body["textFacets"] = args.facets
    if args.fields:
        body["fields"] = args.fields
    with Engine(os.path.join(args.data, args.app)) as engine:
        response = engine.search(body)
    if args.json:
        print(json.dumps(response, ensure_ascii=False))
        return 0
    print(f"{response['totalHits']} hits in {response['responseTime']} ms")
    for result in response["results"]:
        shown = {key: value for key, value in result.items() if key not in ("id", "_rank")}
        text = ", ".join(f"{key}={_short(value)}" for key, value in list(shown.items())[:5])
        print(f"  {result['id']!s:>10}  {result['_rank']:.6f}  {text}")
    for facet in response["textFacets"]:
        values = ", ".join(f"{item['value']} ({item['count']})" for item in facet["values"][:10])
        print(f"facet {facet['field']}: {values}")
    return 0


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


# ---------------------------------------------------------------------- check

def check(args: argparse.Namespace) -> int:
    from roarsearch import Engine

    apps = args.apps or sorted(name for name in (os.listdir(args.data) if os.path.isdir(args.data) else [])
                               if os.path.exists(os.path.join(args.data, name, "FORMAT")))
    if not apps:
        raise ValueError(f"{args.data}: no roarsearch data directory found")
    failed = False
    for app in apps:
        with Engine(os.path.join(args.data, app)) as engine:
            report = engine.check()
        for name, collection in report["collections"].items():
            state = "ok" if not collection["problems"] else f"{len(collection['problems'])} problem(s)"
            print(f"{app}/{name}: {collection['records']} records, {state}")
        for problem in report["problems"]:
            print(f"  {problem}")
        failed |= not report["ok"]
    return 1 if failed else 0


# ---------------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    from roarsearch.errors import SearchError

    handlers = {"serve": serve, "import": import_file, "search": search, "check": check}
    try:
        if args.command == "demo":
            if getattr(args, "demo_missing", False):
                print("roarsearch demo: the demo module is not available in this installation", file=sys.stderr)
                return 1
            from roarsearch import demo as demo_module

            return int(demo_module.run(args))
        return handlers[args.command](args)
    except UsageError as error:
        print(f"roarsearch {args.command}: {error}", file=sys.stderr)
        return 2
    except (SearchError, ValueError, OSError) as error:
        message = error.data if isinstance(error, SearchError) else str(error)
        print(f"roarsearch {args.command}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
