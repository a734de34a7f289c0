"""This module tests the following properties of ``server/auth.py``:

- the admin and search keys given at start keep their roles; a stored key gets its own actions;
- a tenant token verified once is remembered, yet refused from the next request once its key is
  revoked, or once its ``exp`` is past; a forged token is never remembered as valid;
- a token may only search and read records, and its 403 says so.
"""

from __future__ import annotations

import time

import pytest

from roarsearch.errors import ForbiddenError, UnauthorizedError
from roarsearch.keys import KeyStore, mint_token
from roarsearch.server.auth import KeyRing, Role


def bearer(credential: str) -> str:
    return f"Bearer {credential}"


def test_roles_and_remembered_tokens() -> None:
    store = KeyStore(None, "master-secret-of-the-tests-000000")
    ring = KeyRing(("admin",), ("search",), store)
    assert ring.access(bearer("admin")).role is Role.ADMIN
    assert ring.access(bearer("search")).role is Role.SEARCH
    key, secret = store.create({"actions": ["search", "records.read"], "collections": ["orders"]})
    assert ring.access(bearer(secret)).role is Role.KEY
    token = mint_token(key.uid, secret, {"orders": {"filter": "tenant = 1"}})
    for _ in range(3):  # verified once, then remembered
        access = ring.access(bearer(token))
        assert access.role is Role.TOKEN and access.token is not None
    access.require("records.read", "orders")
    with pytest.raises(ForbiddenError, match="a tenant token may only search and read records"):
        access.require("settings.read", "orders")
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    for _ in range(2):
        with pytest.raises(UnauthorizedError):
            ring.access(bearer(forged))
    store.revoke(key.uid)
    with pytest.raises(UnauthorizedError, match="does not exist or was revoked"):
        ring.access(bearer(token))
    with pytest.raises(UnauthorizedError, match="invalid API key"):
        ring.access(bearer(secret))


def test_a_remembered_token_expires() -> None:
    store = KeyStore(None, "master-secret-of-the-tests-000000")
    ring = KeyRing(("admin",), (), store)
    key, secret = store.create({"actions": ["search"]})
    token = mint_token(key.uid, secret, ["*"], expires_at=int(time.time()) + 1)
    assert ring.access(bearer(token)).role is Role.TOKEN
    time.sleep(1.1)
    with pytest.raises(UnauthorizedError, match="expired"):
        ring.access(bearer(token))
