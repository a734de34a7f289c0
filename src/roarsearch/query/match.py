"""Word plans → bitmaps of matching docs.

Owns: looking up, for each query word, the docs where it matches within a typo budget, in all
searched fields or in one of them, and the docs where it matches exactly (memoised per query;
unions of many postings kept in the index's cache until the next write).

Callers: ``query.context`` (the match set) and ``ranking`` (per-rule bitmaps).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import EMPTY, sorted_unique, union_all
from roarsearch.index.index import Index
from roarsearch.query.plan import WordPlan


@dataclass(slots=True)
class WordMatcher:
    """Bitmap lookups for the words of one query over its searched fields (memoised per query)."""

    index: Index
    fields: list[str]
    #: Fields where words match only without typos (settings' ``typoDisabledFields``).
    typo_disabled_fields: frozenset[str] = frozenset()
    _cache: dict[tuple[int, int, str | None], AbstractBitMap] = field(default_factory=dict)
    _parts: dict[tuple[int, int], list[AbstractBitMap]] = field(default_factory=dict)

    def __init__(self, index: Index, fields: list[str], typo_disabled_fields: frozenset[str] = frozenset()) -> None:
        # Written out: a dataclass's generated __init__ runs as interpreted Python (see WordPlan).
        self.index = index
        self.fields = fields
        self.typo_disabled_fields = typo_disabled_fields
        self._cache = {}
        self._parts = {}

    def docs(self, word: WordPlan, max_typos: int, field: str | None = None) -> AbstractBitMap:
        """Docs where ``word`` matches with at most ``max_typos`` typos (in ``field``, or any searched
        field: the union of each field's docs, which the attribute rule asks for next)."""
        key = (word.position, max_typos, field)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        variant = word.lone_variant()
        if field is not None and variant is not None:
            # The common word, one term in one field: its cached posting bitmap, looked up directly.
            typos = 0 if field in self.typo_disabled_fields else max_typos
            postings = self.index.postings.get(field)
            result = (postings.term_docs(variant.term_id) if postings is not None and variant.typos <= typos
                      else EMPTY)
            self._cache[key] = result
            return result
        term_ids = word.term_ids(max_typos)
        if field is not None and field in self.typo_disabled_fields:
            term_ids = word.term_ids(0)
        if len(term_ids) > 8:  # a union of many postings is worth keeping until the next write
            fields = self.fields if field is None else [field]
            shared_key = (word.text, word.prefix, max_typos, tuple(fields), len(word.variants), word.synonyms,
                          tuple(name for name in fields if name in self.typo_disabled_fields))
            result = self.index.cached_union(shared_key, lambda: self._docs_now(word, max_typos, field, term_ids))
        else:
            result = self._docs_now(word, max_typos, field, term_ids)
        self._cache[key] = result
        return result

    def field_parts(self, word: WordPlan, max_typos: int) -> list[AbstractBitMap]:
        """:meth:`docs` of the word in each searched field, in field order (memoised: the match
        set, the attribute rule and the proximity rule each ask for them)."""
        key = (word.position, max_typos)
        parts = self._parts.get(key)
        if parts is None:
            parts = self._parts[key] = [self.docs(word, max_typos, name) for name in self.fields]
        return parts

    def _docs_now(self, word: WordPlan, max_typos: int, field: str | None, term_ids: list[int]) -> AbstractBitMap:
        if field is None:
            return _union([part for part in self.field_parts(word, max_typos) if part])
        if not word.synonyms and word.prefix is None:  # the common word: one lookup
            return self.index.field_docs(field, term_ids)
        parts = [self.index.field_docs(field, term_ids + [phrase[0] for phrase in word.synonyms if len(phrase) == 1])]
        if word.prefix is not None:
            parts.append(self.index.prefix_docs(field, word.prefix))
        parts.extend(self.index.phrase_docs(field, phrase) for phrase in word.phrase_synonyms())
        return _union([part for part in parts if part])

    def docs_within(self, word: WordPlan, max_typos: int, within: AbstractBitMap) -> AbstractBitMap:
        """``docs(word, max_typos) & within``, each field's part intersected first: a word common in
        some fields is then never unioned whole (a few intersections with a small set instead)."""
        whole = self._cache.get((word.position, max_typos, None))
        if whole is not None:
            return whole & within
        return _union([hit for hit in (within & part for part in self.field_parts(word, max_typos) if part) if hit])

    def estimate(self, word: WordPlan) -> int:
        """How many docs ``word`` matches at most (the sum over fields): to intersect the rarest
        word first."""
        return sum(map(len, self.field_parts(word, word.max_typos)))

    def exact_docs(self, word: WordPlan) -> AbstractBitMap:
        """Docs where the word itself (no typo, not a longer word) occurs in a searched field
        (memoised: the exactness rule asks once per bucket it splits)."""
        key = (word.position, -2, "exact")
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        if word.is_exact_only():
            return self.docs(word, word.max_typos)
        term_ids = word.exact_term_ids()
        parts = [self.index.field_docs(name, term_ids) for name in self.fields] if term_ids else []
        for phrase in word.phrase_synonyms():  # a synonym match ranks like the word itself
            parts.extend(self.index.phrase_docs(name, phrase) for name in self.fields)
        result = _union([part for part in parts if part])
        self._cache[key] = result
        return result

    def whole_docs(self, word: WordPlan) -> AbstractBitMap:
        """Docs where the word matches as a whole word — itself, a typo'd whole term within its
        allowance (none in a typo-disabled field), or a synonym — not only as a longer word it starts."""
        key = (word.position, -1, "whole")
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        term_ids = word.whole_term_ids()
        free_ids = word.whole_term_ids(0) if self.typo_disabled_fields else term_ids
        parts = [self.index.field_docs(name, free_ids if name in self.typo_disabled_fields else term_ids)
                 for name in self.fields]
        for phrase in word.phrase_synonyms():
            parts.extend(self.index.phrase_docs(name, phrase) for name in self.fields)
        result = _union([part for part in parts if part])
        self._cache[key] = result
        return result

    def term_ids(self, word: WordPlan, typo_free: bool = False) -> np.ndarray:
        """Every term id the word may match (typo variants — none when ``typo_free``, as in a
        typo-disabled field —, every word of its synonyms and, for a prefix, all its completions)."""
        variant = word.lone_variant()
        if variant is not None and not (typo_free and variant.typos):  # the common word: one term
            return np.asarray([variant.term_id], dtype=np.uint32)
        ids = np.asarray(word.term_ids(0 if typo_free else None) + [term for phrase in word.synonyms for term in phrase],
                         dtype=np.uint32)
        ids = sorted_unique(ids)
        if word.prefix is not None:
            ids = sorted_unique(np.concatenate((ids, self.index.lexicon.prefix_ids(word.prefix).astype(np.uint32, copy=False))))
        return ids

    def term_id_list(self, word: WordPlan, typo_free: bool = False) -> list[int]:
        """:meth:`term_ids` as a list, for the few-match measures that read them one by one (the
        common word's one id without a round trip through numpy)."""
        variant = word.lone_variant()
        if variant is not None and not (typo_free and variant.typos):
            return [variant.term_id]
        ids: list[int] = self.term_ids(word, typo_free).tolist()
        return ids


def _union(parts: list[AbstractBitMap]) -> AbstractBitMap:
    """The union of ``parts``; one part is returned as it is (match sets are only read, never
    changed in place: copying a large posting list per field and word cost more than its use)."""
    if not parts:
        return BitMap()
    return parts[0] if len(parts) == 1 else union_all(parts)
