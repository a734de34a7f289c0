"""This module tests the following properties, in a real headless Chromium (Debian's package)
driving the page served by a real ``roarsearch demo`` server on 127.0.0.1:

- typing a query with a typo shows results as you type, with the matched words highlighted, the
  total and the response time;
- ticking a text facet narrows the results while the facet's own counts stay disjunctive;
- paging and sorting work; screenshots are saved to test-artifacts/ for people to look at.

Chromium is installed by ``.ci/install-browser.sh``; without it these tests fail, never skip.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest


ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("demo")
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "roarsearch", "demo", "--data", str(data), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
    address = None
    assert server.stdout is not None
    for line in server.stdout:
        if line.startswith("search page: "):
            address = line.split(": ", 1)[1].strip()
            break
    assert address, "demo did not print the page address"
    for _ in range(100):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
    yield address
    server.terminate()
    server.wait(timeout=30)
    server.stdout.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    assert os.path.exists(CHROMIUM), "Chromium is missing: run .ci/install-browser.sh (Debian chromium package)"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


def test_search_as_you_type_facets_paging_sort(page_url: str, browser: object) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page = browser.new_page(viewport={"width": 1200, "height": 900})  # type: ignore[attr-defined]
    page.goto(page_url)
    page.wait_for_selector("#results li")
    page.fill("#query", "godfathr")  # a typo
    page.wait_for_function("document.querySelector('#results h2') && "
                           "document.querySelector('#results h2').innerHTML.includes('<em>Godfather</em>')")
    status = page.inner_text("#status")
    assert re.match(r"\d[\d,]* results in \d+ ms", status), status
    assert "Godfather" in page.inner_text("#results li:first-child h2")
    page.screenshot(path=str(ARTIFACTS / "search-typo.png"))

    page.fill("#query", "star wars")
    page.wait_for_function("document.querySelector('#results h2') && "
                           "document.querySelector('#results h2').textContent.includes('Star Wars')")
    page.wait_for_selector("#facets input[data-field='genres'][data-value='Drama']")
    total_before = int(page.inner_text("#status").split()[0].replace(",", ""))
    drama = page.locator("#facets input[data-field='genres'][data-value='Drama']")
    action = page.locator("#facets label", has=page.locator("input[data-value='Action']"))
    action_count_before = action.locator(".count").inner_text()
    drama.check()
    page.wait_for_function(f"parseInt(document.querySelector('#status').textContent.replace(/,/g, '')) < {total_before}")
    action_count_after = page.locator("#facets label", has=page.locator("input[data-value='Action']")).locator(".count").inner_text()
    assert action_count_after == action_count_before  # disjunctive: genres counts ignore the genres filter
    page.screenshot(path=str(ARTIFACTS / "search-facet.png"))

    first_page = page.inner_text("#results li:first-child h2")
    page.click("#next")
    page.wait_for_function("document.querySelector('#page-label').textContent.startsWith('Page 2')")
    assert page.inner_text("#results li:first-child h2") != first_page
    page.select_option("#sort", "-year")
    page.wait_for_function("document.querySelector('#page-label').textContent.startsWith('Page 1')")
    years = [int(y) for y in re.findall(r"\((\d{4})\)", page.inner_text("#results"))]
    assert years == sorted(years, reverse=True) and years
    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.screenshot(path=str(ARTIFACTS / "search-phone.png"), full_page=True)
    page.close()
