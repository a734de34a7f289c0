"""This module tests what the command line tells a person, running the real command:

- ``search``'s table prints the response's warnings (did you mean ...) to stderr, as ``--json``
  shows them in the response;
- ``check`` shows a progress bar on a terminal (and none when its output is not one);
- the README's test command shows why tests were skipped (pytest's ``-rs`` in the project's options).
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

from tests.cli.test_cli import ROOT, run


def imported(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    data = tmp_path / "data"
    result = run("import", "flights", str(source), "--data", str(data))
    assert result.returncode == 0, result.stderr
    return data


def test_search_table_prints_warnings_to_stderr(tmp_path: Path) -> None:
    data = imported(tmp_path, [{"id": 1, "dep_delay": 75}, {"id": 2, "dep_delay": 5}])
    table = run("search", "flights", "--data", str(data), "--filter", "dep_dely > 60")
    assert table.returncode == 0
    assert table.stdout.startswith("0 hits")
    assert "warning: filter: no record has the field 'dep_dely'; did you mean 'dep_delay'?" in table.stderr
    assert "warning" not in table.stdout
    raw = run("search", "flights", "--data", str(data), "--filter", "dep_dely > 60", "--json")
    assert json.loads(raw.stdout)["warnings"] == ["filter: no record has the field 'dep_dely'; did you mean 'dep_delay'?"]
    assert raw.stderr == ""
    clean = run("search", "flights", "--data", str(data), "--filter", "dep_delay > 60")
    assert clean.stdout.startswith("1 hits") and clean.stderr == ""


def run_on_terminal(*args: str) -> tuple[int, str]:
    """Run the command with stderr on a pseudo-terminal; (exit status, what the terminal showed)."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "roarsearch", *args], stdout=subprocess.PIPE, stderr=secondary,
                               cwd=ROOT, env=dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}"))
    os.close(secondary)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([primary], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed: the process is gone
                break
            if not chunk:
                break
            shown += chunk
        elif process.poll() is not None:
            break
    os.close(primary)
    assert process.stdout is not None
    with process.stdout:
        process.stdout.read()
    return process.wait(timeout=30), shown.decode(errors="replace")


def test_check_shows_a_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    data = imported(tmp_path, [{"id": i, "name": f"flight {i}"} for i in range(25_000)])
    status, shown = run_on_terminal("check", "--data", str(data))
    assert status == 0
    assert "check default" in shown and "25.0k/25.0k" in shown and "records" in shown, shown
    quiet = run("check", "--data", str(data))
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.endswith("ok\n")


def test_readme_test_command_shows_skip_reasons(tmp_path: Path) -> None:
    tests = tmp_path / "test_skips.py"
    tests.write_text("import pytest\n\n\n@pytest.mark.skip(reason='needs a browser: .ci/install-browser.sh')\n"
                     "def test_page() -> None:\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
                             str(tmp_path), "-p", "no:cacheprovider", str(tests)],
                            capture_output=True, text=True, timeout=120)
    assert "1 skipped" in result.stdout, result.stdout
    assert "SKIPPED [1]" in result.stdout and "needs a browser: .ci/install-browser.sh" in result.stdout
