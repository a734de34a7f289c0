"""Text normalisation: Unicode compatibility folding, accent folding and case folding.

Owns: turning any text into the comparable form that both indexing and querying use. Pure
functions over ``str``; imports no other roarsearch module (numpy for long texts).

Invariant: ``fold(fold(x)) == fold(x)`` and the function is applied identically at index and query
time, so a word matches itself whatever its case, accents or compatibility form ("ﬂexibility",
"Flexibility" and "flexibility" all fold to "flexibility").
"""

from __future__ import annotations

import re
import sys
import unicodedata
from functools import lru_cache

import numpy as np


def _ranges_pattern(codepoints: list[int]) -> str:
    ranges: list[str] = []
    start = previous = codepoints[0]
    for codepoint in codepoints[1:] + [-1]:
        if codepoint != previous + 1:
            ranges.append(re.escape(chr(start)) + ("-" + re.escape(chr(previous)) if previous > start else ""))
            start = codepoint
        previous = codepoint
    return "[" + "".join(ranges) + "]+"


_MARK_CODEPOINTS = [c for c in range(sys.maxunicode + 1) if unicodedata.combining(chr(c))]
#: Runs of combining marks (accents, diacritics), deleted after NFKD decomposition: for short
#: texts (queries, single values). A regular expression over code point ranges scans text several
#: times faster than ``str.translate`` with a dictionary...
_COMBINING_MARKS = re.compile(_ranges_pattern(_MARK_CODEPOINTS))
#: ... and a lookup table over the text's code points (as a numpy array) 10-30 times faster than
#: the expression for long ones (a batch's joined values: ~100 ns a character through the
#: expression's 300-odd ranges). Indexed by code point; the last entry, False, stands for every
#: code point past the last mark.
_IS_MARK = np.zeros(_MARK_CODEPOINTS[-1] + 2, dtype=bool)
_IS_MARK[_MARK_CODEPOINTS] = True
#: From this many characters on, marks are stripped through the table (numpy's per-call cost
#: outweighs the expression's below).
_TABLE_MIN_CHARS = 256

def _is_lettered_symbol(character: str) -> bool:
    return unicodedata.category(character)[0] == "S" and any(
        part.isascii() and part.isalnum() for part in unicodedata.normalize("NFKD", character))


#: Symbols that NFKD spells with Latin letters or digits (™ → "TM", ℠, ㎏ → "kg", ⒜ → "(a)"): a
#: separator like every other symbol, not letters glued to the word before it ("Thing™" is the word
#: "thing", as other engines' tokenisers have it). Replaced by a space before the decomposition.
#: (Symbols that decompose to ideographs or Hangul, such as the Kangxi radicals, keep their letters.)
_LETTERED_SYMBOLS = re.compile(_ranges_pattern(
    [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF and _is_lettered_symbol(chr(c))]))

#: Letters that NFKD does not decompose but that users type without their stroke or ligature.
_EXTRA_FOLDS = str.maketrans({"ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "ß": "ss",
                              "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ı": "i", "þ": "th", "Þ": "TH"})
_HAS_EXTRA_FOLD = re.compile("[øØđĐłŁßæÆœŒıþÞ]")


def fold(text: str) -> str:
    """Fold ``text`` for comparison: NFKD, drop combining marks, extra letter folds, casefold.

    >>> fold("Ŝtraße ﬂexible Ærø")
    'strasse flexible aero'
    """
    if not text.isascii():
        text = _LETTERED_SYMBOLS.sub(" ", text)
    stripped = _without_marks(unicodedata.normalize("NFKD", text))
    if _HAS_EXTRA_FOLD.search(stripped):
        stripped = stripped.translate(_EXTRA_FOLDS)
    return stripped.casefold()


def _without_marks(decomposed: str) -> str:
    """``decomposed`` with its combining marks deleted."""
    if decomposed.isascii():
        return decomposed
    if len(decomposed) < _TABLE_MIN_CHARS:
        return _COMBINING_MARKS.sub("", decomposed)
    # surrogatepass: a lone surrogate (never a mark) goes through as itself.
    codes = np.frombuffer(decomposed.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    is_mark = _IS_MARK[np.minimum(codes, _IS_MARK.size - 1)]
    if not is_mark.any():
        return decomposed
    return codes[~is_mark].tobytes().decode("utf-32-le", "surrogatepass")


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
