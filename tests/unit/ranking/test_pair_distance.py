"""The proximity of two words per doc and field: the merge of packed sort keys, the pair-by-pair
measure used for a few tokens and the column merge for huge positions all give what a brute force
over every pair of tokens gives, on random tokens (repeated positions, several fields, 32-bit doc
ids and a word matching both sides included)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from roarsearch import Engine
from roarsearch.ranking import bucket_sort
from roarsearch.ranking.bucket_sort import (
    PROXIMITY_CAP,
    FieldTokens,
    _closest,
    _keys,
    _pair_costs_small,
    _pair_costs_unpacked,
    pair_costs,
)


def _word(generator: np.random.Generator, fields: int, count: int, top_doc: int = 5,
          high: int = 0) -> list[FieldTokens]:
    """Random tokens of one word in some of ``fields`` (docs below ``top_doc``, positions below 30
    plus, for some tokens, ``high``)."""
    tokens = []
    for slot in range(fields):
        if generator.random() < 0.3 and slot:
            continue
        docs = np.sort(generator.choice([0, 1, 2, top_doc - 2, top_doc - 1], count)).astype(np.uint32)
        positions = generator.integers(0, 30, count) + generator.choice([0, high], count)
        tokens.append((slot, docs, positions.astype(np.uint32 if high < 1 << 32 else np.uint64)))
    return tokens


def _brute_force(left: list[FieldTokens], right: list[FieldTokens]) -> list[tuple[int, int]]:
    """Sorted (doc, least cost over its fields) of the docs holding both words in one field: every
    pair of tokens measured."""
    best: dict[tuple[int, int], int] = {}
    for left_slot, left_docs, left_positions in left:
        for right_slot, right_docs, right_positions in right:
            if left_slot != right_slot:
                continue
            for doc, here in zip(left_docs.tolist(), left_positions.tolist()):
                for other, there in zip(right_docs.tolist(), right_positions.tolist()):
                    if other == doc:
                        # In reading order the gap (at least 1); reversed one more; less one, capped.
                        distance = max(there - here, 1) if there >= here else here - there + 1
                        cost = min(distance - 1, PROXIMITY_CAP)
                        best[(doc, left_slot)] = min(best.get((doc, left_slot), cost), cost)
    least: dict[int, int] = {}
    for (doc, _slot), cost in best.items():
        least[doc] = min(least.get(doc, cost), cost)
    return sorted(least.items())


def _pairs(measured: tuple[np.ndarray, np.ndarray] | None) -> list[tuple[int, int]]:
    """Each doc's least cost of a measure's (doc, cost) pairs, as the ranking folds them."""
    least: dict[int, int] = {}
    for doc, cost in [] if measured is None else zip(measured[0].tolist(), measured[1].tolist()):
        least[doc] = min(least.get(doc, cost), cost)
    return sorted(least.items())


@pytest.mark.parametrize("seed", range(300))
def test_every_measure_matches_the_brute_force(seed: int) -> None:
    generator = np.random.default_rng(seed)
    fields = int(generator.integers(1, 6))
    top_doc = (1 << 32) if seed % 4 == 0 else 5  # the largest doc ids pack too
    left = _word(generator, fields, int(generator.integers(1, 40)), top_doc)
    right = left if seed % 5 == 0 else _word(generator, fields, int(generator.integers(1, 40)), top_doc)
    expected = _brute_force(left, right)
    assert _pairs(pair_costs(left, right, fields)) == expected
    field_bits = (fields - 1).bit_length()
    small = _pair_costs_small(_keys(left, 31 - field_bits).tolist(), _keys(right, 31 - field_bits).tolist(),
                              32 - field_bits, field_bits)
    assert _pairs(small) == expected
    assert _pairs(_pair_costs_unpacked(left, right, fields)) == expected


@pytest.mark.parametrize("seed", range(60))
def test_positions_too_large_to_pack_take_the_column_merge(seed: int) -> None:
    """Positions past what the packed key holds beside the field slot (fields of tens of millions of
    tokens) are measured by the column merge: same answer as the brute force."""
    generator = np.random.default_rng(seed)
    fields = int(generator.integers(2, 9))
    high = (1 << (31 - (fields - 1).bit_length())) - 16 if seed % 2 else (1 << 33)
    left = _word(generator, fields, int(generator.integers(30, 60)), high=high)
    right = _word(generator, fields, int(generator.integers(30, 60)), high=high)
    assert _pairs(pair_costs(left, right, fields)) == _brute_force(left, right)


@pytest.mark.parametrize("seed", range(300))
def test_closest_matches_the_brute_force(seed: int) -> None:
    generator = np.random.default_rng(seed)
    left = sorted(generator.integers(0, 30, int(generator.integers(1, 8))).tolist())
    right = sorted(generator.integers(0, 30, int(generator.integers(1, 8))).tolist()) if seed % 5 else left
    expected = _brute_force([(0, np.zeros(len(left), np.uint32), np.asarray(left, np.uint32))],
                            [(0, np.zeros(len(right), np.uint32), np.asarray(right, np.uint32))])
    assert [(0, _closest(left, right))] == expected


_WORDS = ["red", "fox", "jumps", "over", "lazy", "dog", "and", "cat"]


def _text_of(words: list[str], generator: np.random.Generator) -> Callable[[int], str]:
    """A maker of random texts of ``words``, so many words long."""
    return lambda length: " ".join(words[int(i)] for i in generator.integers(0, len(words), length))


def _assert_both_paths_rank_alike(engine: Engine, searches: list[tuple[str, int]], fields: list[str],
                                  monkeypatch: pytest.MonkeyPatch) -> list[list[tuple[str, float]]]:
    """Each (query, typo tolerance)'s ids and ``_rank``s through the few-match scoring equal those
    of the vectorised path (all matches scored as many); returns them."""
    def ranks() -> list[list[tuple[str, float]]]:
        return [[(hit["id"], hit["_rank"]) for hit in engine.search(
            {"collection": "c", "query": query, "typoTolerance": typos, "count": 50, "searchFields": fields})["results"]]
            for query, typos in searches]

    few = ranks()
    monkeypatch.setattr(bucket_sort, "FEW_DOCS", -1)
    assert ranks() == few
    return few


def _engine_of_words(generator: np.random.Generator, records: int, title_words: tuple[int, int],
                     body_words: tuple[int, int]) -> Engine:
    """An engine of ``records`` random texts of :data:`_WORDS`: a title and a body of so many words
    (ranges), and up to two tags of two words."""
    text = _text_of(_WORDS, generator)
    engine = Engine()
    engine.add_records("c", [{"id": str(i), "title": text(int(generator.integers(*title_words))),
                              "body": text(int(generator.integers(*body_words))),
                              "tags": [text(2) for _ in range(int(generator.integers(0, 3)))]}
                             for i in range(records)])
    return engine


@pytest.mark.parametrize("seed", range(6))
def test_few_docs_rank_like_the_vectorised_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every result's ``_rank`` (proximity included) is the same whichever path measured it."""
    generator = np.random.default_rng(seed)

    engine = _engine_of_words(generator, 40, (1, 5), (0, 30))
    searches = [(query, 1) for query in ["red fox", "fox red dog", "lazy cat and", "jumps jumps", "dog ov", "cat fxo"]]
    _assert_both_paths_rank_alike(engine, searches, ["title", "body", "tags"], monkeypatch)


_WIDE = ["fox", "red", "read", "reap", "rest", "reel", "rent", "reef", "lazy", "lacy", "hazy", "laze", "lady", "dog"]


@pytest.mark.parametrize("seed", range(6))
def test_few_docs_with_a_wide_word_rank_like_the_vectorised_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few matches of a word of many terms (a prefix with many completions, a typo with many
    look-alikes) take the vectorised proximity inside the few-match scoring: same ``_rank``s."""
    generator = np.random.default_rng(seed)

    text = _text_of(_WIDE, generator)
    engine = Engine()
    engine.add_records("c", [{"id": str(i), "title": text(int(generator.integers(1, 6))),
                              "body": text(int(generator.integers(0, 20)))} for i in range(40)])
    searches = [("fox re", 0), ("dog r", 0), ("lazy fox", 1), ("fox lazy re", 1)]
    assert all(_assert_both_paths_rank_alike(engine, searches, ["title", "body"], monkeypatch))


_LOOKALIKES = ["hanks", "banks", "tanks", "hank", "lamp", "lamb", "damp", "lamps", "desk", "disk"]


@pytest.mark.parametrize("seed", range(8))
def test_few_docs_rank_typod_fields_like_the_vectorised_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Words found only with a typo in some fields and as typed in others: the attribute rule's
    two passes (as typed first, then with typos) give the same ``_rank``s on both paths."""
    generator = np.random.default_rng(seed)

    text = _text_of(_LOOKALIKES, generator)
    engine = Engine()
    engine.add_records("c", [{"id": str(i), "title": text(int(generator.integers(0, 3))),
                              "subtitle": text(int(generator.integers(0, 3))),
                              "body": text(int(generator.integers(0, 6)))} for i in range(40)])
    searches = [("hanks ", 1), ("banks lamp ", 1), ("lamp tanks ", 1), ("desk hank ", 2), ("damp ", 1)]
    assert all(_assert_both_paths_rank_alike(engine, searches, ["title", "subtitle", "body"], monkeypatch))


@pytest.mark.parametrize("seed", range(12))
def test_few_docs_with_a_typo_disabled_field_rank_like_the_vectorised_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With typos disabled in one field, a word with look-alikes pairs there only as typed: the
    same ``_rank``s from either path (each field reads the term ids it allows)."""
    generator = np.random.default_rng(seed)

    text = _text_of(_LOOKALIKES, generator)
    engine = Engine()
    engine.add_records("c", [{"id": str(i), "title": text(int(generator.integers(0, 4))),
                              "body": text(int(generator.integers(2, 12)))} for i in range(40)])
    engine.update_settings("c", {"typoDisabledFields": ["body"]})
    searches = [("hanks lamp ", 1), ("banks lamp desk ", 1), ("lamb tanks ", 1), ("desk hank ", 1)]
    assert any(_assert_both_paths_rank_alike(engine, searches, ["title", "body"], monkeypatch))


@pytest.mark.parametrize("seed", range(6))
def test_looking_pairs_up_only_where_both_words_are_ranks_alike(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Many matches look each word pair up only in the docs holding both words in a field: the same
    ``_rank``s as looking every match up in every field holding a word (words spread over fields
    apart, a word on both sides of a pair, three-word queries)."""
    generator = np.random.default_rng(seed)

    engine = _engine_of_words(generator, 120, (0, 4), (0, 12))

    def ranks() -> list[list[tuple[str, float]]]:
        return [[(hit["id"], hit["_rank"]) for hit in engine.search(
            {"collection": "c", "query": query, "count": 120, "searchFields": ["title", "body", "tags"]})["results"]]
            for query in ["red fox", "fox red dog", "lazy cat and", "jumps jumps", "over dog", "cat and red"]]

    monkeypatch.setattr(bucket_sort, "FEW_DOCS", -1)
    monkeypatch.setattr(bucket_sort, "PAIR_DOCS_MIN", 1 << 30)
    everywhere = ranks()
    monkeypatch.setattr(bucket_sort, "PAIR_DOCS_MIN", 0)
    assert ranks() == everywhere
    assert any(len(hits) > 20 for hits in everywhere)
