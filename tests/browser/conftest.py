"""Fixtures for the search page tests: a real ``roarsearch demo`` server and a real headless Chromium.

The server is the command a new user runs (``python -m roarsearch demo``) on a free port of
127.0.0.1 with its own temporary data directory; its printed page address and admin key are what
the tests use. The browser is Debian's ``chromium`` driven by Debian's ``chromedriver`` through
selenium, with both paths given explicitly so that selenium-manager never downloads anything.
Without them the tests are skipped with the command that installs them (``bash .ci/install-browser.sh``);
CI runs that script and turns any skip into a failure (``tests/conftest.py``).
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# No network beyond 127.0.0.1, no first-run or background services, a throwaway profile (added below).
CHROMIUM_FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--force-device-scale-factor=1", "--lang=en-US")
SERVER_START_SECONDS = 120  # a cold start imports 17,472 films first (about 2 s here; CI machines are slower)
INSTALL_HINT = "run `bash .ci/install-browser.sh` (Debian packages chromium and chromium-driver, selenium from PyPI)"


def browser_missing() -> str | None:
    """Why the search page tests cannot run here (None when Chromium, chromedriver and selenium are all present)."""
    if not os.path.exists(CHROMIUM):
        return f"Chromium is missing ({CHROMIUM}): {INSTALL_HINT}"
    if not os.path.exists(CHROMEDRIVER):
        return f"chromedriver is missing ({CHROMEDRIVER}): {INSTALL_HINT}"
    try:
        import selenium  # noqa: F401
    except ImportError as error:
        return f"selenium is missing ({error}): {INSTALL_HINT}"
    return None


@dataclass(frozen=True)
class DemoServer:
    base_url: str   # http://127.0.0.1:PORT
    page_url: str   # as printed: .../#key=<search key>&collection=movies
    search_key: str
    admin_key: str
    output: list[str]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _read_lines(stream: object, lines: queue.Queue[str | None]) -> None:
    # Drains the server's output for as long as it runs, so that a full pipe never blocks it.
    for line in stream:  # type: ignore[attr-defined]
        lines.put(line)
    lines.put(None)


@pytest.fixture(scope="session")
def demo_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DemoServer]:
    data = tmp_path_factory.mktemp("demo-data")
    port = free_port()
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("ROARSEARCH_API_KEY", "ROARSEARCH_SEARCH_KEYS")}
    environment["PYTHONUNBUFFERED"] = "1"
    server = subprocess.Popen(
        [sys.executable, "-m", "roarsearch", "demo", "--data", str(data), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT, env=environment,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_read_lines, args=(server.stdout, lines), daemon=True)
    reader.start()
    output: list[str] = []
    deadline = time.monotonic() + SERVER_START_SECONDS
    while not any(line.startswith("roarsearch ready on ") for line in output):
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        if line is None or time.monotonic() > deadline:
            server.kill()
            server.wait()
            reader.join(timeout=10)
            assert server.stdout is not None
            server.stdout.close()
            pytest.fail("roarsearch demo did not become ready:\n" + "".join(output))
        output.append(line)
    printed = "".join(output)
    page = re.search(r"^search page:\s+(\S+)$", printed, re.M)
    search_key = re.search(r"^search-only key:\s+(\S+)$", printed, re.M)
    admin_key = re.search(r"^admin key:\s+(\S+)", printed, re.M)
    assert page and search_key and admin_key, f"the demo did not print the address and both keys:\n{printed}"
    try:
        yield DemoServer(f"http://127.0.0.1:{port}", page[1], search_key[1], admin_key[1], output)
    finally:
        server.terminate()
        status = server.wait(timeout=30)
        reader.join(timeout=10)  # it ends at the end of the output; then the pipe can be closed
        assert server.stdout is not None
        server.stdout.close()
        assert status == 0, f"the demo server did not stop cleanly on SIGTERM (status {status})"


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.add_argument("--window-size=1280,900")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
