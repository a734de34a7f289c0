"""roarsearch: an embedded search engine for Python on roaring bitmaps.

    >>> from roarsearch import Engine
    >>> with Engine() as engine:
    ...     engine.add_records("people", [{"id": 1, "fName": "Ada", "lName": "Lovelace"}])
    ...     engine.search({"collection": "people", "query": "ada lovlace"})["totalHits"]
    {'status': 201}
    1

The public API is this module: :class:`Engine`, :class:`SearchError` and its subclasses.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roarsearch.errors import (
    BadRequestError,
    CorruptionError,
    DirectoryLockedError,
    ForbiddenError,
    InternalError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
    SearchError,
    StorageError,
    UnauthorizedError,
)

if TYPE_CHECKING:
    from roarsearch.engine.engine import Engine

__version__ = "0.1.0"

__all__ = [
    "BadRequestError",
    "CorruptionError",
    "DirectoryLockedError",
    "Engine",
    "ForbiddenError",
    "InternalError",
    "MethodNotAllowedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "SearchError",
    "StorageError",
    "UnauthorizedError",
    "__version__",
    "compiled",
]


def compiled() -> bool:
    """Whether this install runs the search path compiled by mypyc (``pip install .`` builds it
    where a C compiler is at hand; an editable install stays pure Python). Answers are the same
    either way; the compiled one is about twice as fast on small match sets."""
    from roarsearch.ranking import bucket_sort

    return not bucket_sort.__file__.endswith(".py")


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import roarsearch.errors` (the CLI's fast paths, the server's
    # startup) does not pay for numpy and the index.
    if name == "Engine":
        from roarsearch.engine.engine import Engine

        return Engine
    raise AttributeError(f"module 'roarsearch' has no attribute {name!r}")
