"""The order of a request's results: explicit sort keys, or relevance by bucket sort.

Owns: turning a candidate bitmap into one page of docs with their ``_rank``, for the plain result
list and for each group. A :class:`Ranker` is made per request from its context; it remembers the
rank of every doc it has placed, so groups can show ``_rank`` without ranking twice.
"""

from __future__ import annotations

import numpy as np
from pyroaring import AbstractBitMap

from roarsearch.query.context import SearchContext
from roarsearch.ranking import bucket_sort as bucket_sorting  # FEW_DOCS read at call time (tests change it)
from roarsearch.ranking.bucket_sort import BucketOrder, RelevanceRules, bucket_places, bucket_sort, order_by_id, pack_costs
from roarsearch.ranking.sort import order_by_keys, sort_page

#: Candidate sets up to this size are ranked by scoring every rule over all of them at once and
#: sorting the packed costs: one vectorised call per rule instead of a bucket walk whose Python
#: steps (a rule per bucket, lone docs scored after) cost more than the few docs they order.
SCORE_ALL_BELOW = 2048
_RANK_SCALE = float(1 << 32)


class Ranker:
    """Pages of docs in the request's order, each with its ``_rank``."""

    def __init__(self, context: SearchContext) -> None:
        self._index = context.index
        self._sort = context.request.sort
        self._ranked = bool(context.words)  # an empty query ranks every record alike
        self._relevance = RelevanceRules(context.matcher, context.words)
        #: The settings' customRanking: applied after the relevance rules, before record id.
        self._custom = context.settings.custom_keys
        around = context.request.geo.around if context.request.geo is not None else None
        #: The point ``_geoDistance`` is measured from (``geo.around``), for sorting by distance.
        self._origin = None if around is None else (around.lat, around.lng)
        #: ``_rank`` of every doc placed so far by this ranker.
        self.ranks: dict[int, float] = {}
        #: The last small set scored whole: (the set, its docs in order, their packed costs).
        #: Plain lists for a few docs, arrays for more (a page of them is made a list).
        self._scored: tuple[AbstractBitMap, list[int] | np.ndarray, list[int] | np.ndarray] | None = None

    def page(self, docs: AbstractBitMap, skip: int, count: int) -> list[tuple[int, float]]:
        """Docs ``skip:skip+count`` of ``docs`` in order, with their ``_rank``."""
        if self._sort:
            sorted_page = sort_page(self._index, docs, self._sort, self._relevance if self._ranked else None, skip, count,
                                    self._custom, self._origin)
            placed = [(doc, 1.0 - cost / float(1 << 32)) for doc, cost in sorted_page]
        elif self._ranked and not self._custom and len(docs) <= SCORE_ALL_BELOW:
            placed = self._scored_page(docs, skip, count)
        else:
            ranked = bucket_sort(docs, self._relevance.rules(), self._index.docs, skip, count, self._tie_order())
            if self._ranked:
                # Pages share a few cost tuples: each is packed once.
                packed: dict[tuple[int, ...], float] = {}
                placed = []
                for doc, costs in ranked:
                    rank = packed.get(costs)
                    if rank is None:
                        rank = packed[costs] = pack_costs(*costs)
                    placed.append((doc, rank))
            else:
                placed = [(doc, 1.0) for doc, _costs in ranked]
        self.ranks.update(placed)
        return placed

    def _scored_page(self, docs: AbstractBitMap, skip: int, count: int) -> list[tuple[int, float]]:
        """:meth:`page` of a small candidate set: every doc's packed costs, sorted (ties by record id)."""
        if count == 0 or skip >= len(docs):  # a page past the end shows nothing: nothing to score
            return []
        if self._scored is None or self._scored[0] is not docs:  # grouping asks for page after page
            self._scored = (docs, *self._score_all(docs))
        _docs, ordered_ids, ordered_costs = self._scored
        return [(doc, 1.0 - cost / _RANK_SCALE)
                for doc, cost in zip(_as_list(ordered_ids[skip:skip + count]), _as_list(ordered_costs[skip:skip + count]))]

    def _score_all(self, docs: AbstractBitMap) -> tuple[list[int] | np.ndarray, list[int] | np.ndarray]:
        """Every doc of ``docs`` in order, and its packed costs: plain lists for a few docs."""
        id_rank = self._index.docs.id_rank()
        # Docs ascend, so a stable sort of the costs breaks ties by doc, which is record id order
        # unless the store says otherwise.
        if len(docs) <= bucket_sorting.FEW_DOCS:
            ids, costs = self._relevance.few_costs(docs)
            keys = costs if id_rank is None else list(zip(costs, id_rank[ids].tolist()))
            order = sorted(range(len(ids)), key=keys.__getitem__)
            return [ids[slot] for slot in order], [costs[slot] for slot in order]
        doc_array, packed = self._relevance.all_costs(docs)
        by_cost = np.argsort(packed, kind="stable") if id_rank is None else np.lexsort((id_rank[doc_array], packed))
        return doc_array[by_cost], packed[by_cost]

    def places(self, docs: AbstractBitMap, targets: AbstractBitMap) -> dict[int, int]:
        """The 1-based place in :meth:`page`'s order of ``docs`` of each doc of ``targets`` (docs of
        ``docs``), for a ranker without an explicit sort, ordering no more than it must."""
        assert not self._sort
        if not targets:
            return {}
        if self._ranked and not self._custom and len(docs) <= SCORE_ALL_BELOW:
            if self._scored is None or self._scored[0] is not docs:
                self._scored = (docs, *self._score_all(docs))
            return {doc: place for place, doc in enumerate(_as_list(self._scored[1]), 1) if doc in targets}
        return bucket_places(docs, self._relevance.rules(), self._index.docs, targets, self._tie_order())

    def _tie_order(self) -> BucketOrder:
        return order_by_keys(self._index, self._custom) if self._custom else order_by_id

    def docs(self, docs: AbstractBitMap, skip: int, count: int) -> list[int]:
        """The docs of :meth:`page` alone (their ranks are kept in :attr:`ranks`)."""
        return [doc for doc, _rank in self.page(docs, skip, count)]


def _as_list(values: list[int] | np.ndarray) -> list[int]:
    return values.tolist() if isinstance(values, np.ndarray) else values
