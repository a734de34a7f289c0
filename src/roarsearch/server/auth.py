"""Bearer keys: admin keys may do everything, search-only keys may only search.

Owns: checking the ``Authorization`` header against the configured keys. Called by every API
route of ``server/app.py`` before the body is read (a request without a valid key costs nothing).

Invariants: comparison is constant-time (``hmac.compare_digest`` against every key, with no early
exit, so the time taken reveals neither which key matched nor how much of one); there is always at
least one admin key, so the service never runs open; a failure is a 401 or 403 ``SearchError``.
"""

from __future__ import annotations

import hmac
from enum import Enum

from roarsearch.errors import ForbiddenError, UnauthorizedError


class Role(Enum):
    ADMIN = "admin"
    SEARCH = "search"


class KeyRing:
    """The configured keys, kept as bytes for ``hmac.compare_digest``."""

    def __init__(self, admin_keys: tuple[str, ...], search_keys: tuple[str, ...]) -> None:
        if not admin_keys:
            raise ValueError("at least one admin key is required: the service never runs open")
        self._admin = [key.encode() for key in admin_keys]
        self._search = [key.encode() for key in search_keys]

    def role(self, authorization: str | None) -> Role:
        """The role of a valid ``Authorization: Bearer <key>``; 401 when it is missing or wrong."""
        if not authorization:
            raise UnauthorizedError("missing Authorization header: send 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthorizedError("Authorization header must be 'Bearer <key>'")
        candidate = token.strip().encode()
        is_admin = False
        is_search = False
        for key in self._admin:  # no early exit: every key is compared
            is_admin |= hmac.compare_digest(candidate, key)
        for key in self._search:
            is_search |= hmac.compare_digest(candidate, key)
        if is_admin:
            return Role.ADMIN
        if is_search:
            return Role.SEARCH
        raise UnauthorizedError("invalid API key")

    def require(self, authorization: str | None, *, admin: bool) -> Role:
        """The caller's role; 401 without a valid key, 403 when ``admin`` and the key may only search."""
        role = self.role(authorization)
        if admin and role is not Role.ADMIN:
            raise ForbiddenError("this key may only search; writes need an admin key")
        return role
