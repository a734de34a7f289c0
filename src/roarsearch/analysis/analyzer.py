"""The one analyzer used for indexing and querying: fold, then split into positioned tokens.

Owns: text → tokens for single strings (queries, highlighting) and for whole batches of field
values at once (ingest), where the folding and splitting run once over the joined batch so that
ingest does not pay a Python call per value.

Callers: ``index.writer`` (batch form), ``engine`` and ``ranking`` (single form), the test oracle.
"""

from __future__ import annotations

import re
from itertools import compress

import numpy as np

from roarsearch.analysis.normalize import fold
from roarsearch.analysis.tokenize import TOKEN_PATTERN, split_words

#: Separates values in a joined batch. NUL survives folding unchanged and is never part of a token.
_VALUE_SEPARATOR = "\x00"


def analyze(text: str) -> list[str]:
    """Tokens of ``text`` in order; a token's list index is its position.

    >>> analyze("Ada LOVELACE, Ørsted")
    ['ada', 'lovelace', 'orsted']
    """
    if text.isascii():
        return _analyze_ascii(text)
    return split_words(fold(text))


#: ASCII punctuation, symbols, controls and underscore → space; letters and digits stay.
_ASCII_SEPARATORS = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})
#: The same as a 256-byte table for ``bytes.translate`` (NUL kept: it separates values).
_ASCII_BYTE_TABLE = bytes(c if (c < 128 and chr(c).isalnum()) or c == 0 else 32 for c in range(256))
#: A token, or the value separator as a token of its own.
_TOKEN_OR_SEPARATOR = re.compile(TOKEN_PATTERN.pattern + "|\x00")


def _analyze_ascii(text: str) -> list[str]:
    # For ASCII, folding is lower() and a word is a run of [a-z0-9]: translate + split runs in C,
    # several times faster than the general regular expression.
    return text.lower().translate(_ASCII_SEPARATORS).split()


def analyze_many(texts: list[str]) -> list[list[str]]:
    """:func:`analyze` for many values at once; same result as ``[analyze(t) for t in texts]``.

    Ingest's hot path: the batch is joined and folded as one string (folding works character by
    character, so nothing crosses a value boundary), split back, and each value that is ASCII
    after folding — nearly all Latin-script text — is split with ``translate`` + ``split`` in C.
    """
    if not texts:
        return []
    joined = _VALUE_SEPARATOR.join(texts)
    if joined.count(_VALUE_SEPARATOR) != len(texts) - 1:  # a value contains NUL: no safe join
        return [analyze(text) for text in texts]
    table = _ASCII_SEPARATORS
    if joined.isascii():
        return [value.translate(table).split() for value in joined.lower().split(_VALUE_SEPARATOR)]
    findall = TOKEN_PATTERN.findall
    return [
        value.translate(table).split() if value.isascii() else findall(value)
        for value in fold(joined).split(_VALUE_SEPARATOR)
    ]


def analyze_batch(texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """All tokens of many values at once: ``(tokens, value index, position)``, one entry per token.

    Equivalent to enumerating ``analyze_many(texts)``, but the whole batch is folded, split and
    numbered in a handful of C calls: values are joined with NUL, the NUL survives as a token of
    its own, and numpy turns the NUL marks into value indexes and positions. Only the values that
    are not ASCII pay for Unicode folding: a batch with a few of them (typographic quotes in
    prose) is split into its ASCII values and the others, each part analysed joined, and the
    tokens put back in value order.
    """
    empty = np.empty(0, dtype=np.int64)
    if not texts:
        return [], empty, empty
    joined = _VALUE_SEPARATOR.join(texts)
    if joined.count(_VALUE_SEPARATOR) != len(texts) - 1:  # a value contains NUL: no safe join
        return _enumerate(analyze_many(texts))
    if joined.isascii():
        return _number(_ascii_tokens(joined))
    is_ascii = np.fromiter(map(str.isascii, texts), dtype=bool, count=len(texts))
    ascii_count = int(is_ascii.sum())
    if ascii_count * 4 < len(texts):  # mostly non-ASCII: one fold over the whole batch
        return _number(_folded_tokens(joined))
    ascii_values = np.flatnonzero(is_ascii)
    other_values = np.flatnonzero(~is_ascii)
    mask = is_ascii.tolist()
    ascii_words, ascii_index, ascii_position = _number(
        _ascii_tokens(_VALUE_SEPARATOR.join(compress(texts, mask))))
    other_words, other_index, other_position = _number(
        _folded_tokens(_VALUE_SEPARATOR.join(compress(texts, [not flag for flag in mask]))))
    value_index = np.concatenate((ascii_values[ascii_index], other_values[other_index]))
    position = np.concatenate((ascii_position, other_position))
    order = np.argsort(value_index, kind="stable")
    words = ascii_words + other_words
    return list(map(words.__getitem__, order.tolist())), value_index[order], position[order]


def _ascii_tokens(joined: str) -> list[str]:
    """Tokens of NUL-joined ASCII values, each NUL a token of its own."""
    spaced = joined.lower().encode("ascii").translate(_ASCII_BYTE_TABLE).decode("ascii")
    return spaced.replace(_VALUE_SEPARATOR, " \x00 ").split()


def _folded_tokens(joined: str) -> list[str]:
    """Tokens of NUL-joined values of any script, each NUL a token of its own."""
    folded = fold(joined)
    if folded.isascii():
        spaced = folded.encode("ascii").translate(_ASCII_BYTE_TABLE).decode("ascii")
        return spaced.replace(_VALUE_SEPARATOR, " \x00 ").split()
    tokens: list[str] = _TOKEN_OR_SEPARATOR.findall(folded)
    return tokens


def _number(tokens: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Words of a token list with NUL separators, their value indexes and positions."""
    is_separator = np.fromiter(map(_VALUE_SEPARATOR.__eq__, tokens), dtype=bool, count=len(tokens))
    value_index = np.cumsum(is_separator)[~is_separator]
    words = list(compress(tokens, ~is_separator))
    position = np.arange(value_index.size, dtype=np.int64) - np.searchsorted(value_index, value_index, side="left")
    return words, value_index.astype(np.int64), position


def _enumerate(token_lists: list[list[str]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
    words = [token for tokens in token_lists for token in tokens]
    value_index = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
    position = np.arange(value_index.size, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return words, value_index, position
