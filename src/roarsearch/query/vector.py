"""The ``vector`` part of a search request (contract §11), parsed without the index.

Owns: the shape of ``{"name", "values", "k", "exact"}`` and ``semanticRatio``, their bounds and
error messages. Whether ``name`` is a declared space, and the length of ``values``, are checked by
the collection (they depend on its settings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from roarsearch.errors import BadRequestError
from roarsearch.schema import describe_value, preview, type_name

DEFAULT_K = 100
MAX_K = 10_000
DEFAULT_SEMANTIC_RATIO = 0.5
MAX_VECTOR_VALUES = 4096
VECTOR_KEYS = ("name", "values", "k", "exact")


@dataclass(frozen=True, slots=True)
class VectorQuery:
    """A validated ``vector`` request: the space's name, the query vector, how many nearest, exactness."""

    name: str
    values: tuple[float, ...]
    k: int = DEFAULT_K
    exact: bool = False


def parse_vector(value: Any) -> VectorQuery:
    """``{"name": "text", "values": [...], "k": 50, "exact": true}`` as a :class:`VectorQuery`, or a 400."""
    if not isinstance(value, dict):
        raise BadRequestError('vector: must be an object like {"name": "text", "values": [0.1, ...], "k": 100}, '
                              f"got {type_name(value)}", field="vector")
    unknown = [key for key in value if key not in VECTOR_KEYS]
    if unknown:
        raise BadRequestError(f"vector.{unknown[0] if isinstance(unknown[0], str) else preview(unknown[0], 40)}: unknown field (vector has {', '.join(VECTOR_KEYS)})",
                              field="vector")
    name = value.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequestError(f"vector.name: must be the name of a vector space, got {describe_value(name)}"
                              if name is not None else "vector.name: is required", field="vector")
    values = value.get("values")
    if values is None:
        raise BadRequestError("vector.values: is required (an array of numbers)", field="vector")
    if not isinstance(values, list):
        raise BadRequestError(f"vector.values: must be an array of numbers, got {type_name(values)}", field="vector")
    if not values or len(values) > MAX_VECTOR_VALUES:
        raise BadRequestError(f"vector.values: must hold 1 to {MAX_VECTOR_VALUES} numbers, got {len(values)}",
                              field="vector")
    floats = []
    for position, number in enumerate(values):
        if isinstance(number, bool) or not isinstance(number, (int, float)):
            raise BadRequestError(f"vector.values[{position}]: must be a number, got {describe_value(number)}",
                                  field="vector")
        try:
            converted = float(number)
        except OverflowError:
            converted = math.inf
        if not math.isfinite(converted):
            raise BadRequestError(f"vector.values[{position}]: must be a finite number, got {describe_value(number)}",
                                  field="vector")
        floats.append(converted)
    k = value.get("k")
    if k is None:
        k = DEFAULT_K
    elif isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise BadRequestError(f"vector.k: must be an integer between 1 and {MAX_K}, got {describe_value(k)}",
                              field="vector")
    exact = value.get("exact")
    if exact is None:
        exact = False
    elif not isinstance(exact, bool):
        raise BadRequestError(f"vector.exact: must be true or false, got {describe_value(exact)}", field="vector")
    return VectorQuery(name, tuple(floats), k, exact)


def parse_semantic_ratio(value: Any) -> float:
    """``semanticRatio``: a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise BadRequestError(f"semanticRatio: must be a number between 0 and 1, got {describe_value(value)}",
                              field="semanticRatio")
    return float(value)


__all__ = ["DEFAULT_K", "DEFAULT_SEMANTIC_RATIO", "MAX_K", "VectorQuery", "parse_semantic_ratio", "parse_vector"]
