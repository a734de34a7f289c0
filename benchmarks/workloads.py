"""Seeded workload classes drawn from the real data, saved as JSON in ``benchmarks/workloads/``.

Owns: what each workload class asks, in an engine-neutral form that every adapter translates into
its own query language. Callers: ``benchmarks.run`` (loads the saved files), the tests.

Invariants:
- Words come from the first ``BASE_RECORDS`` real records and are ASCII letters only, so every word
  of a workload exists at every benchmarked size (sizes start at 10,000; the scale-up keeps the real
  records first) and no engine's accent folding changes the query side.
- Frequency bands are by document frequency over all real records: ``common`` = the 200 most
  frequent words of 4+ letters, ``medium`` = ranks 200-5,000, ``rare`` = the rest (often 1-3 records).
  A multi-word query takes the band of its rarest word and is a run of adjacent words of one real
  field value, so the AND of its words always matches.
- Typos are edits of real words checked with OSA distance (rapidfuzz): one typo needs a word of 4+
  letters, two typos 8+ (the contract's rule), and two-typo words keep their length.

A workload entry::

    {"words": ["san", "jose"], "prefix": false, "typos": 0,
     "filters": [{"op": "range", "field": "population", "low": 1000, "high": 50000},
                 {"op": "eq", "field": "countryCode", "value": "US"},
                 {"op": "in", "field": "countryCode", "values": ["US", "FR"]}],
     "facets": {"text": ["countryCode", "timezone"], "numeric": "population",
                "ranges": [[0, 10000], [10000, 100000], [100000, null]]} | null,
     "sort": {"field": "population", "descending": true} | null,
     "skip": 0, "count": 30, "group": "countryCode" | null}

Ranges are ``[low, high)``; ``null`` is open. Run ``python -m benchmarks.workloads`` to regenerate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

from rapidfuzz.distance import OSA

from benchmarks.datasets import CACHE, CORPORA, Corpus, real_records
from roarsearch.analysis.analyzer import analyze

WORKLOADS = Path(__file__).resolve().parent / "workloads"
BASE_RECORDS = 10_000
PER_CLASS = 30
SEED = 3
COMMON_RANKS = 200
MEDIUM_RANKS = 5_000
DEEP_SKIP = 10_000
BANDS = ("rare", "medium", "common")

CLASSES = (
    "one_word_rare", "one_word_medium", "one_word_common",
    "multi_word_rare", "multi_word_medium", "multi_word_common",
    "typo1_one_word", "typo1_multi_word", "typo2_one_word", "typo2_multi_word",
    "prefix2", "prefix3", "prefix4",
    "filter_range", "filter_equal", "filter_in", "facets", "browse_sort", "deep_page", "group",
)


def _words_of(value: Any) -> list[list[str]]:
    """Token runs of a field value (one run per array element), folded by roarsearch's analyzer."""
    values = value if isinstance(value, list) else [value]
    return [analyze(item) for item in values if isinstance(item, str)]


def _usable(token: str) -> bool:
    return token.isascii() and token.isalpha() and len(token) >= 4


def _typo(word: str, rng: random.Random, length_preserving: bool) -> str:
    """One edit of ``word``: substitution, adjacent transposition, or (unless length must be kept)
    deletion or insertion."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    while True:
        kinds = ("substitute", "transpose") if length_preserving else ("substitute", "transpose", "delete", "insert")
        kind = rng.choice(kinds)
        i = rng.randrange(len(word))
        if kind == "substitute":
            edited = word[:i] + rng.choice(letters) + word[i + 1:]
        elif kind == "transpose" and i < len(word) - 1:
            edited = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        elif kind == "delete" and len(word) > 4:
            edited = word[:i] + word[i + 1:]
        elif kind == "insert":
            edited = word[:i] + rng.choice(letters) + word[i:]
        else:
            continue
        if OSA.distance(word, edited) == 1:
            return edited


def _typos(word: str, count: int, rng: random.Random) -> str:
    """``word`` with exactly ``count`` typos (OSA distance); two typos keep the length."""
    while True:
        edited = word
        for _ in range(count):
            edited = _typo(edited, rng, length_preserving=count > 1)
        if OSA.distance(word, edited) == count:
            return edited


def _query(words: list[str], **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"words": words, "prefix": False, "typos": 0, "filters": [], "facets": None,
                             "sort": None, "skip": 0, "count": 30, "group": None}
    entry.update(overrides)
    return entry


class _Pools:
    """What every class draws from, computed once from the real records: word frequency bands over
    all of them, words and adjacent-word phrases of the first :data:`BASE_RECORDS`, keyword and
    numeric values."""

    def __init__(self, corpus: Corpus, real: list[dict[str, Any]]) -> None:
        frequency: Counter[str] = Counter()
        for record in real:
            frequency.update({token for field in corpus.text_fields for run in _words_of(record.get(field))
                              for token in run})
        base = real[:BASE_RECORDS]
        runs = [run for record in base for field in corpus.text_fields for run in _words_of(record.get(field))]
        self.base_words = {token for run in runs for token in run if _usable(token)}
        self.ranked = [word for word, _ in frequency.most_common() if _usable(word)]
        rank = {word: position for position, word in enumerate(self.ranked)}

        def band_of(word: str) -> str:
            return "common" if rank[word] < COMMON_RANKS else "medium" if rank[word] < MEDIUM_RANKS else "rare"

        self.words_by_band = {band: sorted(w for w in self.base_words if band_of(w) == band) for band in BANDS}
        phrases: dict[str, list[list[str]]] = {band: [] for band in BANDS}
        for run in runs:
            for length in (2, 3):
                for start in range(len(run) - length + 1):
                    phrase = run[start:start + length]
                    if all(_usable(token) for token in phrase) and len(set(phrase)) == length:
                        phrases[max((band_of(t) for t in phrase), key=BANDS.index)].append(phrase)
        # One entry per distinct phrase, sorted: the draw does not depend on set order.
        self.phrases_by_band = {band: [list(p) for p in sorted({tuple(p) for p in found})]
                                for band, found in phrases.items()}
        self.keyword_values = _keyword_values(corpus, real)
        self.base = base
        # Which base records hold each word (any text field): the model that tells whether a
        # query with a filter matches among the base records (see make_fresh).
        self.holding: dict[str, set[int]] = {}
        for position, record in enumerate(base):
            for field in corpus.text_fields:
                for run in _words_of(record.get(field)):
                    for token in run:
                        self.holding.setdefault(token, set()).add(position)
        self.common_words = [w for w in self.ranked[:COMMON_RANKS] if w in self.base_words]
        self.numeric_values = {field: sorted({record[field] for record in real
                                              if isinstance(record.get(field), (int, float))})
                               for field in corpus.numeric_fields}


def make_workloads(corpus: Corpus, real: list[dict[str, Any]], per_class: int = PER_CLASS,
                   seed: int = SEED, pools: _Pools | None = None) -> dict[str, Any]:
    """Every class of :data:`CLASSES`, ``per_class`` queries each, from ``real`` (id order)."""
    rng = random.Random(seed)
    pools = pools or _Pools(corpus, real)
    words_by_band, phrases_by_band, ranked = pools.words_by_band, pools.phrases_by_band, pools.ranked
    base_words = pools.base_words

    def draw(pool: list[Any]) -> Any:
        return pool[rng.randrange(len(pool))]

    def mixed_word(i: int, min_length: int = 4) -> str:
        band = BANDS[i % 3]
        pool = [w for w in words_by_band[band] if len(w) >= min_length] or \
            [w for w in ranked[:MEDIUM_RANKS] if len(w) >= min_length and w in base_words]
        return draw(pool)

    def mixed_phrase(i: int) -> list[str]:
        return list(draw(phrases_by_band[BANDS[i % 3]] or phrases_by_band["medium"]))

    keyword_values = pools.keyword_values
    common_words = pools.common_words
    facets = {"text": list(corpus.facet_text_fields), "numeric": corpus.facet_numeric_field,
              "ranges": [list(bounds) for bounds in corpus.facet_ranges]}
    low, high = corpus.range_bounds
    browse_field, browse_low, browse_high = corpus.browse_filter
    classes: dict[str, list[dict[str, Any]]] = {}
    for band in BANDS:
        classes[f"one_word_{band}"] = [_query([draw(words_by_band[band])]) for _ in range(per_class)]
        pool = phrases_by_band[band] or phrases_by_band["medium"]
        classes[f"multi_word_{band}"] = [_query(list(draw(pool))) for _ in range(per_class)]
    classes["typo1_one_word"] = [_query([_typos(mixed_word(i), 1, rng)], typos=1) for i in range(per_class)]
    classes["typo1_multi_word"] = []
    for i in range(per_class):
        phrase = mixed_phrase(i)
        longest = max(range(len(phrase)), key=lambda j: len(phrase[j]))
        phrase[longest] = _typos(phrase[longest], 1, rng)
        classes["typo1_multi_word"].append(_query(phrase, typos=1))
    classes["typo2_one_word"] = [_query([_typos(mixed_word(i, 8), 2, rng)], typos=2) for i in range(per_class)]
    classes["typo2_multi_word"] = [_query([_typos(word, 1, rng) for word in mixed_phrase(i)], typos=2)
                                   for i in range(per_class)]
    for length in (2, 3, 4):
        classes[f"prefix{length}"] = [_query([mixed_word(i)[:length]], prefix=True) for i in range(per_class)]
    classes["filter_range"] = [
        _query([draw(common_words)], filters=[{"op": "range", "field": corpus.range_field, "low": low, "high": high}])
        for _ in range(per_class)]
    classes["filter_equal"] = [
        _query([draw(common_words)],
               filters=[{"op": "eq", "field": corpus.equal_field, "value": draw(keyword_values[corpus.equal_field][:10])}])
        for _ in range(per_class)]
    classes["filter_in"] = [
        _query([draw(common_words)],
               filters=[{"op": "in", "field": corpus.in_field, "values": rng.sample(keyword_values[corpus.in_field][:40], 3)}])
        for _ in range(per_class)]
    classes["facets"] = [_query([draw(common_words[:20])], facets=facets) for _ in range(per_class)]
    classes["browse_sort"] = [
        _query([], filters=[{"op": "range", "field": browse_field, "low": browse_low, "high": browse_high}],
               sort={"field": corpus.sort_field, "descending": True})
        for _ in range(per_class)]
    classes["deep_page"] = [_query([draw(common_words[:5])], skip=DEEP_SKIP) for _ in range(per_class)]
    classes["group"] = [_query([draw(common_words[:20])], group=corpus.group_field, count=10) for _ in range(per_class)]
    return {"corpus": corpus.name, "seed": seed, "base_records": BASE_RECORDS, "per_class": per_class,
            "classes": {name: classes[name] for name in CLASSES}}


#: Seed of the fresh sets (different from :data:`SEED`: the fresh draws are not the saved workload's).
FRESH_SEED = 11
#: Skips a fresh ``deep_page`` entry draws from (one page of 30 apart).
FRESH_SKIPS = range(1_000, DEEP_SKIP + 1, 30)


def make_fresh(corpus: Corpus, real: list[dict[str, Any]], per_class: int, seed: int = FRESH_SEED,
               exclude: set[str] | None = None, pools: _Pools | None = None) -> dict[str, Any]:
    """Up to ``per_class`` distinct entries of every class for first-run (fresh) timing.

    Each class draws as the saved workload does, from pools widened where the saved workload's are
    small (a class keeps its character: filters, facets and groups over common words or adjacent
    common-word phrases; deep pages of the 50 most common words at skips from 1,000 to 10,000;
    browse ranges with bounds drawn from the field's real values; ranges and ``eq``/``in`` values
    drawn from the real values). An entry with words and filters is kept only when one of the first
    :data:`BASE_RECORDS` real records matches it whole, as every multi-word entry is: at every
    benchmarked size some record holds all its words, so no engine's answer depends on the
    contract's word dropping (which the peers do not have). No entry appears twice in the whole set, nor in ``exclude`` (JSON
    keys, :func:`entry_key`: the saved workload's entries, which warm the process first). A class
    whose pool has fewer distinct entries (2-letter prefixes, the ~200 common words) keeps all it
    has: ``counts`` says how many each class got.
    """
    rng = random.Random(seed)
    pools = pools or _Pools(corpus, real)
    seen = set(exclude or ())
    words_by_band, phrases_by_band = pools.words_by_band, pools.phrases_by_band
    common_phrases = phrases_by_band["common"] or phrases_by_band["medium"]

    def draw(pool: list[Any]) -> Any:
        return pool[rng.randrange(len(pool))]

    word_pools: dict[tuple[str, int], list[str]] = {}

    def mixed_word(i: int, min_length: int = 4) -> str:
        band = BANDS[i % 3]
        if (band, min_length) not in word_pools:
            word_pools[band, min_length] = [w for w in words_by_band[band] if len(w) >= min_length] or \
                [w for w in pools.ranked[:MEDIUM_RANKS] if len(w) >= min_length and w in pools.base_words]
        return draw(word_pools[band, min_length])

    def mixed_phrase(i: int) -> list[str]:
        return list(draw(phrases_by_band[BANDS[i % 3]] or phrases_by_band["medium"]))

    def common_query() -> list[str]:
        return [draw(pools.common_words)] if rng.random() < 0.5 else list(draw(common_phrases))

    def typo_phrase(i: int) -> list[str]:
        phrase = mixed_phrase(i)
        longest = max(range(len(phrase)), key=lambda j: len(phrase[j]))
        phrase[longest] = _typos(phrase[longest], 1, rng)
        return phrase

    def matches_in_base(entry: dict[str, Any]) -> bool:
        """Some base record holds every word and passes every filter (so no engine drops words at
        any benchmarked size: the contract's word dropping only starts when nothing matches)."""
        holders = set.intersection(*(pools.holding.get(word, set()) for word in entry["words"]))
        return any(all(_passes(pools.base[position], spec) for spec in entry["filters"]) for position in holders)

    def value_range(field: str) -> tuple[Any, Any]:
        values = pools.numeric_values[field]
        low, high = sorted((draw(values), draw(values)))
        return low, (high if high > low else None)

    facets = {"text": list(corpus.facet_text_fields), "numeric": corpus.facet_numeric_field,
              "ranges": [list(bounds) for bounds in corpus.facet_ranges]}
    values = pools.keyword_values
    browse_field = corpus.browse_filter[0]
    makers: dict[str, Any] = {
        **{f"one_word_{band}": (lambda i, band=band: _query([draw(words_by_band[band])])) for band in BANDS},
        **{f"multi_word_{band}": (lambda i, band=band: _query(list(draw(phrases_by_band[band] or
                                                                        phrases_by_band["medium"]))))
           for band in BANDS},
        "typo1_one_word": lambda i: _query([_typos(mixed_word(i), 1, rng)], typos=1),
        "typo1_multi_word": lambda i: _query(typo_phrase(i), typos=1),
        "typo2_one_word": lambda i: _query([_typos(mixed_word(i, 8), 2, rng)], typos=2),
        "typo2_multi_word": lambda i: _query([_typos(word, 1, rng) for word in mixed_phrase(i)], typos=2),
        **{f"prefix{length}": (lambda i, length=length: _query([mixed_word(i)[:length]], prefix=True))
           for length in (2, 3, 4)},
        "filter_range": lambda i: _query(common_query(), filters=[
            dict(zip(("op", "field", "low", "high"), ("range", corpus.range_field, *value_range(corpus.range_field))))]),
        "filter_equal": lambda i: _query(common_query(), filters=[
            {"op": "eq", "field": corpus.equal_field, "value": draw(values[corpus.equal_field][:40])}]),
        "filter_in": lambda i: _query(common_query(), filters=[
            {"op": "in", "field": corpus.in_field, "values": rng.sample(values[corpus.in_field][:40], 3)}]),
        "facets": lambda i: _query(common_query(), facets=facets),
        "browse_sort": lambda i: _query([], filters=[
            dict(zip(("op", "field", "low", "high"), ("range", browse_field, *value_range(browse_field))))],
            sort={"field": corpus.sort_field, "descending": True}),
        "deep_page": lambda i: _query([draw(pools.common_words[:50])], skip=rng.choice(FRESH_SKIPS)),
        "group": lambda i: _query(common_query(), group=corpus.group_field, count=10),
    }
    classes: dict[str, list[dict[str, Any]]] = {}
    for kind in CLASSES:
        entries: list[dict[str, Any]] = []
        misses = 0
        # A class whose pool is exhausted stops after this many draws in a row gave nothing new.
        while len(entries) < per_class and misses < 2_000:
            entry = makers[kind](len(entries) + misses)
            key = entry_key(entry)
            if key in seen or (entry["filters"] and entry["words"] and not matches_in_base(entry)):
                misses += 1
                continue
            seen.add(key)
            misses = 0
            entries.append(entry)
        classes[kind] = entries
    return {"corpus": corpus.name, "seed": seed, "per_class": per_class,
            "counts": {kind: len(entries) for kind, entries in classes.items()}, "classes": classes}


def _passes(record: dict[str, Any], spec: dict[str, Any]) -> bool:
    """One workload filter on one record (ranges ``[low, high)``; ``eq``/``in`` match any element)."""
    value = record.get(spec["field"])
    if spec["op"] == "range":
        return isinstance(value, (int, float)) and (spec["low"] is None or value >= spec["low"]) and \
            (spec["high"] is None or value < spec["high"])
    wanted = {spec["value"]} if spec["op"] == "eq" else set(spec["values"])
    return bool(wanted & set(value if isinstance(value, list) else [value]))


def entry_key(entry: dict[str, Any]) -> str:
    """An entry as a canonical JSON string: equal keys, the same query."""
    return json.dumps(entry, sort_keys=True)


#: Text whose tokens change whenever the analyzer's rules do (symbols spelt with letters, accents,
#: apostrophes, CJK, numbers, hyphens).
ANALYZER_PROBE = "Monopoly™ 5㎏ ⒜ Café naïve O'Neil x-ray 東京タワー 1.5 ǅemal ＡＢＣ ß İstanbul"


def analyzer_fingerprint() -> str:
    """A short hash of how the analyzer splits :data:`ANALYZER_PROBE`: the name of every cached
    set of query words drawn from the corpus carries it, so that a set drawn with an older
    analyzer (whose words the engine no longer holds) is drawn again instead of reused."""
    tokens = json.dumps(analyze(ANALYZER_PROBE), ensure_ascii=False)
    return hashlib.sha1(tokens.encode("utf-8")).hexdigest()[:8]


def fresh_path(corpus: str, per_class: int, seed: int = FRESH_SEED) -> Path:
    return CACHE / f"fresh-{corpus}-{per_class}-s{seed}-a{analyzer_fingerprint()}.json"


def load_fresh(corpus: str, per_class: int, seed: int = FRESH_SEED) -> dict[str, Any]:
    """The fresh set of ``corpus`` (``per_class`` per class, none of the saved workload's entries),
    cached in ``benchmarks/.cache/`` (git-ignored) after its first generation."""
    path = fresh_path(corpus, per_class, seed)
    if path.exists():
        return json.loads(path.read_text(encoding="utf-8"))
    saved = load(corpus)["classes"]
    exclude = {entry_key(entry) for entries in saved.values() for entry in entries}
    fresh = make_fresh(CORPORA[corpus], real_records(corpus), per_class, seed, exclude)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(fresh, ensure_ascii=False), encoding="utf-8")
    partial.replace(path)  # atomic: a half-written cache file is never read
    return fresh

def _keyword_values(corpus: Corpus, real: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Values of each keyword field, most frequent first (ties by value)."""
    values: dict[str, list[str]] = {}
    for field in corpus.keyword_fields:
        counts: Counter[str] = Counter()
        for record in real:
            value = record.get(field)
            counts.update(value if isinstance(value, list) else [value] if value is not None else [])
        values[field] = [value for value, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]
    return values


def workload_path(corpus: str) -> Path:
    return WORKLOADS / f"{corpus}.json"


def generate(corpus: str) -> Path:
    """Regenerate and save the workload file of ``corpus``."""
    real = real_records(corpus)
    workloads = make_workloads(CORPORA[corpus], real)
    WORKLOADS.mkdir(exist_ok=True)
    path = workload_path(corpus)
    path.write_text(json.dumps(workloads, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load(corpus: str) -> dict[str, Any]:
    """The saved workload file of ``corpus`` (generated first if missing)."""
    path = workload_path(corpus)
    if not path.exists():
        generate(corpus)
    return json.loads(path.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description="Regenerate benchmarks/workloads/<corpus>.json")
    parser.add_argument("--corpus", choices=sorted(CORPORA), action="append")
    args = parser.parse_args()
    for corpus in args.corpus or sorted(CORPORA):
        print(generate(corpus))


if __name__ == "__main__":
    main()
