"""A brute-force reference model of roarsearch's matching and ranking (contract §3–§4).

This module tests nothing by itself: it is the oracle the property tests compare the engine with.
It keeps records as plain dicts and answers every query by looking at every token of every
record, with the same analyzer as the engine and rapidfuzz's OSA distance — no index, no bitmaps,
no shortcuts — so that a disagreement points at the engine's data structures.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz.distance import OSA

from roarsearch.analysis.analyzer import analyze
from roarsearch.schema import iter_leaves

PROXIMITY_CAP = 8
ELEMENT_GAP = 1024


def allowed_typos(word: str, tolerance: int, one_typo: int = 4, two_typos: int = 8) -> int:
    if tolerance <= 0 or len(word) < one_typo or any(ch.isdigit() for ch in word):
        return 0
    return min(1, tolerance) if len(word) < two_typos else min(2, tolerance)


def query_words(query: str, stop_words: list[str]) -> list[str]:
    """Analysed query words without stop words, unless every word is one (settings)."""
    words = analyze(query)
    stops = {w for text in stop_words for w in analyze(text)}
    kept = [word for word in words if word not in stops]
    return kept or words


def synonyms_per_word(words: list[str], synonyms: dict[str, list[str]]) -> list[list[tuple[str, ...]]]:
    """Per query word, the right phrases of every left phrase found at a span holding it."""
    found: list[list[tuple[str, ...]]] = [[] for _ in words]
    for left, rights in synonyms.items():
        key = tuple(analyze(left))
        if not key:
            continue
        for start in range(len(words) - len(key) + 1):
            if tuple(words[start:start + len(key)]) != key:
                continue
            for right in rights:
                phrase = tuple(analyze(right))
                if not phrase or phrase == key:
                    continue
                for position in range(start, start + len(key)):
                    if phrase not in found[position]:
                        found[position].append(phrase)
    return found


def id_key(record_id: Any) -> tuple[int, Any]:
    return (1, record_id) if isinstance(record_id, str) else (0, record_id)


def word_typos(word: str, token: str, budget: int, is_prefix: bool) -> int | None:
    """Typos with which ``token`` matches query ``word`` (None when it does not match)."""
    best: int | None = None
    if token == word:
        return 0
    if is_prefix and token.startswith(word):
        return 0
    if budget:
        # A typo on the first letter counts as two (contract §4).
        first_letter = 0 if token[:1] == word[:1] else 1
        distance = OSA.distance(word, token) + first_letter
        if distance <= budget:
            best = distance
        if is_prefix and (best is None or best > 1) and not first_letter:
            # While typing, the last word tolerates one typo in its beginning; the typed last letter
            # must be matched (dropping it is not a typo).
            near = any(c <= len(token) and OSA.distance(word, token[:c]) <= 1 for c in (len(word), len(word) + 1))
            near = near or any(token.startswith(word[:j] + word[j + 1:]) for j in range(len(word) - 1))
            if near:
                best = 1
    return best


@dataclass
class ReferenceModel:
    records: dict[Any, dict[str, Any]] = field(default_factory=dict)
    text_fields: list[str] = field(default_factory=list)  # first-seen order, deletes do not forget
    #: Every word any record added ever held (deletes do not forget: the engine's lexicon only grows).
    vocabulary: set[str] = field(default_factory=set)
    #: Query words the last search kept after word dropping (0 for an empty query).
    last_kept: int = 0

    def kept_query(self, query: str) -> str:
        """``query`` as the last search kept it after word dropping: its first ``last_kept`` words,
        the last one whole (a word left last by dropping is no longer typed as a prefix). Facets
        count over these words: dropping is decided once, with every filter (contract §3)."""
        words = query_words(query, [])
        if self.last_kept >= len(words):
            return query
        return " ".join(words[:self.last_kept]) + " "

    def add(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.records[record["id"]] = record
            for path, _element, value in iter_leaves(record):
                if isinstance(value, str):
                    if path not in self.text_fields:
                        self.text_fields.append(path)
                    self.vocabulary.update(analyze(value))

    def delete(self, ids: list[Any]) -> list[bool]:
        return [self.records.pop(record_id, None) is not None for record_id in ids]

    def tokens(self, record: dict[str, Any], fields: list[str]) -> dict[str, list[tuple[str, int]]]:
        by_field: dict[str, list[tuple[str, int]]] = {name: [] for name in fields}
        for path, element, value in iter_leaves(record):
            if path in by_field and isinstance(value, str):
                by_field[path].extend((token, element * ELEMENT_GAP + pos) for pos, token in enumerate(analyze(value)))
        return by_field

    def search(self, query: str, search_fields: list[str] | None = None, typo_tolerance: int = 1,
               skip: int = 0, count: int = 30, universe: set[Any] | None = None,
               sort: list[str] | None = None, settings: dict[str, Any] | None = None) -> tuple[int, list[Any]]:
        """(totalHits, ids of the page) as the contract orders them (``sort`` as on the wire), with
        the collection ``settings`` (contract §7, wire form) applied."""
        settings = settings or {}
        custom = list(settings.get("customRanking") or [])
        sizes = settings.get("typoMinWordSize") or {}
        one_typo, two_typos = sizes.get("oneTypo", 4), sizes.get("twoTypos", 8)
        no_typo_words = {w for text in settings.get("typoDisabledWords") or [] for w in analyze(text)}
        no_typo_fields = set(settings.get("typoDisabledFields") or [])
        fields: list[str] = []
        for name in search_fields or settings.get("searchFields") or ["*"]:
            for candidate in (self.text_fields if name == "*" else [name]):
                if candidate not in fields:
                    fields.append(candidate)
        words = query_words(query, settings.get("stopWords") or [])
        # A synonym phrase holding a word no record ever held cannot match: the engine leaves it
        # out of the plan, so its words do not count for proximity either (a lone "new" near
        # "nyc" when "york" is nowhere).
        synonyms = [[phrase for phrase in phrases if self.vocabulary.issuperset(phrase)]
                    for phrases in synonyms_per_word(words, settings.get("synonyms") or {})]
        pool = [r for r in self.records.values() if universe is None or r["id"] in universe]
        self.last_kept = len(words)
        if not words:
            keyed0 = [(sort_key(r, sort or []), (0, 0, 0, 0), sort_key(r, custom), id_key(r["id"]), r["id"])
                      for r in pool]
            keyed0.sort(key=lambda item: _with_rank(item, sort or []))
            return len(keyed0), [item[-1] for item in keyed0[skip:skip + count]]
        budgets = [0 if word in no_typo_words else allowed_typos(word, typo_tolerance, one_typo, two_typos)
                   for word in words]
        analysed = {r["id"]: self.tokens(r, fields) for r in pool}

        def phrase_starts(tokens: list[tuple[str, int]], phrase: tuple[str, ...]) -> list[int]:
            at = {(token, position) for token, position in tokens}
            return [position for token, position in tokens
                    if token == phrase[0] and all((part, position + k) in at for k, part in enumerate(phrase))]

        def near(record_id: Any, index: int, hits: dict[str, list[tuple[int, int]]]) -> dict[str, list[int]]:
            """Positions counted for proximity: every matching token, and every token of a synonym phrase."""
            terms = {term for phrase in synonyms[index] for term in phrase}
            found = {name: [position for position, _ in found] for name, found in hits.items()}
            for name, tokens in analysed[record_id].items():
                found.setdefault(name, []).extend(position for token, position in tokens if token in terms)
            return found

        def per_word(record_id: Any, kept: int) -> list[dict[str, list[tuple[int, int]]]] | None:
            """For each kept word: field → [(position, typos)] of matching tokens; None if a word misses."""
            result = []
            for index in range(kept):
                word, budget = words[index], budgets[index]
                # The last word is being typed, unless a space or a left-out stop word follows it.
                is_prefix = index == len(words) - 1 and not query[-1:].isspace() and analyze(query)[-1:] == words[-1:]
                hits: dict[str, list[tuple[int, int]]] = {}
                for name, tokens in analysed[record_id].items():
                    for token, position in tokens:
                        typos = word_typos(word, token, 0 if name in no_typo_fields else budget, is_prefix)
                        if typos is not None:
                            hits.setdefault(name, []).append((position, typos))
                    for phrase in synonyms[index]:
                        hits_here = phrase_starts(tokens, phrase)
                        if hits_here:
                            hits.setdefault(name, []).extend((position, 0) for position in hits_here)
                if not hits:
                    return None
                result.append(hits)
            return result

        for kept in range(len(words), 0, -1):
            matches = {}
            for record in pool:
                hits = per_word(record["id"], kept)
                if hits is not None:
                    matches[record["id"]] = hits
            if matches or kept == 1:
                self.last_kept = kept
                break
        keyed = []
        for record_id, hits in matches.items():
            typo = sum(min(t for positions in word.values() for _, t in positions) for word in hits)
            proximity = 0
            nears = [near(record_id, index, word) for index, word in enumerate(hits)]
            for left, right in itertools.pairwise(nears):
                best = PROXIMITY_CAP
                for name in left:
                    for pa in left[name]:
                        for pb in right.get(name, []):
                            distance = max(pb - pa, 1) if pb >= pa else pa - pb + 1
                            best = min(best, distance - 1)
                proximity += best
            exact_fields = [fields.index(name) for word in hits for name, found in word.items() if any(t == 0 for _, t in found)]
            any_fields = [fields.index(name) for word in hits for name in word]
            attribute = 0 if len(fields) < 2 else (min(exact_fields) if exact_fields else len(fields) + min(any_fields))
            # Exactness: 0 when every word occurs as itself (or a synonym); 1 when every word
            # occurs whole (itself, a synonym, or a whole token within its typo allowance in that
            # field); 2 when some word occurs only as the start of a longer token.
            exact = 0
            for index, word in enumerate(words[:kept]):
                singles = {phrase[0] for phrase in synonyms[index] if len(phrase) == 1}
                phrase_hit = any(phrase_starts(tokens, phrase) for tokens in analysed[record_id].values()
                                 for phrase in synonyms[index] if len(phrase) > 1)
                if phrase_hit or any(token == word or token in singles
                                     for tokens in analysed[record_id].values() for token, _ in tokens):
                    continue
                whole = any(OSA.distance(word, token) + (token[:1] != word[:1])
                            <= (0 if name in no_typo_fields else budgets[index])
                            for name, tokens in analysed[record_id].items() for token, _ in tokens)
                exact = max(exact, 1 if whole else 2)
            record = self.records[record_id]
            keyed.append((sort_key(record, sort or []), (typo, proximity, attribute, exact), sort_key(record, custom),
                          id_key(record_id), record_id))
        keyed.sort(key=lambda item: _with_rank(item, sort or []))
        return len(keyed), [item[-1] for item in keyed[skip:skip + count]]


class Reverse:
    """Inverts the order of a comparable value (descending keys on strings)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: Reverse) -> bool:
        return other.value < self.value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Reverse) and other.value == self.value


def _parse_sort(text: str) -> tuple[str, bool]:
    if text.startswith("-"):
        return text[1:], True
    if text.endswith(":desc"):
        return text[:-5], True
    if text.endswith(":asc"):
        return text[:-4], False
    return text, False


def sort_key(record: dict[str, Any], sort: list[str]) -> tuple[Any, ...]:
    """Per sort key (``_rank`` keys are filled in by :func:`_with_rank`): class then value.

    An array by its smallest value ascending and its largest descending, in the order numbers <
    strings; missing last both ways; strings by their folded text alone (values that fold alike
    tie); strings over 256 characters do not sort; booleans sort as the strings "false" < "true".
    """
    from roarsearch.analysis.normalize import fold

    parts: list[Any] = []
    for text in sort:
        field_name, descending = _parse_sort(text)
        if field_name == "_rank":
            parts.append(None)
            continue
        if field_name == "id":  # contract §3: id is a field like any other; id order, ints first
            parts.append((0, Reverse(id_key(record["id"]))) if descending else (0, id_key(record["id"])))
            continue
        values = [value for path, _, value in iter_leaves(record) if path == field_name]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        strings = [fold("true" if v else "false") if isinstance(v, bool) else fold(v)
                   for v in values if isinstance(v, bool) or (isinstance(v, str) and len(v) <= 256)]
        if descending and strings:  # numbers < strings: the largest value is a string
            parts.append((0, Reverse(max(strings))))
        elif descending and numbers:
            parts.append((1, -max(numbers)))
        elif numbers:
            parts.append((0, min(numbers)))
        elif strings:
            parts.append((1, min(strings)))
        else:
            parts.append((2, 0))
    return tuple(parts)


def _with_rank(item: tuple[Any, ...], sort: list[str]) -> tuple[Any, ...]:
    keys, costs, custom, record_key = list(item[0]), item[1], item[2], item[3]
    for position, text in enumerate(sort):
        field_name, descending = _parse_sort(text)
        if field_name == "_rank":
            # "-_rank" (best first) is ascending cost; "_rank" is descending cost.
            keys[position] = costs if descending else Reverse(costs)
    return (*keys, costs, custom, record_key)


# ---------------------------------------------------------------- vectors (contract §11)

RRF_K = 60


def vector_score(values: list[float], query: list[float], metric: str) -> float:
    """A record's ``_vectorScore``: cosine similarity, dot product or Euclidean distance, in float64
    over the float32 values the engine stores (small integers in the tests: exact)."""
    import math

    import numpy as np

    row = [float(np.float32(value)) for value in values]
    point = [float(np.float32(value)) for value in query]
    if metric == "l2":
        return math.sqrt(sum((a - b) ** 2 for a, b in zip(row, point)))
    dot = sum(a * b for a, b in zip(row, point))
    if metric == "dot":
        return dot
    cosine = dot / (math.sqrt(sum(a * a for a in row)) * math.sqrt(sum(b * b for b in point)))
    return min(1.0, max(-1.0, cosine))


def nearest(records: list[dict[str, Any]], name: str, query: list[float], metric: str,
            k: int) -> list[tuple[Any, float]]:
    """The ``k`` records of ``records`` nearest ``query`` in space ``name``: (id, score), nearest
    first, ties by record id."""
    scored = [(record["id"], vector_score(record["_vectors"][name], query, metric)) for record in records
              if isinstance(record.get("_vectors"), dict) and record["_vectors"].get(name) is not None]
    scored.sort(key=lambda item: ((item[1] if metric == "l2" else -item[1]), id_key(item[0])))
    return scored[:k]


def fused(keyword: list[Any], vector: list[Any], ratio: float) -> list[tuple[Any, float]]:
    """Reciprocal rank fusion of two ordered id lists: (id, score), best first; ties by keyword
    order, then vector order, then id."""
    keyword_at = {record_id: position for position, record_id in enumerate(keyword, 1)}
    vector_at = {record_id: position for position, record_id in enumerate(vector, 1)}
    absent = float("inf")
    scored = []
    for record_id in set(keyword) | set(vector):
        score = 0.0
        if record_id in keyword_at:
            score += (1.0 - ratio) / (RRF_K + keyword_at[record_id])
        if record_id in vector_at:
            score += ratio / (RRF_K + vector_at[record_id])
        scored.append((record_id, score))
    scored.sort(key=lambda item: (-item[1], keyword_at.get(item[0], absent), vector_at.get(item[0], absent),
                                  id_key(item[0])))
    return scored
