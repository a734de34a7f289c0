"""Highlighting (extension): the matched words of a result's fields wrapped in ``<em>``…``</em>``.

Owns: ``_highlights`` — for each field of ``highlightFields``, the field's text HTML-escaped with
every word that matched a query word (exactly, with typos, or as a completion of the last word)
wrapped in ``<em>``. Arrays give arrays; fields without text are left out. Only the result page
is highlighted, so the per-record Python work here is bounded by ``count``.
"""

from __future__ import annotations

import html
from typing import Any, Protocol

from roarsearch.analysis.analyzer import analyze
from roarsearch.analysis.tokenize import TOKEN_PATTERN
from roarsearch.query.plan import WordPlan


class LexiconReader(Protocol):
    def id_of(self, term: str) -> int | None: ...


class Highlighter:
    """Marks the words of one query's matches in stored text."""

    def __init__(self, lexicon: LexiconReader, words: list[WordPlan]) -> None:
        self._lexicon = lexicon
        self._term_ids = {variant.term_id for word in words for variant in word.variants}
        self._prefixes = tuple(word.prefix for word in words if word.prefix)

    def _matches(self, token: str) -> bool:
        if self._prefixes and token.startswith(self._prefixes):
            return True
        term_id = self._lexicon.id_of(token)
        return term_id is not None and term_id in self._term_ids

    def mark(self, text: str) -> str:
        pieces: list[str] = []
        last = 0
        # Tokenise the original text (not the folded copy) so offsets point into what is shown.
        for match in TOKEN_PATTERN.finditer(text):
            folded_tokens = analyze(match.group())
            if folded_tokens and any(self._matches(token) for token in folded_tokens):
                pieces.append(html.escape(text[last:match.start()]))
                pieces.append(f"<em>{html.escape(match.group())}</em>")
                last = match.end()
        pieces.append(html.escape(text[last:]))
        return "".join(pieces)

    def highlights(self, record: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for path in fields:
            value = _lookup(record, path.split("."))
            if isinstance(value, str):
                result[path] = self.mark(value)
            elif isinstance(value, list):
                texts = [self.mark(element) for element in value if isinstance(element, str)]
                if texts:
                    result[path] = texts
        return result


def _lookup(value: Any, parts: list[str]) -> Any:
    for position, part in enumerate(parts):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list):
            rest = parts[position:]
            found = [_lookup(element, rest) for element in value if isinstance(element, dict)]
            flat: list[Any] = []
            for element in found:
                flat.extend(element if isinstance(element, list) else [element] if element is not None else [])
            return flat
        else:
            return None
    return value
