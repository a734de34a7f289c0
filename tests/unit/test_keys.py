"""This module tests the following properties of ``roarsearch.keys``:

- a key's secret is HMAC-SHA256(master, uid) in hex: the same in every process that shares the
  master secret, another under another master secret; a secret is found by ``authenticate`` and
  nothing else is (a prefix, the uid, another store's secret);
- the key store file holds no secret, is replaced atomically (no temporary file left), keeps
  changes made by another process (each store re-reads a changed file before it answers), and
  notices a master secret other than the one its keys were made under;
- key bodies are validated field by field (400 naming the field); only ``name`` and
  ``description`` can change; a key holding ``keys`` creates only keys within its own scope;
- patterns: ``*`` names every collection, ``logs-*`` every id starting with ``logs-``;
- search rules in both of Meilisearch's forms; the most specific rule governs a collection;
- a tenant token is refused (``TokenError``, a 401) when its header's algorithm is not HS256
  (``none``, HS512, RS256), its signature is another key's, its key is unknown, revoked, expired
  or lacks ``search``, its ``exp`` is past, its claims or rules are malformed, or it is too long;
  ``mint_token`` refuses rules the service would refuse;
- fuzzed tokens (truncated, bytes flipped, random segments, huge, non-JSON claims) always give a
  ``TokenError`` or a verified token, never another exception, each within a bounded time.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roarsearch.errors import BadRequestError, CorruptionError, ForbiddenError, NotFoundError
from roarsearch.keys import (
    KEYS_FILE,
    KeyStore,
    SearchRules,
    TokenError,
    derive_secret,
    master_secret,
    mint_token,
    parse_search_rules,
    pattern_matches,
    verify_token,
)

MASTER = "m" * 32


def test_derivation() -> None:
    assert derive_secret(MASTER, "uid-1") == derive_secret(MASTER, "uid-1")
    assert derive_secret(MASTER, "uid-1") != derive_secret(MASTER, "uid-2")
    assert derive_secret(MASTER, "uid-1") != derive_secret("other" * 8, "uid-1")
    assert len(derive_secret(MASTER, "uid-1")) == 64 and int(derive_secret(MASTER, "uid-1"), 16) >= 0


def test_store_round_trip_and_no_secret_on_disk(tmp_path: Path) -> None:
    store = KeyStore(str(tmp_path), MASTER)
    key, secret = store.create({"actions": ["search"], "collections": ["orders", "logs-*"], "name": "web"})
    assert secret == derive_secret(MASTER, key.uid)
    assert store.authenticate(secret) == key
    for wrong in (secret[:8], key.uid, secret + "0", derive_secret("x" * 32, key.uid), ""):
        assert store.authenticate(wrong) is None
    on_disk = (tmp_path / KEYS_FILE).read_text()
    assert secret not in on_disk and key.uid in on_disk
    assert sorted(os.listdir(tmp_path)) == ["keys.json", "keys.lock"]  # no temporary file left
    again = KeyStore(str(tmp_path), MASTER)
    assert again.get(key.uid) == key and again.keys() == [key]
    assert again.authenticate(secret) is not None


def test_other_processes_changes_are_seen(tmp_path: Path) -> None:
    first, second = KeyStore(str(tmp_path), MASTER), KeyStore(str(tmp_path), MASTER)
    key, secret = first.create({"actions": ["search"]})
    assert second.authenticate(secret) is not None  # created elsewhere: seen at once
    other, _ = second.create({"actions": ["*"]})
    assert {k.uid for k in first.keys()} == {key.uid, other.uid}  # neither change lost
    second.revoke(key.uid)
    assert first.authenticate(secret) is None  # revoked elsewhere: refused at once
    with pytest.raises(NotFoundError):
        first.revoke(key.uid)


def test_a_changed_master_secret_is_noticed(tmp_path: Path) -> None:
    old = KeyStore(str(tmp_path), MASTER)
    key, secret = old.create({"actions": ["search"]})
    new = KeyStore(str(tmp_path), "n" * 32)
    assert new.master_changed and new.authenticate(secret) is None
    new.revoke(key.uid)  # any change keeps the old check: it does not hide the difference
    old.create({"actions": ["search"]})
    assert KeyStore(str(tmp_path), "n" * 32).master_changed
    assert new.adopt_master() == 1 and not new.master_changed
    assert KeyStore(str(tmp_path), MASTER).master_changed
    assert not KeyStore(str(tmp_path / "empty"), MASTER).master_changed


@pytest.mark.parametrize("content", ["", "{", "[]", '{"format": 2, "keys": []}', '{"format": 1}',
                                     '{"format": 1, "keys": [{"uid": "x"}]}'])
def test_a_damaged_store_is_named(tmp_path: Path, content: str) -> None:
    (tmp_path / KEYS_FILE).write_text(content)
    with pytest.raises(CorruptionError, match=re.escape(str(tmp_path / KEYS_FILE))):
        KeyStore(str(tmp_path), MASTER)


def test_master_secret_file(tmp_path: Path) -> None:
    assert master_secret(str(tmp_path), "given") == "given"
    generated = master_secret(str(tmp_path / "root"), None)
    assert len(generated) >= 40 and master_secret(str(tmp_path / "root"), None) == generated
    assert (tmp_path / "root" / "keys.secret").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(("body", "field"), [
    ({"actions": ["search"], "collections": []}, "collections"),
    ({"actions": ["search"], "collections": [3]}, "collections[0]"),
    ({"actions": ["search"], "collections": ["*x"]}, "collections[0]"),
    ({"actions": ["search"], "collections": ["a*b"]}, "collections[0]"),
    ({"actions": "search"}, "actions"),
    ({"actions": [None]}, "actions[0]"),
    ({"actions": ["search"], "name": 5}, "name"),
    ({"actions": ["search"], "description": "x" * 2000}, "description"),
    ({"actions": ["search"], "expiresAt": 5}, "expiresAt"),
    ({"actions": ["search"], "uid": "mine"}, "uid"),
])
def test_bad_bodies_name_the_field(tmp_path: Path, body: dict[str, Any], field: str) -> None:
    with pytest.raises(BadRequestError) as error:
        KeyStore(None, MASTER).create(body)
    assert error.value.field == field and error.value.data.startswith(field)


def test_updates_and_scopes() -> None:
    store = KeyStore(None, MASTER)
    key, _ = store.create({"actions": ["search", "keys"], "collections": ["logs-*"],
                           "expiresAt": (datetime.now(UTC) + timedelta(days=1)).isoformat()})
    renamed = store.update(key.uid, {"name": "n", "description": "d"})
    assert (renamed.name, renamed.description, renamed.actions) == ("n", "d", key.actions)
    for field in ("actions", "collections", "expiresAt"):
        with pytest.raises(BadRequestError, match=f"{field}: cannot be changed"):
            store.update(key.uid, {field: None})
    inside, _ = store.create({"actions": ["search"], "collections": ["logs-web*"],
                              "expiresAt": (datetime.now(UTC) + timedelta(hours=1)).isoformat()}, within=key)
    assert inside.within(key)
    for body in ({"actions": ["search", "records.write"], "collections": ["logs-web"]},
                 {"actions": ["search"], "collections": ["*"]},
                 {"actions": ["search"], "collections": ["logs-a"]}):  # no expiry: outlives the manager
        with pytest.raises(ForbiddenError):
            store.create(body, within=key)
    with pytest.raises(NotFoundError):
        store.update("nope", {"name": "x"})


def test_chosen_uids_are_never_given_twice() -> None:
    store = KeyStore(None, MASTER)
    uid = "6062abda-a5aa-4414-ac91-ecd7944c0f8d"
    key, secret = store.create({"uid": uid, "actions": ["search"]})
    assert key.uid == uid and secret == derive_secret(MASTER, uid)
    with pytest.raises(BadRequestError, match=r"uid: .* is taken"):
        store.create({"uid": uid, "actions": ["search"]})
    store.revoke(uid)
    with pytest.raises(BadRequestError, match=r"uid: .* is taken"):  # the old secret must stay dead
        store.create({"uid": uid, "actions": ["search"]})
    assert store.authenticate(secret) is None
    with pytest.raises(BadRequestError, match="uid: must be a UUID"):
        store.create({"uid": uid.upper(), "actions": ["search"]})


def test_patterns() -> None:
    assert pattern_matches("*", "anything") and pattern_matches("logs-*", "logs-2024")
    assert pattern_matches("logs-*", "logs-") and not pattern_matches("logs-*", "log")
    assert pattern_matches("orders", "orders") and not pattern_matches("orders", "orders2")


def test_search_rules() -> None:
    listed = parse_search_rules(["orders", "logs-*"])
    assert listed.rule_for("orders") == (True, None) and listed.rule_for("logs-1") == (True, None)
    assert listed.rule_for("other") == (False, None)
    rules = parse_search_rules({"*": {"filter": "tenant = 1"}, "logs-*": None, "logs-web": {"filter": "a = 2"},
                                "empty": {"filter": "  "}, "plain": {}})
    assert rules.rule_for("x") == (True, "tenant = 1")
    assert rules.rule_for("logs-x") == (True, None)
    assert rules.rule_for("logs-web") == (True, "a = 2")
    assert rules.rule_for("empty") == (True, None) and rules.rule_for("plain") == (True, None)
    for bad in ("orders", 5, {"o": {"filter": 3}}, {"o": {"filter": "a ="}}, {"o": {"fliter": "a = 1"}},
                {"o": []}, [3], {"": None}):
        with pytest.raises(ValueError):
            parse_search_rules(bad)
    assert isinstance(rules, SearchRules)


# ---------------------------------------------------------------------- tokens

@pytest.fixture
def store() -> KeyStore:
    return KeyStore(None, MASTER)


def _segment(value: Any) -> str:
    raw = value if isinstance(value, bytes) else json.dumps(value).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def test_a_good_token(store: KeyStore) -> None:
    key, secret = store.create({"actions": ["search"]})
    token = mint_token(key.uid, secret, {"orders": {"filter": "tenant = 1"}},
                       expires_at=datetime.now(UTC) + timedelta(minutes=5))
    verified = verify_token(token, store.signing_key)
    assert verified.key == key and verified.rules.rule_for("orders") == (True, "tenant = 1")
    assert verified.expires is not None and verified.expires > time.time()
    assert verify_token(mint_token(key.uid, secret, ["*"]), store.signing_key).expires is None


def refused(store: KeyStore, token: str, message: str) -> None:
    with pytest.raises(TokenError) as error:
        verify_token(token, store.signing_key)
    assert error.value.status == 401
    assert error.value.data.startswith("invalid tenant token") and message in error.value.data, error.value.data


def test_every_rejection(store: KeyStore) -> None:
    key, secret = store.create({"actions": ["search"]})
    reader, reader_secret = store.create({"actions": ["records.read"]})
    short, short_secret = store.create({"actions": ["*"], "expiresAt": (datetime.now(UTC) + timedelta(seconds=60)).isoformat()})
    revoked, revoked_secret = store.create({"actions": ["search"]})
    store.revoke(revoked.uid)
    claims = {"apiKeyUid": key.uid, "searchRules": {"orders": None}}
    good = mint_token(key.uid, secret, {"orders": None})
    head, body, signature = good.split(".")
    refused(store, f"{_segment({'alg': 'none', 'typ': 'JWT'})}.{_segment(claims)}.", "algorithm must be HS256")
    refused(store, jwt.encode(claims, secret, algorithm="HS512"), "algorithm must be HS256")
    refused(store, f"{_segment({'alg': 'RS256'})}.{body}.{signature}", "algorithm must be HS256")
    refused(store, f"{_segment({'alg': 'HS256', 'typ': 'JWE'})}.{body}.{signature}", "typ must be JWT")
    refused(store, f"{_segment(['HS256'])}.{body}.{signature}", "algorithm must be HS256")
    refused(store, mint_token(key.uid, reader_secret, {"orders": None}), "bad signature")
    refused(store, mint_token("unknown", secret, {"orders": None}), "does not exist or was revoked")
    refused(store, mint_token(revoked.uid, revoked_secret, {"orders": None}), "does not exist or was revoked")
    refused(store, mint_token(reader.uid, reader_secret, {"orders": None}), "does not hold the search action")
    later = datetime.now(UTC) + timedelta(seconds=120)
    with pytest.raises(TokenError, match="its key has expired"):
        verify_token(mint_token(short.uid, short_secret, ["*"]), store.signing_key, now=later)
    refused(store, mint_token(key.uid, secret, ["*"], expires_at=int(time.time()) - 1), "expired (exp is past)")
    refused(store, jwt.encode({**claims, "exp": "tomorrow"}, secret, algorithm="HS256"), "exp must be a number")
    refused(store, jwt.encode({"apiKeyUid": key.uid}, secret, algorithm="HS256"), "searchRules")
    refused(store, jwt.encode({"apiKeyUid": 5, "searchRules": []}, secret, algorithm="HS256"), "apiKeyUid must be a string")
    refused(store, jwt.encode({**claims, "searchRules": {"o": {"filter": "a = "}}}, secret, algorithm="HS256"),
            "searchRules.o.filter")
    refused(store, jwt.encode({**claims, "searchRules": "orders"}, secret, algorithm="HS256"), "searchRules")
    refused(store, good[:-3], "bad signature")
    refused(store, f"{head}.{body}", "malformed")
    refused(store, f"{head}.{_segment(b'not json')}.{signature}", "malformed")
    not_utf8 = _segment(bytes([0xFF, 0xFE]))
    refused(store, f"{head}.{not_utf8}.{signature}", "malformed")
    refused(store, f"{head}.{body}.{signature}" + "A" * 20_000, "longer than")
    refused(store, "a.b.c", "malformed")
    with pytest.raises(ValueError):
        mint_token(key.uid, secret, {"o": {"filter": "("}})


TOKEN_TEXT = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=.", max_size=200)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzzed_tokens_are_401_in_bounded_time(data: st.DataObject) -> None:
    store = KeyStore(None, MASTER)
    key, secret = store.create({"actions": ["search"]})
    good = mint_token(key.uid, secret, {"orders": {"filter": "tenant = 1"}})
    kind = data.draw(st.sampled_from(["truncate", "flip", "segments", "claims", "random", "huge", "nested"]))
    if kind == "truncate":
        token = good[:data.draw(st.integers(0, len(good) - 1))]
    elif kind == "flip":
        position = data.draw(st.integers(0, len(good) - 1))
        token = good[:position] + data.draw(st.sampled_from("AZaz09-_.")) + good[position + 1:]
    elif kind == "segments":
        token = ".".join(data.draw(st.lists(TOKEN_TEXT, min_size=3, max_size=3)))
    elif kind == "claims":
        claims = data.draw(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                                        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                                        max_leaves=12))
        if data.draw(st.booleans()) and isinstance(claims, dict):
            claims["apiKeyUid"] = key.uid
        header = data.draw(st.sampled_from([{"alg": "HS256"}, {"alg": "HS256", "typ": "JWT"}, {"alg": "none"}, {}]))
        signing = f"{_segment(header)}.{_segment(claims)}"
        token = f"{signing}.{data.draw(TOKEN_TEXT.filter(lambda t: '.' not in t))}"
        if data.draw(st.booleans()) and header.get("alg") == "HS256":
            token = jwt.api_jws.encode(json.dumps(claims).encode(), secret, algorithm="HS256",
                                       headers={k: v for k, v in header.items() if k != "alg"})
    elif kind == "random":
        token = data.draw(st.text(max_size=300))
    elif kind == "huge":
        token = good + "A" * data.draw(st.integers(10_000, 2_000_000))
    else:
        depth = data.draw(st.integers(100, 100_000))
        token = f"{good.split('.')[0]}.{_segment(b'[' * depth + b']' * depth)}.{good.split('.')[2]}"
    started = time.perf_counter()
    try:
        verified = verify_token(token, store.signing_key)
    except TokenError as error:
        assert error.status == 401
    else:
        assert verified.key == key
    assert time.perf_counter() - started < 0.5
