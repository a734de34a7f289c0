"""The lexicon: every distinct term of a collection, its id, and fast typo and prefix lookups.

Owns: term ↔ term id (dense, in order of first appearance, never reused or removed — a term
whose records are all gone just has empty postings), and the three structures that keep query
expansion from scanning the vocabulary:

- **Prefixes**: terms sorted, with their ids alongside; a prefix is two binary searches.
- **One typo**: a deletion neighbourhood (SymSpell's idea). Every term is indexed under the CRC32
  of itself and of each string made by deleting one of its characters. Two strings within one
  edit (insertion, deletion, substitution, or a swap of adjacent letters — optimal string
  alignment) always share such a key, so looking up the query's own keys finds every candidate;
  rapidfuzz's OSA distance then confirms each one. Exact: no candidate is capped or missed.
- **Two typos** (query words of 8+ letters): a trigram index over terms of 6+ characters. Strings
  within OSA distance *k* share at least ``max(len) + 2 - 4k`` padded trigrams, so terms below
  that count (or more than two characters longer or shorter) cannot match and are never
  compared; the rest are confirmed with rapidfuzz in one batched call. Also exact.

Incremental: new terms go to small unsorted "delta" runs that are merged into the sorted main
arrays when they grow past :data:`MERGE_THRESHOLD` (or when a lookup needs them sorted), so a
write batch never re-sorts the whole vocabulary. Hash keys are CRC32 (stable across processes), so
the arrays can be saved in snapshots as they are.
"""

from __future__ import annotations

import bisect
import zlib
from typing import Any

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import OSA

#: Terms added since the last merge are kept unsorted until there are this many.
MERGE_THRESHOLD = 32_768
#: Terms shorter than this are left out of the trigram index (two typos need 8+ letter words,
#: which can only match terms of 6+ letters).
TRIGRAM_MIN_LENGTH = 6
_PAD = "\x01"


def _crc(text: str) -> int:
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def _deletion_keys(term: str) -> set[int]:
    keys = {_crc(term)}
    keys.update(_crc(term[:i] + term[i + 1:]) for i in range(len(term)))
    return keys


def _trigrams(term: str) -> set[int]:
    padded = _PAD * 2 + term + _PAD * 2
    return {_crc(padded[i:i + 3]) for i in range(len(padded) - 2)}


class _KeyIndex:
    """A multimap uint32 key → term ids: sorted main arrays plus an unsorted delta."""

    __slots__ = ("keys", "ids", "_delta_keys", "_delta_ids", "_delta_size")

    def __init__(self) -> None:
        self.keys = np.empty(0, dtype=np.uint32)
        self.ids = np.empty(0, dtype=np.uint32)
        self._delta_keys: list[int] = []
        self._delta_ids: list[int] = []
        self._delta_size = 0

    def add(self, term_id: int, keys: set[int]) -> None:
        self._delta_keys.extend(keys)
        self._delta_ids.extend([term_id] * len(keys))

    def merge(self) -> None:
        if not self._delta_keys:
            return
        keys = np.concatenate((self.keys, np.asarray(self._delta_keys, dtype=np.uint32)))
        ids = np.concatenate((self.ids, np.asarray(self._delta_ids, dtype=np.uint32)))
        order = np.argsort(keys, kind="stable")
        self.keys, self.ids = keys[order], ids[order]
        self._delta_keys, self._delta_ids = [], []

    def pending(self) -> int:
        return len(self._delta_keys)

    def lookup(self, wanted: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, index into ``wanted`` of the key that found them) for every hit."""
        if self._delta_keys:
            self.merge()
        queries = np.asarray(wanted, dtype=np.uint32)
        lo = np.searchsorted(self.keys, queries, side="left")
        hi = np.searchsorted(self.keys, queries, side="right")
        lengths = hi - lo
        total = int(lengths.sum())
        if not total:
            return np.empty(0, np.uint32), np.empty(0, np.int64)
        index = np.arange(total, dtype=np.int64) + np.repeat(lo - (np.cumsum(lengths) - lengths), lengths)
        which = np.repeat(np.arange(queries.size, dtype=np.int64), lengths)
        return self.ids[index], which


class Lexicon:
    """Every distinct term of one collection (all fields together), with typo and prefix search."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._terms: list[str] = []
        self._lengths: list[int] = []
        # Prefix search: sorted terms and their ids, for terms up to ``_sorted_upto``.
        self._sorted_terms: list[str] = []
        self._sorted_ids = np.empty(0, dtype=np.uint32)
        self._sorted_upto = 0
        # Terms without their first letter, sorted: typos in the first letter of a prefix.
        self._sorted_tails: list[str] = []
        self._tail_ids = np.empty(0, dtype=np.uint32)
        self._deletions = _KeyIndex()
        self._trigrams = _KeyIndex()
        self._indexed_upto = 0  # terms below this id are in the deletion and trigram indexes

    def __len__(self) -> int:
        return len(self._terms)

    # ------------------------------------------------------------------ ids

    def intern_many(self, terms: list[str]) -> np.ndarray:
        """Term ids for ``terms`` (uint32, one per input), assigning ids to unseen terms.

        Ingest's hot path: known terms resolve in one C-level ``map``; only new ones cost Python
        work, and their typo keys are computed lazily, at the first typo lookup.
        """
        get = self._ids.get
        found = list(map(get, terms))
        if None in found:
            for term in dict.fromkeys(term for term, term_id in zip(terms, found) if term_id is None):
                self._ids[term] = len(self._terms)
                self._terms.append(term)
            found = list(map(get, terms))
        return np.asarray(found, dtype=np.uint32)

    def id_of(self, term: str) -> int | None:
        return self._ids.get(term)

    def term_of(self, term_id: int) -> str:
        return self._terms[term_id]

    # ------------------------------------------------------------------ maintenance

    def _index_new_terms(self) -> None:
        """Put terms added since the last lookup into the deletion and trigram indexes."""
        terms = self._terms
        for term_id in range(self._indexed_upto, len(terms)):
            term = terms[term_id]
            self._deletions.add(term_id, _deletion_keys(term))
            if len(term) >= TRIGRAM_MIN_LENGTH:
                self._trigrams.add(term_id, _trigrams(term))
        self._indexed_upto = len(terms)
        self._lengths = [len(term) for term in terms] if len(self._lengths) != len(terms) else self._lengths

    def _sorted_view(self) -> None:
        if self._sorted_upto == len(self._terms):
            return
        # Timsort merges the sorted run and the new terms in close to linear time.
        new_ids = range(self._sorted_upto, len(self._terms))
        pairs = sorted(
            list(zip(self._sorted_terms, self._sorted_ids.tolist())) + [(self._terms[i], i) for i in new_ids]
        )
        self._sorted_terms = [term for term, _ in pairs]
        self._sorted_ids = np.asarray([term_id for _, term_id in pairs], dtype=np.uint32)
        tails = sorted(
            list(zip(self._sorted_tails, self._tail_ids.tolist())) + [(self._terms[i][1:], i) for i in new_ids]
        )
        self._sorted_tails = [tail for tail, _ in tails]
        self._tail_ids = np.asarray([term_id for _, term_id in tails], dtype=np.uint32)
        self._sorted_upto = len(self._terms)

    # ------------------------------------------------------------------ lookups

    def prefix_ids(self, prefix: str) -> np.ndarray:
        """Sorted ids of every term starting with ``prefix`` (the term itself included)."""
        self._sorted_view()
        lo = bisect.bisect_left(self._sorted_terms, prefix)
        hi = bisect.bisect_left(self._sorted_terms, prefix + "\U0010ffff", lo)
        return np.sort(self._sorted_ids[lo:hi])

    def typo_candidates(self, word: str, max_typos: int) -> list[tuple[int, int]]:
        """(term id, OSA distance) of every term within ``max_typos`` of ``word`` (itself included)."""
        if max_typos <= 0:
            term_id = self._ids.get(word)
            return [] if term_id is None else [(term_id, 0)]
        self._index_new_terms()
        if max_typos == 1:
            ids, _ = self._deletions.lookup(list(_deletion_keys(word)))
        else:
            keys = list(_trigrams(word))
            grams = len(word) + 2
            needed = max(len(word), 1) + 2 - 4 * max_typos - (grams - len(keys))
            if needed <= 0 or len(word) - max_typos < TRIGRAM_MIN_LENGTH:
                return self._scan(word, max_typos)  # not with the 4/8 rules: 8 - 2 >= 6
            hits, _ = self._trigrams.lookup(keys)
            if hits.size == 0:
                return []
            counts = np.bincount(hits)
            ids = np.flatnonzero(counts >= needed)
            # Terms shorter than the trigram minimum are missed here; words of 8+ letters with two
            # typos cannot match them (length differs by more than two).
        candidates = np.unique(ids).tolist()
        terms = self._terms
        lengths = len(word)
        result = []
        for term_id in candidates:
            term = terms[term_id]
            if abs(len(term) - lengths) > max_typos:
                continue
            distance = OSA.distance(word, term, score_cutoff=max_typos)
            if distance <= max_typos:
                result.append((term_id, distance))
        return result

    def _scan(self, word: str, max_typos: int) -> list[tuple[int, int]]:
        """Exhaustive fallback for words too short for the trigram bound (never reached with 4/8 rules)."""
        matches = process.extract(word, self._terms, scorer=OSA.distance, score_cutoff=max_typos, limit=None)
        return [(index, int(distance)) for _, distance, index in matches]

    def _range(self, start: str, lo: int = 0, hi: int | None = None) -> tuple[int, int]:
        terms = self._sorted_terms
        hi = len(terms) if hi is None else hi
        first = bisect.bisect_left(terms, start, lo, hi)
        return first, bisect.bisect_left(terms, start + "\U0010ffff", first, hi)

    def _next_letters(self, start: str) -> list[str]:
        """Distinct letters that follow ``start`` in the vocabulary (one binary search per letter)."""
        terms = self._sorted_terms
        lo, hi = self._range(start)
        letters = []
        depth = len(start)
        while lo < hi:
            term = terms[lo]
            if len(term) == depth:
                lo += 1
                continue
            letter = term[depth]
            letters.append(letter)
            lo = bisect.bisect_left(terms, start + letter + "\U0010ffff", lo, hi)
        return letters

    def prefix_candidates(self, prefix: str, max_typos: int = 0) -> list[tuple[int, int]]:
        """Terms that begin with ``prefix`` (distance 0) or, with ``max_typos`` ≥ 1, with a string one
        edit away from it (distance 1), each term once with its smallest distance.

        One typo at most (a prefix is still being typed), and the edit may not drop the prefix's
        last letter — else "star" would match every "sta…" word. Candidate beginnings are built
        from the letters the vocabulary actually has after each position (substitutions,
        insertions), plus deletions and adjacent swaps, each looked up by binary search.
        """
        best: dict[int, int] = {term_id: 0 for term_id in self.prefix_ids(prefix).tolist()}
        if max_typos <= 0 or len(prefix) < 2:  # a typo on a one-letter prefix would match anything
            return sorted(best.items())
        self._sorted_view()
        beginnings: set[str] = set()
        tail_prefixes = {prefix[1:], prefix}  # first letter substituted; a first letter left out
        for i in range(len(prefix)):
            head, tail = prefix[:i], prefix[i + 1:]
            if i:
                for letter in self._next_letters(head):
                    beginnings.add(head + letter + tail)           # substitution at i
                    beginnings.add(head + letter + prefix[i:])     # a letter the user left out
            if i < len(prefix) - 1:
                beginnings.add(head + tail)                        # an extra letter typed (not the last)
                beginnings.add(head + prefix[i + 1] + prefix[i] + prefix[i + 2:])  # adjacent swap
        for letter in self._next_letters(prefix):
            beginnings.add(prefix + letter)
        beginnings.discard(prefix)
        ids = self._sorted_ids
        for beginning in beginnings:
            lo, hi = self._range(beginning)
            for term_id in ids[lo:hi].tolist():
                if term_id not in best:
                    best[term_id] = 1
        for tail_prefix in tail_prefixes:
            lo = bisect.bisect_left(self._sorted_tails, tail_prefix)
            hi = bisect.bisect_left(self._sorted_tails, tail_prefix + "\U0010ffff", lo)
            for term_id in self._tail_ids[lo:hi].tolist():
                if term_id not in best:
                    best[term_id] = 1
        return sorted(best.items())

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict[str, Any]:
        self._index_new_terms()
        self._deletions.merge()
        self._trigrams.merge()
        return {
            "terms": "\x00".join(self._terms),
            "count": len(self._terms),
            "deletion_keys": self._deletions.keys.tobytes(), "deletion_ids": self._deletions.ids.tobytes(),
            "trigram_keys": self._trigrams.keys.tobytes(), "trigram_ids": self._trigrams.ids.tobytes(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Lexicon":
        lexicon = cls()
        terms = state["terms"].split("\x00") if state["count"] else []
        lexicon._terms = terms
        lexicon._ids = {term: term_id for term_id, term in enumerate(terms)}
        for index, prefix in ((lexicon._deletions, "deletion"), (lexicon._trigrams, "trigram")):
            index.keys = np.frombuffer(state[f"{prefix}_keys"], dtype=np.uint32).copy()
            index.ids = np.frombuffer(state[f"{prefix}_ids"], dtype=np.uint32).copy()
        lexicon._indexed_upto = len(terms)
        lexicon._lengths = [len(term) for term in terms]
        return lexicon

