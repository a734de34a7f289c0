"""MkDocs hooks: the benchmark plots the docs show live in benchmarks/results/, beside the results
they were drawn from, and docs/benchmarks.md links them as ``../benchmarks/results/NAME.png`` (the
path that works when the page is read on a forge). The site gets each linked plot as a file of its
own, and the link is pointed at it, so that ``mkdocs build --strict`` checks it like any other.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.docs_hooks")
ROOT = Path(__file__).resolve().parent
RESULTS = "benchmarks/results"
LINK = re.compile(r"\]\(\.\./" + re.escape(RESULTS) + r"/([A-Za-z0-9_.-]+\.png)\)")


def on_files(files: Files, config: Any) -> Files:
    for plot in sorted((ROOT / RESULTS).glob("*.png")):
        files.append(File(f"{RESULTS}/{plot.name}", str(ROOT), config["site_dir"], config["use_directory_urls"]))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    # Relative to the page's own folder (docs/ holds every page at its top level).
    return LINK.sub(lambda match: f"]({RESULTS}/{match.group(1)})", markdown)


def on_nav(nav: Any, config: Any, files: Files) -> Any:
    # MkDocs only notes a page left out of the nav (INFO); here it is a warning, so that
    # `mkdocs build --strict` fails on a page a reader of the site cannot reach.
    listed = {page.file.src_uri for page in nav.pages}
    for file in files.documentation_pages():
        if file.src_uri not in listed:
            log.warning("docs/%s is not in the nav of mkdocs.yml", file.src_uri)
    return nav


ROLE = re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj):(?=<code>)")


def on_page_content(html: str, page: Any, config: Any, files: Files) -> str:
    # Docstrings name other objects with Sphinx roles (:class:`Engine`); the API page shows the
    # name as code, without the role.
    return ROLE.sub("", html)
