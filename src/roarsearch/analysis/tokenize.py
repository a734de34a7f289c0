"""Word splitting: folded text → tokens with positions.

Owns: what a word is. A token is a maximal run of letters and digits of any script; ideographic
and kana characters (Chinese, Japanese), which are written without spaces, are one token each so
that a query for a compound still matches it word by word (proximity ranking then rewards the
characters standing together). Everything else (spaces, punctuation, underscores, symbols)
separates tokens.

Callers: :mod:`roarsearch.analysis.analyzer` only.
"""

from __future__ import annotations

import re

_IDEOGRAPHS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"

#: One ideograph, or a run of word characters that are neither underscore nor ideographs.
TOKEN_PATTERN = re.compile(rf"[{_IDEOGRAPHS}]|[^\W_{_IDEOGRAPHS}]+")


def split_words(folded: str) -> list[str]:
    """Tokens of already-folded text, in order (the list index is the token's position).

    >>> split_words("rock-n-roll 1984 東京")
    ['rock', 'n', 'roll', '1984', '東', '京']
    """
    return TOKEN_PATTERN.findall(folded)
