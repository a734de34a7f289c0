"""This module tests the search page on a collection it knows nothing about, in a real headless
Chromium against the real ``roarsearch demo`` server (fixtures in ``conftest.py``):

- the collection picker lists every collection the key may search and switches between them;
- without a ``searchPage`` setting the page guesses from the data: each result's title from the
  field named ``name``, facts from numbers and keyword-like fields, facets for keyword-like text
  fields (a few values shared by many records, not names) and ranges for numeric ones, sort choices
  from the numeric fields — and each of these works (a range keeps the records inside it, a sort
  orders by its field);
- a ``searchPage`` setting changes the page without code (labels, facets, sort choices).

The screenshot of the places collection is the one in docs/demo.md (``test-artifacts/search-places.png``).
"""

from __future__ import annotations

import re

import httpx
import pytest

from roarsearch.datasets import load_places
from tests.browser.conftest import ARTIFACTS, DemoServer, browser_missing
from tests.browser.test_search_page import (
    Driver,
    all_css,
    click,
    css,
    facet_counts,
    open_page,
    settled,
    titles,
    total,
    type_query,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]

PLACES = 3000


@pytest.fixture(scope="module")
def places(demo_server: DemoServer) -> list[dict[str, object]]:
    """A second data set beside the films: real places from GeoNames, added over HTTP, no settings."""
    rows = load_places(limit=PLACES)
    headers = {"Authorization": f"Bearer {demo_server.admin_key}"}
    added = httpx.post(f"{demo_server.base_url}/v2/collections/places/records", headers=headers, json=rows, timeout=60)
    assert added.status_code == 201, added.text
    return rows


def places_url(demo_server: DemoServer) -> str:
    return f"{demo_server.base_url}/#key={demo_server.search_key}&collection=places"


def populations(driver: Driver) -> list[int]:
    return [int(found.replace(",", "")) for item in all_css(driver, "#results li")
            for found in re.findall(r"Population ([\d,]+)", item.text)[:1]]


def test_the_picker_switches_collections(demo_server: DemoServer, browser: Driver, places: list[dict[str, object]]) -> None:
    from selenium.webdriver.support.ui import Select

    open_page(browser, demo_server.page_url)
    picker = Select(css(browser, "#collection"))
    assert [option.get_attribute("value") for option in picker.options] == ["movies", "places"]
    assert picker.first_selected_option.get_attribute("value") == "movies"
    picker.select_by_value("places")
    wait_until(browser, lambda d: "collection=places" in d.current_url and settled(d) and total(d) == PLACES,
               "the places collection")
    assert css(browser, "#collection-name").text == "places"
    names = {row["name"] for row in places}
    assert titles(browser) and all(title in names for title in titles(browser)), titles(browser)


def test_a_guessed_page_for_places(demo_server: DemoServer, browser: Driver, places: list[dict[str, object]]) -> None:
    open_page(browser, places_url(demo_server))
    assert total(browser) == PLACES
    # Keyword-like text fields become facets; names and alternate names do not.
    facet_fields = browser.execute_script(
        "return [...new Set([...document.querySelectorAll('#facets input')].map((box) => box.dataset.field))]")
    assert "countryCode" in facet_fields and "timezone" in facet_fields, facet_fields
    assert "name" not in facet_fields and "alternateNames" not in facet_fields
    assert "population" in facet_fields  # a numeric field: ranges
    assert "latitude" not in facet_fields and "longitude" not in facet_fields  # coordinates: no ranges
    legends = [legend.text for legend in all_css(browser, "#facets legend")]
    assert "Country code" in legends and "Population" in legends, legends

    # A text facet narrows, and every result shows the country it was narrowed to.
    counts = facet_counts(browser, "countryCode")
    country, expected = next(iter(counts.items()))
    click(browser, f"#facets input[data-field='countryCode'][data-value='{country}']")
    wait_until(browser, lambda d: settled(d) and total(d) == int(expected.replace(",", "")), f"places in {country}")
    assert all(f"Country code: {country}" in item.text for item in all_css(browser, "#results li"))
    click(browser, "#clear-filters")
    wait_until(browser, lambda d: settled(d) and total(d) == PLACES, "every place again")

    # A guessed population range keeps only places inside it.
    ranges = browser.execute_script(
        "return [...document.querySelectorAll(\"#facets input[data-field='population']\")]"
        ".map((box) => [box.dataset.value, box.closest('label').innerText.trim().split(/\\s+/).pop()])")
    chosen, count = next((value, shown) for value, shown in ranges if shown not in ("", "0"))
    low, high = (float(bound) for bound in re.match(r"\[([\d.]+),([\d.]+)\)", chosen).groups())  # type: ignore[union-attr]
    click(browser, f"#facets input[data-field='population'][data-value='{chosen}']")
    wait_until(browser, lambda d: settled(d) and total(d) == int(count.replace(",", "")), f"population {chosen}")
    shown = populations(browser)
    assert shown and all(low <= population < high for population in shown), (chosen, shown)
    click(browser, "#clear-filters")
    wait_until(browser, lambda d: settled(d) and total(d) == PLACES, "every place again")

    # Sort choices come from the numeric fields.
    from selenium.webdriver.support.ui import Select

    choices = [option.get_attribute("value") for option in Select(css(browser, "#sort")).options]
    assert "-population" in choices and "population" in choices, choices
    Select(css(browser, "#sort")).select_by_value("-population")
    wait_until(browser, lambda d: settled(d) and "sort=-population" in d.current_url, "the most populous first")
    biggest = sorted((int(row["population"]) for row in places), reverse=True)[:10]  # type: ignore[call-overload]
    assert populations(browser) == biggest

    # Search as you type highlights the title field (still sorted: the most populous match first).
    largest = max(places, key=lambda row: int(row["population"]))["name"]  # type: ignore[call-overload]
    typed = str(largest).split()[0][:-1].lower()
    type_query(browser, typed)
    wait_until(browser, lambda d: settled(d) and titles(d)[:1] == [largest], str(largest))
    marks = [mark.text for mark in all_css(browser, "#results li:first-child h2 em")]
    assert marks and all(mark.lower().startswith(typed) for mark in marks), (typed, marks)
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(ARTIFACTS / "search-places.png"))
    from selenium.webdriver.common.keys import Keys

    css(browser, "#query").send_keys(Keys.ESCAPE)
    wait_until(browser, lambda d: settled(d) and total(d) == PLACES, "every place again")


def test_search_page_settings_change_the_page_without_code(demo_server: DemoServer, browser: Driver,
                                                           places: list[dict[str, object]]) -> None:
    headers = {"Authorization": f"Bearer {demo_server.admin_key}"}
    page = {"title": "name", "subtitle": "countryCode", "placeholder": "Find a place",
            "facts": [{"field": "population", "format": "{} people"}],
            "lines": [{"field": "timezone", "label": "Time zone"}],
            "textFacets": [{"field": "timezone", "label": "Time zone"}],
            "numericFacets": [{"field": "population", "label": "Size", "ranges": [
                {"range": "[1000000,)", "label": "A million or more"}, {"range": "[0,1000000)", "label": "Smaller"}]}],
            "sort": [{"sort": "-population", "label": "Largest first"}]}
    changed = httpx.put(f"{demo_server.base_url}/v2/collections/places/settings", headers=headers,
                        json={"searchPage": page}, timeout=10)
    assert changed.status_code == 200, changed.text
    try:
        open_page(browser, places_url(demo_server))
        assert css(browser, "#query").get_attribute("placeholder") == "Find a place"
        assert [legend.text for legend in all_css(browser, "#facets legend")] == ["Time zone", "Size"]
        assert facet_counts(browser, "population").keys() == {"[1000000,)", "[0,1000000)"}
        item = css(browser, "#results li").text
        assert re.search(r"\([A-Z]{2}\)", item) and " people" in item and "Time zone " in item, item
        from selenium.webdriver.support.ui import Select

        assert [option.text for option in Select(css(browser, "#sort")).options] == ["Relevance", "Largest first"]
        click(browser, "#facets input[data-field='population'][data-value='[1000000,)']")
        wait_until(browser, lambda d: settled(d) and total(d) < PLACES, "the big places")
        assert all(int(found.replace(",", "")) >= 1_000_000 for found in
                   re.findall(r"([\d,]+) people", css(browser, "#results").text))
    finally:
        reset = httpx.put(f"{demo_server.base_url}/v2/collections/places/settings", headers=headers,
                          json={"searchPage": None}, timeout=10)
        assert reset.status_code == 200, reset.text
