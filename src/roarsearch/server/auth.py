"""Bearer credentials: the admin and search keys given at start, stored keys, tenant tokens.

Owns: checking the ``Authorization`` header (:meth:`KeyRing.access`) and what the credential may
do (:class:`Access`: its actions, its collections, a tenant token's rules). Called by every API
route of ``server/app.py`` before the body is read (a request without a valid credential costs
nothing). Keys and tokens themselves are :mod:`roarsearch.keys`'s.

Invariants: the configured keys are compared in constant time (``hmac.compare_digest`` against
every one, with no early exit, so the time taken reveals neither which key matched nor how much of
one); a stored key is found by the digest of the candidate (``KeyStore.authenticate``); there is
always at least one admin key, so the service never runs open; a credential that is missing,
wrong, revoked or expired is a 401; a valid one without the action or collection asked is a 403
that names the missing action or the collection the request itself named — the answer is the
same whether that collection exists or not, so a key never learns which collections it cannot see.
"""

from __future__ import annotations

import hmac
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from roarsearch.errors import ForbiddenError, UnauthorizedError
from roarsearch.keys import (
    ACTIONS,
    TOKEN_ACTIONS,
    ApiKey,
    KeyStore,
    TenantToken,
    TenantView,
    TokenError,
    looks_like_token,
    verify_token,
)


class Role(Enum):
    ADMIN = "admin"
    SEARCH = "search"
    KEY = "key"
    TOKEN = "token"


#: Tenant tokens whose signature and rules were checked, remembered per process: verifying one
#: (PyJWT, the rules' filters parsed) takes about 0.1 ms, a remembered one a dict lookup. The key
#: behind it, its expiry and the token's are checked again on every request.
TOKENS_KEPT = 4096

#: What a search key given at start may do: read everything, change nothing.
SEARCH_KEY_ACTIONS = ("search", "records.read", "settings.read", "collections.read")


@dataclass(frozen=True)
class Access:
    """What one request's credential may do."""

    role: Role
    #: The stored key (a tenant token's: the key that signed it).
    key: ApiKey | None = None
    token: TenantToken | None = None

    def allows(self, action: str) -> bool:
        if self.role is Role.ADMIN:
            return True
        if self.role is Role.SEARCH:
            return action in SEARCH_KEY_ACTIONS
        assert self.key is not None
        if self.role is Role.TOKEN and action not in TOKEN_ACTIONS:
            return False
        return self.key.allows(action)

    def sees(self, collection: str) -> bool:
        """Whether the key's collection patterns name ``collection`` (a token's rules aside)."""
        return self.key is None or self.key.sees(collection)

    @property
    def narrowed(self) -> bool:
        """Whether some collection may be out of reach (listings are then filtered)."""
        return self.key is not None and "*" not in self.key.collections

    def require(self, action: str, collection: Any = None) -> None:
        """A 403 unless the credential holds ``action`` (on ``collection``, when one is named)."""
        if not self.allows(action):
            if self.role is Role.SEARCH and action == "keys":
                raise ForbiddenError("this key may not manage keys; that needs an admin key or the 'keys' action",
                                     field="action")
            if self.role is Role.SEARCH:
                raise ForbiddenError("this key may only search; writes need an admin key")
            if self.role is Role.TOKEN:
                raise ForbiddenError(f"a tenant token may only search and read records; '{action}' needs a key",
                                     field="action")
            raise ForbiddenError(f"this key lacks the action '{action}'", field="action")
        if isinstance(collection, str) and not self.sees(collection):
            raise ForbiddenError(f"this key may not access collection '{collection[:64]}'", field="collection")

    def checker(self, action: str) -> Callable[[str], None]:
        """``require(action, collection)`` as a one-argument check (for :class:`TenantView`)."""
        return lambda collection: self.require(action, collection)

    def view(self, engine: Any, action: str = "search") -> Any:
        """What the request reads through: the engine itself, or a :class:`TenantView` of it."""
        if self.token is None:
            return engine
        return TenantView(engine, self.token.rules, self.checker(action))

    def managing(self) -> ApiKey | None:
        """For the keys routes: the stored key whose scope bounds what it manages (None: any)."""
        return self.key if self.role is Role.KEY else None


class KeyRing:
    """The configured keys (as bytes for ``hmac.compare_digest``) and the key store."""

    def __init__(self, admin_keys: tuple[str, ...], search_keys: tuple[str, ...], store: KeyStore | None = None) -> None:
        if not admin_keys:
            raise ValueError("at least one admin key is required: the service never runs open")
        self._admin = [key.encode() for key in admin_keys]
        self._search = [key.encode() for key in search_keys]
        self.store = store if store is not None else KeyStore(None, admin_keys[0])
        self._tokens: OrderedDict[str, TenantToken] = OrderedDict()
        self._tokens_lock = threading.Lock()

    def _token(self, credential: str) -> TenantToken:
        """A verified tenant token: remembered when it was verified before (its signature and rules
        cannot have changed), with its key looked up afresh, so a revoked or expired key, or a
        token past its ``exp``, is refused from the next request on."""
        with self._tokens_lock:
            known = self._tokens.get(credential)
            if known is not None:
                self._tokens.move_to_end(credential)
        if known is None:
            verified = verify_token(credential, self.store.signing_key)
            with self._tokens_lock:
                self._tokens[credential] = verified
                if len(self._tokens) > TOKENS_KEPT:
                    self._tokens.popitem(last=False)
            return verified
        found = self.store.signing_key(known.key.uid)
        if found is None:
            raise TokenError("invalid tenant token: its key does not exist or was revoked")
        key = found[0]
        if key.expired():
            raise TokenError("invalid tenant token: its key has expired")
        if known.expires is not None and known.expires <= time.time():
            raise TokenError("invalid tenant token: expired (exp is past)")
        return replace(known, key=key)

    def access(self, authorization: str | None) -> Access:
        """What a valid ``Authorization: Bearer <credential>`` may do; 401 when it is missing or wrong."""
        if not authorization:
            raise UnauthorizedError("missing Authorization header: send 'Authorization: Bearer <key>'")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise UnauthorizedError("Authorization header must be 'Bearer <key>'")
        credential = token.strip()
        candidate = credential.encode("utf-8", "surrogatepass")
        is_admin = False
        is_search = False
        for key in self._admin:  # no early exit: every key is compared
            is_admin |= hmac.compare_digest(candidate, key)
        for key in self._search:
            is_search |= hmac.compare_digest(candidate, key)
        if is_admin:
            return Access(Role.ADMIN)
        if is_search:
            return Access(Role.SEARCH)
        if looks_like_token(credential):
            verified = self._token(credential)
            return Access(Role.TOKEN, verified.key, verified)
        stored = self.store.authenticate(credential)
        if stored is None:
            raise UnauthorizedError("invalid API key")
        if stored.expired():
            raise UnauthorizedError("this API key has expired")
        return Access(Role.KEY, stored)

    def require(self, authorization: str | None, action: str, collection: Any = None) -> Access:
        """The caller's access; 401 without a valid credential, 403 without ``action`` on ``collection``."""
        access = self.access(authorization)
        access.require(action, collection)
        return access


__all__ = ["ACTIONS", "Access", "KeyRing", "Role"]
