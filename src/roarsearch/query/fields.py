"""Field names in a request: which ones no record holds, said in ``warnings`` with a suggestion.

Owns: contract §3's rule that the answer never depends on which records happen to exist. A field
that no current record holds is not an error anywhere (each stage treats it as absent); the
response's ``warnings`` name it once per place, with the closest field that does exist. A field
held only by deleted records counts as held by none. ``id`` is always a field; a path is held
when a record holds it or a field below it (``address`` when ``address.city`` exists).
"""

from __future__ import annotations

from collections.abc import Iterable

from rapidfuzz import process

from roarsearch.index.index import Index
from roarsearch.query.ast import fields_of
from roarsearch.query.geo import GEO_DISTANCE_FIELD
from roarsearch.query.request import SearchRequest

#: Names that are not record fields in the places they may appear.
SPECIAL = {"*", "_rank", "id", GEO_DISTANCE_FIELD}


def held_fields(index: Index) -> frozenset[str]:
    """Paths some current record holds (and every parent path of one), kept until the next write."""
    found = index.cache.get("held_fields", None, index.generation)  # no closure made on a hit
    if isinstance(found, frozenset):
        return found
    alive = index.alive
    held: set[str] = set()
    for path, columns in list(index.columns.items()):
        if columns.exists.intersection_cardinality(alive):
            parts = path.split(".")
            held.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    for name, space in index.vectors.spaces.items():  # shown by ``fields``, though never indexed as a field
        if space.docs.intersection_cardinality(alive):
            held.update(("_vectors", f"_vectors.{name}"))
    made = frozenset(held)
    index.cache.put("held_fields", None, index.generation, made, 1)
    return made


def _named_lists(request: SearchRequest) -> tuple[tuple[str, Iterable[str]], ...]:
    """(place, field names) of every place of the request but its filter, in request order."""
    return (("searchFields", request.search_fields), ("fields", request.fields),
            ("sort", [key.field for key in request.sort] if request.sort else ()), ("textFacets", request.text_facets),
            ("numericFacets", request.numeric_facets), ("textFacetFilters", request.text_facet_filters),
            ("numericFacetFilters", request.numeric_facet_filters), ("highlightFields", request.highlight_fields),
            ("groupBy", () if request.group_by is None else (request.group_by,)))


def _places(request: SearchRequest, facet: str | None) -> Iterable[tuple[str, str]]:
    """(place, field name) of every field the request names, in request order."""
    if request.filter_tree is not None:
        for name, _span in fields_of(request.filter_tree):
            yield "filter", name
    for place, names in _named_lists(request):
        for name in names:
            yield place, name
    if facet is not None:
        yield "facetName", facet


def _names_only_held(held: frozenset[str], request: SearchRequest, facet: str | None) -> bool:
    """Whether ``request`` has no filter and every field it names is held or special: most
    requests, told by set tests alone (the generator of :func:`_places` cost a small search 2-3
    microseconds, a twentieth of it). The lists most searches give are read as the typed tuples
    they are; the others, when given, by the generic pass."""
    if request.filter_tree is not None or facet is not None:
        return False
    for names in (request.search_fields, request.fields, request.text_facets, request.highlight_fields):
        for name in names:
            if name not in held and name not in SPECIAL:
                return False
    if not (request.sort or request.numeric_facets or request.text_facet_filters or request.numeric_facet_filters
            or request.group_by is not None):
        return True
    for _place, named in _named_lists(request):
        for name in named:
            if name not in held and name not in SPECIAL:
                return False
    return True


def field_warnings(index: Index, request: SearchRequest, facet: str | None = None) -> list[str]:
    """One warning per (place, field) that no current record holds (see the module docstring)."""
    return warnings_for(held_fields(index), request, facet)


def warnings_for(held: frozenset[str], request: SearchRequest, facet: str | None = None) -> list[str]:
    """The warnings of ``request`` given the fields ``held`` (a sharded collection passes the
    union over its shards, so its warnings equal one engine's)."""
    if _names_only_held(held, request, facet):
        return []
    warnings: list[str] = []
    seen: set[tuple[str, str]] = set()
    choices: list[str] | None = None  # sorted only when a warning needs a suggestion
    for place, name in _places(request, facet):
        if name in SPECIAL or name in held or (place, name) in seen:
            continue
        seen.add((place, name))
        if choices is None:
            choices = sorted(held)
        guess = process.extractOne(name, choices, score_cutoff=60) if choices else None
        hint = f"; did you mean '{guess[0]}'?" if guess else ""
        warnings.append(f"{place}: no record has the field '{name}'{hint}")
    return warnings
