"""This module tests the following properties:

- folding removes case, accents and compatibility forms (ligatures, full-width) in every script,
  and long texts (through a table of marks) lose exactly the marks short ones (through a regular
  expression) do;
- words split on anything that is not a letter or digit; ideographs are one token each;
- the batch forms (analyze_many, analyze_batch) equal the single form on arbitrary text;
- the ASCII fast paths (a byte table) split as the general path (fold, then the word pattern) does;
- numbering a batch's tokens by 64-bit keys in numpy gives the terms numbering them one by one
  gives, in the same order, and a collision of keys falls back to the latter.
"""

from __future__ import annotations

from itertools import count
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import roarsearch.analysis.analyzer as analyzer_module
import roarsearch.analysis.normalize as normalize_module
from roarsearch.analysis.analyzer import analyze, analyze_batch, analyze_batch_terms, analyze_many, group_by_term
from roarsearch.analysis.normalize import fold, fold_many
from roarsearch.analysis.tokenize import split_words


def test_fold_case_accents_ligatures() -> None:
    assert fold("Ŝtraße ﬂexible Ærø") == "strasse flexible aero"
    assert fold("ＡＢＣ１２３") == "abc123"
    assert fold("Москва́") == "москва"
    assert fold("e\u0301cole") == "ecole"


def test_long_texts_fold_as_short_ones() -> None:
    long_text = "Ŝtraße ﬂexible Ærø école Москва́ " * 20  # past the table's threshold
    assert len(long_text) >= normalize_module._TABLE_MIN_CHARS
    assert fold(long_text) == "strasse flexible aero ecole москва " * 20


#: Marks of several blocks (Latin, Cyrillic, Hebrew, Devanagari, the last mark of all), letters
#: around them, a lone surrogate, and code points past the table's end.
MARKED = st.text(alphabet=st.sampled_from("ae\u0301\u0308\u0483\u05b0\u093c\U0001e94a\U0001e94b東\ud800\U0010fffd é"),
                 min_size=256, max_size=700)


@given(MARKED)
def test_marks_stripped_alike_by_table_and_expression(text: str) -> None:
    assert normalize_module._without_marks(text) == normalize_module._COMBINING_MARKS.sub("", text)


def test_split_words_all_scripts() -> None:
    assert analyze("rock-n-roll 1984, O'Connor") == ["rock", "n", "roll", "1984", "o", "connor"]
    assert analyze("東京タワー") == ["東", "京", "タ", "ワ", "ー"]
    assert analyze("Αθήνα Київ") == ["αθηνα", "киів"]
    assert analyze("snake_case") == ["snake", "case"]
    assert analyze("") == [] and analyze("!!!") == []


TEXT = st.text(alphabet=st.sampled_from("abcXYZ éÉüßﬂ東京-_.,0123\u0301ø Ωж\x00"), max_size=14)


@given(st.lists(TEXT, min_size=1, max_size=6))
def test_batch_forms_equal_single_form(texts: list[str]) -> None:
    assert analyze_many(texts) == [analyze(text) for text in texts]
    words, value_index, position = analyze_batch(texts)
    expected = [(token, i, j) for i, text in enumerate(texts) for j, token in enumerate(analyze(text))]
    assert list(zip(words, value_index.tolist(), position.tolist())) == expected
    assert fold_many(texts) == [fold(text) for text in texts]


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40),
       st.lists(st.text(alphabet=st.characters(max_codepoint=200, exclude_characters="\x00"), max_size=20), max_size=6))
def test_ascii_fast_paths_split_as_the_general_path(text: str, texts: list[str]) -> None:
    """Controls, NUL and every ASCII symbol separate words; letters and digits stay (one text, and a
    batch of ASCII and non-ASCII values)."""
    assert analyze(text) == split_words(fold(text))
    assert analyze_many(texts) == [split_words(fold(value)) for value in texts]


@given(st.text(max_size=30))
def test_fold_is_idempotent_and_analyze_never_fails(text: str) -> None:
    assert fold(fold(text)) == fold(text)
    assert all(token for token in analyze(text))


@given(st.lists(TEXT, min_size=1, max_size=8))
def test_batch_terms_equal_single_form(texts: list[str]) -> None:
    terms, token_terms, value_index, position = analyze_batch_terms(texts)
    expected = [(token, i, j) for i, text in enumerate(texts) for j, token in enumerate(analyze(text))]
    words = [terms[term] for term in token_terms.tolist()]
    assert list(zip(words, value_index.tolist(), position.tolist())) == expected
    assert len(set(terms)) == len(terms)
    assert sorted(set(token_terms.tolist())) == list(range(len(terms)))


def test_batch_terms_mixed_scripts() -> None:
    texts = ["Café au lait", "plain ASCII, text!", "東京 Tower", "", "ÆRØ ascii", "x" * 3]
    terms, token_terms, value_index, position = analyze_batch_terms(texts)
    expected = [(token, i, j) for i, text in enumerate(texts) for j, token in enumerate(analyze(text))]
    assert [(terms[t], i, j) for t, i, j in zip(token_terms.tolist(), value_index.tolist(), position.tolist())] == expected
    assert analyze_batch_terms([])[0] == []


@given(st.lists(st.text(max_size=20) | st.text(alphabet=st.characters(max_codepoint=127), max_size=20), min_size=1, max_size=8))
def test_batch_terms_any_text(texts: list[str]) -> None:
    terms, token_terms, value_index, position = analyze_batch_terms(texts)
    expected = [(token, i, j) for i, text in enumerate(texts) for j, token in enumerate(analyze(text))]
    assert [(terms[t], i, j) for t, i, j in zip(token_terms.tolist(), value_index.tolist(), position.tolist())] == expected


@given(st.lists(st.text(max_size=20) | st.text(alphabet=st.characters(max_codepoint=127), max_size=20), min_size=1,
                max_size=12), st.integers(1, 40))
def test_batch_terms_in_slices_equal_one_slice(texts: list[str], slice_chars: int) -> None:
    """A batch analysed in slices numbers its terms by first appearance across slices, exactly as
    one slice would."""
    whole = analyze_batch_terms(texts)
    original = analyzer_module.ANALYSIS_SLICE_CHARS
    analyzer_module.ANALYSIS_SLICE_CHARS = slice_chars
    try:
        sliced = analyze_batch_terms(texts)
    finally:
        analyzer_module.ANALYSIS_SLICE_CHARS = original
    assert sliced[0] == whole[0]
    for mine, expected in zip(sliced[1:], whole[1:]):
        assert mine.tolist() == expected.tolist()


def _numbered_tokens(numbered: tuple[Any, ...], seen: dict[bytes, int]) -> tuple[list[bytes], list[int], list[int]]:
    by_code = {code: term for term, code in seen.items()}
    raw, value_index, position = numbered
    return [by_code[code] for code in raw.tolist()], value_index.tolist(), position.tolist()


#: Spaced slices as ``_slice_tokens`` makes them: lowered ASCII letters and digits, UTF-8 bytes of
#: other characters, spaces, NUL separators; words around the 8- and 16-byte key boundaries.
SPACED = st.lists(
    st.sampled_from([b" ", b"\x00", b"  "])
    | st.text(alphabet=st.sampled_from("ab9é東"), min_size=1, max_size=20).map(lambda word: word.encode("utf-8")),
    max_size=40,
).map(b"".join)


@given(SPACED)
def test_numbering_by_keys_equals_numbering_by_dict(spaced: bytes) -> None:
    """Keyed numbering (numpy, one sort) gives every token the term, value and position that
    splitting and numbering token by token gives, and meets new terms in the same order."""
    by_dict: dict[bytes, int] = {b"\x00": 0}
    expected = _numbered_tokens(analyzer_module._number_by_dict(spaced, by_dict, count(1)), by_dict)
    by_keys: dict[bytes, int] = {b"\x00": 0}
    numbered = analyzer_module._number_by_keys(spaced, by_keys, count(1))
    assert numbered is not None
    assert _numbered_tokens(numbered, by_keys) == expected
    assert list(by_keys) == list(by_dict)


def test_numbering_by_keys_gives_up_on_a_key_collision(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mixed keys that collide (here: every token's) are caught by the part-by-part check: the
    slice is numbered token by token instead, with the same terms."""
    texts = ["alpha beta", "internationalization alpha", "abcdefghij abcdefghik", "beta"]
    expected = analyze_batch_terms(texts)
    zero = np.uint64(0)
    monkeypatch.setattr(analyzer_module, "_MIX", (zero, zero, zero))
    spaced = "\x00".join(texts).encode().translate(analyzer_module._BATCH_BYTE_TABLE)
    assert analyzer_module._number_by_keys(spaced, {b"\x00": 0}, count(1)) is None
    assert analyzer_module._number_by_keys(b"same same", {b"\x00": 0}, count(1)) is not None  # one term: no collision
    colliding = analyze_batch_terms(texts)
    assert colliding[0] == expected[0]
    for mine, theirs in zip(colliding[1:], expected[1:]):
        assert mine.tolist() == theirs.tolist()


@given(st.lists(TEXT, min_size=1, max_size=8))
def test_batch_terms_in_order_of_first_appearance(texts: list[str]) -> None:
    terms = analyze_batch_terms(texts)[0]
    tokens = [token for text in texts for token in analyze(text)]
    assert terms == list(dict.fromkeys(tokens))


@given(st.lists(TEXT, min_size=1, max_size=8))
def test_tokens_grouped_by_term_keep_text_order_in_each_term(texts: list[str]) -> None:
    terms, counts, value_index, position, valued = group_by_term(*analyze_batch_terms(texts))
    tokens = [(token, i, j) for i, text in enumerate(texts) for j, token in enumerate(analyze(text))]
    term_of_token = np.repeat(np.arange(len(terms)), counts)
    grouped = [(terms[term], i, j) for term, i, j in zip(term_of_token.tolist(), value_index.tolist(), position.tolist())]
    assert grouped == sorted(tokens, key=lambda token: terms.index(token[0]))  # stable: text order within a term
    assert valued.tolist() == sorted({i for _token, i, _j in tokens})


def test_symbols_spelt_with_letters_separate_words() -> None:
    """NFKD spells ™ as "TM": it must not glue letters to the word before it (other engines and a
    user read "Thing™" as the word "thing"). Symbols that decompose to ideographs keep them."""
    assert analyze("Thing™ works, 5㎏ ⒜ item") == ["thing", "works", "5", "item"]
    assert analyze("Thing\u2122") == analyze("thing") == ["thing"]
    assert fold("\u2f00") == "\u4e00"  # the Kangxi radical one is the ideograph one
    long_text = "Acme Thing™ " * 40  # long texts fold through the mark table: same rule
    assert analyze(long_text) == ["acme", "thing"] * 40
    assert analyze_batch(["Thing™ works", "x℠y"])[0] == ["thing", "works", "x", "y"]
