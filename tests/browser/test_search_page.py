"""This module tests the following properties of the search page, in a real headless Chromium driving
the page that a real ``roarsearch demo`` serves (fixtures in ``conftest.py``):

- typing a query with a typo, key by key, shows results as you type, the matched words highlighted,
  the total and the response time;
- ticking a text facet narrows the results while that facet's own counts stay as they were
  (disjunctive) and the other facets' counts follow the filter; unticking restores the total;
- a numeric facet range (a decade, a Tomatometer band) keeps only records inside it;
- paging moves to other records; each sort choice orders the records by its key;
- the keyboard alone works: ``/`` focuses the box, Tab reaches the facets, Space ticks one and the
  focus stays on it, ``Esc`` clears the query;
- record text is never interpreted as HTML (a record whose title is markup shows the markup as text);
- API errors are shown as readable sentences (a wrong key gives the 401 and what to do);
- at phone width nothing scrolls sideways.

Screenshots go to ``test-artifacts/`` for people to look at.

Determinism: every wait is on a condition of the page, never on time. The page marks ``#results``
``aria-busy`` from the first keystroke of a debounce until the answer to the latest request is
drawn, so ``settled`` is only true once nothing more will change. Elements are re-found inside each
wait (a redraw replaces them), facet counts are read in one script (a redraw cannot interleave),
and clicks retry on a stale element.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.browser.conftest import ARTIFACTS, DemoServer, browser_missing

# A real server and a real browser: about 20 s; `-m "not slow"` leaves them out. Without a browser
# they are skipped before the server starts, with the command that installs one.
pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]

WAIT_SECONDS = 15
STATUS = re.compile(r"^([\d,]+) results? in (\d+) ms$")

Driver = Any  # selenium's WebDriver; typed loosely so this module imports before selenium is installed


def wait_until(driver: Driver, condition: Callable[[Driver], Any], what: str) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        # A redraw between finding an element and reading it is just "not yet": look again.
        return WebDriverWait(driver, WAIT_SECONDS, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException, NoSuchElementException)).until(condition)
    except TimeoutException:
        status = driver.execute_script("return document.getElementById('status').textContent")
        error = driver.execute_script("return document.getElementById('error').textContent")
        pytest.fail(f"timed out waiting for {what} (status: {status!r}, error: {error!r})")


def css(driver: Driver, selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, selector)


def all_css(driver: Driver, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def total(driver: Driver) -> int:
    text = css(driver, "#status").text
    found = STATUS.match(text)
    assert found, f"status line {text!r} does not say '<total> results in <ms> ms'"
    return int(found[1].replace(",", ""))


def settled(driver: Driver) -> bool:
    """The latest request has been answered and drawn (no search in flight, no debounce pending)."""
    return bool(driver.execute_script(
        "return !document.getElementById('results').hasAttribute('aria-busy') && "
        "/^[0-9,]+ results? in [0-9]+ ms$/.test(document.getElementById('status').textContent)"))


def open_page(driver: Driver, url: str) -> None:
    driver.set_window_size(1280, 900)
    driver.get("about:blank")  # a hash-only change would not reload the page
    driver.get(url)
    wait_until(driver, lambda d: settled(d) and all_css(d, "#results li h2"), "the first results")


def facet_counts(driver: Driver, field: str) -> dict[str, str]:
    """value -> count as shown, read in one script so that a redraw cannot interleave."""
    return dict(driver.execute_script(
        "return [...document.querySelectorAll(`#facets input[data-field='${arguments[0]}']`)]"
        ".map((box) => [box.dataset.value, box.closest('label').innerText.trim().split(/\\s+/).pop()])", field))


def facet_box(driver: Driver, field: str, value: str) -> Any:
    return css(driver, f"#facets input[data-field='{field}'][data-value='{value}']")


def click(driver: Driver, selector: str) -> None:
    """Click the element ``selector`` finds, finding it again if a redraw replaced it meanwhile."""
    def clicked(d: Driver) -> bool:
        css(d, selector).click()
        return True

    wait_until(driver, clicked, f"a click on {selector}")


def facet_selected(driver: Driver, field: str, value: str) -> bool:
    return bool(driver.execute_script(
        "const box = document.querySelector(`#facets input[data-field='${arguments[0]}'][data-value='${arguments[1]}']`);"
        "return box !== null && box.checked", field, value))


def type_query(driver: Driver, text: str) -> None:
    box = css(driver, "#query")
    box.clear()
    box.send_keys(text)  # key by key, like a person: the page searches as you type


def titles(driver: Driver) -> list[str]:
    return [heading.text for heading in all_css(driver, "#results li h2")]


def numbers_after(driver: Driver, label: str) -> list[int]:
    """One number per result: the year in "(1994)" or the percentage after "Tomatometer"."""
    pattern = r"\((\d{4})\)" if label == "year" else r"Tomatometer (\d+)%"
    return [int(found) for item in all_css(driver, "#results li") for found in re.findall(pattern, item.text)[:1]]


def test_typo_query_shows_highlighted_results_as_you_type(demo_server: DemoServer, browser: Driver) -> None:
    open_page(browser, demo_server.page_url)
    assert total(browser) == 17_472  # the empty query browses the whole data set
    type_query(browser, "godfathr")  # a typo: one letter missing
    wait_until(browser, lambda d: "<em>Godfather</em>" in css(d, "#results li h2").get_attribute("innerHTML"),
               "the highlighted Godfather")
    wait_until(browser, settled, "the answer to the last keystroke")
    assert titles(browser)[0].startswith("The Godfather")
    assert 0 < total(browser) < 50
    marks = [mark.text for mark in all_css(browser, "#results li h2 em")]
    assert marks and all(mark.startswith("Godfather") for mark in marks)  # and "Godfathers"
    assert "#key=" in browser.current_url and "q=godfathr" in browser.current_url  # a reload keeps the query
    browser.save_screenshot(str(ARTIFACTS / "search-typo.png"))


def test_text_facet_narrows_and_its_counts_stay_disjunctive(demo_server: DemoServer, browser: Driver) -> None:
    open_page(browser, demo_server.page_url)
    type_query(browser, "star wars")
    wait_until(browser, lambda d: settled(d) and any("Star Wars" in title for title in titles(d)), "Star Wars")
    before_total = total(browser)
    before_genres = facet_counts(browser, "genres")
    before_ratings = facet_counts(browser, "mpaaRating")
    assert "Drama" in before_genres and "Action" in before_genres, before_genres

    click(browser, "#facets input[data-field='genres'][data-value='Drama']")
    wait_until(browser, lambda d: settled(d) and total(d) == int(before_genres["Drama"].replace(",", "")),
               "the total to become the Drama count")
    assert total(browser) < before_total
    assert facet_selected(browser, "genres", "Drama")
    # Disjunctive: the genres facet is counted without its own filter, so no genre count moves ...
    assert facet_counts(browser, "genres") == before_genres
    # ... while the other facets are counted over the Drama films only.
    after_ratings = facet_counts(browser, "mpaaRating")
    assert after_ratings != before_ratings
    assert all(int(after_ratings.get(value, "0").replace(",", "")) <= int(count.replace(",", ""))
               for value, count in before_ratings.items())
    assert all("Drama" in text for text in browser.execute_script(
        "return [...document.querySelectorAll('#results li')].map((item) => item.innerText)"))
    browser.save_screenshot(str(ARTIFACTS / "search-facet.png"))

    # A second value of the same facet widens (any of them), and unticking both restores the total.
    click(browser, "#facets input[data-field='genres'][data-value='Action']")
    drama_or_action = wait_until(browser, lambda d: settled(d) and total(d) > int(before_genres["Drama"].replace(",", ""))
                                 and total(d), "Drama or Action")
    assert drama_or_action <= before_total
    click(browser, "#clear-filters")
    wait_until(browser, lambda d: settled(d) and total(d) == before_total, "the unfiltered total")
    assert not facet_selected(browser, "genres", "Drama")


def test_numeric_ranges_keep_only_records_inside_them(demo_server: DemoServer, browser: Driver) -> None:
    open_page(browser, demo_server.page_url)
    everything = total(browser)
    expected = int(facet_counts(browser, "year")["[1990,2000)"].replace(",", ""))
    click(browser, "#facets input[data-field='year'][data-value='[1990,2000)']")
    wait_until(browser, lambda d: settled(d) and total(d) == expected, "the 1990s")
    assert 0 < expected < everything
    years = numbers_after(browser, "year")
    assert years and all(1990 <= year < 2000 for year in years), years

    click(browser, "#facets input[data-field='tomatoMeter'][data-value='[90,100]']")
    wait_until(browser, lambda d: settled(d) and total(d) < expected, "acclaimed films of the 1990s")
    meters = numbers_after(browser, "tomatoMeter")
    assert meters and all(90 <= meter <= 100 for meter in meters), meters
    assert all(1990 <= year < 2000 for year in numbers_after(browser, "year"))


def test_paging_and_every_sort_choice(demo_server: DemoServer, browser: Driver) -> None:
    open_page(browser, demo_server.page_url)
    assert css(browser, "#page-label").text == "Page 1 of 1,748"
    assert not css(browser, "#previous").is_enabled()
    first_page = titles(browser)
    click(browser, "#next")
    wait_until(browser, lambda d: settled(d) and css(d, "#page-label").text.startswith("Page 2 "), "page 2")
    assert set(titles(browser)).isdisjoint(first_page)
    assert css(browser, "#previous").is_enabled()
    click(browser, "#previous")
    wait_until(browser, lambda d: settled(d) and css(d, "#page-label").text.startswith("Page 1 "), "page 1 again")
    assert titles(browser) == first_page

    from selenium.webdriver.support.ui import Select

    for choice, key, descending in (("-year", "year", True), ("year", "year", False), ("-tomatoMeter", "tomatoMeter", True)):
        click(browser, "#next")  # a sort change starts again from the first page
        wait_until(browser, lambda d: settled(d) and css(d, "#page-label").text.startswith("Page 2 "), "page 2")
        Select(css(browser, "#sort")).select_by_value(choice)
        wait_until(browser, lambda d: settled(d) and css(d, "#page-label").text.startswith("Page 1 "), f"sort {choice}")
        values = numbers_after(browser, key)
        assert len(values) == 10, values
        assert values == sorted(values, reverse=descending), (choice, values)
    assert numbers_after(browser, "tomatoMeter")[0] == 100


def test_keyboard_alone(demo_server: DemoServer, browser: Driver) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    open_page(browser, demo_server.page_url)
    click(browser, "#status")  # focus away from the box, as after reading a result
    ActionChains(browser).send_keys("/").perform()
    assert browser.switch_to.active_element.get_attribute("id") == "query"
    ActionChains(browser).send_keys("spielbrg").perform()
    wait_until(browser, lambda d: settled(d) and "Spielberg" in css(d, "#results li").text, "Spielberg's films")
    spielberg = total(browser)

    first_key, label = browser.execute_script(
        "const box = document.querySelector('#facets input'); return [box.dataset.key, box.dataset.value]")
    for _ in range(30):  # Tab through the sort choice and the "skip" of the facets panel to the first box
        ActionChains(browser).send_keys(Keys.TAB).perform()
        if browser.execute_script("return document.activeElement.dataset.key") == first_key:
            break
    else:
        pytest.fail("Tab never reached the first facet checkbox")
    ActionChains(browser).send_keys(Keys.SPACE).perform()
    wait_until(browser, lambda d: settled(d) and total(d) < spielberg, f"the {label} filter")
    focused = browser.execute_script("const box = document.activeElement; return [box.dataset.value, box.checked]")
    assert focused == [label, True]  # focus survived the re-render

    click(browser, "#query")
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    wait_until(browser, lambda d: settled(d) and css(d, "#query").get_attribute("value") == "" and total(d) > spielberg,
               "the cleared query")


def test_record_text_is_shown_as_text_never_as_html(demo_server: DemoServer, browser: Driver) -> None:
    markup = "<img src=x onerror=\"window.injected=1\"> Zqxjvw <b>bold</b>"
    added = httpx.post(f"{demo_server.base_url}/v2/collections/movies/records",
                       headers={"Authorization": f"Bearer {demo_server.admin_key}"},
                       json=[{"id": 990_000_001, "title": markup, "director": "<script>window.injected=2</script>",
                              "cast": ["<i>Zqxjvw</i>"], "year": 2020, "genres": ["<u>Test</u>"]}], timeout=10)
    assert added.status_code == 201, added.text
    try:
        open_page(browser, demo_server.page_url)
        type_query(browser, "zqxjvw")
        wait_until(browser, lambda d: settled(d) and total(d) == 1, "the record with markup")
        item = css(browser, "#results li")
        assert markup.replace("  ", " ") in item.text
        assert "<script>window.injected=2</script>" in item.text and "<i>Zqxjvw</i>" in item.text
        assert not item.find_elements("css selector", "img, b, script, i, u")
        assert [mark.text for mark in item.find_elements("css selector", "em")] == ["Zqxjvw", "Zqxjvw"]
        assert browser.execute_script("return window.injected") is None
        assert any(box.get_attribute("data-value") == "<u>Test</u>" for box in all_css(browser, "#facets input"))
    finally:
        deleted = httpx.request("DELETE", f"{demo_server.base_url}/v2/collections/movies/records",
                                headers={"Authorization": f"Bearer {demo_server.admin_key}"}, json=[990_000_001], timeout=10)
        assert deleted.json() == [{"status": 200, "id": 990_000_001}], deleted.text


def test_api_errors_are_readable(demo_server: DemoServer, browser: Driver) -> None:
    browser.get("about:blank")
    browser.get(f"{demo_server.base_url}/#key=not-the-key&collection=movies")
    error = wait_until(browser, lambda d: css(d, "#error").is_displayed() and css(d, "#error"), "the error")
    assert error.text.startswith("Error 401: ") and "#key=" in error.text, error.text
    assert not all_css(browser, "#results li")

    browser.get("about:blank")
    browser.get(f"{demo_server.base_url}/#key={demo_server.search_key}&collection=no-such-films")
    error = wait_until(browser, lambda d: css(d, "#error").is_displayed() and css(d, "#error"), "the error")
    assert error.text.startswith("Error 404: ") and "no-such-films" in error.text, error.text

    browser.get("about:blank")
    browser.get(f"{demo_server.base_url}/")
    error = wait_until(browser, lambda d: css(d, "#error").is_displayed() and css(d, "#error"), "the error")
    assert "No search key" in error.text


def test_phone_width(demo_server: DemoServer, browser: Driver) -> None:
    browser.set_window_size(390, 844)
    browser.get("about:blank")
    browser.get(demo_server.page_url.replace("collection=movies", "collection=movies&q=tom+hanks"))
    wait_until(browser, lambda d: settled(d) and all_css(d, "#results li h2"), "results at phone width")
    assert "Tom" in css(browser, "#results li").text
    width = browser.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
    assert width[0] <= width[1], f"the page scrolls sideways at phone width: {width}"
    assert css(browser, "#refine").get_attribute("open") is None  # filters folded: results come first
    query_box = css(browser, "#query").rect
    assert query_box["width"] >= 200, query_box
    browser.save_screenshot(str(ARTIFACTS / "search-phone.png"))
    browser.set_window_size(1280, 900)
