"""Several worker processes behind one port: one writer owns the data, the others follow it.

Owns: ``roarsearch serve --workers N`` (docs/service.md, "Workers"). The process the command starts
is the *writer*: it opens the engines (taking each data directory's lock), serves HTTP like a
single-worker server, and after every write publishes the collections' committed log positions on
a :class:`~roarsearch.storage.follow.CommitBoard`. It also starts N-1 *reader* processes
(``python -m roarsearch.server.workers RUN_DIR INDEX``), each holding a
:class:`~roarsearch.engine.follower.FollowerEngine` per application. Readers answer searches and
reads themselves and forward every write, unchanged, to the writer over a Unix socket in the run
folder.

Invariants:
- read-your-writes on every worker: the writer publishes a write's log position before it sends
  the 2xx; a reader, before it answers a read, checks the board (one 8-byte read) and applies what
  it lacks — so a client that got a 2xx for a write, and then reads on any worker, sees it;
- the writer acknowledges a write (publishes it, then sends the 2xx) once every reader has
  applied it (:class:`ReaderProgress`), or after :data:`READERS_WAIT_S`: the readers' own check
  above is what guarantees the rule, this only makes it rare for a read to wait;
- every worker listens on the same address with ``SO_REUSEPORT``: the kernel spreads connections
  over the workers; the writer binds first (a taken port fails before any reader starts);
- SIGTERM/SIGINT to the writer stops every reader (SIGTERM, then SIGKILL after a grace period)
  and exits 0 once they are gone; a reader that dies (non-zero exit) is started again; one that
  cannot start (exits before it is ready, :data:`START_FAILURES` times in a row) stops the server
  with exit status 1 and a message naming its log; a reader whose writer is gone stops itself;
- the run folder (``roarsearch-serve-*`` in the temporary directory: spec, boards, the writer's
  socket, the readers' ready marks) is private (mode 0700) and removed at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sized
from dataclasses import asdict
from typing import Any

from roarsearch.engine.engine import Engine
from roarsearch.engine.follower import FollowerEngine
from roarsearch.server.config import ServerConfig
from roarsearch.storage.follow import CommitBoard, map_shared_file
from roarsearch.storage.shared_analysis import SharedAnalyses

log = logging.getLogger("roarsearch.server")

SPEC_FILE = "spec.json"
WRITER_SOCKET = "writer.sock"
#: Consecutive failed starts of one reader after which the server gives up.
START_FAILURES = 3
#: Seconds a stopping reader gets before it is killed.
STOP_GRACE_S = 30.0
#: How often a reader checks the board between requests, and the supervisor its readers.
FOLLOW_INTERVAL_S = 0.005
WATCH_INTERVAL_S = 0.2
#: A worker over its share of connections closes at most one this often (:class:`Balancer`).
SHED_INTERVAL_S = 0.02
BALANCE_FILE = "balance"
#: The writer waits at most this long for its readers to apply a write before it answers anyway
#: (a reader then applies it before its next read, as always).
READERS_WAIT_S = 0.5
#: How often the writer looks meanwhile (and a read waiting for its reader to catch up).
READERS_POLL_S = 0.001
#: A read waits this long for its reader's follow thread to apply acknowledged writes before it
#: applies them itself.
CATCH_UP_WAIT_S = 0.05
#: Seconds the writer waits for its readers to be ready.
READY_TIMEOUT_S = 600.0


def board_path(run_dir: str, app: str) -> str:
    return os.path.join(run_dir, f"board-{app}")


def analyses_path(run_dir: str, app: str) -> str:
    """The folder where the writer files each add batch's analysis for the readers (storage/shared_analysis.py)."""
    return board_path(run_dir, app) + ".analyses"


def applied_path(run_dir: str, app: str) -> str:
    """The file of :class:`ReaderProgress` for application ``app``."""
    return board_path(run_dir, app) + ".applied"


class ReaderProgress:
    """Per application, the board version each reader has applied: 8 bytes per worker in a shared
    file. A reader writes its slot after every catch-up (``FollowerEngine.on_applied``); the writer
    reads them before it answers a write (:meth:`Publisher.readers_applied`).

    Why: a reader applies a batch once it is durable, while the writer applies it as it is logged,
    so the reader used to finish later, and every read reaching it once the write was acknowledged
    waited for the rest of the batch (the HTTP load benchmark with its writer: 221 reads, 39 ms each
    at the median). Acknowledging a write once every reader has applied it moves that wait to the write.
    """

    def __init__(self, path: str, workers: int, *, create: bool = False) -> None:
        self.workers = workers
        self._map = map_shared_file(path, 8 * workers, create=create)

    def mark(self, worker: int, version: int) -> None:
        """Reader ``worker`` has applied board ``version``."""
        struct.pack_into("<Q", self._map, 8 * worker, version)

    def all_applied(self, version: int) -> bool:
        """Whether every reader (workers 1..N-1) has applied board ``version`` or a later one."""
        return min(struct.unpack_from(f"<{self.workers}Q", self._map, 0)[1:], default=version) >= version

    def close(self) -> None:
        self._map.close()


def listening_socket(host: str, port: int, *, first: bool = False) -> socket.socket:
    """A listening TCP socket with ``SO_REUSEPORT``, so that every worker can bind the same address.

    ``first`` (the writer): the port is first bound without ``SO_REUSEPORT``, so that a port another
    server already listens on — even one of ours, which would otherwise share it — is refused.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    if first and port:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(False)
    except BaseException:
        sock.close()
        raise
    return sock


class Balancer:
    """Evens out connections between the workers, which ``SO_REUSEPORT`` spreads by a hash of the
    client's address, not by load: 32 keep-alive connections landed 20/12, 19/13 (measured), and
    the busier worker, one GIL for more connections, made the tail latency.

    Every worker writes its open connections in its slot of a shared file (``balance`` in the run
    folder) on each fast-path search; a worker holding more than its share (the total divided
    evenly, rounded up) answers one search with ``Connection: close`` every
    :data:`SHED_INTERVAL_S`: the client reconnects (a new source port, a new hash) and lands on
    either worker, so the busier one loses a connection half the time and never gains one.
    """

    def __init__(self, path: str, worker: int, workers: int, *, create: bool = False) -> None:
        self.worker = worker
        self.workers = workers
        self._map = map_shared_file(path, 8 * workers, create=create)
        #: This worker's open connections (the server's own set, handed in once it exists).
        self.connections: Sized = ()
        self._last_shed = 0.0

    def shed(self) -> bool:
        """Whether this response should close its connection (see the class docstring)."""
        mine = len(self.connections)
        struct.pack_into("<Q", self._map, 8 * self.worker, mine)
        total = sum(struct.unpack_from(f"<{self.workers}Q", self._map, 0))
        if mine <= -(-total // self.workers):
            return False
        now = time.monotonic()
        if now - self._last_shed < SHED_INTERVAL_S:
            return False
        self._last_shed = now
        return True

    def close(self) -> None:
        self._map.close()


def unix_socket(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(256)
    return sock


# ---------------------------------------------------------------------- the writer's side

class Publisher:
    """The writer's boards: one per application, published after every write, and as soon as a
    batch is durable in the log (:meth:`publish_logged`) so that readers apply it meanwhile."""

    def __init__(self, run_dir: str, engines: Mapping[str, Engine], workers: int) -> None:
        self.engines = dict(engines)
        self.boards = {app: CommitBoard(board_path(run_dir, app), create=True) for app in engines}
        self.progress = {app: ReaderProgress(applied_path(run_dir, app), workers, create=True) for app in engines}
        self.analyses = {app: SharedAnalyses(analyses_path(run_dir, app), create=True) for app in engines}
        self.drops = dict.fromkeys(engines, 0)
        self.committed: dict[str, dict[str, int]] = {app: {} for app in engines}
        self.logged: dict[str, dict[str, int]] = {app: {} for app in engines}
        #: Per application, the board version of the last announcement of a logged batch.
        self.logged_version = dict.fromkeys(engines, 0)
        # Taken inside a collection's write mutex (publish_logged): never take an engine's lock under it.
        self._lock = threading.Lock()
        for app in engines:
            self.publish(app)

    def publish(self, app: str, *, dropped: bool = False) -> None:
        """Publish ``app``'s committed positions (after a write; ``dropped`` after a collection drop)."""
        engine = self.engines[app]
        positions = committed_positions(engine)
        with engine._collections_lock:
            collections = list(engine._collections.items())
        for name, collection in collections:
            if collection.store is not None and collection.on_logged is None:
                collection.on_logged = functools.partial(self.publish_logged, app, name)
                collection.shared_analyses = self.analyses[app]
        with self._lock:
            if dropped:
                self.drops[app] += 1
            earlier = self.logged[app]
            # A batch logged since the positions were read stays announced.
            self.logged[app] = {name: max(seq, earlier.get(name, 0)) for name, seq in positions.items()}
            self.committed[app] = positions
            self.boards[app].publish(positions, self.drops[app], self.logged[app])

    def readers_applied(self, app: str) -> bool:
        """Whether every reader has applied the batches of ``app`` announced as logged so far (see
        :class:`ReaderProgress`)."""
        return self.progress[app].all_applied(self.logged_version[app])

    def publish_logged(self, app: str, name: str, seq: int) -> None:
        """Announce batch ``seq`` of collection ``name``, durable but not applied yet: readers apply
        it now, in parallel with the writer; requests still wait only for acknowledged batches."""
        with self._lock:
            if self.logged[app].get(name, 0) >= seq or name not in self.committed[app]:
                return  # a collection's first batches are announced by the publish after them
            self.logged[app][name] = seq
            self.logged_version[app] = self.boards[app].publish(self.committed[app], self.drops[app], self.logged[app])

    def close(self) -> None:
        for board in self.boards.values():
            board.close()
        for progress in self.progress.values():
            progress.close()


def committed_positions(engine: Engine) -> dict[str, int]:
    """``{collection: sequence number of its last durable batch}`` of an engine over a directory."""
    with engine._collections_lock:  # the engine's own lock: a snapshot of the name → collection map
        collections = list(engine._collections.items())
    return {name: collection.store.wal.next_seq - 1 for name, collection in collections if collection.store is not None}


class Supervisor:
    """The writer's reader processes: started, watched, restarted, stopped."""

    def __init__(self, run_dir: str, count: int, on_fatal: Callable[[str], None]) -> None:
        self.run_dir = run_dir
        self.count = count
        self.on_fatal = on_fatal
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        self.failures = dict.fromkeys(range(1, count + 1), 0)
        self.stopping = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="roarsearch-supervisor", daemon=True)

    def ready_path(self, index: int) -> str:
        return os.path.join(self.run_dir, f"worker-{index}.ready")

    def start(self) -> None:
        for index in range(1, self.count + 1):
            self._spawn(index)
        self._watcher.start()

    def _spawn(self, index: int) -> None:
        try:
            os.remove(self.ready_path(index))
        except FileNotFoundError:
            pass
        # The reader writes to the writer's own output (its lines say "worker N"), where its
        # errors are seen.
        self.processes[index] = subprocess.Popen(
            [sys.executable, "-m", "roarsearch.server.workers", self.run_dir, str(index)], stdin=subprocess.DEVNULL)

    def ready(self) -> bool:
        return all(os.path.exists(self.ready_path(index)) for index in self.processes)

    async def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.stopping.is_set() or time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def _watch(self) -> None:
        while not self.stopping.wait(WATCH_INTERVAL_S):
            for index, process in list(self.processes.items()):
                status = process.poll()
                if status is None or self.stopping.is_set():
                    continue
                was_ready = os.path.exists(self.ready_path(index))
                self.failures[index] = 0 if was_ready else self.failures[index] + 1
                if self.failures[index] >= START_FAILURES:
                    self.on_fatal(f"worker {index} could not start ({START_FAILURES} attempts, last exit status "
                                  f"{status}); its output is above")
                    return
                log.error("worker %d (pid %d) exited with status %s; starting it again", index, process.pid, status)
                self._spawn(index)

    def stop(self) -> None:
        """SIGTERM every reader, wait, SIGKILL what is left."""
        self.stopping.set()
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_S
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def prepare_run_dir(config: ServerConfig, paths: Mapping[str, str], host: str, port: int, workers: int = 2) -> str:
    """The private run folder with the readers' spec (keys included: the folder is mode 0700)."""
    run_dir = tempfile.mkdtemp(prefix="roarsearch-serve-")
    spec = {"config": {**asdict(config), "apps": list(config.apps), "admin_keys": list(config.admin_keys),
                       "search_keys": list(config.search_keys), "cors_origins": list(config.cors_origins)},
            "paths": dict(paths), "host": host, "port": port, "writer_pid": os.getpid(),
            "writer_socket": os.path.join(run_dir, WRITER_SOCKET), "workers": workers}
    descriptor = os.open(os.path.join(run_dir, SPEC_FILE), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        json.dump(spec, handle)
    return run_dir


def remove_run_dir(run_dir: str) -> None:
    shutil.rmtree(run_dir, ignore_errors=True)


# ---------------------------------------------------------------------- forwarding a write

async def forward(socket_path: str, method: str, target: str, headers: list[tuple[bytes, bytes]],
                  body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    """Send one HTTP/1.1 request to the writer's Unix socket and return (status, headers, body)."""
    reader, writer = await asyncio.open_unix_connection(socket_path)
    try:
        lines = [f"{method} {target} HTTP/1.1".encode("latin-1")]
        for key, value in headers:
            if key.lower() not in (b"content-length", b"connection", b"transfer-encoding", b"expect"):
                lines.append(key + b": " + value)
        lines += [b"content-length: " + str(len(body)).encode(), b"connection: close"]
        writer.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, content = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    answer_headers = []
    for header in header_lines:
        name, _, text = header.partition(":")
        if name.lower() not in ("content-length", "connection", "date", "server", "transfer-encoding"):
            answer_headers.append((name, text.strip()))
    return status, answer_headers, content


# ---------------------------------------------------------------------- a reader process

def reader_main(run_dir: str, index: int) -> int:
    """Run reader ``index``: load the followers, bind the shared port, serve until SIGTERM."""
    import uvicorn

    from roarsearch.server.app import create_app

    logging.basicConfig(level=logging.WARNING, format=f"%(asctime)s worker {index} %(levelname)s %(name)s: %(message)s")
    with open(os.path.join(run_dir, SPEC_FILE)) as handle:
        spec = json.load(handle)
    config_fields = spec["config"]
    config = ServerConfig(**{**config_fields, "apps": tuple(config_fields["apps"]),
                             "admin_keys": tuple(config_fields["admin_keys"]),
                             "search_keys": tuple(config_fields["search_keys"]),
                             "cors_origins": tuple(config_fields["cors_origins"])})
    engines: dict[str, Engine] = {}
    for app in config.apps:
        progress = ReaderProgress(applied_path(run_dir, app), spec["workers"])
        engines[app] = FollowerEngine(spec["paths"][app], CommitBoard(board_path(run_dir, app)),
                                      on_applied=functools.partial(progress.mark, index),
                                      shared_analyses=SharedAnalyses(analyses_path(run_dir, app)))
    sock = listening_socket(spec["host"], spec["port"])
    ready_path = os.path.join(run_dir, f"worker-{index}.ready")

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # As the writer's (cli/main.py): a clean stop after SIGTERM/SIGINT exits 0 instead of
            # re-raising the signal, so the supervisor tells a stop from a crash by the status.
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if not self.should_exit:
                with open(ready_path, "w") as ready:
                    ready.write(str(os.getpid()))

    balancer = Balancer(os.path.join(run_dir, BALANCE_FILE), index, spec["workers"])
    server = Server(uvicorn.Config(create_app(config, engines, writer_socket=spec["writer_socket"], worker=index,
                                              balancer=balancer), lifespan="on",
                                   log_level="warning", access_log=False, timeout_graceful_shutdown=None))
    balancer.connections = server.server_state.connections

    def follow() -> None:
        # Keeps the copy fresh between requests (a request still checks the board itself), and
        # stops this reader when its writer is gone.
        while not server.should_exit:
            if os.getppid() != spec["writer_pid"]:
                log.error("the writer process is gone; stopping")
                server.should_exit = True
                return
            for engine in engines.values():
                assert isinstance(engine, FollowerEngine)
                if engine.behind():
                    try:
                        engine.catch_up()
                    except Exception:  # the request path retries and reports it
                        log.exception("catching up failed")
            time.sleep(FOLLOW_INTERVAL_S)

    threading.Thread(target=follow, name="roarsearch-follow", daemon=True).start()
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(reader_main(sys.argv[1], int(sys.argv[2])))
