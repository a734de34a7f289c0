"""This module tests the following properties (contract §6 "The command line"), running the real
command:

- ``--data`` defaults to ``./roarsearch-data``: import, search, export and check without it use
  ``./roarsearch-data/default`` of the working directory;
- ``import --app ID`` writes into ``DATA/ID`` and ``search --app ID`` reads it; without ``--app``
  a reading command looks at ``DATA/default`` and says which application to name instead;
- ``export`` accepts a directory that ``Engine(DIR)`` wrote, and writes JSON Lines in id order
  (integers, then strings);
- ``import`` shows a progress bar when stderr is a terminal, and none when it is not;
- bad usage of ``export`` and ``check`` (missing argument, unknown option) exits 2.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

from roarsearch import Engine
from tests.cli.test_cli import ROOT, run


def run_in(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``run`` from another working directory (``--data`` defaults to a path relative to it)."""
    return subprocess.run([sys.executable, "-m", "roarsearch", *args], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}"), timeout=120)


def test_data_defaults_to_roarsearch_data_in_the_working_directory(tmp_path: Path) -> None:
    source = tmp_path / "people.jsonl"
    source.write_text('{"id": 2, "name": "Alan"}\n{"id": 1, "name": "Ada"}\n')
    assert run_in(tmp_path, "import", "people", str(source)).returncode == 0
    assert (tmp_path / "roarsearch-data" / "default" / "collections" / "people").is_dir()
    found = run_in(tmp_path, "search", "people", "ada", "--json")
    assert found.returncode == 0 and [r["id"] for r in json.loads(found.stdout)["results"]] == [1]
    exported = run_in(tmp_path, "export", "people")
    assert exported.returncode == 0 and [json.loads(line)["id"] for line in exported.stdout.splitlines()] == [1, 2]
    checked = run_in(tmp_path, "check")
    assert checked.returncode == 0 and "default/people: 2 records, ok" in checked.stdout


def test_app_option_names_a_directory_under_data(tmp_path: Path) -> None:
    source = tmp_path / "goods.jsonl"
    source.write_text('{"id": 1, "name": "kettle"}\n')
    data = tmp_path / "data"
    assert run("import", "goods", str(source), "--data", str(data), "--app", "shop").returncode == 0
    assert (data / "shop" / "collections" / "goods").is_dir() and not (data / "default").exists()
    found = run("search", "goods", "kettle", "--data", str(data), "--app", "shop", "--json")
    assert found.returncode == 0 and json.loads(found.stdout)["totalHits"] == 1
    elsewhere = run("search", "goods", "--data", str(data))
    assert elsewhere.returncode == 1 and "pass --app shop" in elsewhere.stderr


def test_export_accepts_a_library_directory(tmp_path: Path) -> None:
    directory = tmp_path / "engine"
    with Engine(str(directory)) as engine:
        engine.add_records("c", [{"id": "b"}, {"id": 10, "x": [1, None]}, {"id": -2}, {"id": "a"}, {"id": 3}])
    exported = run("export", "c", "--data", str(directory))
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [line["id"] for line in lines] == [-2, 3, 10, "a", "b"]
    assert lines[2] == {"id": 10, "x": [1, None]}
    assert not (directory / "default").exists()


def run_with_terminal_stderr(*args: str) -> tuple[int, str]:
    """Run the command with stderr on a pseudo-terminal; its exit status and what the terminal showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # a terminal has a size
    process = subprocess.Popen([sys.executable, "-m", "roarsearch", *args], stdout=subprocess.DEVNULL,
                               stderr=follower, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    os.close(follower)
    shown = bytearray()
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], 60)
            if not ready:
                break
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process is gone
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
        status = process.wait(timeout=60)
    return status, shown.decode(errors="replace")


def test_import_shows_a_progress_bar_on_a_terminal_only(tmp_path: Path) -> None:
    source = tmp_path / "many.jsonl"
    source.write_text("".join(json.dumps({"id": i, "t": "word"}) + "\n" for i in range(3000)))
    status, shown = run_with_terminal_stderr("import", "c", str(source), "--data", str(tmp_path / "tty"))
    assert status == 0, shown
    assert "100%" in shown and "3,000 records" in shown, shown
    piped = run("import", "c", str(source), "--data", str(tmp_path / "pipe"))
    assert piped.returncode == 0 and piped.stderr == ""


def test_usage_errors_of_export_and_check_exit_2(tmp_path: Path) -> None:
    for args in (["export"], ["export", "c", "--bogus"], ["check", "--bogus"], ["check", "extra"]):
        result = run(*args, "--data", str(tmp_path))
        assert result.returncode == 2, (args, result.stderr)
