"""Text normalisation: Unicode compatibility folding, accent folding and case folding.

Owns: turning any text into the comparable form that both indexing and querying use. Pure
functions over ``str``; imports no other roarsearch module.

Invariant: ``fold(fold(x)) == fold(x)`` and the function is applied identically at index and query
time, so a word matches itself whatever its case, accents or compatibility form ("ﬂexibility",
"Flexibility" and "flexibility" all fold to "flexibility").
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache


def _ranges_pattern(codepoints: list[int]) -> str:
    ranges: list[str] = []
    start = previous = codepoints[0]
    for codepoint in codepoints[1:] + [-1]:
        if codepoint != previous + 1:
            ranges.append(re.escape(chr(start)) + ("-" + re.escape(chr(previous)) if previous > start else ""))
            start = codepoint
        previous = codepoint
    return "[" + "".join(ranges) + "]+"


#: Runs of combining marks (accents, diacritics), deleted after NFKD decomposition. A regular
#: expression over code point ranges scans text several times faster than ``str.translate``
#: with a dictionary.
_COMBINING_MARKS = re.compile(
    _ranges_pattern([c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))])
)

#: Letters that NFKD does not decompose but that users type without their stroke or ligature.
_EXTRA_FOLDS = str.maketrans({"ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "ß": "ss",
                              "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ı": "i", "þ": "th", "Þ": "TH"})
_HAS_EXTRA_FOLD = re.compile("[øØđĐłŁßæÆœŒıþÞ]")


def fold(text: str) -> str:
    """Fold ``text`` for comparison: NFKD, drop combining marks, extra letter folds, casefold.

    >>> fold("Ŝtraße ﬂexible Ærø")
    'strasse flexible aero'
    """
    stripped = _COMBINING_MARKS.sub("", unicodedata.normalize("NFKD", text))
    if _HAS_EXTRA_FOLD.search(stripped):
        stripped = stripped.translate(_EXTRA_FOLDS)
    return stripped.casefold()


@lru_cache(maxsize=65536)
def fold_value(text: str) -> str:
    """:func:`fold` with a cache, for short repeated values (facet values, filter literals)."""
    return fold(text)


def fold_many(texts: list[str]) -> list[str]:
    """``[fold(t) for t in texts]`` in one pass over the joined texts (folding is per character)."""
    if not texts:
        return []
    joined = "\x00".join(texts)
    if joined.count("\x00") != len(texts) - 1:
        return [fold(text) for text in texts]
    if joined.isascii():
        return joined.lower().split("\x00")
    return fold(joined).split("\x00")
