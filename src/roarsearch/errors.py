"""The exception tree of roarsearch and the one table that maps errors to HTTP statuses.

Owns: every exception the public API raises. Imports no other roarsearch module.

Every failure is a :class:`SearchError` carrying ``status`` (the HTTP status the service answers
with) and ``data`` (a message for a person, naming the field and the problem). ``to_dict()`` is the
wire Error object ``{"status": ..., "data": ...}``, so the library and the HTTP service report the
same thing in the same words.

    >>> err = BadRequestError("count: must be an integer between 0 and 1000, got 5000", field="count")
    >>> err.to_dict()
    {'status': 400, 'data': 'count: must be an integer between 0 and 1000, got 5000'}
"""

from __future__ import annotations

from typing import Any


class SearchError(Exception):
    """Root of every roarsearch error: an HTTP-like ``status`` and a human-readable ``data``."""

    status: int = 500

    def __init__(self, data: str, *, field: str | None = None, status: int | None = None) -> None:
        # A message quoting request text stays valid Unicode (a lone surrogate is shown escaped),
        # so the Error object can always be sent as UTF-8 JSON.
        data = data.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(data)
        self.data = data
        self.field = field
        if status is not None:
            self.status = status

    def to_dict(self) -> dict[str, Any]:
        """The wire Error object: ``{"status": int, "data": str}``."""
        return {"status": self.status, "data": self.data}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, data={self.data!r})"


class BadRequestError(SearchError):
    """400: the request or a record is malformed; ``data`` names the field and the problem."""

    status = 400


class UnauthorizedError(SearchError):
    """401: the bearer token is missing or wrong."""

    status = 401


class ForbiddenError(SearchError):
    """403: the key is valid but may not do this (a search-only key writing)."""

    status = 403


class NotFoundError(SearchError):
    """404: unknown collection, record or route."""

    status = 404


class MethodNotAllowedError(SearchError):
    """405: the route exists, the method does not."""

    status = 405


class DirectoryLockedError(SearchError):
    """409: another open engine (this process or another) owns the data directory."""

    status = 409


class PayloadTooLargeError(SearchError):
    """413: the request body is over the configured limit."""

    status = 413


class InternalError(SearchError):
    """500: a bug or an unexpected condition; never caused by bad input."""

    status = 500


class CorruptionError(InternalError):
    """500: a data file failed its checksum or structure check; ``data`` names the file and offset."""


class ServiceUnavailableError(SearchError):
    """503: a part of the engine (a shard being restarted) cannot answer now; retry later."""

    status = 503


class StorageError(SearchError):
    """507: the write could not be made durable (disk full, I/O error); nothing was changed."""

    status = 507


#: The single map from status to exception class, used by the HTTP layer to re-raise by status.
ERROR_BY_STATUS: dict[int, type[SearchError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: MethodNotAllowedError,
    409: DirectoryLockedError,
    413: PayloadTooLargeError,
    500: InternalError,
    503: ServiceUnavailableError,
    507: StorageError,
}


def error_for_status(status: int, data: str) -> SearchError:
    """Build the exception that matches ``status`` (falls back to a plain :class:`SearchError`)."""
    cls = ERROR_BY_STATUS.get(status, SearchError)
    if cls is SearchError:
        return SearchError(data, status=status)
    return cls(data)
