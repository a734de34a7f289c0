"""The one analyzer used for indexing and querying: fold, then split into positioned tokens.

Owns: text → tokens for single strings (queries, highlighting) and for whole batches of field
values at once (ingest), where the folding and splitting run once over the joined batch so that
ingest does not pay a Python call per value.

Callers: ``index.writer`` (batch form), ``engine`` and ``ranking`` (single form), the test oracle.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from itertools import compress, count, pairwise

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


#: ASCII punctuation, symbols, controls and underscore → space; letters and digits stay. A
#: 256-byte table for ``bytes.translate``: ``str.translate`` looks each character up in a dict
#: (a two-word query's analysis took 0.5 microseconds that way, 0.2 through bytes).
_ASCII_TEXT_TABLE = bytes(c if c < 128 and chr(c).isalnum() else 32 for c in range(256))
#: The same with NUL kept: it separates the values of a joined batch.
_ASCII_BYTE_TABLE = bytes(c if (c < 128 and chr(c).isalnum()) or c == 0 else 32 for c in range(256))
#: A token, or the value separator as a token of its own.
_TOKEN_OR_SEPARATOR = re.compile(TOKEN_PATTERN.pattern + "|\x00")


def _analyze_ascii(text: str) -> list[str]:
    # For ASCII, folding is lower() and a word is a run of [a-z0-9]: translate + split runs in C,
    # several times faster than the general regular expression.
    return text.lower().encode("ascii").translate(_ASCII_TEXT_TABLE).decode("ascii").split()


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
    if joined.isascii():
        spaced = joined.lower().encode("ascii").translate(_ASCII_BYTE_TABLE).decode("ascii")
        return [value.split() for value in spaced.split(_VALUE_SEPARATOR)]
    findall = TOKEN_PATTERN.findall
    return [
        value.encode("ascii").translate(_ASCII_TEXT_TABLE).decode("ascii").split() if value.isascii() else findall(value)
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


#: A batch is analysed in slices of about this many characters: each token is a bytes object for
#: a moment, and a whole 10,000-description batch made ~100 MB of them at once.
ANALYSIS_SLICE_CHARS = 1 << 20


def analyze_batch_terms(texts: list[str]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """All tokens of many values as ``(terms, token terms, value index, position)``: the batch's
    distinct terms in order of first appearance, then per token its index into ``terms``, its
    value's index and its position in that value (int32 each: half the bytes of a batch's tokens).

    Same tokens as :func:`analyze_batch`, but each token costs two C-level steps only (a slice made
    by ``bytes.split`` and a dict ``setdefault`` that numbers it within the batch); everything else
    runs per distinct term or in numpy, so the caller maps terms to ids for the distinct ones only.
    Each slice of :data:`ANALYSIS_SLICE_CHARS` is analysed as one UTF-8 buffer: ASCII values are
    lowered and split by a 256-byte table; values with other characters are folded and split by
    the general pattern (together, in one call) and put back as their tokens joined by spaces,
    which the same table leaves whole. Terms are numbered across slices, by first appearance.
    """
    if not texts:
        empty = np.empty(0, dtype=np.int32)
        return [], empty, empty, empty
    seen: dict[bytes, int] = {b"\x00": 0}  # the separator is term 0 here, dropped below
    numbering = count(1)
    raws, value_indexes, positions = [], [], []
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)) + 1)
    cuts = np.searchsorted(ends, np.arange(ANALYSIS_SLICE_CHARS, int(ends[-1]), ANALYSIS_SLICE_CHARS), side="right")
    for first, last in pairwise(sorted({0, *cuts.tolist(), len(texts)})):
        sliced = _slice_tokens(texts[first:last], seen, numbering)
        if sliced is None:  # a value contains NUL: no safe join
            words, value_index, position = _enumerate(analyze_many(texts))
            local: dict[str, int] = {}
            token_terms = np.fromiter(map(local.setdefault, words, count()), dtype=np.int64, count=len(words))
            return _dense_terms(list(local), np.fromiter(local.values(), dtype=np.int64, count=len(local)),
                                token_terms, value_index, position)
        raw, value_index, position = sliced
        raws.append(raw)
        value_indexes.append(value_index + first)
        positions.append(position)
    distinct = list(seen)
    first_seen = np.fromiter(seen.values(), dtype=np.int64, count=len(seen))
    terms = list(map(bytes.decode, distinct[1:]))
    return _dense_terms(terms, first_seen[1:], _joined(raws), _joined(value_indexes), _joined(positions))


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _slice_tokens(texts: list[str], seen: dict[bytes, int], numbering: Iterator[int]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """One slice of :func:`analyze_batch_terms`: each token's ``seen`` code (new terms numbered
    from ``numbering``), its value's index in the slice and its position; None when a value
    holds NUL."""
    joined = _VALUE_SEPARATOR.join(texts)
    if joined.count(_VALUE_SEPARATOR) != len(texts) - 1:
        return None
    if not joined.isascii():
        joined = _tokens_spaced(texts, joined)
    spaced = joined.encode("utf-8").translate(_BATCH_BYTE_TABLE)
    del joined
    numbered = _number_by_keys(spaced, seen, numbering)
    return numbered if numbered is not None else _number_by_dict(spaced, seen, numbering)


def _number_by_dict(spaced: bytes, seen: dict[bytes, int], numbering: Iterator[int]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_slice_tokens`' numbering token by token: ``bytes.split`` and a dict probe each."""
    tokens = spaced.replace(b"\x00", b" \x00 ").split()
    # A list first: numpy converts a list of ints about twice as fast as it consumes an iterator.
    raw = np.array(list(map(seen.setdefault, tokens, numbering)), dtype=np.int32)
    del tokens
    is_separator = raw == 0
    index = np.arange(raw.size, dtype=np.int32)
    last_separator = np.maximum.accumulate(np.where(is_separator, index, -1))
    words = ~is_separator
    return raw[words], np.cumsum(is_separator, dtype=np.int32)[words], (index - last_separator - 1)[words]


#: Per byte count 0..8, the mask keeping that many low bytes of a little-endian 64-bit word.
_LOW_BYTES = np.array([(1 << (8 * count)) - 1 for count in range(9)], dtype=np.uint64)
#: Tokens up to this many bytes are keyed by their bytes as two 64-bit words (longer ones, rare
#: in any language, by a dict of their bytes).
_WORD_KEY_BYTES = 16
#: Odd multipliers mixing a token's key parts into one 64-bit sort key (any collision is caught).
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9))


def _number_by_keys(spaced: bytes, seen: dict[bytes, int], numbering: Iterator[int]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """:func:`_slice_tokens`' numbering in numpy, with Python work per distinct term only: tokens
    are the runs of bytes between spaces and NULs; a token of at most 16 bytes is its bytes read
    as two little-endian 64-bit words (exact: no token holds a NUL), a longer one is numbered by a
    dict. Mixed into one 64-bit key, tokens are grouped by one sort; every token is then compared
    part by part with the one before it in key order, so a collision of mixed keys is never
    trusted (None: the caller numbers the slice token by token instead)."""
    size = len(spaced)
    padded = np.frombuffer(spaced + bytes(_WORD_KEY_BYTES), dtype=np.uint8)
    chars = padded[:size]
    in_token = np.zeros(size + 2, dtype=bool)
    np.not_equal(chars, 32, out=in_token[1:-1])
    in_token[1:-1] &= chars != 0
    edges = np.flatnonzero(in_token[1:] != in_token[:-1])
    del in_token
    starts, ends = edges[0::2], edges[1::2]
    count_tokens = starts.size
    separators = np.flatnonzero(chars == 0)
    value_index = np.searchsorted(separators, starts).astype(np.int32)
    if count_tokens == 0:
        empty = np.empty(0, dtype=np.int32)
        return empty, empty, empty
    # Position: the token's ordinal minus that of its value's first token.
    value_starts = np.flatnonzero(np.concatenate(([True], value_index[1:] != value_index[:-1])))
    run_lengths = np.diff(np.append(value_starts, count_tokens))
    position = (np.arange(count_tokens) - np.repeat(value_starts, run_lengths)).astype(np.int32)
    # words[i]: the 8 bytes from byte i on, as one little-endian integer (an unaligned view).
    words = np.ndarray(shape=(size,), dtype="<u8", buffer=padded, strides=(1,))
    lengths = ends - starts
    first = words[starts] & _LOW_BYTES[np.minimum(lengths, 8)]
    second = np.zeros(count_tokens, dtype=np.uint64)
    long_code = np.zeros(count_tokens, dtype=np.uint64)
    middle = (lengths > 8) & (lengths <= _WORD_KEY_BYTES)
    if middle.any():
        second[middle] = words[starts[middle] + 8] & _LOW_BYTES[lengths[middle] - 8]
    long = np.flatnonzero(lengths > _WORD_KEY_BYTES)
    if long.size:
        codes: dict[bytes, int] = {}
        long_code[long] = np.fromiter(
            (codes.setdefault(spaced[start:end], len(codes) + 1)
             for start, end in zip(starts[long].tolist(), ends[long].tolist())),
            dtype=np.uint64, count=long.size)
    key = first * _MIX[0] ^ second * _MIX[1] ^ long_code * _MIX[2]
    # One plain sort of the keys with each token's index in their low bits, about twice as fast
    # as an argsort: the index's bits are taken from the key, and tokens whose remaining key bits
    # agree are told apart below like any other collision.
    index_bits = max(1, (count_tokens - 1).bit_length())
    low_bits = np.uint64((1 << index_bits) - 1)
    packed = (key & ~low_bits) | np.arange(count_tokens, dtype=np.uint64)
    packed.sort()
    order = (packed & low_bits).astype(np.intp)
    sorted_key = packed >> np.uint64(index_bits)
    same_key = sorted_key[1:] == sorted_key[:-1]
    # A token of at most 16 bytes is its two words (its bytes, zero-padded: no token holds a
    # zero byte), a longer one its dict code (0 for the others): equal parts, equal tokens. In
    # key order, a part may only change where the key does.
    for part, used in ((first, True), (second, middle.any()), (long_code, long.size)):
        if used:
            sorted_part = part[order]
            if (same_key & (sorted_part[1:] != sorted_part[:-1])).any():
                return None  # two different tokens share a mixed key
    group_starts = np.flatnonzero(np.concatenate(([True], ~same_key)))
    group_sizes = np.diff(np.append(group_starts, count_tokens))
    # Each group's first token in text order (equal keys are in index order): the token its term
    # is read from.
    first_token = order[group_starts]
    # Terms in order of first appearance, as numbering token by token gives them.
    appearance = np.argsort(first_token)
    distinct = _gathered(chars, starts[first_token[appearance]], lengths[first_token[appearance]])
    codes_by_group = np.empty(group_starts.size, dtype=np.int32)
    codes_by_group[appearance] = np.fromiter(map(seen.setdefault, distinct, numbering), dtype=np.int32,
                                             count=len(distinct))
    raw = np.empty(count_tokens, dtype=np.int32)
    raw[order] = np.repeat(codes_by_group, group_sizes)
    return raw, value_index, position


def _gathered(chars: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    """The tokens at ``starts`` (of ``lengths`` bytes) of ``chars`` as bytes objects: gathered into
    one space-separated buffer and split in C (no token holds a space), not sliced one by one."""
    if not starts.size:
        return []
    spans = lengths + 1  # each token and the space after it
    offsets = np.cumsum(spans) - spans
    gather = np.repeat(starts - offsets, spans) + np.arange(int(spans.sum()), dtype=np.int64)
    buffer = chars[np.minimum(gather, chars.size - 1)]
    buffer[offsets + lengths] = 32
    return buffer[:-1].tobytes().split(b" ")


#: A field's analysed tokens grouped by term (:func:`group_by_term`): its distinct terms in order of
#: first appearance, each term's token count, each token's value index and position (tokens grouped
#: by term in that order, each term's tokens in text order), and the indexes of the values that
#: hold a token (ascending).
Analysed = tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def analyze_fields(texts_by_field: dict[str, list[str]]) -> dict[str, Analysed]:
    """Each field's values analysed as one batch and grouped by term (fields without any token
    left out): what the writer does inline, and the analysis worker (``analysis.worker``) for a
    bulk add."""
    analysed = {path: analyze_batch_terms(texts) for path, texts in texts_by_field.items() if texts}
    return {path: group_by_term(*found) for path, found in analysed.items() if found[1].size}


def group_by_term(terms: list[str], token_terms: np.ndarray, value_index: np.ndarray, position: np.ndarray
                  ) -> Analysed:
    """:func:`analyze_batch_terms`' tokens (in text order) grouped by term: the writer's postings
    are term-sorted, and grouping here (the analysis worker's core, on a bulk add) leaves the
    writer only to order the groups by term id."""
    counts = np.bincount(token_terms, minlength=len(terms))
    # Term indexes fit 16 bits for most batches: numpy's radix sort, several times faster.
    keys = token_terms.astype(np.uint16) if len(terms) <= 1 << 16 else token_terms
    order = np.argsort(keys, kind="stable")
    valued = value_index[np.flatnonzero(np.diff(value_index, prepend=-1))]  # value_index ascends
    return terms, counts, value_index[order], position[order], valued


def _dense_terms(terms: list[str], first_seen: np.ndarray, token_terms: np.ndarray, value_index: np.ndarray,
                 position: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """Renumber tokens' ``setdefault`` codes (``first_seen``: each term's code) as indexes into ``terms``."""
    dense = np.zeros(int(first_seen.max()) + 1 if first_seen.size else 1, dtype=np.int32)
    dense[first_seen] = np.arange(first_seen.size, dtype=np.int32)
    return terms, dense[token_terms], value_index.astype(np.int32, copy=False), position.astype(np.int32, copy=False)


def _tokens_spaced(texts: list[str], joined: str) -> str:
    """``joined`` with every value that is not ASCII replaced by its tokens joined by spaces (ASCII
    values left as they are), so that the byte table splits the whole batch the same way."""
    is_ascii = np.fromiter(map(str.isascii, texts), dtype=bool, count=len(texts))
    if int(is_ascii.sum()) * 4 < len(texts):  # mostly not ASCII: fold and split the whole batch
        return " ".join(_TOKEN_OR_SEPARATOR.findall(fold(joined)))
    others = np.flatnonzero(~is_ascii)
    other_texts = list(map(texts.__getitem__, others.tolist()))
    tokens = " ".join(_TOKEN_OR_SEPARATOR.findall(fold(_VALUE_SEPARATOR.join(other_texts))))
    values = np.array(texts, dtype=object)
    values[others] = tokens.split(_VALUE_SEPARATOR)
    return _VALUE_SEPARATOR.join(values.tolist())


#: Bytes of a NUL-joined UTF-8 batch: ASCII letters lowered, other ASCII except NUL → space,
#: bytes of multi-byte characters unchanged (values that hold them are already folded and split).
_BATCH_BYTE_TABLE = bytes(
    c + 32 if 65 <= c <= 90 else c if c >= 128 or c == 0 or chr(c).isalnum() else 32 for c in range(256)
)


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
