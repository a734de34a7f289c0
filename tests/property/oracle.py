"""A brute-force reference model of roarsearch's matching and ranking (contract §3–§4).

This module tests nothing by itself: it is the oracle the property tests compare the engine with.
It keeps records as plain dicts and answers every query by looking at every token of every
record, with the same analyzer as the engine and rapidfuzz's OSA distance — no index, no bitmaps,
no shortcuts — so that a disagreement points at the engine's data structures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rapidfuzz.distance import OSA

from roarsearch.analysis.analyzer import analyze
from roarsearch.schema import iter_leaves

PROXIMITY_CAP = 8
ELEMENT_GAP = 1024


def allowed_typos(word: str, tolerance: int) -> int:
    if tolerance <= 0 or len(word) < 4 or any(ch.isdigit() for ch in word):
        return 0
    return min(1, tolerance) if len(word) < 8 else min(2, tolerance)


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
        distance = OSA.distance(word, token)
        if distance <= budget:
            best = distance
        if is_prefix and (best is None or best > 1):
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
    #: Query words the last search kept after word dropping (0 for an empty query).
    last_kept: int = 0

    def add(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self.records[record["id"]] = record
            for path, _element, value in iter_leaves(record):
                if isinstance(value, str) and path not in self.text_fields:
                    self.text_fields.append(path)

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
               sort: list[str] | None = None) -> tuple[int, list[Any]]:
        """(totalHits, ids of the page) as the contract orders them (``sort`` as on the wire)."""
        fields: list[str] = []
        for name in search_fields or ["*"]:
            for candidate in (self.text_fields if name == "*" else [name]):
                if candidate not in fields:
                    fields.append(candidate)
        words = analyze(query)
        pool = [r for r in self.records.values() if universe is None or r["id"] in universe]
        self.last_kept = len(words)
        if not words:
            keyed0 = [(sort_key(r, sort or []), (0, 0, 0, 0), id_key(r["id"]), r["id"]) for r in pool]
            keyed0.sort(key=lambda item: _with_rank(item, sort or []))
            return len(keyed0), [item[3] for item in keyed0[skip:skip + count]]
        budgets = [allowed_typos(word, typo_tolerance) for word in words]
        analysed = {r["id"]: self.tokens(r, fields) for r in pool}

        def per_word(record_id: Any, kept: int) -> list[dict[str, list[tuple[int, int]]]] | None:
            """For each kept word: field → [(position, typos)] of matching tokens; None if a word misses."""
            result = []
            for index in range(kept):
                word, budget = words[index], budgets[index]
                is_prefix = index == len(words) - 1 and not query[-1:].isspace()
                hits: dict[str, list[tuple[int, int]]] = {}
                for name, tokens in analysed[record_id].items():
                    for token, position in tokens:
                        typos = word_typos(word, token, budget, is_prefix)
                        if typos is not None:
                            hits.setdefault(name, []).append((position, typos))
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
            for left, right in zip(hits, hits[1:]):
                best = PROXIMITY_CAP
                for name in left:
                    for pa, _ in left[name]:
                        for pb, _ in right.get(name, []):
                            distance = max(pb - pa, 1) if pb >= pa else pa - pb + 1
                            best = min(best, distance - 1)
                proximity += best
            exact_fields = [fields.index(name) for word in hits for name, found in word.items() if any(t == 0 for _, t in found)]
            any_fields = [fields.index(name) for word in hits for name in word]
            attribute = 0 if len(fields) < 2 else (min(exact_fields) if exact_fields else len(fields) + min(any_fields))
            exact = 0
            for index, word in enumerate(words[:kept]):
                if not any(token == word for tokens in analysed[record_id].values() for token, _ in tokens):
                    exact = 1
            record = self.records[record_id]
            keyed.append((sort_key(record, sort or []), (typo, proximity, attribute, exact), id_key(record_id), record_id))
        keyed.sort(key=lambda item: _with_rank(item, sort or []))
        return len(keyed), [item[3] for item in keyed[skip:skip + count]]


class Reverse:
    """Inverts the order of a comparable value (descending keys on strings)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: "Reverse") -> bool:
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

    Numbers (array: smallest ascending, largest descending) before strings ascending, strings
    before numbers descending, missing last both ways; strings by (folded, raw); strings over 256
    characters do not sort; booleans sort as the strings "false" < "true".
    """
    from roarsearch.analysis.normalize import fold

    parts: list[Any] = []
    for text in sort:
        field_name, descending = _parse_sort(text)
        if field_name == "_rank":
            parts.append(None)
            continue
        values = [value for path, _, value in iter_leaves(record) if path == field_name]
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        strings = [(fold("true" if v else "false") if isinstance(v, bool) else fold(v), str(v))
                   for v in values if isinstance(v, bool) or (isinstance(v, str) and len(v) <= 256)]
        if numbers:
            parts.append((1, -max(numbers)) if descending else (0, min(numbers)))
        elif strings:
            parts.append((0, Reverse(max(strings))) if descending else (1, min(strings)))
        else:
            parts.append((2, 0))
    return tuple(parts)


def _with_rank(item: tuple[Any, ...], sort: list[str]) -> tuple[Any, ...]:
    keys, costs, record_key = list(item[0]), item[1], item[2]
    for position, text in enumerate(sort):
        field_name, descending = _parse_sort(text)
        if field_name == "_rank":
            # "-_rank" (best first) is ascending cost; "_rank" is descending cost.
            keys[position] = costs if descending else Reverse(costs)
    return (*keys, costs, record_key)
