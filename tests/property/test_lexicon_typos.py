"""This module tests the following properties:

- typo candidates (0, 1, 2 typos) equal a brute-force scan with rapidfuzz's OSA distance over random
  vocabularies of tiny alphabets (collisions and near-misses), unicode included, whatever the length;
- prefix ids and one-typo prefix candidates equal brute-force definitions;
- adding terms between lookups (incremental indexes) gives the same answers as a fresh build, and
  ids are stable; state round trips.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from rapidfuzz.distance import OSA

from roarsearch.index.lexicon import Lexicon

WORD = st.text(alphabet=st.sampled_from("abcdé東"), min_size=1, max_size=11)


def brute_typos(terms: list[str], word: str, k: int) -> list[tuple[int, int]]:
    return sorted((i, d) for i, t in enumerate(terms) if (d := OSA.distance(word, t)) <= k)


def brute_prefix(terms: list[str], q: str) -> dict[int, int]:
    found: dict[int, int] = {}
    for index, term in enumerate(terms):
        if term.startswith(q):
            found[index] = 0
        elif (len(q) >= 2 and any(c <= len(term) and OSA.distance(q, term[:c]) <= 1 for c in (len(q), len(q) + 1))) or any(
                term.startswith(q[:j] + q[j + 1:]) for j in range(len(q) - 1)):
            found[index] = 1
    return found


@settings(max_examples=300)
@given(st.lists(WORD, min_size=1, max_size=60), st.lists(WORD, min_size=0, max_size=30),
       st.lists(WORD, min_size=1, max_size=8))
def test_lookups_equal_brute_force(first: list[str], later: list[str], queries: list[str]) -> None:
    lexicon = Lexicon()
    lexicon.intern_many(first)
    lexicon.typo_candidates("abcd", 1)  # build the indexes, then grow them incrementally
    lexicon.prefix_ids("a")
    ids = lexicon.intern_many(later + first)
    terms = list(dict.fromkeys(first + later))
    assert [lexicon.term_of(int(i)) for i in ids] == later + first
    for query in queries:
        for k in (0, 1, 2):
            assert sorted(lexicon.typo_candidates(query, k)) == brute_typos(terms, query, k), (query, k)
        assert lexicon.prefix_ids(query).tolist() == sorted(i for i, t in enumerate(terms) if t.startswith(query))
        assert dict(lexicon.prefix_candidates(query, 1)) == brute_prefix(terms, query)
        assert dict(lexicon.prefix_candidates(query, 0)) == {i: 0 for i, t in enumerate(terms) if t.startswith(query)}


@given(st.lists(WORD, min_size=0, max_size=40), st.lists(WORD, min_size=1, max_size=5))
def test_state_round_trip(words: list[str], queries: list[str]) -> None:
    lexicon = Lexicon()
    lexicon.intern_many(words)
    loaded = Lexicon.from_state(lexicon.to_state())
    assert len(loaded) == len(lexicon)
    for query in queries:
        assert loaded.id_of(query) == lexicon.id_of(query)
        assert sorted(loaded.typo_candidates(query, 1)) == sorted(lexicon.typo_candidates(query, 1))
        assert loaded.prefix_ids(query).tolist() == lexicon.prefix_ids(query).tolist()
    loaded.intern_many(["zzzz"])
    new_id = loaded.id_of("zzzz")
    assert (new_id, 1) in loaded.typo_candidates("zzzy", 1)
