"""This module tests the following properties:

- ``roarsearch serve --shards 2`` serves a sharded data directory through the same HTTP API
  (add 201, search with facets, delete);
- a shard actor process killed (SIGKILL) is restarted from its directory: requests meanwhile get a
  503 Error object with ``Retry-After``, never a partial answer, and afterwards the whole answer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray", reason="pip install -e '.[cluster]'")

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore::ResourceWarning")]

ROOT = Path(__file__).resolve().parents[2]
KEY = "test-admin-key"


def _call(base: str, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read()), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), {k.lower(): v for k, v in error.headers.items()}


def _shard_pids(session: int) -> list[int]:
    """Processes of the server's session that run a shard actor."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            command = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[3]) == session and b"ShardActor" in command:
            found.append(int(name))
    return found


def test_serve_sharded_and_restart_a_dead_shard(tmp_path: Path) -> None:
    server = subprocess.Popen([sys.executable, "-m", "roarsearch", "serve", "--data", str(tmp_path / "data"),
                               "--shards", "2", "--port", "0", "--api-key", KEY],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              start_new_session=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert "ready on" in line, line
        base = line.split("ready on ")[1].split()[0]
        records = [{"id": i, "title": f"star {['wars', 'trek'][i % 2]}", "brand": ["acme", "zeta", "beta"][i % 3]}
                   for i in range(30)]
        assert _call(base, "POST", "/v2/collections/films/records", records)[0] == 201
        query = {"collection": "films", "query": "star wars", "textFacets": ["brand"], "count": 5}
        status, whole, _ = _call(base, "POST", "/v2", query)
        assert status == 200 and whole["totalHits"] == 15
        pids = _shard_pids(server.pid)
        assert len(pids) == 2, pids
        os.kill(pids[0], signal.SIGKILL)
        statuses = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status, body, headers = _call(base, "POST", "/v2", query)
            statuses.append(status)
            if status == 200:
                body.pop("responseTime"), whole.pop("responseTime", None)
                assert body == whole  # never a partial answer
                if 503 in statuses:
                    break
            else:
                assert status == 503 and body["status"] == 503 and headers.get("retry-after") == "1", (status, body)
            time.sleep(0.05)
        assert 503 in statuses and statuses[-1] == 200, statuses
        assert _call(base, "DELETE", "/v2/collections/films/records", [1, 2, 999])[1] == [
            {"status": 200, "id": 1}, {"status": 200, "id": 2}, {"status": 404, "id": 999}]
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
