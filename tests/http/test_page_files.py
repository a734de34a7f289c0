"""This module tests the following properties, against a real server on 127.0.0.1 over HTTP:

- ``serve --page-files DIR`` serves DIR's files at ``/`` ahead of the search page's own: an
  application's ``embed.js`` replaces the bundled one, files of its own (a model's, in a
  subfolder) are served beside it, and every other page file is still the bundled one;
- the API routes are never shadowed by a file of DIR, and the page still answers GET and HEAD only;
- with several workers, every worker serves the same files;
- a DIR that is not a directory is a usage error (exit 2) naming it, before anything is served.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import ROOT, Server, start_server, stop_server

APP_EMBED = "window.roarsearchEmbed = (text) => [text.length, 1, 0];\n"
BUNDLED = ROOT / "src" / "roarsearch" / "server" / "static"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("page-files")
    files = root / "files"
    (files / "model").mkdir(parents=True)
    (files / "embed.js").write_text(APP_EMBED)
    (files / "model" / "vocabulary.json").write_text('{"shoe": 0}')
    (files / "v2").write_text("a file named like the API")
    running = start_server(root / "data", "--page-files", str(files), "--workers", "2")
    yield running
    assert stop_server(running) == 0


def test_the_applications_files_come_first(served: Server) -> None:
    with served.client(key=None) as client:
        for _ in range(6):  # connections spread over both workers
            embed = client.get("/embed.js", headers={"Connection": "close"})
            assert embed.status_code == 200 and embed.text == APP_EMBED
            assert "javascript" in embed.headers["content-type"]
        assert client.get("/model/vocabulary.json").json() == {"shoe": 0}
        assert client.get("/app.js").text == (BUNDLED / "app.js").read_text()
        page = client.get("/")
        assert page.status_code == 200 and page.text == (BUNDLED / "index.html").read_text()
        assert client.head("/embed.js").status_code == 200
        refused = client.post("/embed.js")
        assert refused.status_code == 404 and refused.json()["status"] == 404
        assert client.get("/missing.js").status_code == 404


def test_the_api_is_never_shadowed(served: Server) -> None:
    with served.client() as client:
        answer = client.post("/v2", json={"collection": "c"})
        assert answer.status_code == 404 and "c" in answer.json()["data"]  # the engine's answer, not the file
        assert client.get("/health").status_code == 200


def test_a_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "roarsearch", "serve", "--data", str(tmp_path / "data"),
                             "--port", "0", "--page-files", str(tmp_path / "nowhere")],
                            capture_output=True, text=True, timeout=60, cwd=ROOT,
                            env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 2 and f"--page-files {tmp_path / 'nowhere'}: not a directory" in result.stderr
    assert not (tmp_path / "data").exists()
