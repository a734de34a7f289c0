"""A real server on 127.0.0.1: ``python -m roarsearch serve --port 0``, with known keys.

The server picks a free port itself and names it in its one ready line, so there is no race
between choosing a port and binding it. Its output goes to a log file (a pipe nobody reads would
fill up and stall the server); tests read the log to check what the server printed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
ADMIN, SEARCH = "admin-key-for-tests", "search-key-for-tests"
READY = re.compile(r"roarsearch ready on (http://127\.0\.0\.1:\d+) ")
START_TIMEOUT_S = 30


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    data: Path
    log: Path

    def client(self, key: str | None = ADMIN, host: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if host:
            headers["Host"] = host
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def launch(data: Path, *arguments: str, keys: bool = True, env: dict[str, str] | None = None,
           log: Path | None = None) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``roarsearch serve`` without waiting for it."""
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("ROARSEARCH_API_KEY", "ROARSEARCH_SEARCH_KEYS", "ROARSEARCH_FAILPOINTS")}
    environment.update(env or {}, PYTHONPATH=str(ROOT / "src"))
    key_arguments = ["--api-key", ADMIN, "--search-key", SEARCH] if keys else []
    log = log or data.parent / f"{data.name}-server-{time.monotonic_ns()}.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "roarsearch", "serve", "--data", str(data), "--port", "0", *key_arguments,
             *arguments], stdout=output, stderr=subprocess.STDOUT, env=environment, cwd=ROOT)
    return process, log


def start_server(data: Path, *arguments: str, keys: bool = True, env: dict[str, str] | None = None) -> Server:
    """Start the server and wait for its ready line and a 200 from ``/health``."""
    process, log = launch(data, *arguments, keys=keys, env=env)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready = READY.search(log.read_text(errors="replace"))
        if ready:
            server = Server(process, ready[1], data, log)
            assert httpx.get(f"{server.url}/health", timeout=5).status_code == 200
            return server
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}: {log.read_text(errors='replace')}")
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(f"server not ready within {START_TIMEOUT_S} s: {log.read_text(errors='replace')}")


def stop_server(server: Server, sig: signal.Signals = signal.SIGTERM) -> int:
    """Signal the server and return its exit status (killed after 30 s: a hang fails the test)."""
    server.process.send_signal(sig)
    try:
        return server.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
        raise


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Two applications (shop is the default), two allowed browser origins, a 200 kB body limit."""
    data = tmp_path_factory.mktemp("serve") / "data"
    running = start_server(data, "--app", "shop", "--app", "blog", "--max-body-bytes", "200000",
                           "--cors-origin", "https://shop.example.com", "--cors-origin", "https://blog.example.com")
    yield running
    assert stop_server(running) == 0
