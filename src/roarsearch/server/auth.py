"""Bearer keys: admin keys may do everything, search-only keys may only search.

Owns: the comparison of the ``Authorization`` header with the configured keys, in constant time
(``hmac.compare_digest`` against every key, so the time taken does not reveal which key, or how
much of one, matched).
"""

from __future__ import annotations

import hmac

from roarsearch.errors import ForbiddenError, UnauthorizedError


class KeyRing:
    def __init__(self, admin_keys: tuple[str, ...], search_keys: tuple[str, ...]) -> None:
        if not admin_keys:
            raise ValueError("at least one admin key is required: the service never runs open")
        self._admin = [key.encode() for key in admin_keys]
        self._search = [key.encode() for key in search_keys]

    def role(self, authorization: str | None) -> str:
        """"admin" or "search" for a valid ``Authorization: Bearer <key>``; 401 otherwise."""
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
            return "admin"
        if is_search:
            return "search"
        raise UnauthorizedError("invalid API key")

    def require(self, authorization: str | None, admin: bool) -> str:
        role = self.role(authorization)
        if admin and role != "admin":
            raise ForbiddenError("this key may only search; writes need an admin key")
        return role
