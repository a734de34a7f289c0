"""This module tests the following properties:

- ``search_facet_values`` returns what a brute-force model returns over the raw records of the
  candidates: the values whose analyzed form the analyzed query begins (rank 0), begins at a word
  boundary (rank 1), or — one-word queries of 4+ letters — comes within the allowed typos (OSA) of
  a prefix of one of its words (rank 2); ordered by rank, count descending, then value ascending;
  values no candidate holds left out; ``count`` respected; numbers matched by their spelling;
- the search structures follow the column when it gains values (new values are found);
- an empty query lists the most frequent values.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap
from rapidfuzz.distance import OSA

from roarsearch.analysis.analyzer import analyze
from roarsearch.analysis.normalize import fold
from roarsearch.facets.value_search import search_facet_values
from roarsearch.index.index import Index
from roarsearch.query.plan import allowed_typos
from roarsearch.schema import iter_leaves

NAMES = ["Steven Spielberg", "Stephen King", "steven", "Spielberg Steven", "Ståle Solbakken", "Jean-Luc Godard",
         "Godard", "Ridley Scott", "Tony Scott", "Sofia Coppola", "Francis Ford Coppola", "Spilberg"]
QUERIES = ["", "s", "st", "ste", "stev", "steven", "stephen", "spielbrg", "spilberg", "scott", "ridley sc",
           "ford cop", "godrad", "jean luc", "copola", "stale", "ß", "x", "1", "19", "true"]
SCALAR = st.one_of(st.sampled_from(NAMES), st.booleans(), st.sampled_from([1, 19, 1990, 2.5]))
RECORDS = st.lists(st.fixed_dictionaries({"id": st.integers(0, 20)}, optional={
    "who": st.one_of(SCALAR, st.lists(SCALAR, max_size=3), st.none())}), min_size=1, max_size=20)


def rank_of(query: str, value: Any, tolerance: int) -> int | None:
    if isinstance(value, bool):
        spelled = "true" if value else "false"
    elif isinstance(value, (int, float)):
        spelled = str(int(value) if float(value).is_integer() else value)
    else:
        spelled = value
    words = analyze(spelled)
    line = " ".join(words)
    if line.startswith(query):
        return 0
    if (" " + line).find(" " + query) >= 0:
        return 1
    budget = allowed_typos(query, tolerance) if " " not in query else 0
    if budget and not isinstance(value, (int, float)):
        for word in words:
            for cut in range(max(1, len(query) - budget), len(query) + budget + 1):
                if OSA.distance(query, word[:cut]) + (word[:1] != query[:1]) <= budget:
                    return 2
    return None


def model(index: Index, candidates: BitMap, query: str, count: int, tolerance: int) -> list[dict[str, Any]]:
    wanted = " ".join(analyze(query))
    hits: dict[tuple[Any, ...], list[Any]] = {}
    for doc in candidates:
        distinct: dict[tuple[Any, ...], Any] = {}
        for path, _, value in iter_leaves(index.docs.record(doc)):
            if path != "who":
                continue
            if isinstance(value, bool):
                key: tuple[Any, ...] = (1, str(value).lower(), str(value))
            elif isinstance(value, (int, float)):
                key, value = (0, float(value), ""), (int(value) if float(value).is_integer() else value)
            else:
                key = (2, fold(value), value)
            distinct[key] = value
        for key, value in distinct.items():
            hits.setdefault(key, [value, 0])[1] += 1
    ranked = []
    for key, (value, number) in hits.items():
        rank = 0 if not wanted else rank_of(wanted, value, tolerance)
        if rank is not None:
            ranked.append(((rank, -number, key), value, number))
    ranked.sort(key=lambda item: item[0])
    return [{"value": value, "count": number} for _, value, number in ranked[:count]]


@given(batches=st.lists(RECORDS, min_size=1, max_size=2), pick=st.data(), query=st.sampled_from(QUERIES),
       count=st.integers(1, 15), tolerance=st.integers(0, 2))
def test_matches_model(batches, pick, query, count, tolerance) -> None:
    index = Index()
    for batch in batches:
        index.add_records(batch)
    alive = sorted(index.alive)
    candidates = BitMap(pick.draw(st.lists(st.sampled_from(alive), unique=True)) if alive else [])
    columns = index.field_columns("who")
    assert search_facet_values(columns, candidates, query, count, tolerance) == model(
        index, candidates, query, count, tolerance)
    index.add_records([{"id": 100, "who": ["Brand New Name", "Stevenson"]}])  # the structures follow
    candidates = candidates | BitMap([max(index.alive)])
    columns = index.field_columns("who")
    assert search_facet_values(columns, candidates, query, count, tolerance) == model(
        index, candidates, query, count, tolerance)


def test_typo_prefix_and_order() -> None:
    index = Index()
    index.add_records([{"id": i, "who": name} for i, name in enumerate(
        ["Steven Spielberg"] * 3 + ["Spielberg Steven", "Stevens Spilberg", "Ridley Scott", "Spilbergo"])])
    columns = index.field_columns("who")
    # No value begins with the typed text: every match is a typo match, by count then value.
    # One typo (the default) reaches "spielberg"; two also reach "spilberg".
    assert search_facet_values(columns, index.alive, "spielbrg", 10) == [
        {"value": "Steven Spielberg", "count": 3}, {"value": "Spielberg Steven", "count": 1},
    ]
    assert search_facet_values(columns, index.alive, "spielbrg", 10, typo_tolerance=2) == [
        {"value": "Steven Spielberg", "count": 3}, {"value": "Spielberg Steven", "count": 1},
        {"value": "Spilbergo", "count": 1}, {"value": "Stevens Spilberg", "count": 1},
    ]
    assert search_facet_values(columns, index.alive, "spielbrg", 10, typo_tolerance=0) == []
    # The value's beginning, then a word's beginning, then typos ("spil" is one from "spiel").
    assert search_facet_values(columns, index.alive, "SPIEL", 10) == [
        {"value": "Spielberg Steven", "count": 1}, {"value": "Steven Spielberg", "count": 3},
        {"value": "Spilbergo", "count": 1}, {"value": "Stevens Spilberg", "count": 1},
    ]
    assert search_facet_values(columns, index.alive, "", 2) == [
        {"value": "Steven Spielberg", "count": 3}, {"value": "Ridley Scott", "count": 1},
    ]
    assert search_facet_values(columns, index.alive, "ridley sc", 10) == [{"value": "Ridley Scott", "count": 1}]
    assert search_facet_values(columns, BitMap([5]), "s", 10) == [{"value": "Ridley Scott", "count": 1}]
    assert search_facet_values(columns, index.alive, "s", 0) == []
    assert search_facet_values(None, index.alive, "s", 5) == []
