"""Facet value search: the values of one facet that match a few typed letters, with counts.

Owns: contract §5's ``textFacetQuery``. The query and the values are analyzed like search text
(folded, split into words, words joined by one space). A value matches when

- rank 0: the query begins the value;
- rank 1: the query begins one of the value's words (a query of several words: begins the value
  at one of its word boundaries);
- rank 2: a one-word query of 4+ letters is within the typo allowance of the beginning of one of
  the value's words (:func:`roarsearch.query.plan.allowed_typos` with the request's
  ``typoTolerance``: one typo from 4 letters, a second from 8 when the tolerance is 2; OSA
  distance, so a swap of neighbours is one typo, and a typo on the first letter counts as two). "Beginning" is any prefix whose
  length is within the allowance of the query's length.

Counts are over the records the rest of the request selects; values no such record holds are
left out. Order: rank, then count descending, then value ascending (numbers < booleans <
strings; strings by folded text, then raw). An empty query lists the most frequent values.
Numbers of the field take part as their JSON spelling (prefix matches only: a word with a digit
is never typo-tolerant).

Speed: a facet can hold hundreds of thousands of strings, so nothing here loops over values in
Python per query. Per value column, built once and rebuilt when the column gains values (values
are append-only), a :class:`_ValueText` holds

- every analyzed value in one newline-separated string: rank 0 and rank 1 are a regular
  expression scan of that string, match offsets mapped to value ids with ``searchsorted``;
- the distinct words as a fixed-width numpy string array with, for each, the values holding it:
  typo candidates are the distinct word prefixes of the lengths that can match (numpy truncation
  and ``unique``), scored in one ``rapidfuzz.process.cdist`` call.

Counting is :func:`roarsearch.facets.text.select_pairs` + ``numpy.bincount``; the order is one
``numpy.lexsort`` over the matching values. Measured at 300,000 distinct values (400,000 records):
see ``docs/facets.md``.

Called by ``engine.collection.Collection.facet_values``; the structures live in the index's cache.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap
from rapidfuzz import process
from rapidfuzz.distance import OSA

from roarsearch.analysis.analyzer import analyze, analyze_batch
from roarsearch.facets.text import plain_number, select_pairs
from roarsearch.index.bitmaps import sorted_unique
from roarsearch.index.columns import FieldColumns, ValueColumn
from roarsearch.query.plan import allowed_typos

#: Value columns whose search structures are kept (the facets being typed into right now).
CACHED_COLUMNS = 8
#: Sorts after every string that begins with a given prefix (bisecting a prefix's range).
_AFTER_ALL = "\U0010ffff"
#: Rank of a value that does not match (ranks 0, 1, 2 are described in the module docstring).
NO_MATCH = 3


class _ValueText:
    """Search structures over the analyzed values of one value column (see the module docstring)."""

    __slots__ = ("size", "lines", "sorted_lines", "line_order", "words", "word_list",
                 "word_values_start", "word_values", "is_string", "_prefixes")

    def __init__(self, column: ValueColumn) -> None:
        values = column.values
        self.size = len(values)
        spelled = [("true" if value else "false") if isinstance(value, bool) else value for value in values]
        tokens, value_index, _positions = analyze_batch(spelled)
        #: Per value, its words joined by one space.
        self.lines = _join_lines(tokens, value_index, self.size)
        # Sorted lines: values beginning with the query are one bisected slice.
        self.line_order = np.asarray(sorted(range(self.size), key=self.lines.__getitem__), dtype=np.int64)
        self.sorted_lines = [self.lines[value_id] for value_id in self.line_order.tolist()]
        # Distinct words (sorted) and, per word (CSR), the values holding it.
        if tokens:
            self.words, word_of_token = np.unique(np.asarray(tokens), return_inverse=True)
            order = np.argsort(word_of_token, kind="stable")
            self.word_values = value_index[order]
            self.word_values_start = np.searchsorted(word_of_token[order], np.arange(self.words.size + 1))
        else:
            self.words = np.empty(0, dtype="U1")
            self.word_values = np.empty(0, dtype=np.int64)
            self.word_values_start = np.zeros(1, dtype=np.int64)
        self.word_list: list[str] = self.words.tolist()
        self.is_string = np.fromiter((not isinstance(value, bool) for value in values), dtype=bool, count=self.size)
        #: Per prefix length: (distinct word prefixes of that length, prefix index of each word).
        #: Per prefix length: the distinct prefixes, each word's prefix, and each prefix's first letter.
        self._prefixes: dict[int, tuple[list[str], np.ndarray, np.ndarray]] = {}

    def ranks(self, query: str, budget: int) -> np.ndarray:
        """Per value id, its match rank for the analyzed ``query`` (:data:`NO_MATCH` if none)."""
        rank = np.full(self.size, NO_MATCH, dtype=np.int8)
        if not query:
            rank[:] = 0
            return rank
        if budget and self.words.size:
            rank[self._typo_values(query, budget)] = 2
        if " " in query:
            rank[self._phrase_values(query)] = 1
        else:
            lo = bisect_left(self.word_list, query)
            hi = bisect_left(self.word_list, query + _AFTER_ALL, lo)
            rank[self._values_of_words(np.arange(lo, hi, dtype=np.int64))] = 1
        lo = bisect_left(self.sorted_lines, query)
        hi = bisect_left(self.sorted_lines, query + _AFTER_ALL, lo)
        rank[self.line_order[lo:hi]] = 0
        return rank

    def _phrase_values(self, query: str) -> np.ndarray:
        """Value ids where the (several-word) query begins at a word boundary.

        Such a value holds the query's first word whole: only those values' lines are checked.
        """
        first_word = query.split(" ", 1)[0]
        position = bisect_left(self.word_list, first_word)
        if position == len(self.word_list) or self.word_list[position] != first_word:
            return np.empty(0, dtype=np.int64)
        holders = sorted_unique(self._values_of_words(np.asarray([position], dtype=np.int64))).tolist()
        needle = " " + query
        lines = self.lines
        return np.asarray([value_id for value_id in holders if needle in " " + lines[value_id]], dtype=np.int64)

    def _typo_values(self, query: str, budget: int) -> np.ndarray:
        """Value ids with a word whose prefix is within ``budget`` typos of ``query``."""
        matched_words = np.zeros(self.words.size, dtype=bool)
        for length in range(max(1, len(query) - budget), len(query) + budget + 1):
            if length not in self._prefixes:
                unique_prefixes, word_of_prefix = np.unique(self.words.astype(f"U{length}"), return_inverse=True)
                self._prefixes[length] = (unique_prefixes.tolist(), word_of_prefix.astype(np.int32),
                                          unique_prefixes.astype("U1"))
            prefix_list, word_of_prefix, first_letters = self._prefixes[length]
            distances = process.cdist([query], prefix_list, scorer=OSA.distance, score_cutoff=budget, dtype=np.int32)[0]
            distances = distances + (first_letters != query[:1])  # a typo on the first letter counts as two
            matched_words |= (distances <= budget)[word_of_prefix]
        return self._values_of_words(np.flatnonzero(matched_words))

    def _values_of_words(self, word_ids: np.ndarray) -> np.ndarray:
        """Value ids holding any of ``word_ids`` (with repeats)."""
        starts, ends = self.word_values_start[word_ids], self.word_values_start[word_ids + 1]
        lengths = ends - starts
        positions = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        found: np.ndarray = self.word_values[positions]
        return found


def _join_lines(tokens: list[str], value_index: np.ndarray, size: int) -> list[str]:
    """Per value, its tokens joined by one space (values without tokens give "")."""
    bounds = np.searchsorted(value_index, np.arange(size + 1), side="left").tolist()
    return [" ".join(tokens[bounds[position]:bounds[position + 1]]) for position in range(size)]


def _value_text(columns: FieldColumns) -> _ValueText:
    """The field's search structures, kept in the index's cache until the column gains values
    (values are append-only and deletes do not change them: the number of values is the stamp)."""
    column = columns.values
    assert column is not None
    text: _ValueText = columns.cache.get_or_build("value_text", columns.path, (id(column), len(column.values)),
                                                  lambda: _ValueText(column), CACHED_COLUMNS)
    return text


def _string_matches(columns: FieldColumns, candidates: AbstractBitMap, query: str, budget: int, count: int) -> list[tuple[Any, ...]]:
    """The best ``count`` (rank, -count, kind, order within kind, value, count) of the column's values."""
    column = columns.values
    assert column is not None
    _, selected = select_pairs(column, candidates)
    if not selected.size:
        return []
    hits = np.bincount(selected, minlength=len(column.values))
    text = _value_text(columns)
    rank = text.ranks(query, budget)
    chosen = np.flatnonzero((hits > 0) & (rank < NO_MATCH))
    if not chosen.size:
        return []
    # One int64 key orders (rank, count descending, booleans before strings, folded value), so
    # the best ``count`` are an argpartition away, without sorting every matching value.
    values_count = len(column.values)
    chosen_hits = hits[chosen].astype(np.int64)
    most = int(chosen_hits.max())
    position = column.fold_rank()[chosen] + np.where(text.is_string[chosen], values_count, 0)
    key = (rank[chosen].astype(np.int64) * (most + 1) + (most - chosen_hits)) * (2 * values_count) + position
    if key.size > count:
        keep = np.argpartition(key, count - 1)[:count]
        chosen, key = chosen[keep], key[keep]
    best = chosen[np.argsort(key, kind="stable")]
    fold_rank = column.fold_rank()
    return [
        (int(rank[value_id]), -int(hits[value_id]), 2 if text.is_string[value_id] else 1, int(fold_rank[value_id]),
         column.values[value_id], int(hits[value_id]))
        for value_id in best.tolist()
    ]


def _number_matches(columns: FieldColumns, candidates: AbstractBitMap, query: str, count: int) -> list[tuple[Any, ...]]:
    """Numbers of the field whose spelling the query begins (or all of them for an empty query)."""
    if columns.numeric is None:
        return []
    selected_docs, selected = select_pairs(columns.numeric, candidates)
    if not selected.size:
        return []
    # A record counts once per distinct number.
    pairs = np.unique(np.stack((selected_docs.astype(np.float64), selected)), axis=1)
    distinct, hits = np.unique(pairs[1], return_counts=True)
    found = []
    for number, number_hits in zip(distinct.tolist(), hits.tolist()):
        value = plain_number(number)
        if not query or " ".join(analyze(str(value))).startswith(query):
            found.append((0, -number_hits, 0, number, value, number_hits))
    found.sort(key=lambda item: item[:4])
    return found[:count]


def search_facet_values(columns: FieldColumns | None, candidates: AbstractBitMap, query: str, count: int,
                        typo_tolerance: int = 1) -> list[dict[str, Any]]:
    """``[{"value": v, "count": n}, ...]``: up to ``count`` values of the facet matching ``query``.

    ``typo_tolerance`` is the request's ``typoTolerance`` (contract default 1).
    """
    if columns is None or not candidates or count <= 0:
        return []
    wanted = " ".join(analyze(query))
    budget = allowed_typos(wanted, typo_tolerance) if wanted and " " not in wanted else 0
    found: list[tuple[Any, ...]] = []
    if columns.values is not None:
        found.extend(_string_matches(columns, candidates, wanted, budget, count))
    found.extend(_number_matches(columns, candidates, wanted, count))
    found.sort(key=lambda item: item[:4])
    return [{"value": value, "count": hits} for *_, value, hits in found[:count]]
