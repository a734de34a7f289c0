"""Compatibility names for the scripts that import ``benchmarks.data`` (core, durability, load,
typo_quality): the corpora themselves live in :mod:`benchmarks.datasets`, which documents the real
sources and the scale-up.
"""

from __future__ import annotations

from typing import Any

from benchmarks.datasets import CACHE, jsonl_size, real_movies, scaled_places

__all__ = ["CACHE", "jsonl_size", "movies", "places"]


def places(n: int, seed: int = 42) -> list[dict[str, Any]]:
    """``n`` GeoNames places: the 234,908 real ones first, then seeded scaled copies."""
    return scaled_places(n, seed)


def movies() -> list[dict[str, Any]]:
    """The 17,472 real films projected on the benchmark schema."""
    return real_movies()
