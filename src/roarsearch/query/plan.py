"""Query text → a plan of words, each with the terms it may match and at what cost.

Owns: the matching rules of contract §3–§4 that concern words: typo allowances by word length,
exact matching of numbers and identifiers, the last word as a prefix, and resolving
``searchFields`` (``*`` = every text field, in the order fields were first seen). Produces plain
data (term ids with typo counts); the bitmaps are looked up by :mod:`roarsearch.query.match`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from roarsearch.analysis.analyzer import analyze
from roarsearch.index.cache import IndexCache

#: Words shorter than this get no typo; a second typo needs at least SECOND_TYPO_MIN_LENGTH letters.
FIRST_TYPO_MIN_LENGTH = 4
SECOND_TYPO_MIN_LENGTH = 8


@dataclass(frozen=True, slots=True)
class Variant:
    """One term a query word may match: its id, the typos it costs, and whether it is the word itself."""

    term_id: int
    typos: int
    exact: bool


@dataclass(frozen=True, slots=True)
class WordPlan:
    """A query word and every term it matches."""

    text: str
    position: int
    is_prefix: bool
    variants: tuple[Variant, ...]
    #: Set on the last word: every term starting with it also matches, at no typo and not exact.
    #: Kept as a prefix, not a list of terms, so that a one-letter prefix costs one cached union.
    prefix: str | None = None

    def term_ids(self, max_typos: int | None = None) -> list[int]:
        return [v.term_id for v in self.variants if max_typos is None or v.typos <= max_typos]

    def exact_term_ids(self) -> list[int]:
        return [v.term_id for v in self.variants if v.exact]

    @property
    def max_typos(self) -> int:
        return max((v.typos for v in self.variants), default=0)


def allowed_typos(word: str, typo_tolerance: int) -> int:
    """Typos a word may carry: none under 4 letters or with a digit, a second one from 8 letters."""
    if typo_tolerance <= 0 or len(word) < FIRST_TYPO_MIN_LENGTH or any(ch.isdigit() for ch in word):
        return 0
    if len(word) < SECOND_TYPO_MIN_LENGTH:
        return min(1, typo_tolerance)
    return min(2, typo_tolerance)


def plan_words(lexicon: LexiconLike, query: str, typo_tolerance: int,
               cache: IndexCache | None = None) -> list[WordPlan]:
    """Expand every word of ``query``; the last word also matches as a prefix, unless the query
    ends with a space (the user has finished typing it).

    Expansions are kept in the index's ``cache`` when one is given: hot queries repeat, and
    expanding a word costs far more than looking it up. They depend only on the vocabulary,
    which only grows, so the vocabulary's size is their stamp (a delete keeps them).
    """
    words = analyze(query)
    # A query ending in a space has a complete last word: it is not being typed any more.
    typing_last_word = bool(query) and not query[-1].isspace()
    plans: list[WordPlan] = []
    for position, word in enumerate(words):
        is_prefix = position == len(words) - 1 and typing_last_word
        budget = allowed_typos(word, typo_tolerance)
        variants = _expand(lexicon, word, budget, is_prefix) if cache is None else _cached_expand(
            cache, lexicon, word, budget, is_prefix)
        plans.append(WordPlan(word, position, is_prefix, variants, word if is_prefix else None))
    return plans


#: Word expansions kept per index.
EXPANSION_CACHE_SIZE = 4096


def _cached_expand(cache: IndexCache, lexicon: LexiconLike, word: str, budget: int,
                   is_prefix: bool) -> tuple[Variant, ...]:
    expanded: tuple[Variant, ...] = cache.get_or_build(
        "expansions", (word, budget, is_prefix), len(lexicon), lambda: _expand(lexicon, word, budget, is_prefix),
        EXPANSION_CACHE_SIZE)
    return expanded


def _expand(lexicon: LexiconLike, word: str, budget: int, is_prefix: bool) -> tuple[Variant, ...]:
    """Every term ``word`` may match within ``budget`` typos, with its cost."""
    best: dict[int, tuple[int, bool]] = {}
    exact_id = lexicon.id_of(word)
    if exact_id is not None:
        best[exact_id] = (0, True)
    if budget:
        for term_id, distance in lexicon.typo_candidates(word, budget):
            if term_id not in best or distance < best[term_id][0]:
                best[term_id] = (distance, term_id == exact_id)
    if is_prefix and budget:
        # Distance-0 prefix matches are covered by ``prefix``; keep only the typo'd ones here.
        for term_id, distance in lexicon.prefix_candidates(word, budget):
            if distance and (term_id not in best or distance < best[term_id][0]):
                best[term_id] = (distance, False)
    return tuple(Variant(term_id, typos, exact) for term_id, (typos, exact) in best.items())


def resolve_search_fields(requested: tuple[str, ...], text_fields: list[str]) -> list[str]:
    """``*`` expands to every text field (first-seen order); named fields keep the request order."""
    resolved: list[str] = []
    for name in requested:
        candidates = text_fields if name == "*" else [name]
        for candidate in candidates:
            if candidate not in resolved:
                resolved.append(candidate)
    return resolved


class LexiconLike(Protocol):  # the real class is index.lexicon.Lexicon
    def __len__(self) -> int: ...
    def id_of(self, term: str) -> int | None: ...
    def typo_candidates(self, word: str, max_typos: int) -> list[tuple[int, int]]: ...
    def prefix_candidates(self, prefix: str, max_typos: int = 0) -> list[tuple[int, int]]: ...


__all__ = ["Variant", "WordPlan", "allowed_typos", "plan_words", "resolve_search_fields"]
