"""Word plans → bitmaps of matching docs, and the match set with the drop-words fallback.

Owns: looking up, for each query word, the docs where it matches within a typo budget, in all
searched fields or in one of them, and the docs where it matches exactly; the AND across words
within a universe; and the contract's fallback — while nothing matches every word, drop words
from the end (never the first).

Callers: ``engine.collection`` (the match set) and ``ranking`` (per-rule bitmaps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from pyroaring import BitMap

from roarsearch.index.bitmaps import EMPTY, union_all
from roarsearch.index.index import Index
from roarsearch.query.plan import WordPlan


@dataclass(slots=True)
class WordMatcher:
    """Bitmap lookups for the words of one query over its searched fields (memoised per query)."""

    index: Index
    fields: list[str]
    _cache: dict[tuple[int, int, str | None], BitMap] = field(default_factory=dict)

    def docs(self, word: WordPlan, max_typos: int, field: str | None = None) -> BitMap:
        """Docs where ``word`` matches with at most ``max_typos`` typos (in ``field``, or any searched field)."""
        key = (word.position, max_typos, field)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        fields = self.fields if field is None else [field]
        shared_key = (word.text, word.prefix, max_typos, tuple(fields), len(word.variants))
        result = self.index.word_docs_cache_get(shared_key)
        if result is None:
            term_ids = word.term_ids(max_typos)
            parts = [self.index.field_docs(name, term_ids) for name in fields]
            if word.prefix is not None:
                parts.extend(self.index.prefix_docs(name, word.prefix) for name in fields)
            result = union_all([part for part in parts if part])
            if len(term_ids) > 8:  # a union of many postings: worth keeping until the next write
                self.index.word_docs_cache_put(shared_key, result)
        self._cache[key] = result
        return result

    def exact_docs(self, word: WordPlan) -> BitMap:
        """Docs where the word itself (no typo, not a longer word) occurs in a searched field."""
        term_ids = word.exact_term_ids()
        if not term_ids:
            return EMPTY
        return union_all([self.index.field_docs(name, term_ids) for name in self.fields])

    def term_ids(self, word: WordPlan) -> np.ndarray:
        """Every term id the word may match (typo variants and, for a prefix, all its completions)."""
        ids = np.asarray(word.term_ids(), dtype=np.uint32)
        if word.prefix is not None:
            ids = np.union1d(ids, self.index.lexicon.prefix_ids(word.prefix))
        return ids


def match_words(
    matcher: WordMatcher,
    words: list[WordPlan],
    universe: BitMap,
    narrow: Callable[[BitMap], BitMap] | None = None,
) -> tuple[BitMap, list[WordPlan]]:
    """Docs of ``universe`` matching every word and passing ``narrow`` (the filters); if none, drop
    words from the end until some do.

    Filters run after the words so that they only look at the docs the words left (a range check
    on a few hundred docs instead of a slice of the whole column). Returns the match set and the
    words it was computed with (the first word is never dropped, so a query whose first word matches
    nothing matches nothing).
    """
    if not words:
        return (narrow(universe) if narrow else universe), []
    per_word = [matcher.docs(word, word.max_typos) for word in words]
    for kept in range(len(words), 0, -1):
        candidates = universe.copy()
        for docs in per_word[:kept]:
            candidates &= docs
            if not candidates:
                break
        if candidates and narrow is not None:
            candidates = narrow(candidates)
        if candidates or kept == 1:
            return candidates, words[:kept]
    return BitMap(), words[:1]
