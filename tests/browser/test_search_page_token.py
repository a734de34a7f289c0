"""This module tests the following properties of the search page with a tenant token:

- the page takes a tenant token in its address (``#key=<token>``) as it takes a search key, and
  every count it shows is the token's (only the films its rule lets through);
- a token outside its rules gives a readable 403, a revoked key's token a readable 401.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from roarsearch.keys import mint_token
from tests.browser.conftest import DemoServer

WAIT_SECONDS = 15
STATUS = re.compile(r"^([\d,]+) results? in (\d+) ms$")


def _wait(driver: Any, script: str, what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.05).until(lambda d: d.execute_script(script))
    except TimeoutException:
        pytest.fail(f"timed out waiting for {what}")


def shown_total(driver: Any) -> int:
    text = _wait(driver, "const s = document.getElementById('status').textContent;"
                         "return !document.getElementById('results').hasAttribute('aria-busy') && "
                         "/^[0-9,]+ results? in [0-9]+ ms$/.test(s) && s", "the results")
    found = STATUS.match(text)
    assert found, text
    return int(found[1].replace(",", ""))


def shown_error(driver: Any) -> str:
    return str(_wait(driver, "const e = document.getElementById('error');"
                             "return e.offsetParent !== null && e.textContent", "the error"))


def test_the_page_searches_with_a_tenant_token(demo_server: DemoServer, browser: Any) -> None:
    admin = {"Authorization": f"Bearer {demo_server.admin_key}"}
    key = httpx.post(f"{demo_server.base_url}/v2/keys", headers=admin, timeout=30,
                     json={"actions": ["search"], "collections": ["movies"]}).json()
    token = mint_token(key["uid"], key["key"], {"movies": {"filter": "year < 1950"}})
    expected = httpx.post(f"{demo_server.base_url}/v2", headers=admin, timeout=30,
                          json={"collection": "movies", "filter": "year < 1950", "count": 0}).json()["totalHits"]
    everything = httpx.post(f"{demo_server.base_url}/v2", headers=admin, timeout=30,
                            json={"collection": "movies", "count": 0}).json()["totalHits"]
    assert 0 < expected < everything

    browser.get("about:blank")
    browser.get(f"{demo_server.base_url}/#key={token}&collection=movies")
    assert shown_total(browser) == expected

    browser.get("about:blank")
    outside = mint_token(key["uid"], key["key"], {"films": None})
    browser.get(f"{demo_server.base_url}/#key={outside}&collection=movies")
    error = shown_error(browser)
    assert error.startswith("Error 403: ") and "tenant token may not search collection 'movies'" in error, error

    assert httpx.delete(f"{demo_server.base_url}/v2/keys/{key['uid']}", headers=admin, timeout=30).status_code == 200
    browser.get("about:blank")
    browser.get(f"{demo_server.base_url}/#key={token}&collection=movies")
    error = shown_error(browser)
    assert error.startswith("Error 401: ") and "invalid tenant token" in error, error
