"""This module tests the prefix keys a saved lexicon's sorted term views carry (each term's first 8
UTF-8 bytes as one integer, searched before the terms themselves):

- saved keys are ascending in both views (terms, and terms without their first letter), for
  terms of one- to four-byte letters and terms sharing their first 8 bytes or more;
- a loaded lexicon finds every term's id, every prefix's terms and every one-typo prefix's terms
  as a brute-force scan does and as the lexicon it was saved from does;
- a state saved without keys (older snapshots) loads to the same answers.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch.index.lexicon import Lexicon, prefix_keys

# Letters of one to four UTF-8 bytes (a lone surrogate among them), and words sharing long beginnings.
_LETTERS = "ab\u00e9\u20ac\U0001d11e\ud800z"
_words = st.text(alphabet=_LETTERS, min_size=1, max_size=12)
_long_shared = st.builds(lambda head, tail: head + tail, st.sampled_from(["abababab", "\u00e9\u00e9\u00e9\u00e9a"]),
                         st.text(alphabet=_LETTERS, max_size=4))
_terms = st.lists(st.one_of(_words, _long_shared), min_size=1, max_size=300, unique=True)
_probes = st.lists(st.one_of(_words, _long_shared, st.text(alphabet=_LETTERS, max_size=3)), max_size=30)


def _brute_prefix(terms: list[str], prefix: str) -> list[int]:
    return [term_id for term_id, term in enumerate(terms) if term.startswith(prefix)]


@settings(max_examples=150, deadline=None)
@given(_terms, _probes)
def test_a_loaded_lexicon_answers_through_its_keys_as_a_scan_does(terms: list[str], probes: list[str]) -> None:
    built = Lexicon.from_terms(terms)
    state = built.to_state()
    loaded = Lexicon.from_state(state)
    runs = (loaded._by_term[0], loaded._by_tail[0])
    assert all(run.keys is not None and run.keys.size == len(terms) for run in runs)
    for run in runs:
        assert run.keys is not None and bool((run.keys[1:] >= run.keys[:-1]).all())
    without_keys = Lexicon.from_state({key: value for key, value in state.items()
                                       if key not in ("sorted_keys", "tail_keys")})
    assert without_keys._by_term[0].keys is None
    for probe in [*terms[:40], *probes]:
        expected_id = terms.index(probe) if probe in terms else None
        assert loaded.id_of(probe) == expected_id == without_keys.id_of(probe)
        assert loaded.prefix_ids(probe).tolist() == _brute_prefix(terms, probe) == without_keys.prefix_ids(probe).tolist()
        assert loaded.prefix_candidates(probe, 1) == built.prefix_candidates(probe, 1) == without_keys.prefix_candidates(probe, 1)


def test_keys_hold_the_first_eight_bytes_big_endian() -> None:
    joined = "\x00".join(["a", "abcdefghij", "\u00e9t\u00e9", ""]).encode("utf-8")
    keys = prefix_keys(joined)
    assert keys.tolist() == [int.from_bytes(text.ljust(8, b"\x00")[:8], "big")
                             for text in (b"a", b"abcdefgh", "\u00e9t\u00e9".encode(), b"")]
    tails = prefix_keys(joined, skip_first_letter=True)
    assert tails.tolist() == [0, int.from_bytes(b"bcdefghi", "big"),
                              int.from_bytes("t\u00e9".encode().ljust(8, b"\x00"), "big"), 0]
    assert keys.dtype == np.uint64
