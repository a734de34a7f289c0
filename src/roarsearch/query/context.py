"""The candidate sets of one search, computed once and passed forward to every later stage.

Owns: the prologue that search and facet value search share — the universe (alive docs), the
facet filter bitmaps, the query words (planned with typos and prefix), the docs holding them with
the contract's word dropping, and the match set after every filter — as one :class:`SearchContext`.
Ranking, facets, groups and highlighting read it; none of them recomputes a candidate set.

Order of work: words first, then facet filters, then the filter expression, so that filters only
look at the docs the words left (a range check on a few hundred docs instead of a slice of a
whole column). While no doc passes words and filters together, words are dropped from the end of
the query (never the first), as contract §3 says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyroaring import AbstractBitMap, BitMap

from roarsearch.index.bitmaps import DocMasks
from roarsearch.index.index import Index
from roarsearch.query.execute import evaluate_filter
from roarsearch.query.facet_filters import TEXT, facet_filter_docs
from roarsearch.query.match import WordMatcher
from roarsearch.query.plan import WordPlan, plan_words, resolve_search_fields
from roarsearch.query.request import SearchRequest
from roarsearch.query.settings import DEFAULT_SETTINGS, Settings


@dataclass(slots=True)
class SearchContext:
    """Everything later stages need to know about which docs a request selects."""

    index: Index
    request: SearchRequest
    #: Searched fields, resolved (``*`` expanded), in attribute-priority order.
    fields: list[str]
    matcher: WordMatcher
    #: The query words kept after word dropping (all of them unless nothing matched them all).
    words: list[WordPlan]
    #: Alive docs holding every kept word (every alive doc for an empty query).
    word_docs: AbstractBitMap
    #: Per (kind, field) (kind ``"text"`` or ``"numeric"``), the docs that facet filter entry selects.
    facet_filters: dict[tuple[str, str], AbstractBitMap]
    #: The match set: ``word_docs`` passing every facet filter and the filter expression.
    candidates: AbstractBitMap
    #: Dense masks of this request's candidate sets, shared by its facets.
    masks: DocMasks = field(default_factory=DocMasks)
    #: The collection's settings this search ran with (one value for the whole search).
    settings: Settings = DEFAULT_SETTINGS
    #: With a ``vector`` request: what a facet with its own facet filter counts over, given the
    #: keyword matches with that filter left out (``ranking.fusion.VectorSearch.widen``).
    widen: Callable[[tuple[str, str], AbstractBitMap], AbstractBitMap] | None = None
    _filtered_word_docs: AbstractBitMap | None = None
    _all_but: dict[tuple[str, str], AbstractBitMap] | None = None

    def __init__(self, index: Index, request: SearchRequest, fields: list[str], matcher: WordMatcher,
                 words: list[WordPlan], word_docs: AbstractBitMap, facet_filters: dict[tuple[str, str], AbstractBitMap],
                 candidates: AbstractBitMap, settings: Settings = DEFAULT_SETTINGS) -> None:
        # Written out: a dataclass's generated __init__ runs as interpreted Python (see WordPlan).
        self.index = index
        self.request = request
        self.fields = fields
        self.matcher = matcher
        self.words = words
        self.word_docs = word_docs
        self.facet_filters = facet_filters
        self.candidates = candidates
        self.masks = DocMasks()
        self.settings = settings
        self.widen = None
        self._filtered_word_docs = None
        self._all_but = None

    def without_facet_filter(self, field: str, kind: str = TEXT) -> AbstractBitMap:
        """The match set with every facet filter but ``field``'s own of this ``kind`` (``"text"``
        or ``"numeric"``): what that facet counts over (disjunctive facets: a ticked brand still
        shows the other brands; a numeric facet on a field still applies its text facet filter)."""
        facet = (kind, field)
        if facet not in self.facet_filters:
            return self.candidates
        if self.widen is not None:
            return self.widen(facet, self._without(facet))
        return self._without(facet)

    def _without(self, facet: tuple[str, str]) -> AbstractBitMap:
        if self._filtered_word_docs is None:
            self._filtered_word_docs = _apply_filter(self.index, self.request, self.word_docs)
        if len(self.facet_filters) <= 8:
            docs = self._filtered_word_docs
            for other, selected in self.facet_filters.items():
                if other != facet:
                    docs = docs & selected
            return docs
        # Many facet filters, each faceted: the ANDs of the filters before and after each one, built
        # once, keep this linear in their number instead of quadratic.
        if self._all_but is None:
            names = list(self.facet_filters)
            before: list[AbstractBitMap] = [self._filtered_word_docs]
            for name in names[:-1]:
                before.append(before[-1] & self.facet_filters[name])
            after: AbstractBitMap | None = None
            all_but: dict[tuple[str, str], AbstractBitMap] = {}
            for position in range(len(names) - 1, -1, -1):
                all_but[names[position]] = before[position] if after is None else before[position] & after
                selected = self.facet_filters[names[position]]
                after = selected if after is None else after & selected
            self._all_but = all_but
        return self._all_but[facet]


def prepare_search(index: Index, request: SearchRequest, settings: Settings = DEFAULT_SETTINGS,
                   kept_words: int | None = None) -> SearchContext:
    """Plan the words and compute the candidate sets of ``request`` over ``index`` with the
    collection's ``settings`` (stop words, synonyms, typo thresholds and typo-disabled fields).

    ``kept_words`` (hook for ``roarsearch.cluster``): keep exactly this many query words instead of
    dropping words until this index matches, so that word dropping is decided over every shard.
    """
    facet_filters = facet_filter_docs(index, request.text_facet_filters, request.numeric_facet_filters)
    fields = resolve_search_fields(request.search_fields, index.text_fields())
    words = plan_words(index.lexicon, request.query, request.typo_tolerance, index.cache, settings)
    matcher = WordMatcher(index, fields, frozenset(settings.typo_disabled_fields))
    universe = _geo_universe(index, request)
    # Every doc ever added still alive and no geo area: the universe holds every doc a word can
    # match, and intersecting the rarest word's docs with it (a new bitmap) would change nothing.
    restricts = universe is not index.alive or len(universe) != index.docs.next_doc
    kept = len(words) if kept_words is None else max(min(kept_words, len(words)), min(1, len(words)))
    while True:
        word_docs = _docs_of_all(matcher, words[:kept], universe, restricts)
        candidates = _narrow(index, request, facet_filters, word_docs) if word_docs else BitMap()
        if candidates or kept <= 1 or kept_words is not None:
            break
        kept -= 1  # contract §3: drop words from the end while nothing matches (never the first)
    return SearchContext(index, request, fields, matcher, words[:kept], word_docs, facet_filters, candidates,
                         settings=settings)


def _docs_of_all(matcher: WordMatcher, words: list[WordPlan], universe: AbstractBitMap,
                 restricts: bool) -> AbstractBitMap:
    """Docs of ``universe`` holding every one of ``words``: the rarest word's docs first, then each
    other word's docs within those (a common word is never unioned over its fields whole).
    ``restricts``: False when ``universe`` holds every doc the words can match (the result may
    then be a word's own bitmap: match sets are only read, never changed in place)."""
    if not words:
        return universe
    order = sorted(words, key=matcher.estimate) if len(words) > 1 else words
    first = matcher.docs(order[0], order[0].max_typos)
    docs = universe & first if restricts else first
    for word in order[1:]:
        if not docs:
            break
        docs = matcher.docs_within(word, word.max_typos, docs)
    return docs


def _geo_universe(index: Index, request: SearchRequest) -> AbstractBitMap:
    """Alive docs inside the request's geo circle and polygon (all alive docs without a geo filter).

    Geo is a filter like any other (contract §9), applied first: word dropping only counts the
    records inside. The geo column answers from the docs near the area, not from the collection.
    """
    universe: AbstractBitMap = index.alive
    geo = request.geo
    if geo is None:
        return universe
    if geo.around is not None and geo.around.radius is not None:
        universe = index.geo.within_circle(geo.around.lat, geo.around.lng, geo.around.radius, universe) & universe
    if geo.polygon is not None:
        universe = index.geo.within_polygon(list(geo.polygon), universe) & universe
    return universe


def _narrow(index: Index, request: SearchRequest, facet_filters: dict[tuple[str, str], AbstractBitMap],
            docs: AbstractBitMap) -> AbstractBitMap:
    """``docs`` passing every facet filter, then the filter expression."""
    for selected in facet_filters.values():
        docs = docs & selected
        if not docs:
            return docs
    return _apply_filter(index, request, docs)


def _apply_filter(index: Index, request: SearchRequest, docs: AbstractBitMap) -> AbstractBitMap:
    if request.filter_tree is None:
        return docs
    return evaluate_filter(request.filter_tree, index, docs)


def passing_filters(index: Index, request: SearchRequest,
                    facet_filters: dict[tuple[str, str], AbstractBitMap]) -> AbstractBitMap:
    """Alive docs inside the request's geo area passing ``facet_filters`` and the filter expression,
    whatever their words (the candidates of a vector search)."""
    return _narrow(index, request, facet_filters, _geo_universe(index, request))


def filter_docs(index: Index, request: SearchRequest) -> AbstractBitMap:
    """Alive docs passing the request's filter expression alone (delete by filter)."""
    return _apply_filter(index, request, index.alive)
