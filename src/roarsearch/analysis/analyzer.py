"""The one analyzer used for indexing and querying: fold, then split into positioned tokens.

Owns: text → tokens for single strings (queries, highlighting) and for whole batches of field
values at once (ingest), where the folding and splitting run once over the joined batch so that
ingest does not pay a Python call per value.

Callers: ``index.writer`` (batch form), ``engine`` and ``ranking`` (single form), the test oracle.
"""

from __future__ import annotations

from roarsearch.analysis.normalize import fold
from roarsearch.analysis.tokenize import split_words

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


def _analyze_ascii(text: str) -> list[str]:
    # For ASCII, folding is lower() and a word is a run of [a-z0-9]: translate + split runs in C,
    # several times faster than the general regular expression.
    return text.lower().translate(_ASCII_SEPARATORS).split()


def analyze_many(texts: list[str]) -> list[list[str]]:
    """:func:`analyze` for many values at once; same result as ``[analyze(t) for t in texts]``.

    Ingest's hot path: when the whole batch is ASCII it is lowered, split and translated as one
    string; otherwise each value takes the ASCII fast path or the general path on its own.
    """
    if not texts:
        return []
    joined = _VALUE_SEPARATOR.join(texts)
    if joined.isascii() and joined.count(_VALUE_SEPARATOR) == len(texts) - 1:
        values = joined.lower().split(_VALUE_SEPARATOR)
        table = _ASCII_SEPARATORS
        return [value.translate(table).split() for value in values]
    return [_analyze_ascii(text) if text.isascii() else analyze(text) for text in texts]
