"""The proximity of two words per doc: the pair-by-pair measure used for a few tokens gives what
the vectorised merge gives, on random tokens (repeated positions and a word matching both sides
included)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from roarsearch import Engine
from roarsearch.ranking import bucket_sort
from roarsearch.ranking.bucket_sort import _closest, _pair_distance, _pair_distance_small


def _tokens(generator: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray]:
    docs = np.sort(generator.integers(0, 5, count)).astype(np.uint32)
    positions = generator.integers(0, 30, count).astype(np.uint32)
    return docs, positions


@pytest.mark.parametrize("seed", range(300))
def test_small_measure_matches_the_merge(seed: int) -> None:
    generator = np.random.default_rng(seed)
    left = _tokens(generator, int(generator.integers(1, 12)))
    right = _tokens(generator, int(generator.integers(1, 12)))
    if seed % 5 == 0:  # the same word on both sides
        right = left
    merged = _pair_distance(*left, *right) if left[0].size + right[0].size > 48 else None
    small = _pair_distance_small(*left, *right)
    if merged is None:
        # The merge's own path, forced: tokens above the small limit.
        repeat = 60 // (left[0].size + right[0].size) + 1
        big_left = tuple(np.tile(part, repeat) for part in left)
        order = np.argsort(big_left[0], kind="stable")
        big_right = tuple(np.tile(part, repeat) for part in right)
        order_right = np.argsort(big_right[0], kind="stable")
        merged = _pair_distance(big_left[0][order], big_left[1][order], big_right[0][order_right], big_right[1][order_right])
    if small is None:
        assert merged is None
        return
    assert merged is not None
    assert small[0].tolist() == merged[0].tolist()
    assert small[1].tolist() == merged[1].tolist()


@pytest.mark.parametrize("seed", range(300))
def test_closest_matches_the_small_measure(seed: int) -> None:
    generator = np.random.default_rng(seed)
    left = sorted(generator.integers(0, 30, int(generator.integers(1, 8))).tolist())
    right = sorted(generator.integers(0, 30, int(generator.integers(1, 8))).tolist()) if seed % 5 else left
    measured = _pair_distance_small(np.zeros(len(left), np.uint32), np.asarray(left, np.uint32),
                                    np.zeros(len(right), np.uint32), np.asarray(right, np.uint32))
    assert measured is not None
    assert _closest(left, right) == int(measured[1][0])


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


@pytest.mark.parametrize("seed", range(6))
def test_few_docs_rank_like_the_vectorised_path(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every result's ``_rank`` (proximity included) is the same whichever path measured it."""
    generator = np.random.default_rng(seed)

    text = _text_of(_WORDS, generator)
    engine = Engine()
    engine.add_records("c", [{"id": str(i), "title": text(int(generator.integers(1, 5))),
                              "body": text(int(generator.integers(0, 30))),
                              "tags": [text(2) for _ in range(int(generator.integers(0, 3)))]}
                             for i in range(40)])
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


@pytest.mark.parametrize("seed", range(60))
def test_merge_packs_any_doc_id_and_falls_back_for_huge_positions(seed: int) -> None:
    """The merge's packed sort key holds 32-bit doc ids and positions below 2^31 (array elements
    sit 1,024 positions apart); past that it sorts the three columns instead, with the same answer."""
    generator = np.random.default_rng(seed)
    huge = seed % 3 == 0
    top = (1 << 32) - 1 if not huge else 1 << 20

    def tokens(count: int) -> tuple[np.ndarray, np.ndarray]:
        docs = np.sort(generator.choice([0, 7, top - 1, top], count)).astype(np.uint32)
        high = (1 << 33) if huge else (1 << 31) - 1
        positions = generator.integers(0, 40, count) + generator.choice([0, 1024, high - 64], count)
        return docs, positions.astype(np.int64 if huge else np.uint32)

    left, right = tokens(int(generator.integers(30, 60))), tokens(int(generator.integers(30, 60)))
    merged, small = _pair_distance(*left, *right), _pair_distance_small(*left, *right)
    if small is None:
        assert merged is None
        return
    assert merged is not None
    assert small[0].tolist() == merged[0].tolist() and small[1].tolist() == merged[1].tolist()


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
