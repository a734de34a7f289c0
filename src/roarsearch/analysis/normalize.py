"""Text normalisation: Unicode compatibility folding, accent folding and case folding.

Owns: turning any text into the comparable form that both indexing and querying use. Pure
functions over ``str``; imports no other roarsearch module.

Invariant: ``fold(fold(x)) == fold(x)`` and the function is applied identically at index and query
time, so a word matches itself whatever its case, accents or compatibility form ("ﬂexibility",
"Flexibility" and "flexibility" all fold to "flexibility").
"""

from __future__ import annotations

import sys
import unicodedata
from functools import lru_cache

#: Characters deleted after NFKD decomposition: the combining marks (accents, diacritics).
#: Built once; ``str.translate`` then strips them in C.
_STRIP_MARKS = {
    codepoint: None
    for codepoint in range(sys.maxunicode + 1)
    if unicodedata.combining(chr(codepoint))
}

#: Letters that NFKD does not decompose but that users type without their stroke or ligature.
_EXTRA_FOLDS = str.maketrans({"ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ł": "l", "Ł": "L", "ß": "ss",
                              "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "ı": "i", "þ": "th", "Þ": "TH"})


def fold(text: str) -> str:
    """Fold ``text`` for comparison: NFKD, drop combining marks, extra letter folds, casefold.

    >>> fold("Ŝtraße ﬂexible Ærø")
    'strasse flexible aero'
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = decomposed.translate(_STRIP_MARKS).translate(_EXTRA_FOLDS)
    return stripped.casefold()


@lru_cache(maxsize=65536)
def fold_value(text: str) -> str:
    """:func:`fold` with a cache, for short repeated values (facet values, filter literals)."""
    return fold(text)
