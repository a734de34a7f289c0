"""This module tests the following properties of tenant tokens' rules (contract §12), through the
library layer the service uses (``roarsearch.keys.TenantView`` over an ``Engine``):

- whatever a request tries (OR and NOT around the tenant field, ``id`` filters, facet filters on
  the tenant field, facet counts and stats, groups, facet value search, multi-search across
  collections, paging, record reads by id), its answer equals the answer of a model that holds
  only the records the rule lets through: the oracle (``tests/property/oracle.py``) restricted
  to them for matches, order and ``totalHits``, and brute-force counts over them for text facets,
  numeric stats and ranges, groups and facet values;
- a record outside the rule is never returned, counted or read: by id it is as absent as a record
  that never existed, and paging walks exactly the visible records in id order;
- a collection the rules do not name is a 403 (in a multi-search: that search's answer only).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch import Engine
from roarsearch.analysis.normalize import fold
from roarsearch.errors import ForbiddenError
from roarsearch.keys import SearchRules, TenantView, parse_search_rules
from tests.property.oracle import ReferenceModel
from tests.property.test_facets_model import in_interval

WORDS = ["apple", "apples", "banana", "cherry", "citrus", "apply", "grape"]
CATS = ["red", "blue", "green"]
TENANTS = [0, 1, 2, 3]
INTERVALS = ["[0,2)", "[2,5]", "(3,)"]

RECORD = st.fixed_dictionaries({
    "tenant": st.sampled_from(TENANTS),
    "cat": st.sampled_from(CATS),
    "n": st.integers(0, 6),
    "title": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
})


@st.composite
def records(draw: Any) -> list[dict[str, Any]]:
    bodies = draw(st.lists(RECORD, min_size=1, max_size=25))
    ids = draw(st.lists(st.integers(0, 60), min_size=len(bodies), max_size=len(bodies), unique=True))
    return [{"id": record_id, **body} for record_id, body in zip(ids, bodies)]


# A filter as (text, predicate): the text goes to the engine, the predicate to the model.
ATOMS = st.one_of(
    st.sampled_from(TENANTS).map(lambda t: (f"tenant = {t}", lambda r, t=t: r["tenant"] == t)),
    st.sampled_from(TENANTS).map(lambda t: (f"tenant != {t}", lambda r, t=t: r["tenant"] != t)),
    st.sampled_from(CATS).map(lambda c: (f'cat = "{c}"', lambda r, c=c: r["cat"] == c)),
    st.integers(0, 6).map(lambda k: (f"n > {k}", lambda r, k=k: r["n"] > k)),
    st.lists(st.integers(0, 60), min_size=1, max_size=5).map(
        lambda ids: (f"id IN [{', '.join(map(str, ids))}]", lambda r, ids=tuple(ids): r["id"] in ids)),
    st.integers(0, 60).map(lambda i: (f"id = {i}", lambda r, i=i: r["id"] == i)),
    st.just(("tenant EXISTS", lambda r: True)),
)


def _combine(children: Any) -> Any:
    return st.one_of(
        st.tuples(children, children).map(lambda p: (f"({p[0][0]}) OR ({p[1][0]})",
                                                     lambda r, a=p[0][1], b=p[1][1]: a(r) or b(r))),
        st.tuples(children, children).map(lambda p: (f"({p[0][0]}) AND ({p[1][0]})",
                                                     lambda r, a=p[0][1], b=p[1][1]: a(r) and b(r))),
        children.map(lambda c: (f"NOT ({c[0]})", lambda r, a=c[1]: not a(r))),
    )


FILTERS = st.recursive(ATOMS, _combine, max_leaves=5)

# A tenant rule: (filter text, predicate).
RULES = st.one_of(
    st.sampled_from(TENANTS).map(lambda t: (f"tenant = {t}", lambda r, t=t: r["tenant"] == t)),
    st.lists(st.sampled_from(TENANTS), min_size=1, max_size=2, unique=True).map(
        lambda ts: (f"tenant IN [{', '.join(map(str, ts))}]", lambda r, ts=tuple(ts): r["tenant"] in ts)),
)


@st.composite
def requests(draw: Any) -> tuple[dict[str, Any], Any]:
    """A search body and the predicate of its own filter and facet filters (facets kept apart)."""
    body: dict[str, Any] = {"collection": "orders"}
    filter_predicate = lambda r: True  # noqa: E731
    if draw(st.booleans()):
        text, filter_predicate = draw(FILTERS)
        body["filter"] = text
    if draw(st.booleans()):
        body["query"] = " ".join(draw(st.lists(st.sampled_from(WORDS + ["app", "ban", "cherr"]), min_size=1, max_size=2)))
    if draw(st.booleans()):
        body["textFacetFilters"] = draw(st.fixed_dictionaries({}, optional={
            "tenant": st.lists(st.sampled_from(TENANTS), min_size=1, max_size=2),
            "cat": st.lists(st.sampled_from(CATS), min_size=1, max_size=2)}))
    if draw(st.booleans()):
        body["numericFacetFilters"] = draw(st.fixed_dictionaries({}, optional={
            "tenant": st.lists(st.sampled_from(["[0,1]", "[2,3]", "[3,3]"]), min_size=1, max_size=2),
            "n": st.lists(st.sampled_from(INTERVALS), min_size=1, max_size=2)}))
    body["textFacets"] = draw(st.lists(st.sampled_from(["tenant", "cat"]), unique=True, max_size=2))
    if draw(st.booleans()):
        body["numericFacets"] = {"n": INTERVALS, **({"tenant": ["[0,1]"]} if draw(st.booleans()) else {})}
    if draw(st.booleans()):
        body["groupBy"] = draw(st.sampled_from(["cat", "tenant"]))
        body["groupLimit"] = draw(st.integers(1, 3))
    else:
        body["skip"] = draw(st.integers(0, 5))
    body["count"] = draw(st.integers(0, 30))
    if draw(st.booleans()):
        body["highlightFields"] = ["title"]
    return body, filter_predicate


class VisibleModel:
    """The records a rule lets through, answering requests by brute force (and the oracle)."""

    def __init__(self, all_records: list[dict[str, Any]], visible: Any) -> None:
        self.oracle = ReferenceModel()
        self.oracle.add(all_records)  # text fields in the collection's first-seen order
        self.visible = [record for record in all_records if visible(record)]

    def facet_pass(self, record: dict[str, Any], body: dict[str, Any], skip: str = "", kind: str = "") -> bool:
        """Whether ``record`` passes the facet filters, the one of ``skip`` of ``kind`` (``text``
        or ``numeric``) left out: a facet leaves out only its own filter of its own kind (§4)."""
        for field, values in body.get("textFacetFilters", {}).items():
            if not (field == skip and kind == "text") and record[field] not in values:
                return False
        for field, ranges in body.get("numericFacetFilters", {}).items():
            if not (field == skip and kind == "numeric") and not any(in_interval(record[field], text) for text in ranges):
                return False
        return True

    def matches(self, body: dict[str, Any], own: Any, skip: str = "", kind: str = "") -> list[Any]:
        """Ids of the matches in the contract's order (every one, no page)."""
        query = body.get("query", "")
        if skip:  # a facet counts over the words the whole request kept (dropping decided once)
            self.matches(body, own)
            query = self.oracle.kept_query(query)
        universe = {r["id"] for r in self.visible if own(r) and self.facet_pass(r, body, skip, kind)}
        _total, ids = self.oracle.search(query, universe=universe, count=10_000)
        return ids

    def check(self, body: dict[str, Any], own: Any, answer: dict[str, Any]) -> None:
        by_id = {r["id"]: r for r in self.visible}
        ids = self.matches(body, own)
        assert answer["totalHits"] == len(ids), (body, answer["totalHits"], ids)
        count = body["count"]
        if "groupBy" in body:
            field, limit = body["groupBy"], body["groupLimit"]
            groups: dict[Any, list[Any]] = {}
            for record_id in ids:
                groups.setdefault(by_id[record_id][field], []).append(record_id)
            expected = [(value, len(members), members[:limit]) for value, members in list(groups.items())[:count]]
            got = [(group["value"], group["totalHits"], [hit["id"] for hit in group["results"]]) for group in answer["results"]]
            assert got == expected, (body, got, expected)
        else:
            skip = body["skip"]
            assert [hit["id"] for hit in answer["results"]] == ids[skip:skip + count], body
        for facet in answer["textFacets"]:
            field = facet["field"]
            counted = Counter(by_id[i][field] for i in self.matches(body, own, field, "text"))
            assert {value["value"]: value["count"] for value in facet["values"]} == dict(counted), (body, facet)
        for facet in answer["numericFacets"]:
            field = facet["field"]
            values = [by_id[i][field] for i in self.matches(body, own, field, "numeric")]
            assert facet["stats"]["count"] == len(values), (body, facet)
            if values:
                assert (facet["stats"]["min"], facet["stats"]["max"]) == (min(values), max(values))
            assert [r["count"] for r in facet["ranges"]] == [
                sum(1 for v in values if in_interval(v, text)) for text in body["numericFacets"][field]]


def view_of(engine: Engine, rule: str) -> TenantView:
    rules: SearchRules = parse_search_rules({"orders": {"filter": rule}, "other*": None})
    return TenantView(engine, rules)


@settings(max_examples=200, deadline=None)
@given(records(), RULES, st.lists(requests(), min_size=1, max_size=4), st.lists(st.integers(0, 60), max_size=6),
       st.integers(1, 7), st.sampled_from(["a", "ap", "r", "gre", "blu", "x"]))
def test_a_tenant_sees_exactly_its_records(records_: list[dict[str, Any]], rule: Any, bodies: list[Any],
                                           probe_ids: list[int], page_size: int, facet_query: str) -> None:
    rule_text, visible = rule
    with Engine() as engine:
        engine.add_records("orders", records_)
        engine.add_records("other-a", [{"id": 1, "tenant": 9}])
        engine.add_records("secret", [{"id": 1, "tenant": 9}])
        view = view_of(engine, rule_text)
        model = VisibleModel(records_, visible)
        for body, own in bodies:
            answer = view.search(body)
            assert answer["query"] == body and "warnings" not in answer
            model.check(body, own, answer)

        # multi-search: the same answers, and a collection outside the rules is its own 403
        searches = [body for body, _ in bodies] + [{"collection": "secret"}, {"collection": "other-a", "count": 0}]
        results = view.multi_search(searches)
        for (body, own), answer in zip(bodies, results):
            model.check(body, own, answer)
        assert results[-2] == {"status": 403, "data": "this tenant token may not search collection 'secret'"}
        assert results[-1]["totalHits"] == 1

        # facet value search, on the rest of the body's selection
        body, own = bodies[0]
        facet_body = {key: value for key, value in body.items()
                      if key in ("query", "filter", "textFacetFilters", "numericFacetFilters")}
        facet_body["textFacetQuery"] = {"query": facet_query, "count": 100}
        got = view.search_facet_values("orders", "cat", facet_body)["values"]
        by_id = {r["id"]: r for r in model.visible}
        counted = Counter(by_id[i]["cat"] for i in model.matches(body, own, "cat", "text"))
        for value in got:
            assert value["count"] == counted[value["value"]], (facet_body, got, counted)
        for value, number in counted.items():
            if fold(value).startswith(fold(facet_query)):
                assert {"value": value, "count": number} in got, (facet_body, got, counted)

        # record reads by id: a hidden record is as absent as one that never was
        visible_ids = {r["id"] for r in model.visible}
        for record_id in probe_ids:
            found = view.get_records("orders", [record_id])
            assert found == ([by_id[record_id]] if record_id in visible_ids else []), record_id
        assert [r["id"] for r in view.get_records("orders", probe_ids)] == [i for i in probe_ids if i in visible_ids]

        # paging walks exactly the visible records, in id order
        walked: list[Any] = []
        after = None
        while True:
            page = view.page_records("orders", page_size, after)
            walked += [record["id"] for record in page["records"]]
            after = page["next"]
            if after is None:
                break
        assert walked == sorted(visible_ids)


def test_collections_outside_the_rules_are_403() -> None:
    with Engine() as engine:
        engine.add_records("secret", [{"id": 1}])
        view = view_of(engine, "tenant = 1")
        for call in (lambda: view.search({"collection": "secret"}), lambda: view.get_records("secret", [1]),
                     lambda: view.page_records("secret"), lambda: view.search_facet_values("secret", "x", {}),
                     lambda: view.search({"collection": "missing"})):
            try:
                call()
            except ForbiddenError as error:
                assert error.data.startswith("this tenant token may not search collection")
            else:
                raise AssertionError("a collection outside the rules was read")
