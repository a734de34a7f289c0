"""A real server on 127.0.0.1: ``python -m roarsearch serve`` on a free port, with known keys."""

from __future__ import annotations

import os
import socket
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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[str]
    url: str
    data: Path
    port: int

    def client(self, key: str | None = ADMIN, host: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if host:
            headers["Host"] = host
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def start_server(data: Path, port: int, *extra: str) -> Server:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("ROARSEARCH_API_KEY", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "roarsearch", "serve", "--data", str(data), "--port", str(port),
         "--api-key", ADMIN, "--search-key", SEARCH, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited: {process.stdout.read() if process.stdout else ''}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return Server(process, url, data, port)
        except httpx.HTTPError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("server did not answer within 30 s")


def stop_server(server: Server) -> int:
    server.process.terminate()
    try:
        return server.process.wait(timeout=30)
    finally:
        if server.process.stdout:
            server.process.stdout.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("serve")
    running = start_server(data, free_port(), "--app", "shop", "--app", "blog", "--max-body-bytes", "200000")
    yield running
    stop_server(running)
