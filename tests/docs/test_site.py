"""This module tests the following properties of the documentation site (mkdocs.yml over docs/):

- it builds with ``mkdocs build --strict``, as CI builds it: no link to a missing page or anchor, no
  page left out of the nav, an API page rendered from the docstrings of the public API;
- the strict build does fail on those faults (a link to a page that does not exist, an anchor no
  heading makes, a page missing from the nav), so a green build means they are absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs site needs the docs extra: pip install -e '.[docs]'")
pytest.importorskip("mkdocstrings", reason="the docs site needs the docs extra: pip install -e '.[docs]'")
pytest.importorskip("material", reason="the docs site needs the docs extra: pip install -e '.[docs]'")

ROOT = Path(__file__).resolve().parents[2]


def build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=project, env=environment, capture_output=True, text=True, timeout=300)


def test_site_builds_strictly(tmp_path: Path) -> None:
    result = build(ROOT, tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    for name in ("roarsearch.engine.engine.Engine.search", "roarsearch.errors.SearchError", "roarsearch.datasets.load_movies"):
        assert f'id="{name}"' in api, name
    assert (tmp_path / "site" / "benchmarks" / "results" / "scaling-packages.png").exists()


def test_strict_build_fails_on_broken_links_and_pages_left_out(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("mkdocs.yml", "docs_hooks.py"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "docs", project / "docs")
    for name in ("src", "benchmarks"):
        (project / name).symlink_to(ROOT / name)
    with (project / "docs" / "index.md").open("a") as page:
        page.write("\nSee [a page that is not there](no-such-page.md) and [a heading](filters.md#no-such-heading).\n")
    (project / "docs" / "orphan.md").write_text("# A page left out of the nav\n")
    result = build(project, tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "no-such-page.md" in output, output
    assert "no-such-heading" in output, output
    assert "orphan.md" in output, output
