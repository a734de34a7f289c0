"""This module tests the following properties of ``roarsearch demo`` without a browser:

- the first run indexes all 17,472 films; a second run reuses them without importing again
  (the data directory is not written to);
- a collection left short by an interrupted run is completed, not duplicated (ids replace);
- ``--no-serve`` loads and exits 0; the options have the documented defaults and are all in docs/demo.md;
- the printed address carries the search key and the collection in the fragment;
- the command serves (no browser needed): the page at ``/`` and a search with the printed key.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from roarsearch import Engine
from roarsearch.cli import demo
from roarsearch.datasets import load_movies
from tests.browser.conftest import DemoServer

MOVIES = 17_472


def directory_state(path: Path) -> dict[str, tuple[int, int]]:
    return {str(file): (file.stat().st_size, file.stat().st_mtime_ns) for file in path.rglob("*") if file.is_file()}


def test_first_run_indexes_second_run_reuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert demo.load(str(tmp_path)) == MOVIES
    assert "indexed 17,472 movies from bokeh-sampledata" in capsys.readouterr().out
    with Engine(str(tmp_path / "default")) as engine:
        answer = engine.search({"collection": "movies", "query": "godfathr", "count": 1, "fields": ["title"]})
        assert answer["results"][0]["title"] == "The Godfather"
    before = directory_state(tmp_path)
    assert demo.load(str(tmp_path)) == MOVIES
    assert capsys.readouterr().out.startswith("reusing 17,472 movies")
    # Opening and closing an engine may touch its lock file; no data file changes.
    changed = {name for name, state in directory_state(tmp_path).items() if before.get(name) != state}
    assert all("lock" in os.path.basename(name).lower() for name in changed), changed


def test_an_interrupted_import_is_completed_without_duplicates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Engine(str(tmp_path / "default")) as engine:
        engine.add_records("movies", load_movies(limit=500))  # as if Ctrl-C came after the first batch
    assert demo.load(str(tmp_path)) == MOVIES
    assert "500 of 17,472 movies indexed by an interrupted run" in capsys.readouterr().out
    with Engine(str(tmp_path / "default")) as engine:
        assert engine.search({"collection": "movies", "count": 0})["totalHits"] == MOVIES


def test_no_serve_from_the_command_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    finished = subprocess.run([sys.executable, "-m", "roarsearch", "demo", "--data", str(data), "--no-serve"],
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert "indexed 17,472 movies" in finished.stdout
    assert "search page" not in finished.stdout  # it did not start serving
    assert (data / "default").is_dir()


def test_options_and_address() -> None:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    defaults = parser.parse_args([])
    assert (defaults.data, defaults.host, defaults.port, defaults.no_serve) == ("./roarsearch-data", "127.0.0.1", 7700, False)
    assert demo.page_address("127.0.0.1", 7700, "abc_-1") == "http://127.0.0.1:7700/#key=abc_-1&collection=movies"
    assert demo.page_address("::1", 8000, "k").startswith("http://[::1]:8000/#key=k&")


def test_every_option_is_documented() -> None:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    documented = (Path(__file__).resolve().parents[2] / "docs" / "demo.md").read_text()
    options = [option for action in parser._actions for option in action.option_strings if option.startswith("--")]
    assert options and all(option in documented for option in options if option != "--help"), options


def test_the_demo_serves_the_page_and_searches(demo_server: DemoServer) -> None:
    page = httpx.get(demo_server.base_url + "/", timeout=30)
    assert page.status_code == 200 and "roarsearch" in page.text
    found = httpx.post(demo_server.base_url + "/v2", json={"collection": "movies", "query": "star wars"},
                       headers={"Authorization": f"Bearer {demo_server.search_key}"}, timeout=30)
    assert found.status_code == 200 and found.json()["totalHits"] > 0
