"""A settings update at the engine boundary: the wire dict validated all or nothing.

Owns: every key of contract §7 — its type and its error message. An update names some keys; each
named key's new value replaces the old one whole, ``null`` resets it to its default, an unknown key
or a wrong type is a 400 naming it and nothing changes. Returns the whole new :class:`Settings`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rapidfuzz import process

from roarsearch.engine.request import SORT_KEY
from roarsearch.errors import BadRequestError
from roarsearch.index.vectors import MAX_DIMENSIONS, METRICS
from roarsearch.query.intervals import parse_interval
from roarsearch.query.settings import DEFAULT_SETTINGS, Settings, settings_from_dict
from roarsearch.schema import check_strings, describe_value, type_name

SETTING_KEYS = ("searchFields", "customRanking", "stopWords", "synonyms", "typoMinWordSize",
                "typoDisabledFields", "typoDisabledWords", "searchPage", "vectors")
#: Bounds, so that no settings update can hold the engine.
MAX_ENTRIES = 1000
MAX_STRING_BYTES = 512
MAX_WORD_SIZE = 1000


def _strings(name: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise BadRequestError(f"{name}: must be an array of strings, got {type_name(value)}", field=name)
    if len(value) > MAX_ENTRIES:
        raise BadRequestError(f"{name}: at most {MAX_ENTRIES} entries, got {len(value)}", field=name)
    for position, element in enumerate(value):
        _string(f"{name}[{position}]", element, name)
    return list(value)


def _string(where: str, value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadRequestError(f"{where}: must be a non-empty string, got {type_name(value)}", field=name)
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        raise BadRequestError(f"{where}: is not valid Unicode", field=name) from None
    if size > MAX_STRING_BYTES:
        raise BadRequestError(f"{where}: must be at most {MAX_STRING_BYTES} bytes", field=name)
    return value


def _custom_ranking(value: Any) -> list[str]:
    keys = _strings("customRanking", value)
    for position, text in enumerate(keys):
        match = SORT_KEY.fullmatch(text.strip())
        if (match is None or (match["minus"] and match["direction"]) or not match["field"].strip()
                or match["field"].strip() == "_rank"):
            raise BadRequestError(
                f"customRanking[{position}]: expected 'field', '-field', 'field:asc' or 'field:desc' "
                f"(not _rank), got {text!r}", field="customRanking")
    return keys


def _synonyms(value: Any) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise BadRequestError(
            f"synonyms: must be an object like {{\"tv\": [\"television\"]}}, got {type_name(value)}", field="synonyms")
    if len(value) > MAX_ENTRIES:
        raise BadRequestError(f"synonyms: at most {MAX_ENTRIES} entries, got {len(value)}", field="synonyms")
    result: dict[str, list[str]] = {}
    for left, rights in value.items():
        _string(f"synonyms key {left!r}", left, "synonyms")
        if not isinstance(rights, list):
            raise BadRequestError(f"synonyms.{left}: must be an array of strings, got {type_name(rights)}",
                                  field="synonyms")
        if len(rights) > MAX_ENTRIES:
            raise BadRequestError(f"synonyms.{left}: at most {MAX_ENTRIES} entries", field="synonyms")
        for position, right in enumerate(rights):
            _string(f"synonyms.{left}[{position}]", right, "synonyms")
        result[left] = list(rights)
    return result


def _typo_sizes(value: Any) -> dict[str, int]:
    name = "typoMinWordSize"
    if not isinstance(value, dict):
        raise BadRequestError(f"{name}: must be an object like {{\"oneTypo\": 4, \"twoTypos\": 8}}, "
                              f"got {type_name(value)}", field=name)
    unknown = [key for key in value if key not in ("oneTypo", "twoTypos")]
    if unknown:
        raise BadRequestError(f"{name}.{unknown[0]}: unknown key (expected oneTypo, twoTypos)", field=name)
    sizes = {"oneTypo": DEFAULT_SETTINGS.one_typo, "twoTypos": DEFAULT_SETTINGS.two_typos}
    for key, given in value.items():
        if isinstance(given, bool) or not isinstance(given, int):
            raise BadRequestError(f"{name}.{key}: must be an integer, got {type_name(given)}", field=name)
        if not 1 <= given <= MAX_WORD_SIZE:
            raise BadRequestError(f"{name}.{key}: must be between 1 and {MAX_WORD_SIZE}, got {given}", field=name)
        sizes[key] = given
    if sizes["twoTypos"] < sizes["oneTypo"]:
        raise BadRequestError(f"{name}: twoTypos ({sizes['twoTypos']}) must be at least oneTypo ({sizes['oneTypo']})",
                              field=name)
    return sizes


#: ``searchPage`` keys: what each holds (see docs/settings.md, "The search page").
_PAGE_LISTS = {
    "facts": {"field": "field", "format": "text", "badge": "flag"},
    "lines": {"field": "field", "label": "text", "limit": "count"},
    "textFacets": {"field": "field", "label": "text"},
    "numericFacets": {"field": "field", "label": "text", "ranges": "ranges"},
    "sort": {"sort": "sort", "label": "text"},
}
_PAGE_TEXTS = ("title", "subtitle", "placeholder")
MAX_PAGE_ENTRIES = 50


def _search_page(value: Any) -> dict[str, Any]:
    """How the bundled search page shows the collection: checked shape, no field has to exist."""
    name = "searchPage"
    if not isinstance(value, dict):
        raise BadRequestError(f"{name}: must be an object like {{\"title\": \"name\"}}, got {type_name(value)}", field=name)
    known = (*_PAGE_TEXTS, *_PAGE_LISTS)
    for key in value:
        if key not in known:
            raise BadRequestError(f"{name}.{key}: unknown key (expected {', '.join(known)})", field=name)
    page: dict[str, Any] = {}
    for key, given in value.items():
        if key in _PAGE_TEXTS:
            page[key] = _string(f"{name}.{key}", given, name)
            continue
        if not isinstance(given, list):
            raise BadRequestError(f"{name}.{key}: must be an array of objects, got {type_name(given)}", field=name)
        if len(given) > MAX_PAGE_ENTRIES:
            raise BadRequestError(f"{name}.{key}: at most {MAX_PAGE_ENTRIES} entries, got {len(given)}", field=name)
        entries = []
        for position, entry in enumerate(given):
            where = f"{name}.{key}[{position}]"
            shape = _PAGE_LISTS[key]
            if not isinstance(entry, dict):
                raise BadRequestError(f"{where}: must be an object, got {type_name(entry)}", field=name)
            first = next(iter(shape))
            if first not in entry:
                raise BadRequestError(f"{where}.{first}: is required", field=name)
            for part, item in entry.items():
                kind = shape.get(part)
                if kind is None:
                    raise BadRequestError(f"{where}.{part}: unknown key (expected {', '.join(shape)})", field=name)
                _page_part(f"{where}.{part}", kind, item)
            entries.append(dict(entry))
        page[key] = entries
    return page


def _page_part(where: str, kind: str, item: Any) -> None:
    name = "searchPage"
    if kind in ("field", "text"):
        _string(where, item, name)
    elif kind == "flag":
        if not isinstance(item, bool):
            raise BadRequestError(f"{where}: must be true or false, got {type_name(item)}", field=name)
    elif kind == "count":
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= MAX_ENTRIES:
            raise BadRequestError(f"{where}: must be an integer between 1 and {MAX_ENTRIES}", field=name)
    elif kind == "sort":
        match = SORT_KEY.fullmatch(_string(where, item, name).strip())
        if match is None or (match["minus"] and match["direction"]) or not match["field"].strip():
            raise BadRequestError(f"{where}: expected 'field', '-field', 'field:asc' or 'field:desc', got {item!r}",
                                  field=name)
    elif kind == "ranges":
        if not isinstance(item, list) or len(item) > MAX_PAGE_ENTRIES:
            raise BadRequestError(f"{where}: must be an array of at most {MAX_PAGE_ENTRIES} "
                                  '{"range": "[0,10)", "label": "..."} objects', field=name)
        for position, entry in enumerate(item):
            if not isinstance(entry, dict) or "range" not in entry or not set(entry) <= {"range", "label"}:
                raise BadRequestError(f'{where}[{position}]: must be an object like {{"range": "[0,10)", "label": '
                                      f'"under 10"}}', field=name)
            try:
                parse_interval(_string(f"{where}[{position}].range", entry["range"], name), f"{where}[{position}].range")
            except BadRequestError as error:
                raise BadRequestError(error.data, field=name) from None
            if "label" in entry:
                _string(f"{where}[{position}].label", entry["label"], name)


#: A vector space name: like a field name segment (it appears in ``_vectors.NAME``).
VECTOR_SPACE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Most vector spaces per collection.
MAX_VECTOR_SPACES = 16


def _vector_spaces(value: Any) -> dict[str, dict[str, Any]]:
    """``{"name": {"dimensions": 384, "metric": "cosine"}}`` (contract §11), metric defaulting to cosine."""
    if not isinstance(value, dict):
        raise BadRequestError('vectors: must be an object like {"text": {"dimensions": 384, "metric": "cosine"}}, '
                              f"got {type_name(value)}", field="vectors")
    if len(value) > MAX_VECTOR_SPACES:
        raise BadRequestError(f"vectors: at most {MAX_VECTOR_SPACES} vector spaces, got {len(value)}", field="vectors")
    spaces: dict[str, dict[str, Any]] = {}
    for name, space in value.items():
        if not VECTOR_SPACE_NAME.fullmatch(name):
            raise BadRequestError(f"vectors.{name}: a vector space name is 1 to 64 letters, digits, '_' or '-'",
                                  field="vectors")
        where = f"vectors.{name}"
        if not isinstance(space, dict):
            raise BadRequestError(f'{where}: must be an object like {{"dimensions": 384, "metric": "cosine"}}, '
                                  f"got {type_name(space)}", field="vectors")
        unknown = [key for key in space if key not in ("dimensions", "metric")]
        if unknown:
            raise BadRequestError(f"{where}.{unknown[0]}: unknown key (a vector space has dimensions and metric)",
                                  field="vectors")
        dimensions = space.get("dimensions")
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 1 <= dimensions <= MAX_DIMENSIONS:
            raise BadRequestError(f"{where}.dimensions: must be an integer between 1 and {MAX_DIMENSIONS}, "
                                  f"got {describe_value(dimensions)}", field="vectors")
        metric = space.get("metric")
        if metric is None:
            metric = "cosine"
        if metric not in METRICS:
            raise BadRequestError(f"{where}.metric: must be one of {', '.join(METRICS)}, got {describe_value(metric)}",
                                  field="vectors")
        spaces[name] = {"dimensions": dimensions, "metric": metric}
    return spaces


_CHECKS: dict[str, Callable[[Any], Any]] = {
    "searchFields": lambda value: _strings("searchFields", value) or ["*"],
    "customRanking": _custom_ranking,
    "stopWords": lambda value: _strings("stopWords", value),
    "synonyms": _synonyms,
    "typoMinWordSize": _typo_sizes,
    "typoDisabledFields": lambda value: _strings("typoDisabledFields", value),
    "typoDisabledWords": lambda value: _strings("typoDisabledWords", value),
    "searchPage": _search_page,
    "vectors": _vector_spaces,
}


def updated_settings(current: Settings, update: Any) -> Settings:
    """``current`` with the keys ``update`` names replaced (``null``: the default), or a 400 changing nothing."""
    if not isinstance(update, dict):
        raise BadRequestError(f"settings: must be a JSON object, got {type_name(update)}", field="body")
    for key, value in update.items():  # lone surrogates anywhere: a 400 naming the key, never a 500
        check_strings(key, "setting name")
        check_strings(value, str(key))
    for key in update:
        if key not in SETTING_KEYS:
            guess = process.extractOne(str(key), list(SETTING_KEYS), score_cutoff=70)
            hint = f"; did you mean '{guess[0]}'?" if guess else ""
            raise BadRequestError(f"{key}: unknown setting{hint} (settings are {', '.join(SETTING_KEYS)})",
                                  field=str(key))
    merged = current.to_dict()
    defaults = DEFAULT_SETTINGS.to_dict()
    for key, value in update.items():
        merged[key] = defaults[key] if value is None else _CHECKS[key](value)
    return settings_from_dict(merged)


def check_space_changes(old: tuple[tuple[str, int, str], ...], new: tuple[tuple[str, int, str], ...],
                        holds_vectors: Callable[[str], bool]) -> None:
    """A 400 when ``new`` changes the dimensions or metric of a space whose vectors some live record
    holds (removing the space is allowed: it drops them). ``holds_vectors(name)`` is asked only of
    changed spaces (a sharded collection asks its shards)."""
    declared = {name: (dimensions, metric) for name, dimensions, metric in new}
    for name, dimensions, metric in old:
        changed = declared.get(name)
        if changed is not None and changed != (dimensions, metric) and holds_vectors(name):
            raise BadRequestError(
                f"vectors.{name}: records hold vectors of {dimensions} dimensions ({metric}); its dimensions and "
                f"metric cannot change while they do (remove the space with null, which drops its vectors, "
                f"or declare a new one)", field="vectors")


__all__ = ["SETTING_KEYS", "check_space_changes", "updated_settings"]
