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
]


def __getattr__(name: str) -> Any:
    # Imported lazily so that `import roarsearch.errors` (the CLI's fast paths, the server's
    # startup) does not pay for numpy and the index.
    if name == "Engine":
        from roarsearch.engine.engine import Engine

        return Engine
    raise AttributeError(f"module 'roarsearch' has no attribute {name!r}")
