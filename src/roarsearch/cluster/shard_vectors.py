"""The shard side of a vector or hybrid search over a sharded collection (contract §10, §11).

Owns: what one shard computes for each step of the driver's ``vector`` search (the driver's
side, and why the answer is exact, is :mod:`roarsearch.cluster.vector_merge`):

1. :func:`nearest_lists`: this shard's ``k`` nearest among its records passing every filter,
   facet filter and geo area, and, per facet counted with its own facet filter left out
   (:func:`widened_facets`), among those passing every other filter: ``(record id, score)``
   nearest first. Scores are exact per record (the float64 re-score of a row does not depend on
   the rows scored with it), so the driver's merge of these lists is the engine's ``k`` nearest.
2. :class:`VectorPartial`, given the global vector matches this shard holds (with their global
   positions ``b``) and the global lists of the widened facets: the matches here (the keyword
   matches, with the number of words the driver kept, plus those vector matches), ``totalHits``,
   facets and numeric sums over them (a widened facet over its keyword matches and its own global
   list), group totals, and the *candidates* the page can come from — every vector match held
   here, and the first ``count`` keyword-only matches (per group: ``groupLimit``) in the request's
   order. Among keyword-only matches the fused order is the keyword order (a record's fused score
   falls with its keyword position), so this shard's order of them is the global one restricted to
   this shard: whatever the page holds is among the candidates. Each candidate carries its sort
   parts (:mod:`roarsearch.cluster.partial`), its *keyword key* (relevance cost, oriented
   customRanking parts, record id: the keyword order's total order, comparable across shards)
   and its position in this shard's keyword order.
3. :meth:`VectorPartial.keyword_counts`: how many keyword matches here precede each of some
   keyword keys (a binary search in this shard's keyword order; keys are computed only for the
   positions probed), summed by the driver into global keyword positions ``a``.
4. :meth:`VectorPartial.render`: the page's records as the engine shows them (projected, with
   ``_geoDistance`` and ``_highlights``); the driver sets ``_rank`` and adds ``_vectorScore``.

Called by :class:`~roarsearch.cluster.shard.ShardActor`, which keeps each search's
:class:`VectorPartial` between its steps (the driver holds writes off meanwhile).
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Any

import numpy as np
from pyroaring import AbstractBitMap, BitMap

from roarsearch.cluster.merge import oriented, typed
from roarsearch.cluster.partial import field_sort_part, numeric_sums, relevance_cost, resolved_body
from roarsearch.engine.collection import Collection
from roarsearch.facets.counts import numeric_facets, text_facets
from roarsearch.facets.groups import group_results
from roarsearch.index.bitmaps import bitmap_from_array
from roarsearch.index.docstore import id_sort_key
from roarsearch.index.index import Index
from roarsearch.query.context import passing_filters, prepare_search
from roarsearch.query.facet_filters import NUMERIC, TEXT, facet_filter_docs
from roarsearch.query.fields import held_fields
from roarsearch.query.geo import GEO_DISTANCE_FIELD
from roarsearch.query.request import SearchRequest
from roarsearch.ranking.fusion import FusedRanker, keyword_order, nearest_finder, shown_vectors
from roarsearch.ranking.highlight import Highlighter
from roarsearch.ranking.ranker import Ranker
from roarsearch.ranking.sort import RANK_KEY
from roarsearch.schema import first_leaf

#: A facet counted with its own facet filter left out: ``(kind, field)``, kind ``"text"`` or ``"numeric"``.
Facet = tuple[str, str]
#: ``(record id, score)`` of a vector match.
Scored = tuple[Any, float]
#: What the driver's steps after the first give a shard: the request, the words kept, the
#: global vector matches held here as ``(record id, b)``, and per widened facet its global list's
#: record ids held here.
Recipe = tuple[SearchRequest, int | None, list[tuple[Any, int]], dict[Facet, list[Any]]]
#: A candidate for the page: (record id, sort parts (None for ``_rank`` keys), keyword key or
#: None, position in this shard's keyword order or None, group value or None).
Candidate = tuple[Any, list[Any], tuple[Any, ...] | None, int | None, Any]


def widened_facets(request: SearchRequest) -> list[Facet]:
    """The facets counted with their own facet filter left out (contract §3): each counts the
    ``k`` nearest among the records passing every *other* filter, a list of its own."""
    own = ({(TEXT, field) for field, values in request.text_facet_filters.items() if values}
           | {(NUMERIC, field) for field, intervals in request.numeric_facet_filters.items() if intervals})
    wanted = [(TEXT, field) for field in request.text_facets]
    wanted += [(NUMERIC, field) for field in request.numeric_facets if field != GEO_DISTANCE_FIELD]
    return [facet for facet in dict.fromkeys(wanted) if facet in own]


def nearest_lists(index: Index, request: SearchRequest) -> dict[str, Any]:
    """The nearest step: this shard's ``k`` nearest, and per widened facet its ``k`` nearest with that
    facet's own filter left out; the space's metric (the driver orders by it). A 400 when the
    space is not declared or the query vector does not fit it (the engine's own checks)."""
    assert request.vector is not None
    nearest = nearest_finder(index, request, request.vector)
    filters = facet_filter_docs(index, request.text_facet_filters, request.numeric_facet_filters)

    def scored(selected: dict[Facet, AbstractBitMap]) -> list[Scored]:
        docs, scores = nearest(passing_filters(index, request, selected))
        return list(zip(index.docs.record_ids.ids_of(docs), scores.tolist()))

    return {"metric": index.vectors.spaces[request.vector.name].metric,
            "nearest": scored(filters),
            "facets": {facet: scored({other: docs for other, docs in filters.items() if other != facet})
                       for facet in widened_facets(request)}}


class VectorPartial:
    """One shard's part of a vector or hybrid search, from the matches step on (the caller holds the
    collection's read lock while it is built and used)."""

    def __init__(self, collection: Collection, recipe: Recipe) -> None:
        request, kept_words, vector, facet_vectors = recipe
        index = collection.index
        self.collection = collection
        self.index = index
        self.request = request
        with_settings, settings = collection._with_settings(request, resolved_body())
        context = prepare_search(index, with_settings, settings, kept_words)
        self.context = context
        #: Whether the request has query words (else the matches are the vector matches alone).
        self.hybrid = bool(context.words)
        doc_of = index.docs.doc_of
        held = [(doc, b) for doc, b in ((doc_of(record_id), b) for record_id, b in vector) if doc is not None]
        #: The vector matches held here, in the global vector order, and their global positions.
        self.vector_docs = np.asarray([doc for doc, _b in held], dtype=np.int64)
        self.vector_at = dict(held)
        vector_set = _bitmap(self.vector_docs)
        keyword: AbstractBitMap = context.candidates if self.hybrid else BitMap()
        #: This shard's keyword matches in the keyword order, and the ranker that placed them.
        self.order: np.ndarray = np.zeros(0, dtype=np.int64)
        self.ranker: Ranker | None = None
        if self.hybrid:
            self.order, self.ranker = keyword_order(context)
        by_doc = np.argsort(self.order, kind="stable")
        self._sorted_docs = self.order[by_doc]
        self._positions = by_doc + 1
        facet_sets = {facet: _bitmap(np.asarray([doc for doc in map(doc_of, ids) if doc is not None], dtype=np.int64))
                      for facet, ids in facet_vectors.items()}

        def widen(facet: Facet, keyword_docs: AbstractBitMap) -> AbstractBitMap:
            # The engine's VectorSearch.widen, with the global list of the facet's own k nearest.
            nearest = facet_sets.get(facet, BitMap())
            return keyword_docs | nearest if self.hybrid else nearest

        context.candidates = keyword | vector_set
        context.widen = widen
        self.vector_set = vector_set
        self.keyword_only = keyword - vector_set
        self._keys: dict[int, tuple[Any, ...]] = {}

    # ------------------------------------------------------------------ matches step

    def answer(self) -> dict[str, Any]:
        """Counts over the matches here, and the candidates for the page (see the module)."""
        context, index = self.context, self.index
        response = {"totalHits": len(context.candidates), "textFacets": text_facets(context),
                    "numericFacets": numeric_facets(context)}
        chosen, groups = self._chosen()
        return {"kept": len(context.words), "held": sorted(held_fields(index)), "hybrid": self.hybrid,
                "response": response, "sums": numeric_sums(context), "groups": groups,
                "candidates": self._candidates(chosen)}

    def _chosen(self) -> tuple[list[tuple[int, Any]], list[list[Any]] | None]:
        """The candidate docs with their group value, and (grouped) every group's total here."""
        request, index = self.request, self.index
        keyword_only = self.order[~np.isin(self.order, self.vector_docs)]
        # Keyword-only matches in the request's order: its sort, ties (and ``_rank`` keys) by the
        # keyword order — the fused order among them.
        ranker = FusedRanker(index, request.sort, request, keyword_only, np.zeros(keyword_only.size))
        if request.group_by is None:
            return ([(doc, None) for doc in ranker.docs(self.keyword_only, 0, request.count)]
                    + [(doc, None) for doc in self.vector_docs.tolist()]), None
        field = request.group_by
        columns = index.field_columns(field)

        def first_value(doc: int) -> Any:
            return first_leaf(index.docs.record(doc), field)

        in_vector_order = FusedRanker(index, (), request, self.vector_docs, np.zeros(self.vector_docs.size))
        totals: dict[tuple[str, Any], list[Any]] = {}
        chosen: list[tuple[int, Any]] = []
        for docs, rank_docs, limit in ((self.keyword_only, ranker.docs, request.group_limit),
                                       (self.vector_set, in_vector_order.docs, len(self.vector_set))):
            for value, total, members in group_results(columns, docs, rank_docs, 0, request.group_count, limit,
                                                       first_value):
                totals.setdefault(typed(value), [value, 0])[1] += total
                chosen.extend((doc, value) for doc in members)
        return chosen, list(totals.values())

    def _candidates(self, chosen: list[tuple[int, Any]]) -> list[Candidate]:
        request, index = self.request, self.index
        around = request.geo.around if request.geo is not None else None
        docs = np.asarray([doc for doc, _value in chosen], dtype=np.int64)
        # Exact distances: ties in whole metres are broken by them, as in one engine.
        exact = ({} if around is None else
                 dict(zip(docs.tolist(), index.geo.distances(docs, around.lat, around.lng).tolist())))
        record_ids = index.docs.record_ids
        candidates: list[Candidate] = []
        for doc, value in chosen:
            record_id = record_ids[doc]
            parts = [None if key.field == RANK_KEY else
                     field_sort_part(index, key.field, doc, key.descending, record_id,
                                     exact.get(doc, math.nan) if around is not None else None)
                     for key in request.sort]
            position = self._position(doc)
            candidates.append((record_id, parts, None if position is None else self._key(doc), position, value))
        return candidates

    def _position(self, doc: int) -> int | None:
        """1-based position of ``doc`` in this shard's keyword order (None: no keyword match)."""
        at = int(np.searchsorted(self._sorted_docs, doc))
        if at < self._sorted_docs.size and int(self._sorted_docs[at]) == doc:
            return int(self._positions[at])
        return None

    def _key(self, doc: int) -> tuple[Any, ...]:
        """The keyword key of a keyword match: what the keyword order sorts by (relevance, the
        settings' customRanking — never measured from ``geo``: the keyword order has no sort —
        then record id), comparable across shards."""
        key = self._keys.get(doc)
        if key is None:
            assert self.ranker is not None
            record_id = self.index.docs.record_ids[doc]
            assert record_id is not None  # a keyword match is alive
            ties = [oriented(field_sort_part(self.index, custom.field, doc, custom.descending, record_id), custom.descending)
                    for custom in self.context.settings.custom_keys]
            key = self._keys[doc] = (relevance_cost(self.ranker.ranks[doc]), *ties, id_sort_key(record_id))
        return key

    # ------------------------------------------------------------------ positions step

    def keyword_counts(self, keys: list[tuple[Any, ...]]) -> list[int]:
        """Per keyword key (of a record held elsewhere), the keyword matches here that precede it."""
        order = self.order

        def key_at(position: int) -> tuple[Any, ...]:
            return self._key(int(order[position]))

        return [bisect.bisect_left(range(order.size), key, key=key_at) for key in keys]

    # ------------------------------------------------------------------ render step

    def render(self, record_ids: list[Any]) -> list[dict[str, Any]]:
        """The records of ``record_ids`` as the engine's page shows them, ``_rank`` left at 0."""
        collection, index = self.collection, self.index
        highlighting = bool(self.request.highlight_fields)
        request = collection._held_paths_only(self.request)
        highlighter = Highlighter(index.lexicon, self.context.words) if highlighting else None
        placed = [(index.docs.doc_for(record_id), 0.0) for record_id in record_ids]
        results = collection._results(placed, request, highlighter)
        shown_vectors(results, dataclasses.replace(request, group_by=None), index, None)
        return results


def _bitmap(docs: np.ndarray) -> AbstractBitMap:
    return bitmap_from_array(np.sort(docs).astype(np.uint32))


__all__ = ["Candidate", "Facet", "Recipe", "Scored", "VectorPartial", "nearest_lists", "widened_facets"]
