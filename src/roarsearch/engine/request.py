"""The search request at the engine boundary: the wire dict validated into a typed request.

Owns: every field of contract §3 — its type, range, default and error message — and nothing
else. The library and the HTTP service both call :func:`parse_search_request`, so their errors are
identical. ``null`` for a field means its default (clients often send every field). Everything
that can be parsed without the index is parsed here, once: the filter expression into a tree,
facet intervals into :class:`Interval` objects (types in :mod:`roarsearch.query.request`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import msgpack
from rapidfuzz import process

from roarsearch.errors import BadRequestError
from roarsearch.query.ast import FilterNode
from roarsearch.query.filter_parser import parse_filter
from roarsearch.query.geo import check_distance_uses, parse_geo
from roarsearch.query.intervals import Interval, parse_interval_cached
from roarsearch.query.request import SearchRequest, SortKey
from roarsearch.query.vector import DEFAULT_SEMANTIC_RATIO, parse_semantic_ratio, parse_vector
from roarsearch.schema import check_strings, integer_text, preview, type_name

COLLECTION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_COUNT = 1000
MAX_FACET_COUNT = 10_000
MAX_GROUP_LIMIT = 1000
#: Results of one grouped page (groups × groupLimit): 1,000 groups of 1,000 records would be a
#: page of up to a million records (benchmarks/responsiveness.py).
MAX_GROUPED_RESULTS = 10_000
#: Bounds that keep any one request from holding the engine (contract §3, "Types and bounds").
MAX_QUERY_LENGTH = 1024
MAX_ARRAY_ENTRIES = 1000
MAX_FACET_FILTER_VALUES = 1000
#: Values (or intervals) of all fields of one facet object together: 1,000 fields of 1,000 values
#: each would be a million, seconds of work for one request (benchmarks/responsiveness.py).
MAX_FACET_VALUES_TOTAL = 10_000
MAX_SKIP = 1_000_000
MAX_INTERVAL_LENGTH = 200
SORT_KEY = re.compile(r"(?P<minus>-)?(?P<field>[^:]+?)(?::(?P<direction>asc|desc))?")

DEFAULT_COUNT = 30
DEFAULT_TYPO_TOLERANCE = 1
DEFAULT_FACET_COUNT = 100
DEFAULT_GROUP_COUNT = -1
DEFAULT_GROUP_LIMIT = 3
#: Every request field of the contract, with its default.
DEFAULTS: dict[str, Any] = {
    "collection": None,
    "query": "",
    "searchFields": ["*"],
    "fields": ["*"],
    "filter": "",
    "sort": [],
    "skip": 0,
    "count": DEFAULT_COUNT,
    "typoTolerance": DEFAULT_TYPO_TOLERANCE,
    "textFacets": [],
    "facetCount": DEFAULT_FACET_COUNT,
    "textFacetFilters": {},
    "numericFacets": {},
    "numericFacetFilters": {},
    "groupBy": None,
    "groupCount": DEFAULT_GROUP_COUNT,
    "groupLimit": DEFAULT_GROUP_LIMIT,
    "highlightFields": [],
    "textFacetQuery": None,
    "geo": None,
    "vector": None,
    "semanticRatio": DEFAULT_SEMANTIC_RATIO,
}


#: Collection ids found valid so far (a process serves a few collections): a set test instead of
#: the regular expression on every search (1.4 % of a small search's instructions).
_VALID_IDS: set[str] = set()
_VALID_IDS_KEPT = 1024


def check_collection_id(value: Any, where: str = "collection") -> str:
    if not isinstance(value, str):
        raise BadRequestError(f"{where}: must be a string, got {type_name(value)}", field=where)
    if value in _VALID_IDS:
        return value
    if not COLLECTION_ID.fullmatch(value):
        raise BadRequestError(
            f"{where}: must be 1 to 64 characters of letters, digits, '_' or '-', got {value!r}", field=where
        )
    if len(_VALID_IDS) < _VALID_IDS_KEPT:
        _VALID_IDS.add(value)
    return value


def _integer(body: dict[str, Any], name: str, low: int, high: int | None) -> int:
    value = body[name]
    if type(value) is int and low <= value and (high is None or value <= high):  # the usual case, at once
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise BadRequestError(f"{name}: must be an integer, got {type_name(value)}", field=name)
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise BadRequestError(f"{name}: must be {bounds}, got {integer_text(value)}", field=name)
    return value


def _field_list(body: dict[str, Any], name: str) -> tuple[str, ...]:
    """A list of field names where naming a field twice adds nothing: kept once, first place wins."""
    value = body[name]
    if type(value) is list and len(value) <= MAX_ARRAY_ENTRIES:  # the usual case, checked inline
        for element in value:
            if type(element) is not str or not element:
                break
        else:
            return tuple(dict.fromkeys(value))
    return tuple(dict.fromkeys(_string_list(body, name)))


def _string_list(body: dict[str, Any], name: str) -> tuple[str, ...]:
    value = body[name]
    if isinstance(value, str):
        raise BadRequestError(f"{name}: must be an array of strings, like [{value!r:.60}], got a string", field=name)
    if not isinstance(value, list):
        raise BadRequestError(f"{name}: must be an array of strings, got {type_name(value)}", field=name)
    _bounded(value, name, MAX_ARRAY_ENTRIES)
    for position, element in enumerate(value):
        if not isinstance(element, str) or element == "":
            raise BadRequestError(
                f"{name}[{position}]: must be a non-empty string, got {type_name(element)}", field=name
            )
    return tuple(value)


def _bounded(value: list[Any] | dict[str, Any], name: str, limit: int, what: str = "entries") -> None:
    if len(value) > limit:
        raise BadRequestError(f"{name}: at most {limit} {what} are allowed, got {len(value)}", field=name.split(".")[0])


def _string(body: dict[str, Any], name: str, limit: int | None = None) -> str:
    value = body[name]
    if not isinstance(value, str):
        raise BadRequestError(f"{name}: must be a string, got {type_name(value)}", field=name)
    if limit is not None and len(value) > limit:
        raise BadRequestError(f"{name}: must be at most {limit} characters, got {len(value)}", field=name)
    return value


def _sort_keys(body: dict[str, Any]) -> tuple[SortKey, ...]:
    keys = []
    for position, text in enumerate(_string_list(body, "sort")):
        match = SORT_KEY.fullmatch(text.strip())
        if match is None or (match["minus"] and match["direction"]) or not match["field"].strip():
            raise BadRequestError(
                f"sort[{position}]: expected 'field', '-field', 'field:asc' or 'field:desc', got {text!r}",
                field="sort",
            )
        descending = bool(match["minus"]) or match["direction"] == "desc"
        keys.append(SortKey(match["field"].strip(), descending))
    return tuple(keys)


def _object(body: dict[str, Any], name: str) -> dict[str, Any]:
    value = body[name]
    if not isinstance(value, dict):
        raise BadRequestError(f"{name}: must be an object, got {type_name(value)}", field=name)
    _bounded(value, name, MAX_ARRAY_ENTRIES, "fields")
    return value


def _total_bounded(value: dict[str, Any], name: str, what: str) -> None:
    total = sum(len(entries) for entries in value.values() if isinstance(entries, list))
    if total > MAX_FACET_VALUES_TOTAL:
        raise BadRequestError(f"{name}: at most {MAX_FACET_VALUES_TOTAL} {what} in all fields together are allowed, "
                              f"got {total}", field=name)


def _facet_filters(body: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    result: dict[str, tuple[Any, ...]] = {}
    filters = _object(body, "textFacetFilters")
    _total_bounded(filters, "textFacetFilters", "values")
    for facet, values in filters.items():
        if not isinstance(values, list):
            raise BadRequestError(
                f"textFacetFilters.{facet}: must be an array of values, like {{\"{facet:.40}\": [{preview(values, 40)}]}}, "
                f"got {type_name(values)}", field="textFacetFilters")
        _bounded(values, f"textFacetFilters.{facet}", MAX_FACET_FILTER_VALUES, "values")
        for element in values:
            if element is None or isinstance(element, (dict, list)):
                raise BadRequestError(
                    f"textFacetFilters.{facet}: values must be strings, numbers or booleans, got {type_name(element)}",
                    field="textFacetFilters",
                )
            if isinstance(element, int) and not isinstance(element, bool) and not _fits_float(element):
                raise BadRequestError(
                    f"textFacetFilters.{facet}: numbers must be finite, got an integer beyond 1.8e308",
                    field="textFacetFilters",
                )
        result[facet] = tuple(values)
    return result


def _fits_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _interval_lists(body: dict[str, Any], name: str) -> dict[str, tuple[Interval, ...]]:
    result: dict[str, tuple[Interval, ...]] = {}
    given = _object(body, name)
    _total_bounded(given, name, "intervals")
    for facet, intervals in given.items():
        if not isinstance(intervals, list):
            raise BadRequestError(f"{name}.{facet}: must be an array of interval strings, like [\"[0,100)\"], "
                                  f"got {type_name(intervals)}", field=name)
        _bounded(intervals, f"{name}.{facet}", MAX_FACET_FILTER_VALUES, "intervals")
        for position, interval in enumerate(intervals):
            if not isinstance(interval, str):
                raise BadRequestError(
                    f"{name}.{facet}[{position}]: must be an interval string like \"[0,100)\", got {type_name(interval)}",
                    field=name,
                )
            if len(interval) > MAX_INTERVAL_LENGTH:
                raise BadRequestError(f"{name}.{facet}[{position}]: an interval is at most {MAX_INTERVAL_LENGTH} "
                                      f"characters, got {len(interval)}", field=name)
        result[facet] = tuple(parse_interval_cached(text, f"{name}.{facet}[{position}]")
                              for position, text in enumerate(intervals))
    return result


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


#: Filter texts up to this long have their parsed tree remembered (the trees are frozen).
CACHED_FILTER_LENGTH = 1024


@functools.lru_cache(maxsize=512)
def _parsed_filter_cached(text: str) -> FilterNode | None:
    return parse_filter(text)


def _parsed_filter(text: str) -> FilterNode | None:
    """:func:`parse_filter`, remembering short texts: an application sends the same few filters
    (a category, a price band) again and again, and parsing costs more than the rest of a small
    search. Errors are not remembered (a malformed text raises each time)."""
    return _parsed_filter_cached(text) if len(text) <= CACHED_FILTER_LENGTH else parse_filter(text)


def _valid_unicode(body: dict[str, Any]) -> bool:
    """Whether every string of ``body`` is valid Unicode, told by one C-level pass (msgpack encodes
    strings as UTF-8); False also when it cannot tell (a huge integer, deep nesting). A body of
    ASCII names and strings, lists of them and numbers (most searches) is told without it: an
    ASCII string holds no lone surrogate, and the pass cost a short search 0.5-0.9 us."""
    for name, value in body.items():
        if not (isinstance(name, str) and name.isascii()):
            return _packs(body)
        if isinstance(value, str):
            if not value.isascii():
                return _packs(body)
        elif isinstance(value, list):
            for item in value:
                if not (isinstance(item, str) and item.isascii()):
                    return _packs(body)
        elif not isinstance(value, (int, float)) and value is not None:  # bool is an int
            return _packs(body)
    return True


def _packs(body: dict[str, Any]) -> bool:
    try:
        msgpack.packb(body)
    except (UnicodeEncodeError, OverflowError, ValueError, TypeError):
        return False
    return True


def parse_search_request(body: Any, *, facet_search: bool = False) -> SearchRequest:
    """Validate a wire search body and return the typed request, or raise a 400 naming the field."""
    if not isinstance(body, dict):
        raise BadRequestError(f"request body: must be a JSON object, got {type_name(body)}", field="body")
    if not _valid_unicode(body):  # lone surrogates anywhere: a 400 naming the field, never a 500
        for name, value in body.items():
            check_strings(name, "request field name")
            check_strings(value, str(name))
    # The fields the body gives (null is the default): each is parsed only when given, and read
    # from here (a copy of the defaults merged with them cost every search a dict of twenty).
    given: dict[str, Any] = {}
    for name, value in body.items():
        if name not in DEFAULTS:
            guess = process.extractOne(str(name), list(DEFAULTS), score_cutoff=70)
            hint = f"; did you mean '{guess[0]}'?" if guess else ""
            raise BadRequestError(f"{name}: unknown request field{hint}", field=str(name))
        if value is not None:
            given[name] = value
    if "collection" not in given:
        raise BadRequestError("collection: is required", field="collection")
    collection = check_collection_id(given["collection"])
    geo = parse_geo(given["geo"]) if "geo" in given else None
    facet_query: str | None = None
    facet_query_count = 100
    text_facet_query = given.get("textFacetQuery")
    if facet_search:
        if not isinstance(text_facet_query, dict):
            raise BadRequestError(
                "textFacetQuery: must be an object like {\"query\": \"ac\", \"count\": 100}", field="textFacetQuery"
            )
        extra = [key for key in text_facet_query if key not in ("query", "count")]
        if extra:
            raise BadRequestError(f"textFacetQuery.{extra[0]}: unknown field", field="textFacetQuery")
        given_query: Any = text_facet_query.get("query") or ""  # checked before it is typed (compiled code enforces types)
        if not isinstance(given_query, str):
            raise BadRequestError("textFacetQuery.query: must be a string", field="textFacetQuery")
        facet_query = given_query
        facet_query_count = _integer({"textFacetQuery.count": text_facet_query.get("count", 100)},
                                     "textFacetQuery.count", 1, MAX_FACET_COUNT)
    elif not _is_empty(text_facet_query):
        raise BadRequestError(
            "textFacetQuery: is only used by the facet value search route "
            "(POST /v2/collections/{collectionId}/facet/{facetName}/query)",
            field="textFacetQuery",
        )
    group_by = given.get("groupBy")
    if group_by is not None and (not isinstance(group_by, str)):
        raise BadRequestError(f"groupBy: must be a field name string, got {type_name(group_by)}", field="groupBy")
    # Fields the body leaves out take their defaults as they parse, unchecked (a search names a
    # few of the twenty: validating the rest was a fifth of a small search's time).
    filter_text = _string(given, "filter") if "filter" in given else ""  # the parser limits it to 16 KiB
    sort = _sort_keys(given) if "sort" in given else ()
    numeric_facets = _interval_lists(given, "numericFacets") if "numericFacets" in given else {}
    if sort or numeric_facets:
        check_distance_uses(geo, [key.field for key in sort], numeric_facets)
    # Positional, in the dataclass's field order (named in the comments): 22 keywords cost a
    # small search 0.7 microseconds more, a thirtieth of it. mypy checks each argument's type and
    # tests/unit/engine/test_request_fields.py each field's place.
    request = SearchRequest(
        collection,  # collection
        _string(given, "query", MAX_QUERY_LENGTH) if "query" in given else "",  # query
        (_field_list(given, "searchFields") if "searchFields" in given else ()) or ("*",),  # search_fields
        (_field_list(given, "fields") if "fields" in given else ()) or ("*",),  # fields
        filter_text,  # filter
        _parsed_filter(filter_text) if filter_text.strip() else None,  # filter_tree
        sort,  # sort
        _integer(given, "skip", 0, MAX_SKIP) if "skip" in given else 0,  # skip
        _integer(given, "count", 0, MAX_COUNT) if "count" in given else DEFAULT_COUNT,  # count
        _integer(given, "typoTolerance", 0, 2) if "typoTolerance" in given else DEFAULT_TYPO_TOLERANCE,  # typo_tolerance
        _field_list(given, "textFacets") if "textFacets" in given else (),  # text_facets
        _integer(given, "facetCount", 0, MAX_FACET_COUNT) if "facetCount" in given else DEFAULT_FACET_COUNT,  # facet_count
        _facet_filters(given) if "textFacetFilters" in given else {},  # text_facet_filters
        numeric_facets,  # numeric_facets
        _interval_lists(given, "numericFacetFilters") if "numericFacetFilters" in given else {},  # numeric_facet_filters
        group_by or None,  # group_by
        _integer(given, "groupCount", -1, MAX_COUNT) if "groupCount" in given else DEFAULT_GROUP_COUNT,  # group_count
        _integer(given, "groupLimit", 1, MAX_GROUP_LIMIT) if "groupLimit" in given else DEFAULT_GROUP_LIMIT,  # group_limit
        _field_list(given, "highlightFields") if "highlightFields" in given else (),  # highlight_fields
        facet_query,  # facet_query
        facet_query_count,  # facet_query_count
        geo,  # geo
        parse_vector(given["vector"]) if "vector" in given else None,  # vector
        parse_semantic_ratio(given["semanticRatio"]) if "semanticRatio" in given else DEFAULT_SEMANTIC_RATIO,  # semantic_ratio
    )
    if request.group_by is not None:
        groups = request.count if request.group_count == -1 else request.group_count
        if groups * request.group_limit > MAX_GROUPED_RESULTS:
            raise BadRequestError(
                f"groupLimit: a grouped page holds at most {MAX_GROUPED_RESULTS} results (groups × groupLimit), "
                f"got {integer_text(groups)} × {request.group_limit}", field="groupLimit")
    return request
