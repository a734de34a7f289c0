"""Facet value search: the values of one facet that match a few typed letters, with counts.

Owns: contract §5's ``textFacetQuery``. A value matches when the folded query is a prefix of the
folded value or of one of its words; otherwise, for queries of 4+ letters, when it is within the
typo allowance of such a prefix (the same 4/8 thresholds as search, OSA distance). Counts are
over the records the rest of the request selects; values no such record holds are left out.
Order: prefix of the whole value, then prefix of a word, then typo matches; within each, count
descending, then value ascending. An empty query lists the most frequent values.
"""

from __future__ import annotations

from typing import Any

from pyroaring import BitMap
from rapidfuzz.distance import OSA

from roarsearch.analysis.analyzer import analyze
from roarsearch.analysis.normalize import fold
from roarsearch.facets.text import value_counts
from roarsearch.index.columns import FieldColumns
from roarsearch.query.plan import allowed_typos


def _match_rank(query: str, folded: str, budget: int) -> int | None:
    if folded.startswith(query):
        return 0
    words = analyze(folded)
    if any(word.startswith(query) for word in words):
        return 1
    if budget:
        for text in [folded, *words]:
            for cut in range(max(1, len(query) - budget), len(query) + budget + 1):
                if OSA.distance(query, text[:cut], score_cutoff=budget) <= budget:
                    return 2
    return None


def search_facet_values(columns: FieldColumns | None, candidates: BitMap, query: str, count: int) -> list[dict[str, Any]]:
    """``[{"value": v, "count": n}, ...]``: up to ``count`` values of the facet matching ``query``."""
    counted = value_counts(columns, candidates)
    wanted = " ".join(analyze(query))
    budget = allowed_typos(wanted, 1) if " " not in wanted else 0
    ranked = []
    for value, hits, sort_key in counted:
        folded = " ".join(analyze(fold(str(value)) if not isinstance(value, bool) else str(value).lower()))
        rank = 0 if not wanted else _match_rank(wanted, folded, budget)
        if rank is not None:
            ranked.append((rank, -hits, sort_key, value, hits))
    ranked.sort(key=lambda item: item[:3])
    return [{"value": value, "count": hits} for *_, value, hits in ranked[:count]]
