"""The ``packages`` corpus (Debian package descriptions, issue 17): parsing of apt's control files,
a clear error when the apt lists are missing, determinism and honest scale-up, workloads, and
engines that agree on a tiny slice of it. Tests that need the real lists skip when they are absent
(``python -m benchmarks.datasets --fetch`` fetches them); none asserts a time."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from benchmarks import datasets
from benchmarks.datasets import PACKAGES, PACKAGES_COPY_OFFSET, SourceMissing, real_packages, scaled_packages
from benchmarks.workloads import CLASSES, load, make_workloads

TRANSLATION = """Package: alpha
Description-md5: 11111111111111111111111111111111
Description-en: Alpha tool for testing
 Alpha is a small tool that does
 many useful things.
 .
 Features:
   * lists are kept
   * on their own lines
 .
 This package contains the alpha binary.

Package: beta
Description-md5: 22222222222222222222222222222222
Description-en: Beta library
 Beta provides a library of routines for parsing data.
"""

DUMPAVAIL = """Package: beta
Version: 1.0
Installed-Size: 120
Maintainer: Jane Roe <jane@example.org>
Architecture: amd64
Depends: libc6 (>= 2.34), zlib1g
Pre-Depends: dpkg
Description: Beta library
Description-md5: 22222222222222222222222222222222
Tag: role::shared-lib,
 devel::library
Section: libs
Priority: optional
Size: 4567

Package: alpha
Version: 2.0
Installed-Size: 30
Maintainer: John Doe <john@example.org>
Architecture: all
Description: Alpha tool for testing
Description-md5: 11111111111111111111111111111111
Section: utils
Priority: optional
Size: 890

Package: gamma
Version: 0.1
Architecture: all
Description: Gamma without an English long description
Description-md5: 33333333333333333333333333333333
Section: misc
"""


@pytest.fixture()
def fake_lists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A lists directory with one (uncompressed) Translation-en file; apt-cache answers DUMPAVAIL."""
    (tmp_path / "deb.example_dists_x_main_i18n_Translation-en").write_text(TRANSLATION, encoding="utf-8")

    def fake_output(*command: str) -> str:
        if command[0] == "apt-cache":
            assert f"Dir::State::Lists={tmp_path}" in command  # only the private lists are read
            return DUMPAVAIL
        return Path(command[-1]).read_text(encoding="utf-8")  # apt-helper cat-file

    monkeypatch.setattr(datasets, "_apt_output", fake_output)
    return tmp_path


def test_apt_control_files_become_records(fake_lists: Path) -> None:
    records = real_packages(fake_lists)
    assert [record["name"] for record in records] == sorted(["alpha", "beta"], key=lambda n: datasets.hashlib.sha1(n.encode()).hexdigest())
    assert [record["id"] for record in records] == [1, 2]  # gamma has no long description: left out
    alpha = next(record for record in records if record["name"] == "alpha")
    assert alpha["summary"] == "Alpha tool for testing"
    assert alpha["description"] == ("Alpha is a small tool that does many useful things.\n\nFeatures:\n* lists are kept"
                                    "\n* on their own lines\n\nThis package contains the alpha binary.")
    assert alpha["maintainer"] == "John Doe" and alpha["section"] == "utils" and "tags" not in alpha
    beta = next(record for record in records if record["name"] == "beta")
    assert beta["tags"] == ["devel::library", "role::shared-lib"]
    assert (beta["installedSize"], beta["size"], beta["dependsCount"]) == (120, 4567, 3)
    allowed = {"id", *PACKAGES.text_fields, *PACKAGES.keyword_fields, *PACKAGES.numeric_fields}
    assert all(set(record) <= allowed for record in records)
    assert real_packages(fake_lists) == records


def test_missing_lists_name_the_command(tmp_path: Path) -> None:
    with pytest.raises(SourceMissing, match=r"python -m benchmarks\.datasets --fetch"):
        real_packages(tmp_path / "nothing-here")


@pytest.fixture(scope="module")
def real() -> list[dict[str, Any]]:
    try:
        return real_packages()
    except SourceMissing as missing:
        pytest.skip(f"packages corpus source missing: {missing}")


def test_real_packages_are_text_heavy_and_in_id_order(real: list[dict[str, Any]]) -> None:
    assert len(real) > 30_000
    assert [record["id"] for record in real] == list(range(1, len(real) + 1))
    assert len({record["name"] for record in real}) == len(real)
    prose = [sum(len(record[field]) for field in PACKAGES.text_fields) for record in real]
    assert statistics.mean(prose) > 400
    assert all(isinstance(record["installedSize"], int) and record["section"] for record in real[:1_000])


def test_scale_up_is_deterministic_with_unique_ids_and_real_records_first(real: list[dict[str, Any]]) -> None:
    base = real[:2_000]
    first = scaled_packages(5_000, real=base)
    assert first == scaled_packages(5_000, real=base)
    assert first[:2_000] == base
    assert len({record["id"] for record in first}) == 5_000
    assert all(record["id"] > PACKAGES_COPY_OFFSET for record in first[2_000:])
    changed = 0
    for index, copy in enumerate(first[2_000:], start=2_000):
        source = base[index % 2_000]  # copy k of real package i sits at k * 2,000 + i
        assert copy["id"] == source["id"] + (index // 2_000) * PACKAGES_COPY_OFFSET
        assert copy["name"].startswith(source["name"] + "-")
        for field in ("section", "priority", "architecture", "maintainer", "tags", "dependsCount"):
            assert copy.get(field) == source.get(field)
        assert int(0.5 * source["installedSize"]) <= copy["installedSize"] <= 1.5 * source["installedSize"]
        # Words are resampled one for one: the layout (spaces, paragraphs) is the real one.
        assert copy["description"].count(" ") == source["description"].count(" ")
        assert copy["description"].count("\n") == source["description"].count("\n")
        changed += copy["description"] != source["description"]
    assert changed > 0.8 * 3_000  # short descriptions with few plain lower-case words may stay the same
    assert scaled_packages(5_000, seed=7, real=base) != first
    assert scaled_packages(1_500, real=base) == base[:1_500]


def test_packages_workloads_come_from_the_real_records(real: list[dict[str, Any]]) -> None:
    small = make_workloads(PACKAGES, real[:1_500], per_class=3)
    assert small == make_workloads(PACKAGES, real[:1_500], per_class=3)
    assert list(small["classes"]) == list(CLASSES)
    saved = load("packages")
    assert saved["corpus"] == "packages" and list(saved["classes"]) == list(CLASSES)
    text = " ".join(record[field] for record in real[:10_000] for field in PACKAGES.text_fields).lower()
    for band in ("rare", "medium", "common"):
        for entry in saved["classes"][f"one_word_{band}"]:
            assert entry["words"][0] in text, entry


def test_engines_agree_on_a_tiny_packages_corpus(real: list[dict[str, Any]], tmp_path: Path) -> None:
    pytest.importorskip("tantivy", reason="pip install -e '.[bench]'")
    from benchmarks.run import EXACT_CLASSES, adapter_for

    workloads = make_workloads(PACKAGES, real[:800], per_class=3)
    compared = [kind for kind in EXACT_CLASSES if not kind.startswith("prefix")]
    totals: dict[str, dict[str, list[int]]] = {}
    for engine in ("roarsearch", "sqlite-fts5", "tantivy"):
        adapter = adapter_for(engine)
        directory = tmp_path / engine
        directory.mkdir()
        assert adapter.build(PACKAGES, [real[:500], real[500:800]], str(directory)) == 800
        reopened = adapter_for(engine)  # as benchmarks.ingest does: a fresh adapter attached to the files
        reopened.attach(PACKAGES, str(directory))
        reopened.open()
        totals[engine] = {kind: [reopened.search(kind, entry).total for entry in workloads["classes"][kind]]
                          for kind in compared}
        reopened.close()
    for kind in compared:
        assert len({json.dumps(per_engine[kind]) for per_engine in totals.values()}) == 1, (kind, totals)
    assert any(total > 0 for total in totals["roarsearch"]["one_word_common"])
