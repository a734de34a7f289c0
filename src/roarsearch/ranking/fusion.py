"""Vector and hybrid ranking (contract §11): the vector matches, reciprocal rank fusion, and the
ranker that pages the fused order.

Owns: which docs a ``vector`` request matches (the ``k`` nearest among the docs passing every
filter, facet filter and geo area), how they join the keyword matches, their order and ``_rank``,
and the candidate sets disjunctive facets count over. Nearest neighbours come from
:mod:`roarsearch.index.vectors`; the keyword order from :class:`~roarsearch.ranking.ranker.Ranker`.

Fusion: a doc's score is ``(1 - r) / (60 + a) + r / (60 + b)``, ``a`` and ``b`` its 1-based
positions in the keyword and vector orders (a list it is absent from adds 0); ties go to the
keyword order, then the vector order, then record id. Without query words the order is the
vector order and ``_rank`` is ``1 / (60 + b)``.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.errors import BadRequestError
from roarsearch.index.bitmaps import bitmap_from_array
from roarsearch.index.index import Index
from roarsearch.index.vectors import VECTORS_FIELD, check_vector
from roarsearch.query.context import SearchContext, passing_filters
from roarsearch.query.request import SearchRequest, SortKey
from roarsearch.query.vector import VectorQuery
from roarsearch.ranking.ranker import Ranker
from roarsearch.ranking.sort import RANK_KEY, _field_keys

#: The constant of reciprocal rank fusion (as in its paper, Meilisearch and Elasticsearch).
RRF_K = 60

#: Finds the ``k`` nearest of some candidate docs: (docs nearest first, their scores).
Nearest = Callable[[AbstractBitMap], tuple[np.ndarray, np.ndarray]]


def nearest_finder(index: Index, request: SearchRequest, vector: VectorQuery) -> Nearest:
    """The nearest-neighbour search of ``vector`` over a candidate set (a 400 when the space is not
    declared or the query vector does not fit it)."""
    space = index.vectors.spaces.get(vector.name)
    if space is None:
        declared = ", ".join(sorted(index.vectors.spaces)) or "none"
        raise BadRequestError(f"vector.name: no vector space '{vector.name}' is declared in the collection's "
                              f"settings (declared: {declared})", field="vector")
    query = check_vector(list(vector.values), space.dimensions, space.metric, "vector.values")
    id_rank = index.docs.id_rank()

    def nearest(candidates: AbstractBitMap) -> tuple[np.ndarray, np.ndarray]:
        return space.nearest(candidates, query, vector.k, id_rank, exact=vector.exact)

    return nearest


def fused_score(keyword_at: int | None, vector_at: int | None, ratio: float) -> float:
    """One record's fused score from its 1-based positions (None: absent from that list), with the
    very float operations of :func:`fuse` (so ``roarsearch.cluster`` computes the same bits). A
    vector-only search's ``_rank`` is ``fused_score(None, b, 1.0)``."""
    score = 0.0
    if keyword_at is not None:
        score += (1.0 - ratio) / (RRF_K + float(keyword_at))
    if vector_at is not None:
        score += ratio / (RRF_K + float(vector_at))
    return score


def fuse(keyword: np.ndarray, vector: np.ndarray, ratio: float, id_rank: np.ndarray | None,
         keyword_places: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The fused order of two ordered doc lists: (docs, scores), best first. ``keyword_places``:
    the 1-based keyword places of ``keyword`` when it is not the whole keyword order (by default
    ``keyword[i]`` is at place ``i + 1``)."""
    docs = np.union1d(keyword, vector).astype(np.int64)
    absent = np.iinfo(np.int64).max
    keyword_at = np.full(docs.size, absent, dtype=np.int64)
    vector_at = np.full(docs.size, absent, dtype=np.int64)
    keyword_at[np.searchsorted(docs, keyword)] = (np.arange(1, keyword.size + 1) if keyword_places is None
                                                  else keyword_places)
    vector_at[np.searchsorted(docs, vector)] = np.arange(1, vector.size + 1)
    scores = np.zeros(docs.size, dtype=np.float64)
    in_keyword = keyword_at != absent
    in_vector = vector_at != absent
    scores[in_keyword] += (1.0 - ratio) / (RRF_K + keyword_at[in_keyword].astype(np.float64))
    scores[in_vector] += ratio / (RRF_K + vector_at[in_vector].astype(np.float64))
    ids = docs if id_rank is None else id_rank[docs]
    order = np.lexsort((ids, vector_at, keyword_at, -scores))
    return docs[order], scores[order]


def keyword_ranker(context: SearchContext) -> Ranker:
    """The ranker of the keyword order of contract §4 over the keyword matches
    (``context.candidates``, before the vector matches join them): relevance, the settings'
    customRanking, then id, whatever the request's own sort."""
    request = context.request
    unsorted = SearchRequest(request.collection, request.query, request.search_fields, geo=request.geo)
    return Ranker(SearchContext(context.index, unsorted, context.fields, context.matcher, context.words,
                                context.word_docs, context.facet_filters, context.candidates,
                                settings=context.settings))


def keyword_order(context: SearchContext) -> tuple[np.ndarray, Ranker]:
    """Every keyword match in the keyword order, and the ranker that placed them (its ``ranks``
    hold each one's ``_rank``). ``roarsearch.cluster`` uses it too: a shard's keyword positions
    must be the engine's."""
    ranker = keyword_ranker(context)
    keyword_matches = context.candidates
    return np.asarray(ranker.docs(keyword_matches, 0, len(keyword_matches)), dtype=np.int64), ranker


def keyword_places(context: SearchContext, vector_matches: AbstractBitMap, shown: int) -> tuple[np.ndarray, np.ndarray]:
    """The keyword matches a fused page of the first ``shown`` places can hold, with their places
    in the keyword order: the keyword order down to its ``shown``-th doc that is not a vector
    match, and the vector matches that are keyword matches further down. No other doc can reach
    those places: keyword-only docs keep their keyword order in the fused order, so each one
    further down comes after those ``shown``."""
    keyword_matches = context.candidates
    ranker = keyword_ranker(context)
    first: list[int] = []
    keyword_only = 0
    while keyword_only < shown and len(first) < len(keyword_matches):
        more = ranker.docs(keyword_matches, len(first), shown - keyword_only)
        if not more:
            break
        first.extend(more)
        keyword_only += sum(1 for doc in more if doc not in vector_matches)
    further = (keyword_matches & vector_matches) - BitMap(first)
    places = ranker.places(keyword_matches, further)
    docs = np.fromiter(chain(first, places), dtype=np.int64, count=len(first) + len(places))
    return docs, np.fromiter(chain(range(1, len(first) + 1), places.values()), dtype=np.int64, count=docs.size)


class VectorSearch:
    """The matches of a ``vector`` request, their order, ``_vectorScore`` and facet candidate sets."""

    def __init__(self, context: SearchContext) -> None:
        request = context.request
        assert request.vector is not None
        index = context.index
        self._context = context
        self._nearest = nearest_finder(index, request, request.vector)
        #: Whether the request has query words (else the matches are the vector matches alone).
        self.hybrid = bool(context.words)
        passing = context.candidates if not self.hybrid else passing_filters(index, request, context.facet_filters)
        vector_docs, vector_scores = self._nearest(passing)
        #: ``_vectorScore`` of every vector match.
        self.scores: dict[int, float] = dict(zip(vector_docs.tolist(), vector_scores.tolist()))
        id_rank = index.docs.id_rank()
        vector_matches = bitmap_from_array(vector_docs.astype(np.uint32))
        if self.hybrid:
            keyword_matches = context.candidates
            if request.sort or request.group_by is not None:  # every match in order: sorts and groups reorder them
                keyword, _ranker = keyword_order(context)
                places = None
            else:  # one page: the keyword matches that can reach it (:func:`keyword_places`)
                keyword, places = keyword_places(context, vector_matches, request.skip + request.count)
            order, ranks = fuse(keyword, vector_docs, request.semantic_ratio, id_rank, places)
            self.matches: AbstractBitMap = keyword_matches | vector_matches
        else:
            order = vector_docs
            ranks = 1.0 / (RRF_K + np.arange(1, vector_docs.size + 1, dtype=np.float64))
            self.matches = vector_matches
        self.ranker = FusedRanker(index, request.sort, request, order, ranks)

    def widen(self, facet: tuple[str, str], keyword_docs: AbstractBitMap) -> AbstractBitMap:
        """What a facet with a facet filter of its own counts over: the keyword matches with that
        filter left out (``keyword_docs``) and the ``k`` nearest among the docs passing every other filter."""
        context = self._context
        others = {name: docs for name, docs in context.facet_filters.items() if name != facet}
        if not self.hybrid:  # without words, ``keyword_docs`` is every doc passing the other filters
            nearest, _scores = self._nearest(keyword_docs)
            return bitmap_from_array(nearest.astype(np.uint32))
        nearest, _scores = self._nearest(passing_filters(context.index, context.request, others))
        return keyword_docs | bitmap_from_array(nearest.astype(np.uint32))


class FusedRanker:
    """:class:`~roarsearch.ranking.ranker.Ranker`'s interface over a fused order: pages of any
    subset of the matches (groups rank their own docs), an explicit sort with the fused order as
    its tie-break, and ``_rank`` the fused score."""

    def __init__(self, index: Index, sort: tuple[SortKey, ...], request: SearchRequest, order: np.ndarray,
                 ranks: np.ndarray) -> None:
        self._index = index
        self._sort = sort
        around = request.geo.around if request.geo is not None else None
        self._origin = None if around is None else (around.lat, around.lng)
        self._order = order.astype(np.int64)
        self._rank_of = dict(zip(self._order.tolist(), ranks.tolist()))
        self._sorted: np.ndarray | None = None
        self.ranks: dict[int, float] = {}

    def _ordered(self) -> np.ndarray:
        """Every match in the request's order."""
        if not self._sort:
            return self._order
        if self._sorted is None:
            docs = self._order
            position = np.arange(docs.size, dtype=np.float64)
            columns: list[np.ndarray] = []
            for key in self._sort:
                if key.field == RANK_KEY:  # ``-_rank`` is the fused order itself
                    columns.append(position if key.descending else -position)
                else:
                    columns.extend(_field_keys(self._index, key.field, docs, key.descending, self._origin))
            columns.append(position)
            self._sorted = docs[np.lexsort(tuple(reversed(columns)))]
        return self._sorted

    def page(self, docs: AbstractBitMap, skip: int, count: int) -> list[tuple[int, float]]:
        """Docs ``skip:skip+count`` of ``docs`` (a subset of the matches) in order, with their ``_rank``."""
        ordered = self._ordered()
        if len(docs) != ordered.size:
            keep = np.fromiter(map(docs.__contains__, ordered.tolist()), dtype=bool, count=ordered.size)
            ordered = ordered[keep]
        rank_of = self._rank_of
        placed = [(doc, rank_of[doc]) for doc in ordered[skip:skip + count].tolist()]
        self.ranks.update(placed)
        return placed

    def docs(self, docs: AbstractBitMap, skip: int, count: int) -> list[int]:
        return [doc for doc, _rank in self.page(docs, skip, count)]


def shown_vectors(results: list[dict[str, Any]], request: SearchRequest, index: Index,
                  scores: dict[int, float] | None) -> None:
    """Finish a page of results in place: ``_vectorScore`` on each vector match, and ``_vectors``
    shown only when ``fields`` names it (and then only the declared spaces' vectors)."""
    named = any(path == VECTORS_FIELD or path.startswith(VECTORS_FIELD + ".") for path in request.fields)
    by_id: dict[tuple[str, Any], float] = {}
    if scores:
        docs = np.fromiter(scores, dtype=np.int64, count=len(scores))
        for record_id, score in zip(index.docs.record_ids.ids_of(docs), scores.values()):
            by_id[(type(record_id).__name__, record_id)] = score
    records = ([shown for group in results for shown in group["results"]] if request.group_by is not None
               else results)
    spaces = index.vectors.spaces
    for shown in records:
        if by_id:
            found = by_id.get((type(shown["id"]).__name__, shown["id"]))
            if found is not None:
                shown["_vectorScore"] = found
        vectors = shown.get(VECTORS_FIELD)
        if vectors is None and VECTORS_FIELD not in shown:
            continue
        if not named:
            del shown[VECTORS_FIELD]
        elif isinstance(vectors, dict):
            shown[VECTORS_FIELD] = {name: values for name, values in vectors.items() if name in spaces}


__all__ = ["RRF_K", "FusedRanker", "VectorSearch", "fuse", "fused_score", "keyword_order", "nearest_finder", "shown_vectors"]
