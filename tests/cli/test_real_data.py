"""This module tests the following properties of the command line on real-world input:

- CSV is strict: an unclosed quote or a row with too few or too many cells stops the import with
  the line number, exit 1, and nothing of that batch is written;
- ``--id-field`` takes the id from a named column; ``--generate-ids`` makes ids from the content,
  so a re-import replaces records instead of duplicating them;
- gzip, bz2 and xz files import like plain ones (by magic bytes, whatever the extension), and
  damaged compressed data is a clear error;
- ``--data`` may name a root of applications or a directory ``Engine(DIR)`` wrote, for import,
  search, check, export and backup, with a hint when it is one level off;
- ``export`` writes JSON Lines in id order and re-importing it restores the collection exactly;
- ``backup`` copies consistently and leaves nothing on failure; ``--version``; ``| head`` is quiet.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from roarsearch import Engine, __version__
from tests.cli.test_cli import ROOT, run


def search_json(data: Path, collection: str, *extra: str) -> dict:
    result = run("search", collection, "--data", str(data), "--json", "--count", "100", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_unclosed_quote_stops_the_import_naming_its_line(tmp_path: Path) -> None:
    source = tmp_path / "films.csv"
    source.write_text('id,title,year\n1,"Alien,1979\n2,Brazil,1985\n3,Heat,1995\n4,Ran,1985\n5,Ed Wood,1994\n')
    data = tmp_path / "data"
    result = run("import", "films", str(source), "--data", str(data))
    assert result.returncode == 1
    assert "line 2: a quoted cell is never closed" in result.stderr and "Traceback" not in result.stderr
    assert "nothing of this batch was written" in result.stderr
    assert not (data / "default" / "collections" / "films").exists() or \
        search_json(data, "films")["totalHits"] == 0


def test_a_quote_closed_rows_later_is_a_cell_count_error(tmp_path: Path) -> None:
    source = tmp_path / "films.csv"
    source.write_text('id,title,year\n1,"Alien,1979\n2,Brazil,1985\n3,"Heat",1995\n')
    result = run("import", "films", str(source), "--data", str(tmp_path / "data"))
    assert result.returncode == 1
    assert "line 2: " in result.stderr and "the row runs from line 2 to line 4" in result.stderr, result.stderr


@pytest.mark.parametrize("row, cells", [("2,Brazil", 2), ("2,Brazil,1985,extra", 4)])
def test_wrong_cell_count_stops_the_import(tmp_path: Path, row: str, cells: int) -> None:
    source = tmp_path / "films.csv"
    source.write_text(f"id,title,year\n1,Alien,1979\n{row}\n3,Heat,1995\n")
    data = tmp_path / "data"
    result = run("import", "films", str(source), "--data", str(data))
    assert result.returncode == 1 and f"line 3: {cells} cells, the header names 3" in result.stderr
    assert run("search", "films", "--data", str(data)).returncode == 1  # nothing written: no collection


def test_id_field_and_generated_ids(tmp_path: Path) -> None:
    source = tmp_path / "books.csv"
    source.write_text("isbn,title,pages\n9780140449136,Crime and Punishment,671\n9780451524935,1984,328\n")
    data = tmp_path / "data"
    without = run("import", "books", str(source), "--data", str(data))
    assert without.returncode == 1 and "--id-field NAME" in without.stderr and "--generate-ids" in without.stderr
    assert run("import", "books", str(source), "--data", str(data), "--id-field", "isbn").returncode == 0
    results = search_json(data, "books", "--sort", "id")["results"]
    assert [(r["id"], r["pages"]) for r in results] == [(9780140449136, 671), (9780451524935, 328)]

    plain = tmp_path / "notes.csv"
    plain.write_text("title,score\nfirst,1.5\nsecond,2\nthird,3\n")
    for _ in range(2):  # the second import replaces: same content, same ids
        imported = run("import", "notes", str(plain), "--data", str(data), "--generate-ids")
        assert imported.returncode == 0 and "imported 3 records" in imported.stdout, imported.stderr
    notes = search_json(data, "notes")
    assert notes["totalHits"] == 3
    assert all(isinstance(r["id"], str) and len(r["id"]) == 16 for r in notes["results"])
    missing = run("import", "books", str(plain), "--data", str(data), "--id-field", "isbn")
    assert missing.returncode == 1 and "line 2: the record has no field 'isbn'" in missing.stderr


@pytest.mark.parametrize("suffix, compress", [(".csv.gz", gzip.compress), (".csv.bz2", bz2.compress),
                                              (".csv.xz", lzma.compress), (".csv", gzip.compress)])
def test_compressed_files(tmp_path: Path, suffix: str, compress: object) -> None:
    source = tmp_path / f"items{suffix}"
    source.write_bytes(compress(b"id,name,price\n1,Red shirt,10\n2,Blue shirt,20.5\n"))  # type: ignore[operator]
    data = tmp_path / "data"
    result = run("import", "items", str(source), "--data", str(data))
    assert result.returncode == 0 and "imported 2 records" in result.stdout, result.stderr
    assert search_json(data, "items", "--filter", "price > 15")["results"][0]["name"] == "Blue shirt"


def test_damaged_compressed_file_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "items.jsonl.gz"
    source.write_bytes(gzip.compress(b'{"id": 1}\n' * 1000)[:-20])
    result = run("import", "items", str(source), "--data", str(tmp_path / "data"))
    assert result.returncode == 1 and "damaged gzip data" in result.stderr and "Traceback" not in result.stderr


def test_data_may_be_a_root_or_an_engine_directory(tmp_path: Path) -> None:
    engine_dir = tmp_path / "library-made"
    with Engine(str(engine_dir)) as engine:
        engine.add_records("people", [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Alan"}])
    source = tmp_path / "more.jsonl"
    source.write_text('{"id": 3, "name": "Grace"}\n')
    assert run("import", "people", str(source), "--data", str(engine_dir)).returncode == 0
    assert not (engine_dir / "default").exists()  # written into the directory itself
    assert search_json(engine_dir, "people")["totalHits"] == 3
    checked = run("check", "--data", str(engine_dir))
    assert checked.returncode == 0 and "default/people: 3 records, ok" in checked.stdout
    assert run("search", "people", "--data", str(engine_dir), "--app", "shop").returncode == 2

    root = tmp_path / "root"
    assert run("import", "people", str(source), "--data", str(root)).returncode == 0
    with pytest.raises(Exception) as refused:
        Engine(str(root))
    assert "root of applications" in str(refused.value) and str(root / "default") in str(refused.value)
    inside = run("search", "people", "--data", str(root / "default" / "collections"))
    assert inside.returncode == 1 and f"pass --data {root / 'default'}" in inside.stderr
    other = run("search", "people", "--data", str(root), "--app", "shop")
    assert other.returncode == 1 and "holds the applications default: pass --app default" in other.stderr


def test_export_in_id_order_and_reimport_restores_exactly(tmp_path: Path) -> None:
    records = [{"id": "b", "nested": {"x": [1, 2.5, None]}, "flag": True}, {"id": 10, "name": "ten"},
               {"id": -3, "name": "minus"}, {"id": "a", "text": "é ü 字"}]
    records += [{"id": 100 + i, "n": i} for i in range(2100)]  # more than one page
    data = tmp_path / "data"
    with Engine(str(data / "default")) as engine:
        engine.add_records("c", records)
    exported = run("export", "c", "--data", str(data))
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    ints = sorted(r["id"] for r in records if isinstance(r["id"], int))
    assert [r["id"] for r in lines] == ints + ["a", "b"]
    assert sorted(map(json.dumps, lines)) == sorted(map(json.dumps, records))  # exactly as stored

    target = tmp_path / "c.jsonl"
    assert run("export", "c", "--data", str(data), "--output", str(target)).returncode == 0
    assert target.read_text() == exported.stdout
    copy = tmp_path / "copy"
    assert run("import", "c", str(target), "--data", str(copy)).returncode == 0
    assert run("export", "c", "--data", str(copy)).stdout == exported.stdout
    assert run("export", "nope", "--data", str(data)).returncode == 1
    assert not list(tmp_path.glob(".export-*"))


def test_backup_command_and_helper_leave_nothing_half_made(tmp_path: Path) -> None:
    from roarsearch import SearchError
    from roarsearch.storage.store import backup_data_directory

    data = tmp_path / "data"
    with Engine(str(data)) as engine:
        engine.add_records("c", [{"id": 1, "t": "x"}])
    made = run("backup", str(tmp_path / "bk"), "--data", str(data))
    assert made.returncode == 0 and "1 collection: c" in made.stdout, made.stderr
    assert search_json(tmp_path / "bk", "c")["totalHits"] == 1
    again = run("backup", str(tmp_path / "bk"), "--data", str(data))
    assert again.returncode == 1 and "already exists" in again.stderr
    missing = run("backup", str(tmp_path / "bk2"), "--data", str(tmp_path / "absent"))
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    with pytest.raises(SearchError) as error:
        backup_data_directory(tmp_path / "absent", tmp_path / "bk3")
    assert error.value.status == 400 and "not a roarsearch data directory" in error.value.data
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bk", "data"]


def test_version_and_broken_pipe(tmp_path: Path) -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"roarsearch {__version__}"
    source = tmp_path / "many.jsonl"
    source.write_text("".join(json.dumps({"id": i, "t": "word " * 50}) + "\n" for i in range(3000)))
    data = tmp_path / "data"
    assert run("import", "c", str(source), "--data", str(data)).returncode == 0
    piped = subprocess.run(f"{sys.executable} -m roarsearch export c --data {data} | head -n 1",
                           shell=True, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert json.loads(piped.stdout)["id"] == 0 and piped.stderr == "", piped.stderr
