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
    # The skipped test below is the subject, run in a child pytest with the project's options: this
    # test fails if those options stop printing why a test was skipped (``-rs`` in addopts).
    tests = tmp_path / "test_skips.py"
    tests.write_text("import pytest\n\n\n@pytest.mark.skip(reason='needs a browser: .ci/install-browser.sh')\n"
                     "def test_page() -> None:\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"), "--rootdir",
                             str(tmp_path), "-p", "no:cacheprovider", str(tests)],
                            capture_output=True, text=True, timeout=120)
    assert "1 skipped" in result.stdout, result.stdout
    assert "SKIPPED [1]" in result.stdout and "needs a browser: .ci/install-browser.sh" in result.stdout


def test_csv_rows_get_a_location_from_geo_columns_or_the_geo_option(tmp_path: Path) -> None:
    flat = tmp_path / "flat.csv"
    flat.write_text("id,name,_geo.lat,_geo.lng\n1,Paris,48.8566,2.3522\n2,Nowhere,,\n3,London,51.5074,-0.1278\n")
    named = tmp_path / "named.csv"
    named.write_text("id,name,latitude,longitude\n1,Paris,48.8566,2.3522\n2,Nowhere,,\n3,London,51.5074,-0.1278\n")
    for source, options in ((flat, []), (named, ["--geo", "latitude,longitude"])):
        data = tmp_path / f"data-{source.stem}"
        result = run("import", "places", str(source), "--data", str(data), *options)
        assert result.returncode == 0 and result.stderr == "", result.stderr
        checked = run("check", "--data", str(data))
        assert checked.returncode == 0, checked.stdout  # the engine and check agree on the location
        exported = [json.loads(line) for line in run("export", "places", "--data", str(data)).stdout.splitlines()]
        assert exported[1] == {"id": 2, "name": "Nowhere"}
        with_location = exported[0]
        assert (with_location.get("_geo") or {"lat": with_location["_geo.lat"], "lng": with_location["_geo.lng"]}) \
            == {"lat": 48.8566, "lng": 2.3522}
        found = run("search", "places", "--data", str(data), "--filter", "_geo.lat > 50", "--json")
        assert [hit["id"] for hit in json.loads(found.stdout)["results"]] == [3]
    # Without the option, latitude/longitude columns are plain numbers: the import says so.
    data = tmp_path / "data-plain"
    result = run("import", "places", str(named), "--data", str(data))
    assert result.returncode == 0
    assert "'latitude' and 'longitude' give no location" in result.stderr and "--geo latitude,longitude" in result.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("id,latitude,longitude\n1,48.8,\n")
    result = run("import", "places", str(bad), "--data", str(tmp_path / "data-bad"), "--geo", "latitude,longitude")
    assert result.returncode == 1
    assert "line 2: 'longitude' (named by --geo): is empty or missing" in result.stderr
    assert run("import", "places", str(bad), "--data", str(tmp_path / "data-bad"), "--geo", "latitude").returncode == 2
