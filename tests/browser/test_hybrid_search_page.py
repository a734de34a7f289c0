"""This module tests the following properties of hybrid search on the search page, in a real headless
Chromium against the real ``roarsearch demo`` server (fixtures in ``conftest.py``), with an embedding
hook injected before the page's own scripts run (``window.roarsearchEmbed``, a deterministic stand-in
model that the test computes in Python too):

- on a collection whose settings declare vector spaces, a query sends a hybrid search (the words, the
  hook's vector for them and the semantic ratio, default 0.5), and what the page shows — the order
  and each result's ``_vectorScore`` — is what ``Engine.search`` answers for the same body on the same
  records; the hook is called once per text (a change of ratio or space reuses or adds a vector);
- the semantic-ratio slider changes the request (and so the order); the space picker, shown when
  there are several spaces, changes the space and the vector;
- a slow embedding never lets an older query's answer replace a newer one: the superseded search
  sends nothing, and its hook call sees its ``signal`` aborted;
- a hook that returns the wrong number of dimensions, or throws, gives the keyword results (exactly
  the engine's keyword-only answer) with a visible note and no error; a good hook set from the
  console afterwards brings hybrid search back;
- with a tenant token (which may not read settings) the page learns the spaces from the
  records' ``_vectors`` and searches hybrid within the token's filter;
- without a vector space (the films), or without a hook, the page shows no hybrid controls and its
  requests carry no vector: the page is the one it always was.

Screenshots go to ``test-artifacts/`` (``search-hybrid.png``, ``search-hybrid-fallback.png``).

Determinism: every wait is on a condition of the page (``settled``, the requests recorded by a
wrapper around ``fetch``, the hook's own record of its calls), never on time.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from roarsearch import Engine
from roarsearch.keys import mint_token
from tests.browser.conftest import ARTIFACTS, DemoServer, browser_missing
from tests.browser.test_search_page import Driver, all_css, css, open_page, settled, titles, type_query, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.skipif(browser_missing() is not None, reason=str(browser_missing()))]

COLLECTION = "gear"
# The stand-in model, word by word: each known word adds to one "topic" dimension (as in docs/vectors.md).
TOPICS = {"shoes": 0, "sneakers": 0, "trainers": 0, "boots": 0, "running": 1, "jogging": 1, "marathon": 1,
          "rain": 2, "waterproof": 2, "jacket": 3, "coat": 3, "warm": 4, "winter": 4, "wool": 4}
SETTINGS = {"vectors": {"text": {"dimensions": 5, "metric": "cosine"}, "tags": {"dimensions": 3, "metric": "dot"}}}
TITLES = ["Trail running shoes", "Waterproof rain jacket", "Marathon sneakers", "Wool winter coat", "Leather boots",
          "Shoes cleaning kit", "Winter boots", "Waterproof hiking boots", "Running socks", "Rain coat for kids",
          "Kids sneakers", "Shoes and boots dryer"]
NO_TEXT_VECTOR = {"Shoes cleaning kit"}  # a keyword match that is never a vector match

# The same two functions in the browser: the hook maps text to what `embed` computes here.
HOOK = """
(() => {
  const TOPICS = TOPICS_JSON;
  const embedText = (text) => {
    const vector = [0, 0, 0, 0, 0];
    for (const word of text.toLowerCase().split(/\\s+/)) if (word in TOPICS) vector[TOPICS[word]] += 1;
    return vector;
  };
  const embedTags = (text) => [text.split(/\\s+/).filter(Boolean).length, (text.match(/o/gi) || []).length, 1];
  window.__embedCalls = [];
  window.__slow = {};  // text -> milliseconds the hook takes for it
  window.roarsearchEmbed = async (text, context) => {
    const call = { text, collection: context.collection, space: context.space, dimensions: context.dimensions,
                   metric: context.metric, done: false, aborted: false };
    window.__embedCalls.push(call);
    if (window.__slow[text]) await new Promise((resolve) => setTimeout(resolve, window.__slow[text]));
    call.done = true;
    call.aborted = context.signal.aborted;
    return context.space === "tags" ? embedTags(text) : embedText(text);
  };
})();
""".replace("TOPICS_JSON", json.dumps(TOPICS))

# Every search body the page sends, in order.
RECORDER = """
(() => {
  window.__requests = [];
  const send = window.fetch;
  window.fetch = function (path, init) {
    if (path === "/v2" && init && init.body) window.__requests.push(JSON.parse(init.body));
    return send.apply(this, arguments);
  };
})();
"""


def embed_text(text: str) -> list[float]:
    vector = [0.0] * 5
    for word in text.lower().split():
        if word in TOPICS:
            vector[TOPICS[word]] += 1.0
    return vector


def embed_tags(text: str) -> list[float]:
    return [float(len(text.split())), float(text.lower().count("o")), 1.0]


def records() -> list[dict[str, Any]]:
    return [{"id": number, "title": title, "brand": ("Acme", "Zeta", "Nova")[number % 3], "price": 20 + 15 * number,
             "_vectors": {"text": None if title in NO_TEXT_VECTOR else embed_text(title), "tags": embed_tags(title)}}
            for number, title in enumerate(TITLES, start=1)]


@pytest.fixture(scope="module")
def gear(demo_server: DemoServer) -> Engine:
    """The collection on the server, and an in-process engine holding the same settings and records."""
    headers = {"Authorization": f"Bearer {demo_server.admin_key}"}
    base = f"{demo_server.base_url}/v2/collections/{COLLECTION}"
    assert httpx.put(f"{base}/settings", headers=headers, json=SETTINGS, timeout=30).status_code in (200, 202)
    added = httpx.post(f"{base}/records", headers=headers, json=records(), timeout=30)
    assert added.status_code == 201, added.text
    engine = Engine()
    engine.update_settings(COLLECTION, SETTINGS)
    engine.add_records(COLLECTION, records())
    return engine


@contextmanager
def injected(driver: Driver, *scripts: str) -> Iterator[None]:
    """Scripts that run in every new document before the page's own (the browser is shared: removed after)."""
    identifiers = [driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": script})["identifier"]
                   for script in scripts]
    try:
        yield
    finally:
        for identifier in identifiers:
            driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": identifier})


def gear_url(demo_server: DemoServer) -> str:
    return f"{demo_server.base_url}/#key={demo_server.search_key}&collection={COLLECTION}"


def requests(driver: Driver) -> list[dict[str, Any]]:
    return list(driver.execute_script("return window.__requests"))


def shown(driver: Driver) -> list[tuple[str, float | None]]:
    """(title, _vectorScore or None) per result, read in one script."""
    return [(title, None if score is None else float(score)) for title, score in driver.execute_script(
        "return [...document.querySelectorAll('#results li')].filter((item) => item.querySelector('h2')).map((item) => {"
        "  const score = item.querySelector('.vector-score');"
        "  return [item.querySelector('h2').textContent, score ? score.dataset.vectorScore : null]; })")]


def expected(engine: Engine, body: dict[str, Any]) -> list[tuple[str, float | None]]:
    return [(found["title"], found.get("_vectorScore")) for found in engine.search(body)["results"]]


def searched(driver: Driver, condition: Any, what: str) -> dict[str, Any]:
    """Waits until the page is settled and its last request satisfies ``condition``; that request."""
    wait_until(driver, lambda d: settled(d) and requests(d) and condition(requests(d)[-1]), what)
    return requests(driver)[-1]


def hybrid_shown(driver: Driver) -> bool:
    return bool(driver.execute_script("return !document.getElementById('hybrid-area').hidden"))


def note(driver: Driver) -> str | None:
    text = driver.execute_script("const note = document.getElementById('hybrid-note'); return note.hidden ? null : note.textContent")
    return None if text is None else str(text)


def test_hybrid_requests_show_what_the_engine_answers(demo_server: DemoServer, browser: Driver, gear: Engine) -> None:
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    with injected(browser, RECORDER, HOOK):
        open_page(browser, gear_url(demo_server))
        assert hybrid_shown(browser)
        assert [option.text for option in Select(css(browser, "#space")).options] == ["text (5)", "tags (3)"]
        assert css(browser, "#semantic-ratio").get_attribute("value") == "0.5"
        # No words, no vector: the empty query browses as before, and the hook is not asked.
        assert "vector" not in requests(browser)[-1] and browser.execute_script("return window.__embedCalls") == []

        type_query(browser, "shoes")
        body = searched(browser, lambda last: last.get("query") == "shoes", "the hybrid search for shoes")
        assert body["vector"] == {"name": "text", "values": embed_text("shoes")} and body["semanticRatio"] == 0.5
        assert shown(browser) == expected(gear, body)
        half = shown(browser)
        assert dict(half)["Shoes cleaning kit"] is None and dict(half)["Leather boots"] == 1.0  # keyword-only vs vector match
        assert [found.text for found in all_css(browser, "#results .vector-score")] == \
            [f"Similarity {score:.3f}" for _, score in half if score is not None]
        browser.save_screenshot(str(ARTIFACTS / "search-hybrid.png"))

        # The slider, by keyboard: End is all meaning, Home all words; each changes the request and the order.
        css(browser, "#semantic-ratio").send_keys(Keys.END)
        body = searched(browser, lambda last: last.get("semanticRatio") == 1, "the search with ratio 1")
        assert shown(browser) == expected(gear, body) and [title for title, _ in shown(browser)][:3] == \
            ["Leather boots", "Kids sneakers", "Shoes and boots dryer"]  # the nearest (1.0), ties by id
        assert "ratio=1" in browser.current_url and css(browser, "#semantic-ratio-value").text == "1.0"
        css(browser, "#semantic-ratio").send_keys(Keys.HOME)
        body = searched(browser, lambda last: last.get("semanticRatio") == 0, "the search with ratio 0")
        assert shown(browser) == expected(gear, body)
        assert titles(browser)[0] != "Leather boots" and shown(browser) != half

        # The other space: its vector from the hook, for the same words.
        Select(css(browser, "#space")).select_by_value("tags")
        body = searched(browser, lambda last: last.get("vector", {}).get("name") == "tags", "the search in the tags space")
        assert body["vector"]["values"] == embed_tags("shoes") and shown(browser) == expected(gear, body)
        assert "Dot product" in css(browser, "#results li .vector-score").text
        calls = browser.execute_script("return window.__embedCalls.filter((call) => call.text === 'shoes')")
        assert [(call["space"], call["dimensions"], call["metric"], call["collection"]) for call in calls] == \
            [("text", 5, "cosine", COLLECTION), ("tags", 3, "dot", COLLECTION)]  # one call per text and space


def test_a_slow_embedding_never_overwrites_a_newer_answer(demo_server: DemoServer, browser: Driver, gear: Engine) -> None:
    with injected(browser, RECORDER, HOOK):
        open_page(browser, gear_url(demo_server))
        browser.execute_script("window.__slow['winter boots'] = 1500")
        type_query(browser, "winter boots")
        wait_until(browser, lambda d: d.execute_script("return window.__embedCalls.some((call) => call.text === 'winter boots')"),
                   "the slow embedding to start")
        type_query(browser, "rain jacket")
        body = searched(browser, lambda last: last.get("query") == "rain jacket", "the newer search")
        newer = shown(browser)
        assert newer == expected(gear, body)
        # The older query's vector arrives after the newer answer is drawn; once it has (and the
        # page has had its turn), nothing was sent for it and the newer answer is still shown.
        slow = browser.execute_async_script("""
            const done = arguments[arguments.length - 1];
            const check = () => {
              const call = window.__embedCalls.find((item) => item.text === 'winter boots');
              if (call.done) setTimeout(() => done(call), 50); else setTimeout(check, 20);
            };
            check();""")
        assert slow["aborted"]  # the hook was told the page no longer needs it
        assert not [sent for sent in requests(browser) if sent.get("query") == "winter boots"]
        assert settled(browser) and shown(browser) == newer


def test_a_broken_hook_falls_back_to_keywords_with_a_note(demo_server: DemoServer, browser: Driver, gear: Engine) -> None:
    with injected(browser, RECORDER, HOOK):
        open_page(browser, gear_url(demo_server))
        type_query(browser, "shoes")
        searched(browser, lambda last: "vector" in last, "the hybrid search")
        assert note(browser) is None

        # Set from the console: the page notices and searches again.
        browser.execute_script("window.roarsearchEmbed = async () => [1, 2]")
        body = searched(browser, lambda last: last.get("query") == "shoes" and "vector" not in last, "the keyword search")
        assert "semanticRatio" not in body and body["query"] == "shoes"
        wait_until(browser, note, "the note")
        assert note(browser) == "Keyword results only: the embedding hook returned 2 numbers, not the 5 numbers for the space “text”."
        browser.save_screenshot(str(ARTIFACTS / "search-hybrid-fallback.png"))
        assert shown(browser) == expected(gear, body) and all(score is None for _, score in shown(browser))
        assert css(browser, "#error").get_attribute("hidden") is not None and hybrid_shown(browser)

        browser.execute_script("window.roarsearchEmbed = () => { throw new Error('the model is offline'); }")
        type_query(browser, "boots")
        searched(browser, lambda last: last.get("query") == "boots" and "vector" not in last, "the keyword search for boots")
        wait_until(browser, lambda d: "the model is offline" in (note(d) or ""), "the note about the failure")
        assert note(browser) == "Keyword results only: the embedding hook failed (the model is offline)."

        browser.execute_script("window.roarsearchEmbed = async (text) => text.toLowerCase().includes('boots') ? [1, 0, 0, 0, 0] : [0, 1, 0, 0, 0]")
        body = searched(browser, lambda last: last.get("query") == "boots" and "vector" in last, "hybrid search again")
        assert note(browser) is None and shown(browser) == expected(gear, body)


def test_without_a_vector_space_or_a_hook_the_page_is_unchanged(demo_server: DemoServer, browser: Driver, gear: Engine) -> None:
    with injected(browser, RECORDER, HOOK):  # a hook, but the films declare no vector space
        open_page(browser, demo_server.page_url)
        assert not hybrid_shown(browser)
        type_query(browser, "godfathr")
        searched(browser, lambda last: last.get("query") == "godfathr", "the films' search")
        assert all("vector" not in body and "semanticRatio" not in body for body in requests(browser))
        assert browser.execute_script("return window.__embedCalls") == []
        assert "ratio=" not in browser.current_url and note(browser) is None

    with injected(browser, RECORDER):  # vector spaces, but no hook
        open_page(browser, gear_url(demo_server))
        assert not hybrid_shown(browser)
        type_query(browser, "shoes")
        body = searched(browser, lambda last: last.get("query") == "shoes", "the keyword search")
        assert all("vector" not in sent for sent in requests(browser))
        assert shown(browser) == expected(gear, body) and not all_css(browser, "#results .vector-score")


def test_a_tenant_token_searches_hybrid_within_its_filter(demo_server: DemoServer, browser: Driver, gear: Engine) -> None:
    admin = {"Authorization": f"Bearer {demo_server.admin_key}"}
    key = httpx.post(f"{demo_server.base_url}/v2/keys", headers=admin, timeout=30,
                     json={"actions": ["search"], "collections": [COLLECTION]}).json()
    token = mint_token(key["uid"], key["key"], {COLLECTION: {"filter": "price < 100"}})
    try:
        with injected(browser, RECORDER, HOOK):
            open_page(browser, f"{demo_server.base_url}/#key={token}&collection={COLLECTION}")
            assert hybrid_shown(browser)
            picked = browser.execute_script("return [...document.getElementById('space').options].map((option) => option.text)")
            assert sorted(picked) == ["tags (3)", "text (5)"]
            type_query(browser, "shoes")
            body = searched(browser, lambda last: last.get("query") == "shoes", "the hybrid search for shoes")
            # The first space the records hold, with the length of their vectors (the metric is unknown).
            assert body["vector"]["name"] == picked[0].split()[0]
            assert "Vector score" in css(browser, "#results .vector-score").text
            assert shown(browser) == expected(gear, {**body, "filter": "price < 100"})
    finally:
        httpx.delete(f"{demo_server.base_url}/v2/keys/{key['uid']}", headers=admin, timeout=30)
