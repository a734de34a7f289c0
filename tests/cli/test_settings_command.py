"""This module tests the following properties of ``roarsearch settings``, running the real command:

- without ``--set`` it prints every key as JSON; with ``--set KEY=JSON`` (repeatable, ``null``
  resets) it changes them, durably, and prints the result, which the next search uses;
- a wrong key or type exits 1 naming it and changes nothing; a value that is not JSON exits 2.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_cli import run


def test_settings_command(tmp_path: Path) -> None:
    source = tmp_path / "places.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in [{"id": 1, "name": "Paris", "population": 10},
                                                         {"id": 2, "name": "Paris", "population": 99}]) + "\n")
    data = tmp_path / "data"
    assert run("import", "places", str(source), "--data", str(data)).returncode == 0
    shown = run("settings", "places", "--data", str(data))
    assert shown.returncode == 0 and json.loads(shown.stdout)["customRanking"] == []
    changed = run("settings", "places", "--data", str(data), "--set", 'customRanking=["-population"]',
                  "--set", 'stopWords=["the"]')
    assert changed.returncode == 0, changed.stderr
    assert json.loads(changed.stdout)["customRanking"] == ["-population"]
    raw = run("search", "places", "the paris", "--data", str(data), "--json")
    assert [r["id"] for r in json.loads(raw.stdout)["results"]] == [2, 1]
    bad = run("settings", "places", "--data", str(data), "--set", 'stopWords="the"')
    assert bad.returncode == 1 and "stopWords: must be an array of strings" in bad.stderr
    assert run("settings", "places", "--data", str(data), "--set", "stopWords=[nope").returncode == 2
    assert run("settings", "places", "--data", str(data), "--set", "stopWords").returncode == 2
    reset = run("settings", "places", "--data", str(data), "--set", "stopWords=null")
    assert json.loads(reset.stdout)["stopWords"] == [] and json.loads(reset.stdout)["customRanking"] == ["-population"]
