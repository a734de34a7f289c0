"""Query text → a plan of words, each with the terms it may match and at what cost.

Owns: the matching rules of contract §3–§4 that concern words: typo allowances by word length,
a typo on the first letter counting as two, exact matching of numbers and identifiers, the last word as a prefix, and resolving
``searchFields`` (``*`` = every text field, in the order fields were first seen). Produces plain
data (term ids with typo counts); the bitmaps are looked up by :mod:`roarsearch.query.match`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from rapidfuzz import process
from rapidfuzz.distance import OSA

from roarsearch.analysis.analyzer import analyze
from roarsearch.index.cache import IndexCache
from roarsearch.query.settings import DEFAULT_SETTINGS, Settings

#: Words shorter than this get no typo; a second typo needs at least SECOND_TYPO_MIN_LENGTH letters.
FIRST_TYPO_MIN_LENGTH = 4
SECOND_TYPO_MIN_LENGTH = 8


@dataclass(frozen=True, slots=True)
class Variant:
    """One term a query word may match: its id, the typos it costs, and whether it is the word itself."""

    term_id: int
    typos: int
    exact: bool
    #: The term is the whole word (itself or within its typos), not only a longer word it starts.
    whole: bool = True


@dataclass(slots=True)
class WordPlan:
    """A query word and every term it matches. Never changed once made (not frozen: a search makes
    one per word, and a frozen dataclass costs more to make)."""

    text: str
    position: int
    is_prefix: bool
    variants: tuple[Variant, ...]
    #: Set on the last word: every term starting with it also matches, at no typo and not exact.
    #: Kept as a prefix, not a list of terms, so that a one-letter prefix costs one cached union.
    prefix: str | None = None
    #: Synonym phrases (settings): each a tuple of term ids, matched as adjacent words, at no
    #: typo and exact, in addition to the variants. A phrase with a word the lexicon lacks is left out.
    synonyms: tuple[tuple[int, ...], ...] = ()
    #: The most typos any variant costs (derived: asked for many times per search).
    max_typos: int = field(init=False)

    def __init__(self, text: str, position: int, is_prefix: bool, variants: tuple[Variant, ...],
                 prefix: str | None = None, synonyms: tuple[tuple[int, ...], ...] = ()) -> None:
        # Written out: compiled code runs a dataclass's generated __init__ as interpreted Python
        # (see docs/architecture.md, "Compiled"); the dataclass still gives repr and ==.
        self.text = text
        self.position = position
        self.is_prefix = is_prefix
        self.variants = variants
        self.prefix = prefix
        self.synonyms = synonyms
        self.max_typos = variants[0].typos if len(variants) == 1 else max((v.typos for v in variants), default=0)

    def term_ids(self, max_typos: int | None = None) -> list[int]:
        return [v.term_id for v in self.variants if max_typos is None or v.typos <= max_typos]

    def exact_term_ids(self) -> list[int]:
        """Exact variants, and the synonyms that are one word (they rank like the word itself)."""
        return [v.term_id for v in self.variants if v.exact] + [p[0] for p in self.synonyms if len(p) == 1]

    def whole_term_ids(self, max_typos: int | None = None) -> list[int]:
        """Variants that match the word whole (not only as a prefix completion), and one-word synonyms."""
        return ([v.term_id for v in self.variants if v.whole and (max_typos is None or v.typos <= max_typos)]
                + [p[0] for p in self.synonyms if len(p) == 1])

    def lone_variant(self) -> Variant | None:
        """The one term the word matches, when it matches exactly one (no other variant, no
        prefix, no synonym): the common word, looked up without the general machinery."""
        return self.variants[0] if len(self.variants) == 1 and self.prefix is None and not self.synonyms else None

    def is_exact_only(self) -> bool:
        """Whether every term the word matches is the word itself: no typo'd or longer word (its
        exact docs are then its whole match set)."""
        return self.prefix is None and all(variant.exact for variant in self.variants)

    def phrase_synonyms(self) -> list[tuple[int, ...]]:
        """Synonyms of two or more words (matched as adjacent words)."""
        return [phrase for phrase in self.synonyms if len(phrase) > 1]


def allowed_typos(word: str, typo_tolerance: int, one_typo: int = FIRST_TYPO_MIN_LENGTH,
                  two_typos: int = SECOND_TYPO_MIN_LENGTH) -> int:
    """Typos a word may carry: none under ``one_typo`` letters (4) or with a digit, a second one
    from ``two_typos`` letters (8); the settings' ``typoMinWordSize`` moves both thresholds."""
    if typo_tolerance <= 0 or len(word) < one_typo or any(ch.isdigit() for ch in word):
        return 0
    if len(word) < two_typos:
        return min(1, typo_tolerance)
    return min(2, typo_tolerance)


def query_words(query: str, settings: Settings = DEFAULT_SETTINGS) -> list[str]:
    """The analysed words of ``query`` with the settings' stop words left out, unless every word is one."""
    words = analyze(query)
    if settings.folded_stop_words:
        kept = [word for word in words if word not in settings.folded_stop_words]
        if kept:
            return kept
    return words


def synonym_phrases(words: list[str], settings: Settings) -> list[list[tuple[str, ...]]]:
    """Per query word, the synonym phrases it also matches: every left phrase found at some span
    of ``words`` lends its right phrases to each word of that span."""
    found: list[list[tuple[str, ...]]] = [[] for _ in words]
    if not settings.synonym_map:
        return found
    for start in range(len(words)):
        for length in range(1, min(settings.longest_synonym, len(words) - start) + 1):
            rights = settings.synonym_map.get(tuple(words[start:start + length]))
            if not rights:
                continue
            for position in range(start, start + length):
                found[position].extend(phrase for phrase in rights if phrase not in found[position])
    return found


def plan_words(lexicon: LexiconLike, query: str, typo_tolerance: int,
               cache: IndexCache | None = None, settings: Settings = DEFAULT_SETTINGS) -> list[WordPlan]:
    """Expand every word of ``query``; the last word also matches as a prefix, unless the query
    ends with a space (the user has finished typing it).

    Settings apply here: stop words are left out (unless every word is one), typo thresholds come
    from ``typoMinWordSize``, a ``typoDisabledWords`` word gets no typo, and synonyms join each
    word's plan as phrases of term ids.

    Expansions are kept in the index's ``cache`` when one is given: hot queries repeat, and
    expanding a word costs far more than looking it up. They depend only on the vocabulary,
    which only grows, so the vocabulary's size is their stamp (a delete keeps them), and one made
    at a smaller size is extended by the terms added since rather than made again.
    """
    words = query_words(query, settings)
    synonyms = synonym_phrases(words, settings)
    # A query ending in a space has a complete last word: it is not being typed any more. Nor is
    # the last kept word when a stop word after it was left out.
    typing_last_word = bool(query) and not query[-1].isspace()
    if typing_last_word and settings.folded_stop_words and words and analyze(query)[-1] != words[-1]:
        typing_last_word = False
    plans: list[WordPlan] = []
    for position, word in enumerate(words):
        is_prefix = position == len(words) - 1 and typing_last_word
        budget = allowed_typos(word, typo_tolerance, settings.one_typo, settings.two_typos)
        if word in settings.folded_typo_disabled_words:
            budget = 0
        if cache is None:
            variants = _expand(lexicon, word, budget, is_prefix)
        else:
            # Kept while the vocabulary grows: terms added since are checked alone and merged in.
            variants = cache.get_or_extend(
                "expansions", (word, budget, is_prefix), None, len(lexicon),
                lambda: _expand(lexicon, word, budget, is_prefix),  # noqa: B023 - called at once
                lambda made, made_at: _merged(made, _expand(lexicon, word, budget, is_prefix, made_at)),  # noqa: B023
                EXPANSION_CACHE_SIZE)
        phrases: list[tuple[int, ...]] = []
        for phrase in synonyms[position]:
            ids = [lexicon.id_of(part) for part in phrase]
            if all(term_id is not None for term_id in ids):
                phrases.append(tuple(term_id for term_id in ids if term_id is not None))
        plans.append(WordPlan(word, position, is_prefix, variants, word if is_prefix else None, tuple(phrases)))
    return plans


#: Word expansions kept per index.
EXPANSION_CACHE_SIZE = 4096


def _expand(lexicon: LexiconLike, word: str, budget: int, is_prefix: bool, first_new: int = 0) -> tuple[Variant, ...]:
    """Every term ``word`` may match within ``budget`` typos, with its cost. ``first_new``: only
    the terms of that id on (those added since an expansion was made, compared with the word
    directly: a write's few): whether a term matches depends on that term alone, so they merge
    with the old ones (:func:`_merged`)."""
    best: dict[int, tuple[int, bool, bool]] = {}
    exact_id = lexicon.id_of(word)
    if exact_id is not None and exact_id >= first_new:
        best[exact_id] = (0, True, True)
    if budget:
        for term_id, distance in (_new_typo_candidates(lexicon, word, budget, first_new) if first_new
                                  else lexicon.typo_candidates(word, budget)):
            typos = distance + _first_letter_cost(word, lexicon.term_of(term_id)) if distance else 0
            if typos <= budget and (term_id not in best or typos < best[term_id][0]):
                best[term_id] = (typos, term_id == exact_id, True)
    if is_prefix and budget:
        # Distance-0 prefix matches are covered by ``prefix``; keep only the typo'd ones here. One
        # typo at most, so none on the first letter (it counts as two).
        for term_id, distance in lexicon.prefix_candidates(word, budget):
            if (term_id >= first_new and distance and (term_id not in best or distance < best[term_id][0])
                    and not _first_letter_cost(word, lexicon.term_of(term_id))):
                best[term_id] = (distance, False, False)
    return tuple(Variant(term_id, typos, exact, whole) for term_id, (typos, exact, whole) in best.items())


def _first_letter_cost(word: str, term: str) -> int:
    """The extra typo a match costs when it changes the word's first letter (contract §4: a typo
    there counts as two, so ``zlib`` does not match every ``lib…`` word)."""
    return 0 if term[:1] == word[:1] else 1


def _new_typo_candidates(lexicon: LexiconLike, word: str, budget: int, first_new: int) -> list[tuple[int, int]]:
    """(term id, distance) of the terms from ``first_new`` on within ``budget`` of ``word``, by id."""
    matches = process.extract(word, lexicon.terms_since(first_new, len(lexicon)), scorer=OSA.distance,
                              score_cutoff=budget, limit=None)
    return sorted((first_new + index, int(distance)) for _, distance, index in matches)


def _merged(old: tuple[Variant, ...], new: tuple[Variant, ...]) -> tuple[Variant, ...]:
    """Variants of old and new terms in the order one expansion of all of them gives: the word
    itself, then typo'd terms by id, then longer terms by id (new ids follow old ones)."""
    if not new:
        return old
    groups: tuple[list[Variant], list[Variant], list[Variant]] = ([], [], [])
    for variants in (old, new):
        for variant in variants:
            groups[0 if variant.exact else 1 if variant.whole else 2].append(variant)
    return tuple(groups[0] + groups[1] + groups[2])


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
    def term_of(self, term_id: int) -> str: ...
    def typo_candidates(self, word: str, max_typos: int) -> list[tuple[int, int]]: ...
    def prefix_candidates(self, prefix: str, max_typos: int = 0) -> list[tuple[int, int]]: ...
    def terms_since(self, first: int, last: int) -> list[str]: ...


__all__ = ["Variant", "WordPlan", "allowed_typos", "plan_words", "query_words", "resolve_search_fields", "synonym_phrases"]
