"""This module tests the following properties, running the real command:

- import loads JSON Lines, a JSON array and CSV in batches; a bad line stops it with the line
  number and writes nothing of its batch (earlier batches stay);
- search prints a readable table, or JSON with --json; check reports ok (0) and damage (1);
- usage errors exit 2; the script and python -m are the same program.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from roarsearch import Engine

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "roarsearch", *args], capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{ROOT}"), timeout=120)


def test_import_search_check_jsonl(tmp_path: Path) -> None:
    source = tmp_path / "people.jsonl"
    source.write_text("\n".join(json.dumps({"id": i, "name": f"person {i}", "team": "red" if i % 2 else "blue"})
                                for i in range(25)) + "\n")
    data = tmp_path / "data"
    result = run("import", "people", str(source), "--data", str(data), "--batch-size", "10")
    assert result.returncode == 0, result.stderr
    assert "imported 25 records" in result.stdout
    table = run("search", "people", "person", "--data", str(data), "--facet", "team", "--count", "3")
    assert table.returncode == 0 and "25 hits" in table.stdout and "facet team: blue (13), red (12)" in table.stdout
    raw = run("search", "people", "persn 7", "--data", str(data), "--json")
    assert json.loads(raw.stdout)["results"][0]["id"] == 7
    assert run("check", "--data", str(data)).returncode == 0


def test_bad_line_stops_import_and_keeps_earlier_batches(tmp_path: Path) -> None:
    lines = [json.dumps({"id": i}) for i in range(12)]
    lines[7] = '{"id": 7, "broken": '
    source = tmp_path / "bad.jsonl"
    source.write_text("\n".join(lines) + "\n")
    data = tmp_path / "data"
    result = run("import", "c", str(source), "--data", str(data), "--batch-size", "5")
    assert result.returncode == 1
    assert "line 8: malformed JSON" in result.stderr
    raw = run("search", "c", "--data", str(data), "--json", "--count", "100")
    assert json.loads(raw.stdout)["totalHits"] == 5  # the first batch only, nothing of the second


def test_invalid_record_names_its_line(tmp_path: Path) -> None:
    source = tmp_path / "records.json"
    source.write_text(json.dumps([{"id": 1}, {"id": 2}, {"name": "no id"}]))
    result = run("import", "c", str(source), "--data", str(tmp_path / "d"))
    assert result.returncode == 1 and "line 1 (record 3 of the file): records[2].id: is required" in result.stderr


def test_csv_import(tmp_path: Path) -> None:
    source = tmp_path / "items.csv"
    source.write_text("id,title,price\n1,Red shirt,10.5\n2,Blue shirt,20\n")
    data = tmp_path / "data"
    assert run("import", "items", str(source), "--data", str(data)).returncode == 0
    raw = run("search", "items", "shirt", "--data", str(data), "--json", "--filter", "price > 15")
    assert [r["id"] for r in json.loads(raw.stdout)["results"]] == [2]


def test_check_reports_damage_and_usage_errors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    source = tmp_path / "a.jsonl"
    source.write_text('{"id": 1, "t": "x"}\n')
    assert run("import", "c", str(source), "--data", str(data)).returncode == 0
    snapshot = data / "default" / "collections" / "c" / "snapshot.rsnap"
    raw = bytearray(snapshot.read_bytes())
    raw[-1] ^= 0xFF
    snapshot.write_bytes(bytes(raw))
    damaged = run("check", "--data", str(data))
    assert damaged.returncode == 1 and "checksum" in damaged.stderr
    assert run("search").returncode == 2
    assert run("frobnicate").returncode == 2


def test_json_array_errors_name_the_real_line(tmp_path: Path) -> None:
    source = tmp_path / "records.json"
    source.write_text('[\n  {"id": 1},\n  {"id": 2},\n  {"id": 3,\n   "x": NaN},\n  {"id": 4}\n]\n')
    data = tmp_path / "data"
    result = run("import", "c", str(source), "--data", str(data), "--batch-size", "2")
    assert result.returncode == 1 and "line 4: NaN is not JSON" in result.stderr
    assert "(2 records before it were)" in result.stderr
    raw = run("search", "c", "--data", str(data), "--json")
    assert json.loads(raw.stdout)["totalHits"] == 2
    multi = tmp_path / "multi.json"
    multi.write_text('[\n {"id": 1},\n\n {"id": 2}, {"name": "no id"}\n]')
    result = run("import", "c", str(multi), "--data", str(data))
    assert result.returncode == 1 and "line 4 (record 3 of the file): records[2].id: is required" in result.stderr
    trailing = tmp_path / "trailing.json"
    trailing.write_text('[{"id": 1}]\n[{"id": 2}]')
    result = run("import", "c", str(trailing), "--data", str(data))
    assert result.returncode == 1 and "line 2: text after the end of the array" in result.stderr


def test_csv_cells_and_lines(tmp_path: Path) -> None:
    source = tmp_path / "codes.csv"
    source.write_text('id,zip,note,score\n1,02134,"two\nlines",1e3\n2,10001,,-0.5\n')
    data = tmp_path / "data"
    assert run("import", "codes", str(source), "--data", str(data)).returncode == 0
    results = json.loads(run("search", "codes", "--data", str(data), "--json").stdout)["results"]
    assert [(r["zip"], r.get("note"), r["score"]) for r in results] == [("02134", "two\nlines", 1000.0), (10001, None, -0.5)]
    bad = tmp_path / "bad.csv"
    bad.write_text('id,name\n1,"a\nb"\n2,x,extra\n')
    result = run("import", "codes", str(bad), "--data", str(data))
    assert result.returncode == 1 and "line 4: 3 cells, the header names 2" in result.stderr


def test_search_table_and_reading_commands_create_nothing(tmp_path: Path) -> None:
    source = tmp_path / "films.jsonl"
    source.write_text("\n".join(json.dumps({"id": i, "title": f"Star film {i}", "year": 1970 + i}) for i in range(3)))
    data = tmp_path / "data"
    assert run("import", "films", str(source), "--data", str(data)).returncode == 0
    table = run("search", "films", "star", "--data", str(data), "--fields", "title", "--sort=-year", "--count", "2")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("3 hits in ") and lines[0].endswith("showing 1-2")
    assert lines[1].split() == ["id", "title", "_rank"] and set(lines[2]) <= {"-", " "}
    assert lines[3].split()[:4] == ["2", "Star", "film", "2"] and lines[4].split()[0] == "1"
    missing = run("search", "films", "--data", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "not a roarsearch data directory" in missing.stderr
    assert not (tmp_path / "nowhere").exists()
    assert run("check", "--data", str(tmp_path / "nowhere")).returncode == 1
    checked = run("check", "--data", str(data), "--app", "default")
    assert checked.returncode == 0 and "default/films: 3 records, ok" in checked.stdout


def test_entry_points_and_usage(tmp_path: Path) -> None:
    assert run("--help").returncode == 0
    assert run("import", "c", str(tmp_path / "absent.jsonl"), "--data", str(tmp_path)).returncode == 2
    assert run("import", "c", "x.jsonl", "--batch-size", "0").returncode == 2
    assert run("serve", "--app", "bad/name", "--data", str(tmp_path), "--api-key", "k").returncode == 2
    script = subprocess.run(["roarsearch", "--help"], capture_output=True, text=True, timeout=60)
    assert script.returncode == 0 and script.stdout == run("--help").stdout
    demo = run("demo", "--help")
    assert demo.returncode == 0 and "demo" in demo.stdout


def test_import_reads_vectors_from_json_lines(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": i, "title": f"doc {i}", "_vectors": {"text": [1.0, float(i)]}})
                                for i in range(12)) + "\n")
    data = tmp_path / "data"
    with Engine(data) as engine:
        engine.update_settings("docs", {"vectors": {"text": {"dimensions": 2, "metric": "l2"}}})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]))
    command = [sys.executable, "-m", "roarsearch", "import", "docs", str(source), "--data", str(data), "--batch-size", "5"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    with Engine(data) as engine:
        found = engine.search({"collection": "docs", "vector": {"name": "text", "values": [1, 7.2], "k": 2}})
        assert [shown["id"] for shown in found["results"]] == [7, 8]
        assert engine.check()["ok"]
    source.write_text(json.dumps({"id": 99, "_vectors": {"text": [1.0]}}) + "\n")
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert result.returncode == 1 and "_vectors.text: must hold exactly 2 numbers, got 1" in result.stderr
