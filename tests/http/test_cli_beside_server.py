"""This module tests the command line beside a running ``roarsearch serve``, on the real programs:

- ``search``, ``export``, ``check`` and ``settings`` (reading) work while the server holds the
  data directory, and see every write it acknowledged before they started;
- ``import`` and ``settings --set`` say that the directory is in use and what to run instead;
- ``serve`` prints one line when it has stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.http.conftest import ROOT, start_server, stop_server


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "roarsearch", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), timeout=120)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_reading_commands_work_beside_a_running_server(tmp_path: Path, workers: str) -> None:
    data = tmp_path / "data"
    source = tmp_path / "films.jsonl"
    source.write_text("".join(json.dumps({"id": i, "title": f"film {i}", "year": 1990 + i}) + "\n" for i in range(5)))
    assert cli("import", "films", str(source), "--data", str(data)).returncode == 0
    server = start_server(data, "--workers", workers)
    try:
        with server.client() as client:
            assert client.post("/v2/collections/films/records", json=[{"id": 9, "title": "late film", "year": 2020}]
                               ).status_code == 201
            assert client.put("/v2/collections/films/settings", json={"stopWords": ["the"]}).status_code == 200
            assert client.request("DELETE", "/v2/collections/films/records", json=[0]).status_code == 200
        found = cli("search", "films", "late", "--data", str(data), "--json")
        assert found.returncode == 0, found.stderr
        assert [result["id"] for result in json.loads(found.stdout)["results"]] == [9]
        table = cli("search", "films", "film", "--data", str(data))
        assert table.returncode == 0 and table.stdout.startswith("5 hits"), table.stdout + table.stderr
        exported = cli("export", "films", "--data", str(data))
        assert exported.returncode == 0, exported.stderr
        assert [json.loads(line)["id"] for line in exported.stdout.splitlines()] == [1, 2, 3, 4, 9]
        checked = cli("check", "--data", str(data))
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "default/films: 5 records, ok" in checked.stdout
        assert "in use by another process" in checked.stderr
        settings = cli("settings", "films", "--data", str(data))
        assert settings.returncode == 0 and json.loads(settings.stdout)["stopWords"] == ["the"]

        refused = cli("import", "films", str(source), "--data", str(data))
        assert refused.returncode == 1
        assert "in use by another process" in refused.stderr
        assert "POST /v2/collections/films/records" in refused.stderr
        assert "search, export, check and backup work beside it" in refused.stderr
        refused = cli("settings", "films", "--data", str(data), "--set", "stopWords=[]")
        assert refused.returncode == 1 and "PUT /v2/collections/films/settings" in refused.stderr
    finally:
        status = stop_server(server)
    assert status == 0
    assert "roarsearch stopped apps=default" in server.output()
    assert server.output().rstrip().splitlines()[-1].startswith("roarsearch stopped")


def test_check_beside_a_server_reports_a_damaged_log(tmp_path: Path) -> None:
    data = tmp_path / "data"
    source = tmp_path / "films.jsonl"
    source.write_text("".join(json.dumps({"id": i, "title": f"film {i}"}) + "\n" for i in range(5)))
    assert cli("import", "films", str(source), "--data", str(data)).returncode == 0
    server = start_server(data, "--workers", "1")
    try:
        with server.client() as client:
            for i in range(3):
                assert client.post("/v2/collections/films/records", json=[{"id": 10 + i, "title": "more"}]
                                   ).status_code == 201
        log = data / "default" / "collections" / "films" / "wal.rlog"
        damaged = bytearray(log.read_bytes())
        damaged[len(damaged) // 2] ^= 0xFF
        log.write_bytes(bytes(damaged))
        checked = cli("check", "--data", str(data))
        assert checked.returncode == 1, checked.stdout
        assert "problems found" in checked.stdout
    finally:
        stop_server(server)
