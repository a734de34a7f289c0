"""Interim brute-force lexicon used until ``index/lexicon.py`` lands (same API). To be removed."""

from __future__ import annotations

import bisect

import numpy as np
from rapidfuzz.distance import OSA


class Lexicon:
    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._terms: list[str] = []
        self._sorted: list[str] | None = None

    def __len__(self) -> int:
        return len(self._terms)

    def intern_many(self, terms: list[str]) -> np.ndarray:
        ids = self._ids
        out = np.empty(len(terms), dtype=np.uint32)
        for index, term in enumerate(terms):
            term_id = ids.get(term)
            if term_id is None:
                term_id = ids[term] = len(self._terms)
                self._terms.append(term)
                self._sorted = None
            out[index] = term_id
        return out

    def id_of(self, term: str) -> int | None:
        return self._ids.get(term)

    def term_of(self, term_id: int) -> str:
        return self._terms[term_id]

    def typo_candidates(self, word: str, max_typos: int) -> list[tuple[int, int]]:
        return [(i, d) for i, t in enumerate(self._terms) if (d := OSA.distance(word, t)) <= max_typos]

    def prefix_candidates(self, prefix: str, max_typos: int = 0) -> list[tuple[int, int]]:
        best: dict[int, int] = {}
        for i, t in enumerate(self._terms):
            for cut in range(len(prefix), len(prefix) + max_typos + 1):
                d = OSA.distance(prefix, t[:cut])
                if d <= max_typos and d < best.get(i, 99):
                    best[i] = d
        return sorted(best.items())

    def prefix_ids(self, prefix: str) -> np.ndarray:
        if self._sorted is None:
            self._sorted = sorted(self._terms)
        lo = bisect.bisect_left(self._sorted, prefix)
        hi = bisect.bisect_left(self._sorted, prefix + "\U0010ffff")
        return np.array(sorted(self._ids[t] for t in self._sorted[lo:hi]), dtype=np.uint32)

    def to_state(self) -> dict:
        return {"terms": self._terms}

    @classmethod
    def from_state(cls, state: dict) -> "Lexicon":
        lexicon = cls()
        lexicon.intern_many(list(state["terms"]))
        return lexicon
