"""Collection settings (contract §7) as one frozen value, read by every search stage.

Owns: the typed shape of a collection's settings with their defaults, their wire form
(:meth:`Settings.to_dict` / :func:`settings_from_dict`, also what the write-ahead log and the
snapshot hold), and the derived, analysed forms the stages use (stop words and typo-disabled
words folded like query words, synonym phrases split into words). Validation of a wire update
lives in :mod:`roarsearch.engine.settings`; this module trusts what it is given.

A collection holds one :class:`Settings`; an update replaces it whole, so a search that started
with the old value keeps it to the end.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from roarsearch.analysis.analyzer import analyze
from roarsearch.query.request import SortKey

#: Word lengths from which the first and the second typo are allowed (contract §3 defaults).
DEFAULT_ONE_TYPO = 4
DEFAULT_TWO_TYPOS = 8


@dataclass(frozen=True, slots=True)
class Settings:
    """One collection's settings, every key with its default where unset."""

    search_fields: tuple[str, ...] = ("*",)
    #: Sort keys as given on the wire (``"-population"``, ``"name:asc"``).
    custom_ranking: tuple[str, ...] = ()
    stop_words: tuple[str, ...] = ()
    #: ``(left phrase, (right phrases ...))`` as given on the wire, in the order given.
    synonyms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    one_typo: int = DEFAULT_ONE_TYPO
    two_typos: int = DEFAULT_TWO_TYPOS
    typo_disabled_fields: tuple[str, ...] = ()
    typo_disabled_words: tuple[str, ...] = ()
    #: ``searchPage`` (how the bundled search page shows the collection) as JSON text ("" when
    #: unset): searches never read it; kept as text so that the value stays hashable.
    search_page: str = ""
    #: Declared vector spaces (contract §11): ``(name, dimensions, metric)`` in the order given.
    vectors: tuple[tuple[str, int, str], ...] = ()
    # ---- derived (analysed once, when the value is made)
    folded_stop_words: frozenset[str] = field(default=frozenset(), init=False, compare=False, repr=False)
    folded_typo_disabled_words: frozenset[str] = field(default=frozenset(), init=False, compare=False, repr=False)
    #: Left phrase (analysed words) → right phrases (analysed words), empty phrases left out.
    synonym_map: dict[tuple[str, ...], tuple[tuple[str, ...], ...]] = field(
        default_factory=dict, init=False, compare=False, repr=False)
    #: Longest left phrase, in words.
    longest_synonym: int = field(default=0, init=False, compare=False, repr=False)
    #: ``custom_ranking`` parsed (the wire form was validated by the engine).
    custom_keys: tuple[SortKey, ...] = field(default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "folded_stop_words", frozenset(w for text in self.stop_words for w in analyze(text)))
        object.__setattr__(self, "folded_typo_disabled_words",
                           frozenset(w for text in self.typo_disabled_words for w in analyze(text)))
        mapping: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
        for left, rights in self.synonyms:
            key = tuple(analyze(left))
            if not key:
                continue
            targets = mapping.setdefault(key, [])
            for right in rights:
                phrase = tuple(analyze(right))
                if phrase and phrase != key and phrase not in targets:
                    targets.append(phrase)
        object.__setattr__(self, "synonym_map", {key: tuple(value) for key, value in mapping.items() if value})
        object.__setattr__(self, "longest_synonym", max((len(key) for key in self.synonym_map), default=0))
        object.__setattr__(self, "custom_keys", tuple(parse_sort_key(text) for text in self.custom_ranking))

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_SETTINGS

    def to_dict(self) -> dict[str, Any]:
        """The wire form: every key, with its default where unset."""
        return {
            "searchFields": list(self.search_fields),
            "customRanking": list(self.custom_ranking),
            "stopWords": list(self.stop_words),
            "synonyms": {left: list(rights) for left, rights in self.synonyms},
            "typoMinWordSize": {"oneTypo": self.one_typo, "twoTypos": self.two_typos},
            "typoDisabledFields": list(self.typo_disabled_fields),
            "typoDisabledWords": list(self.typo_disabled_words),
            "searchPage": json.loads(self.search_page) if self.search_page else {},
            "vectors": {name: {"dimensions": dimensions, "metric": metric} for name, dimensions, metric in self.vectors},
        }


def parse_sort_key(text: str) -> SortKey:
    """``"field"``, ``"-field"``, ``"field:asc"`` or ``"field:desc"`` (already validated) as a :class:`SortKey`."""
    text = text.strip()
    if text.startswith("-"):
        return SortKey(text[1:].strip(), True)
    for suffix, descending in ((":asc", False), (":desc", True)):
        if text.endswith(suffix):
            return SortKey(text[: -len(suffix)].strip(), descending)
    return SortKey(text, False)


DEFAULT_SETTINGS = Settings()


def settings_from_dict(data: dict[str, Any] | None) -> Settings:
    """A :class:`Settings` from its (already valid) wire form; missing keys take their defaults."""
    if not data:
        return DEFAULT_SETTINGS
    typo_sizes = data.get("typoMinWordSize") or {}
    return Settings(
        search_fields=tuple(data.get("searchFields") or ("*",)),
        custom_ranking=tuple(data.get("customRanking") or ()),
        stop_words=tuple(data.get("stopWords") or ()),
        synonyms=tuple((left, tuple(rights)) for left, rights in (data.get("synonyms") or {}).items()),
        one_typo=int(typo_sizes.get("oneTypo", DEFAULT_ONE_TYPO)),
        two_typos=int(typo_sizes.get("twoTypos", DEFAULT_TWO_TYPOS)),
        typo_disabled_fields=tuple(data.get("typoDisabledFields") or ()),
        typo_disabled_words=tuple(data.get("typoDisabledWords") or ()),
        search_page=json.dumps(data["searchPage"], ensure_ascii=False) if data.get("searchPage") else "",
        vectors=tuple((name, int(space["dimensions"]), str(space.get("metric", "cosine")))
                      for name, space in (data.get("vectors") or {}).items()),
    )


__all__ = ["DEFAULT_SETTINGS", "Settings", "settings_from_dict"]
