"""This module tests the following properties of the lexicon's typo indexes and sorted term views
(for prefixes), each kept as a big sorted run and a small sorted run of the latest entries:

- terms added a few at a time go into the small run (the big one is not sorted again), and every
  one- and two-typo lookup, prefix lookup and one-typo prefix lookup then equals a lexicon built
  from all the terms at once;
- the small run is merged into the big one once it outgrows its share, with the same answers;
- a saved state holds one merged run and loads to the same answers.
"""

from __future__ import annotations

import random
import string

from roarsearch.index import lexicon as lexicon_module
from roarsearch.index.lexicon import Lexicon


def _words(generator: random.Random, count: int) -> list[str]:
    return ["".join(generator.choices("abcdefgh", k=generator.randint(3, 9))) for _ in range(count)]


def _answers(lexicon: Lexicon, probes: list[str]) -> list[list[tuple[int, int]]]:
    return [sorted(lexicon.typo_candidates(probe, typos)) for probe in probes for typos in (1, 2)]


def test_a_few_new_terms_go_to_the_small_run_with_the_same_answers() -> None:
    generator = random.Random(4)
    lexicon = Lexicon.from_terms(list(dict.fromkeys(_words(generator, 3_000))))
    lexicon.typo_candidates("abcde", 1)
    big_before = lexicon._deletions._runs[0]
    probes = _words(generator, 40) + [string.ascii_lowercase[:7]]
    for _ in range(5):
        lexicon.intern_many(_words(generator, 10))
        assert _answers(lexicon, probes) == _answers(Lexicon.from_terms(lexicon.terms()), probes)
    big_keys, _big_ids, small_keys, _small_ids = lexicon._deletions._runs
    assert big_keys is big_before and small_keys.size > 0  # the big run was left as it was
    assert lexicon._trigrams._runs[2].size > 0


def test_the_small_run_is_merged_once_it_outgrows_its_share() -> None:
    generator = random.Random(5)
    lexicon = Lexicon.from_terms(list(dict.fromkeys(_words(generator, 500))))
    probes = _words(generator, 30)
    lexicon.typo_candidates("abcde", 1)
    merged = 0
    for _ in range(30):
        big_before = lexicon._deletions._runs[0].size
        lexicon.intern_many(_words(generator, 20))
        assert _answers(lexicon, probes) == _answers(Lexicon.from_terms(lexicon.terms()), probes)
        merged += lexicon._deletions._runs[0].size > big_before
        assert lexicon._deletions._runs[2].size <= lexicon._deletions._runs[0].size * lexicon_module.RECENT_RUN_SHARE
    assert merged >= 2


def test_a_saved_state_holds_one_run() -> None:
    generator = random.Random(6)
    lexicon = Lexicon.from_terms(list(dict.fromkeys(_words(generator, 2_000))))
    lexicon.typo_candidates("abcde", 1)
    lexicon.intern_many(_words(generator, 10))
    probes = _words(generator, 30)
    before = _answers(lexicon, probes)
    loaded = Lexicon.from_state(lexicon.to_state())
    assert loaded._deletions._runs[2].size == 0 and loaded._trigrams._runs[2].size == 0
    assert _answers(loaded, probes) == before == _answers(lexicon, probes)


def _prefix_answers(lexicon: Lexicon, prefixes: list[str]) -> list[object]:
    return [(lexicon.prefix_ids(prefix).tolist(), lexicon.prefix_candidates(prefix, 1)) for prefix in prefixes]


def test_sorted_term_views_keep_new_terms_in_a_small_run_with_the_same_answers() -> None:
    generator = random.Random(7)
    lexicon = Lexicon.from_terms(list(dict.fromkeys(_words(generator, 3_000))))
    lexicon.prefix_ids("ab")
    big_terms, big_tails = lexicon._by_term[0], lexicon._by_tail[0]
    prefixes = ["".join(generator.choices("abcdefgh", k=generator.randint(1, 4))) for _ in range(40)]
    for _ in range(5):
        lexicon.intern_many(_words(generator, 10) + ["zz" + word for word in _words(generator, 3)])
        assert _prefix_answers(lexicon, prefixes + ["zz", "zza", "z"]) == \
            _prefix_answers(Lexicon.from_terms(lexicon.terms()), prefixes + ["zz", "zza", "z"])
    assert lexicon._by_term[0] is big_terms and lexicon._by_tail[0] is big_tails  # not sorted again
    assert len(lexicon._by_term[1].ids) > 0 and len(lexicon._by_tail[1].ids) > 0


def test_sorted_term_views_merge_once_the_small_run_outgrows_its_share() -> None:
    generator = random.Random(8)
    lexicon = Lexicon.from_terms(list(dict.fromkeys(_words(generator, 400))))
    prefixes = ["".join(generator.choices("abcdefgh", k=generator.randint(1, 3))) for _ in range(30)]
    merged = 0
    for _ in range(30):
        big_before = len(lexicon._by_term[0].ids)
        lexicon.intern_many(_words(generator, 15))
        assert _prefix_answers(lexicon, prefixes) == _prefix_answers(Lexicon.from_terms(lexicon.terms()), prefixes)
        merged += len(lexicon._by_term[0].ids) > big_before
        assert len(lexicon._by_term[1].ids) <= len(lexicon._by_term[0].ids) * lexicon_module.RECENT_RUN_SHARE
    assert merged >= 2


def test_a_saved_state_holds_whole_sorted_views() -> None:
    generator = random.Random(9)
    lexicon = Lexicon.from_terms(list(dict.fromkeys(_words(generator, 2_000))))
    lexicon.prefix_ids("a")
    lexicon.intern_many(_words(generator, 10))
    prefixes = ["".join(generator.choices("abcdefgh", k=generator.randint(1, 3))) for _ in range(30)]
    before = _prefix_answers(lexicon, prefixes)
    assert len(lexicon._by_term[1].ids) > 0
    loaded = Lexicon.from_state(lexicon.to_state())
    assert len(loaded._by_term[1].ids) == 0 and len(loaded._by_term[0].ids) == len(lexicon)
    assert _prefix_answers(loaded, prefixes) == before == _prefix_answers(lexicon, prefixes)
