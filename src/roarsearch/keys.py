"""API keys with actions and collection patterns, and tenant tokens (contract §12).

Owns: what a key is (:class:`ApiKey`: actions, collection patterns, expiry), how its secret is
derived (:func:`derive_secret`), the durable key store of a data root (:class:`KeyStore`), and
tenant tokens: minting (:func:`mint_token`), verifying (:func:`verify_token`) and the search rules
they carry (:class:`SearchRules`). The HTTP service (``server/auth.py``, ``server/app.py``) and the
``roarsearch keys`` command use this module; an application imports it to mint tokens for its
users without calling the service (docs/security.md).

Invariants:
- a key's secret is never stored: it is ``HMAC-SHA256(master secret, uid)`` in hex, so the service
  can recompute it to check a bearer key or a token's signature. The key store file holds each
  key's uid, actions, patterns and dates, and a short check value of the master secret (so a
  changed master secret is noticed, not guessed at); never a secret;
- the key store file (``keys.json`` in the data root) is replaced whole: written to a temporary
  file, fsynced, renamed over the old one, and the directory fsynced; read-modify-write runs under
  an exclusive lock on ``keys.lock``, so processes sharing the root (the workers of one server, the
  ``roarsearch keys`` command) never lose each other's changes;
- every process re-reads the file when it changed (one ``stat`` per check: inode, size and
  mtime), so a key revoked by one process is refused by all of them from their next request;
- a tenant token is accepted only when its header says HS256, its signature is that of the
  secret of the stored, unexpired key its ``apiKeyUid`` names (a key holding ``search``), its
  ``exp`` (when given) is in the future, and its ``searchRules`` are well formed (each filter
  parses); anything else is :class:`TokenError`, which the service answers with 401.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from roarsearch.errors import BadRequestError, CorruptionError, NotFoundError, SearchError, UnauthorizedError
from roarsearch.query.filter_parser import parse_filter

try:
    import jwt
except ImportError:  # pragma: no cover - the server extra installs it
    jwt = None  # type: ignore[assignment]

#: Every action a key may hold; ``*`` holds them all.
ACTIONS = ("search", "records.read", "records.write", "settings.read", "settings.write",
           "collections.read", "collections.write", "keys")
ALL = "*"
#: The actions a tenant token can use, of those its key holds: it reads records, nothing else.
TOKEN_ACTIONS = ("search", "records.read")

KEYS_FILE = "keys.json"
LOCK_FILE = "keys.lock"
#: The generated master secret, when the service runs without a configured admin key.
SECRET_FILE = "keys.secret"
STORE_FORMAT = 1
#: Characters of a secret shown by listings (the rest is returned once, at creation).
PREFIX_CHARS = 8
#: Longest description or name, in characters; most patterns per key.
MAX_TEXT = 1024
MAX_PATTERNS = 1000
#: Longest tenant token accepted, in bytes: a longer one is refused before it is decoded.
MAX_TOKEN_BYTES = 16 * 1024
TOKEN_ALGORITHM = "HS256"
CHECK_MESSAGE = b"roarsearch key store"


def _require_jwt() -> Any:
    if jwt is None:
        raise ImportError("tenant tokens need PyJWT: pip install 'roarsearch[server]' (or pip install PyJWT)")
    return jwt


def derive_secret(master: str, uid: str) -> str:
    """The secret of key ``uid``: HMAC-SHA256 of the uid under the master secret, in hex (64 chars).

    >>> derive_secret("master", "b6f2c6a6-0000-4000-8000-000000000000")[:12]
    '429ae3ce992a'
    """
    return hmac.new(master.encode("utf-8"), uid.encode("utf-8"), hashlib.sha256).hexdigest()


def master_check(master: str) -> str:
    """A short value that tells whether a key store was made under ``master`` (it reveals nothing of it)."""
    return hmac.new(master.encode("utf-8"), CHECK_MESSAGE, hashlib.sha256).hexdigest()[:16]


def pattern_matches(pattern: str, collection: str) -> bool:
    """Whether ``pattern`` (a collection id, ``*`` or a prefix ending in ``*``) names ``collection``."""
    if pattern.endswith(ALL):
        return collection.startswith(pattern[:-1])
    return pattern == collection


def patterns_cover(patterns: tuple[str, ...], pattern: str) -> bool:
    """Whether every collection ``pattern`` names is named by one of ``patterns``."""
    for own in patterns:
        if own.endswith(ALL):
            if pattern.startswith(own[:-1]):
                return True
        elif own == pattern:
            return True
    return False


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def now_utc() -> datetime:
    return datetime.now(UTC)


def format_time(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a ``Z``, to the second (``2030-01-01T00:00:00Z``)."""
    if moment is None:
        return None
    return _utc(moment).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def parse_time(value: Any, where: str) -> datetime | None:
    """An ISO 8601 time (a time without an offset is UTC; to the second) or None; a 400 naming
    ``where`` otherwise."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequestError(f"{where}: must be an ISO 8601 time or null, got {type(value).__name__}", field=where)
    try:
        return _utc(datetime.fromisoformat(value)).replace(microsecond=0)
    except ValueError:
        raise BadRequestError(f"{where}: not an ISO 8601 time: {value[:64]!r} (e.g. \"2030-01-31T00:00:00Z\")",
                              field=where) from None


@dataclass(frozen=True)
class ApiKey:
    """A stored key: what it may do, where, and until when. Its secret is derived, never kept."""

    uid: str
    name: str | None
    description: str | None
    actions: tuple[str, ...]
    collections: tuple[str, ...]
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    def allows(self, action: str) -> bool:
        return ALL in self.actions or action in self.actions

    def sees(self, collection: str) -> bool:
        return any(pattern_matches(pattern, collection) for pattern in self.collections)

    def expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or now_utc())

    def held_actions(self) -> tuple[str, ...]:
        """Its actions with ``*`` spelled out."""
        return ACTIONS if ALL in self.actions else self.actions

    def within(self, other: ApiKey) -> bool:
        """Whether this key may do nothing ``other`` may not: its actions, collections and lifetime."""
        if not all(other.allows(action) for action in self.held_actions()):
            return False
        if not all(patterns_cover(other.collections, pattern) for pattern in self.collections):
            return False
        if other.expires_at is None:
            return True
        return self.expires_at is not None and self.expires_at <= other.expires_at

    def to_dict(self, secret: str | None = None, *, whole: bool = False) -> dict[str, Any]:
        """The wire form: with ``secret``, its first characters as ``keyPrefix`` — and, when
        ``whole`` (the answer to a creation only), the secret itself as ``key``."""
        body: dict[str, Any] = {"uid": self.uid, "name": self.name, "description": self.description}
        if secret is not None:
            if whole:
                body["key"] = secret
            body["keyPrefix"] = secret[:PREFIX_CHARS]
        body.update({"actions": list(self.actions), "collections": list(self.collections),
                     "expiresAt": format_time(self.expires_at), "createdAt": format_time(self.created_at),
                     "updatedAt": format_time(self.updated_at)})
        return body

    def to_stored(self) -> dict[str, Any]:
        return self.to_dict()

    @classmethod
    def from_stored(cls, entry: Mapping[str, Any]) -> ApiKey:
        created = parse_time(entry["createdAt"], "createdAt")
        updated = parse_time(entry["updatedAt"], "updatedAt")
        assert created is not None and updated is not None
        return cls(str(entry["uid"]), entry.get("name"), entry.get("description"), tuple(entry["actions"]),
                   tuple(entry["collections"]), parse_time(entry.get("expiresAt"), "expiresAt"), created, updated)


# ---------------------------------------------------------------------- validating key requests

KEY_FIELDS = ("uid", "name", "description", "actions", "collections", "expiresAt")
UPDATABLE_FIELDS = ("name", "description")
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _text(body: Mapping[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequestError(f"{field}: must be a string or null, got {type(value).__name__}", field=field)
    if len(value) > MAX_TEXT:
        raise BadRequestError(f"{field}: at most {MAX_TEXT} characters, got {len(value)}", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequestError(f"{field}: not valid Unicode", field=field) from None
    return value


def _actions(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise BadRequestError(f"actions: must be a non-empty array of actions from {', '.join(ACTIONS)} or *",
                              field="actions")
    for position, action in enumerate(value):
        if action != ALL and action not in ACTIONS:
            shown = action if isinstance(action, str) else type(action).__name__
            raise BadRequestError(f"actions[{position}]: unknown action {str(shown)[:64]!r}; expected one of "
                                  f"{', '.join(ACTIONS)} or *", field=f"actions[{position}]")
    return tuple(dict.fromkeys(value))


def _patterns(value: Any) -> tuple[str, ...]:
    from roarsearch.engine.request import COLLECTION_ID

    if not isinstance(value, list) or not value:
        raise BadRequestError("collections: must be a non-empty array of collection ids or patterns ending in *",
                              field="collections")
    if len(value) > MAX_PATTERNS:
        raise BadRequestError(f"collections: at most {MAX_PATTERNS} entries, got {len(value)}", field="collections")
    for position, pattern in enumerate(value):
        where = f"collections[{position}]"
        if not isinstance(pattern, str):
            raise BadRequestError(f"{where}: must be a string, got {type(pattern).__name__}", field=where)
        stem = pattern[:-1] if pattern.endswith(ALL) else pattern
        if not (pattern == ALL or COLLECTION_ID.fullmatch(stem)):
            raise BadRequestError(f"{where}: must be a collection id, *, or an id prefix followed by *, got "
                                  f"{pattern[:80]!r}", field=where)
    return tuple(dict.fromkeys(value))


def _unknown(body: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    for name in body:
        if name not in allowed:
            raise BadRequestError(f"{str(name)[:64]}: unknown field; a key has {', '.join(allowed)}", field=str(name))


def new_key(body: Any, *, now: datetime | None = None, uid: str | None = None) -> ApiKey:
    """The key a creation body describes (contract §12), or a 400 naming the first bad field."""
    if not isinstance(body, dict):
        raise BadRequestError("request body: must be a JSON object with actions (and collections, expiresAt, "
                              "description, name)", field="body")
    _unknown(body, KEY_FIELDS)
    moment = (now or now_utc()).replace(microsecond=0)  # as stored: a key reads back equal
    if "actions" not in body:
        raise BadRequestError("actions: required, e.g. [\"search\"]", field="actions")
    expires = parse_time(body.get("expiresAt"), "expiresAt")
    if expires is not None and expires <= moment:
        raise BadRequestError(f"expiresAt: must be in the future, got {format_time(expires)}", field="expiresAt")
    chosen = body.get("uid")
    if chosen is not None:
        if not isinstance(chosen, str) or not UUID_TEXT.fullmatch(chosen):
            raise BadRequestError("uid: must be a UUID in its canonical form (8-4-4-4-12 lowercase hex digits), "
                                  "or left out", field="uid")
        uid = chosen
    return ApiKey(uid or str(uuid.uuid4()), _text(body, "name"), _text(body, "description"), _actions(body["actions"]),
                  _patterns(body.get("collections", [ALL])), expires, moment, moment)


def updated_key(key: ApiKey, body: Any, *, now: datetime | None = None) -> ApiKey:
    """``key`` renamed by an update body: only ``name`` and ``description`` change (a 400 otherwise)."""
    if not isinstance(body, dict):
        raise BadRequestError("request body: must be a JSON object with name and/or description", field="body")
    for name in body:
        if name in KEY_FIELDS and name not in UPDATABLE_FIELDS:
            raise BadRequestError(f"{name}: cannot be changed; create a new key and revoke this one", field=name)
    _unknown(body, UPDATABLE_FIELDS)
    changes: dict[str, Any] = {field: _text(body, field) for field in UPDATABLE_FIELDS if field in body}
    return replace(key, **changes, updated_at=(now or now_utc()).replace(microsecond=0))


# ---------------------------------------------------------------------- the master secret

def master_secret(root: str, admin_key: str | None) -> str:
    """The master secret keys are derived from: the configured admin key, or else one generated
    once and kept in ``ROOT/keys.secret`` (mode 0600), so that stored keys survive restarts."""
    if admin_key:
        return admin_key
    path = os.path.join(root, SECRET_FILE)
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read().strip()
    except FileNotFoundError:
        pass
    os.makedirs(root, exist_ok=True)
    secret = secrets.token_urlsafe(32)
    temporary = f"{path}.{os.getpid()}.tmp"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(secret)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(temporary, path)  # the first writer wins when two processes start at once
    except FileExistsError:
        pass
    finally:
        os.remove(temporary)
    _fsync_dir(root)
    with open(path, encoding="ascii") as handle:
        return handle.read().strip()


def _fsync_dir(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------- the key store

class KeyStore:
    """The keys of one data root, in ``ROOT/keys.json`` (or in memory when ``root`` is None).

    Every method reads the file first if it changed since this process last read it, so several
    processes can share a root. Secrets are checked against an index of their SHA-256 digests,
    rebuilt when the file is read: a lookup costs one hash, whatever the number of keys, and never
    compares a secret byte by byte.
    """

    def __init__(self, root: str | None, master: str) -> None:
        if not master:
            raise ValueError("the master secret must not be empty")
        self.root = root
        self.path = None if root is None else os.path.join(root, KEYS_FILE)
        self._master = master
        self._check = master_check(master)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None
        self._keys: dict[str, ApiKey] = {}
        #: Uids of revoked keys: never given again, or the same secret would come back to life.
        self._revoked: set[str] = set()
        self._by_digest: dict[bytes, str] = {}
        self._stored_check: str | None = None
        self.refresh()

    # -- reading

    def _stat(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return self._seen
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return None
        return (status.st_ino, status.st_size, status.st_mtime_ns)

    def refresh(self) -> None:
        """Read the file again if it changed (one ``stat`` when it did not)."""
        if self.path is None:
            return
        seen = self._stat()
        if seen == self._seen and (seen is not None or not self._keys):
            return
        with self._lock:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        seen = self._stat()
        revoked: list[str] = []
        if seen is None:
            entries: list[dict[str, Any]] = []
            stored_check = None
        else:
            try:
                with open(self.path, encoding="utf-8") as handle:
                    content = json.load(handle)
                if content.get("format") != STORE_FORMAT:
                    raise CorruptionError(f"{self.path}: key store of format {content.get('format')!r}; "
                                          f"this roarsearch reads format {STORE_FORMAT}")
                entries = content["keys"]
                stored_check = content.get("master")
                revoked = content.get("revoked", [])
                keys = {entry["uid"]: ApiKey.from_stored(entry) for entry in entries}
            except (ValueError, KeyError, TypeError, AttributeError, SearchError) as error:
                if isinstance(error, CorruptionError):
                    raise
                raise CorruptionError(f"{self.path}: not a roarsearch key store ({error})") from None
        if seen is None:
            keys = {}
        self._index(keys)
        self._revoked = set(revoked)
        self._stored_check = stored_check
        self._seen = seen

    def _index(self, keys: dict[str, ApiKey]) -> None:
        self._by_digest = {hashlib.sha256(derive_secret(self._master, uid).encode()).digest(): uid for uid in keys}
        self._keys = keys

    @property
    def master_changed(self) -> bool:
        """Whether the stored keys were made under another master secret (their secrets now differ)."""
        self.refresh()
        return bool(self._keys) and self._stored_check not in (None, self._check)

    def keys(self) -> list[ApiKey]:
        """Every key, oldest first."""
        self.refresh()
        return sorted(self._keys.values(), key=lambda key: (key.created_at, key.uid))

    def get(self, uid: str) -> ApiKey:
        """Key ``uid``; a 404 when there is none."""
        self.refresh()
        key = self._keys.get(uid)
        if key is None:
            raise NotFoundError(f"key '{str(uid)[:64]}' not found", field="uid")
        return key

    def secret(self, key: ApiKey) -> str:
        """The secret of ``key`` (derived: the same in every process sharing the master secret)."""
        return derive_secret(self._master, key.uid)

    def authenticate(self, candidate: str) -> ApiKey | None:
        """The stored key whose secret is ``candidate``, or None (expiry is the caller's to check)."""
        self.refresh()
        uid = self._by_digest.get(hashlib.sha256(candidate.encode("utf-8", "surrogatepass")).digest())
        if uid is None:
            return None
        key = self._keys.get(uid)
        if key is None or not hmac.compare_digest(self.secret(key).encode(), candidate.encode("utf-8", "surrogatepass")):
            return None
        return key

    def signing_key(self, uid: str) -> tuple[ApiKey, str] | None:
        """The key ``uid`` and its secret, for checking a token's signature; None when there is none."""
        self.refresh()
        key = self._keys.get(uid)
        return None if key is None else (key, self.secret(key))

    # -- writing

    @contextlib.contextmanager
    def _changing(self) -> Iterator[dict[str, ApiKey]]:
        """The keys, read afresh under the store's lock; what the block leaves in them is written."""
        with self._lock:
            if self.path is None:
                keys = dict(self._keys)
                yield keys
                self._index(keys)
                self._stored_check = self._check
                return
            assert self.root is not None
            os.makedirs(self.root, exist_ok=True)
            descriptor = os.open(os.path.join(self.root, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                self._load()
                keys = dict(self._keys)
                # The check of the master secret the keys were made under stays until the service
                # adopts another (adopt_master): a command run with a wrong secret must not hide it.
                check = self._stored_check if self._keys and self._stored_check else self._check
                yield keys
                self._write(keys, self._check if self._stored_check is None else check)
                self._load()
            finally:
                os.close(descriptor)  # releases the lock

    def _write(self, keys: dict[str, ApiKey], check: str) -> None:
        assert self.path is not None and self.root is not None
        content = {"format": STORE_FORMAT, "master": check,
                   "keys": [key.to_stored() for key in sorted(keys.values(), key=lambda key: (key.created_at, key.uid))],
                   "revoked": sorted(self._revoked)}
        data = json.dumps(content, indent=1, ensure_ascii=False).encode("utf-8")
        temporary = f"{self.path}.{os.getpid()}.{threading.get_ident()}.tmp"
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(descriptor, view):]
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, self.path)
        _fsync_dir(self.root)

    def create(self, body: Any, *, within: ApiKey | None = None) -> tuple[ApiKey, str]:
        """Create the key ``body`` describes; returns it and its secret (shown once).

        ``within``: the key asking, when it is a stored key holding ``keys``: it may only create
        keys that can do nothing it cannot (a 403 otherwise).
        """
        key = new_key(body)
        if within is not None and not key.within(within):
            raise _forbidden_scope()
        with self._changing() as keys:
            if key.uid in keys or key.uid in self._revoked:
                raise BadRequestError(f"uid: {key.uid} is taken (by a key, or a revoked one)", field="uid")
            keys[key.uid] = key
        return key, self.secret(key)

    def update(self, uid: str, body: Any, *, within: ApiKey | None = None) -> ApiKey:
        """Rename key ``uid`` (``name``, ``description``); a 404 when there is none."""
        with self._changing() as keys:
            key = keys.get(uid)
            if key is None or (within is not None and not key.within(within)):
                raise NotFoundError(f"key '{str(uid)[:64]}' not found", field="uid")
            keys[uid] = key = updated_key(key, body)
        return key

    def revoke(self, uid: str, *, within: ApiKey | None = None) -> None:
        """Delete key ``uid``: its secret and every token it signed are refused from now on."""
        with self._changing() as keys:
            key = keys.get(uid)
            if key is None or (within is not None and not key.within(within)):
                raise NotFoundError(f"key '{str(uid)[:64]}' not found", field="uid")
            del keys[uid]
            self._revoked.add(uid)

    def adopt_master(self) -> int:
        """Record that the keys now derive from this store's master secret; the number of keys whose
        secrets changed with it (0 when the master secret is the one they were made with)."""
        if not self.master_changed:
            return 0
        with self._changing() as keys:
            changed = len(keys)
            self._stored_check = None  # written as this store's own
        return changed


def _forbidden_scope() -> SearchError:
    from roarsearch.errors import ForbiddenError

    return ForbiddenError("this key may only create keys within its own actions, collections and expiry",
                          field="actions")


# ---------------------------------------------------------------------- tenant tokens

class TokenError(UnauthorizedError):
    """401: a tenant token that is malformed, badly signed, expired, or names no usable key."""


@dataclass(frozen=True)
class SearchRules:
    """A token's ``searchRules``: which collections it may search, each with an optional filter.

    ``rules`` maps a collection id or pattern (``*``, ``logs-*``) to its filter (None: no filter).
    A collection is governed by its own name when listed, else by the longest pattern naming it.
    """

    rules: tuple[tuple[str, str | None], ...]

    def rule_for(self, collection: str) -> tuple[bool, str | None]:
        """(whether the token may search ``collection``, the filter ANDed to its requests)."""
        best: tuple[str, str | None] | None = None
        for pattern, rule in self.rules:
            if pattern == collection:
                return True, rule
            if pattern_matches(pattern, collection) and (best is None or len(pattern) > len(best[0])):
                best = (pattern, rule)
        return (False, None) if best is None else (True, best[1])


def parse_search_rules(value: Any) -> SearchRules:
    """``searchRules`` as Meilisearch spells them: a list of collections/patterns, or an object
    mapping each to null, ``{}`` or ``{"filter": "..."}``. ValueError names what is wrong."""
    rules: list[tuple[str, str | None]] = []
    if isinstance(value, list):
        items: list[tuple[Any, Any]] = [(name, None) for name in value]
    elif isinstance(value, dict):
        items = list(value.items())
    else:
        raise ValueError("searchRules: must be an object or an array of collection names")
    if len(items) > MAX_PATTERNS:
        raise ValueError(f"searchRules: at most {MAX_PATTERNS} collections")
    for name, rule in items:
        if not isinstance(name, str) or not name:
            raise ValueError("searchRules: collection names must be non-empty strings")
        where = f"searchRules.{name[:64]}"
        text: str | None
        if rule is None:
            text = None
        elif isinstance(rule, dict):
            unknown = [field for field in rule if field != "filter"]
            if unknown:
                raise ValueError(f"{where}: unknown field {str(unknown[0])[:64]!r} (a rule has filter)")
            text = rule.get("filter")
            if text is not None and not isinstance(text, str):
                raise ValueError(f"{where}.filter: must be a string")
        else:
            raise ValueError(f"{where}: must be null or an object with filter")
        if text is not None:
            try:
                tree = parse_filter(text)
            except SearchError as error:
                raise ValueError(f"{where}.filter: {error.data}") from None
            if tree is None:
                text = None
        rules.append((name, text))
    return SearchRules(tuple(rules))


def _rules_to_json(rules: Any) -> Any:
    if isinstance(rules, SearchRules):
        return {name: ({} if rule is None else {"filter": rule}) for name, rule in rules.rules}
    return rules


def mint_token(key_uid: str, secret: str, search_rules: Any, *, expires_at: datetime | int | None = None) -> str:
    """A tenant token: an HS256 JWT signed with a key's ``secret`` (``KeyStore.create`` returns it,
    ``derive_secret`` recomputes it), carrying ``apiKeyUid``, ``searchRules`` and ``exp``.

    ``search_rules``: as :func:`parse_search_rules` reads them (``{"orders": {"filter": "tenant = 42"}}``),
    checked here so that a token the service would refuse is never made. ``expires_at``: a
    datetime or a Unix time; None for a token valid as long as its key.
    """
    module = _require_jwt()
    parse_search_rules(_rules_to_json(search_rules))
    claims: dict[str, Any] = {"apiKeyUid": key_uid, "searchRules": _rules_to_json(search_rules)}
    if isinstance(expires_at, datetime):
        claims["exp"] = int(_utc(expires_at).timestamp())
    elif expires_at is not None:
        claims["exp"] = int(expires_at)
    token: str = module.encode(claims, secret, algorithm=TOKEN_ALGORITHM)
    return token


@dataclass(frozen=True)
class TenantToken:
    """A verified token: the key that signed it, its rules and its expiry (Unix time or None)."""

    key: ApiKey
    rules: SearchRules
    expires: int | None


def looks_like_token(credential: str) -> bool:
    """Whether a bearer credential has a JWT's shape (three dot-separated parts); keys have no dots."""
    return credential.count(".") == 2


def _b64_json(segment: str) -> Any:
    padded = segment + "=" * (-len(segment) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def verify_token(token: str, lookup: Callable[[str], tuple[ApiKey, str] | None], *, now: datetime | None = None) -> TenantToken:
    """Check a tenant token against the key it names; :class:`TokenError` (401) for any fault.

    ``lookup(uid)`` returns the stored key and its secret (``KeyStore.signing_key``), or None.
    """
    module = _require_jwt()
    moment = now or now_utc()
    if len(token) > MAX_TOKEN_BYTES:
        raise TokenError(f"invalid tenant token: longer than {MAX_TOKEN_BYTES} bytes")
    try:
        head, body, _signature = token.split(".")
        header = _b64_json(head)
        if not isinstance(header, dict) or header.get("alg") != TOKEN_ALGORITHM:
            shown = header.get("alg") if isinstance(header, dict) else None
            raise TokenError(f"invalid tenant token: the algorithm must be {TOKEN_ALGORITHM}, got {str(shown)[:16]!r}")
        if header.get("typ", "JWT") != "JWT":
            raise TokenError("invalid tenant token: typ must be JWT")
        unverified = _b64_json(body)
        if not isinstance(unverified, dict) or not isinstance(unverified.get("apiKeyUid"), str):
            raise TokenError("invalid tenant token: apiKeyUid must be a string")
        found = lookup(unverified["apiKeyUid"])
        if found is None:
            raise TokenError("invalid tenant token: its key does not exist or was revoked")
        key, secret = found
        if key.expired(moment):
            raise TokenError("invalid tenant token: its key has expired")
        if not key.allows("search"):
            raise TokenError("invalid tenant token: its key does not hold the search action")
        claims = module.decode(token, secret, algorithms=[TOKEN_ALGORITHM],
                               options={"require": ["apiKeyUid", "searchRules"], "verify_exp": False,
                                        "verify_nbf": False, "verify_iat": False, "verify_aud": False,
                                        "verify_iss": False})
        expires = claims.get("exp")
        if expires is not None:
            if isinstance(expires, bool) or not isinstance(expires, (int, float)):
                raise TokenError("invalid tenant token: exp must be a number (Unix time)")
            if expires <= moment.timestamp():
                raise TokenError("invalid tenant token: expired (exp is past)")
        if claims["apiKeyUid"] != key.uid:
            raise TokenError("invalid tenant token: apiKeyUid does not match")
        rules = parse_search_rules(claims["searchRules"])
    except TokenError:
        raise
    except module.InvalidSignatureError:
        raise TokenError("invalid tenant token: bad signature") from None
    except module.PyJWTError as error:
        raise TokenError(f"invalid tenant token: {str(error)[:200]}") from None
    except ValueError as error:  # bad JSON, base64, claims or rules (UnicodeError and binascii.Error are ValueErrors)
        message = str(error) if str(error).startswith("searchRules") else "malformed"
        raise TokenError(f"invalid tenant token: {message[:200]}") from None
    except (TypeError, KeyError, AttributeError, RecursionError, OverflowError, binascii.Error):
        raise TokenError("invalid tenant token: malformed") from None
    return TenantToken(key, rules, None if expires is None else int(expires))


# ---------------------------------------------------------------------- applying a token's rules

#: Record ids per visibility check of :meth:`TenantView.get_records` (keeps its filter well under 16 KiB).
VISIBLE_CHECK_IDS = 20


def filter_literal(value: int | str) -> str:
    """A record id as a filter literal: a number, or a double-quoted string with ``\\`` escapes."""
    if isinstance(value, int):
        return str(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def restricted_filter(rule: str | None, user: Any) -> Any:
    """The request's ``filter`` with the rule's ANDed to it. The request's own is parsed alone first,
    so its errors keep their positions and no text of it can reach outside its parentheses."""
    if rule is None:
        return user
    if parse_filter(user) is None:  # a 400 for a non-string or malformed filter, as the engine's
        return rule
    return f"({rule}) AND ({user})"


class TenantView:
    """An engine seen through a tenant token's :class:`SearchRules` (contract §12).

    The rule's filter of each collection is ANDed to the request's own filter, so everything a
    request computes — results, ``totalHits``, facets and stats, groups, highlights, word
    dropping, facet values — runs over the visible records only; records read by id or by page
    are the visible ones. A collection the rules do not name is a 403 that names it (and says
    nothing of whether it exists). Responses echo the request as sent and carry no ``warnings``:
    those describe the whole collection (the fields other tenants' records hold).

    ``engine`` is anything with the :class:`~roarsearch.Engine` API (a ``ShardedEngine`` too).
    ``check(collection)``, when given, runs for each collection the rules name (the service checks
    the signing key's own collection patterns there).
    """

    def __init__(self, engine: Any, rules: SearchRules, check: Callable[[str], None] | None = None) -> None:
        self.engine = engine
        self.rules = rules
        self.check = check

    def rule(self, collection: Any) -> str | None:
        """The filter of ``collection`` (None: none); a 403 when the rules do not name it."""
        from roarsearch.errors import ForbiddenError

        if not isinstance(collection, str):
            from roarsearch.engine.request import check_collection_id

            check_collection_id(collection)  # its 400
        allowed, rule = self.rules.rule_for(collection)
        if not allowed:
            raise ForbiddenError(f"this tenant token may not search collection '{str(collection)[:64]}'",
                                 field="collection")
        if self.check is not None:
            self.check(collection)
        return rule

    def restrict(self, body: Any, collection: Any = None) -> Any:
        """``body`` with the rule of its collection (or ``collection``) ANDed to its filter."""
        if not isinstance(body, dict):
            return body  # the engine's 400
        rule = self.rule(body.get("collection") if collection is None else collection)
        if rule is None:
            return body
        return {**body, "filter": restricted_filter(rule, body.get("filter", ""))}

    def search(self, request: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.engine.search(self.restrict(request))
        result["query"] = request
        result.pop("warnings", None)
        return result

    def multi_search(self, searches: Any) -> list[dict[str, Any]]:
        from roarsearch.engine.engine import MULTI_SEARCH_THREADS, run_multi_search

        return run_multi_search(self.search, searches, MULTI_SEARCH_THREADS)

    def search_facet_values(self, collection: str, facet: str, request: Any) -> dict[str, Any]:
        result: dict[str, Any] = self.engine.search_facet_values(collection, facet, self.restrict(request, collection))
        return result

    def get_records(self, collection: str, ids: list[int | str]) -> list[dict[str, Any]]:
        """The visible records of ``ids``, in the order asked (an invisible one is as an absent one)."""
        rule = self.rule(collection)
        found: list[dict[str, Any]] = self.engine.get_records(collection, ids)
        if rule is None or not found:
            return found
        visible: set[tuple[bool, int | str]] = set()
        for start in range(0, len(found), VISIBLE_CHECK_IDS):
            chunk = [record["id"] for record in found[start:start + VISIBLE_CHECK_IDS]]
            answer = self.engine.search({
                "collection": collection, "count": len(chunk), "fields": ["id"],
                "filter": f"({rule}) AND id IN [{', '.join(filter_literal(value) for value in chunk)}]"})
            visible.update((isinstance(hit["id"], str), hit["id"]) for hit in answer["results"])
        return [record for record in found if (isinstance(record["id"], str), record["id"]) in visible]

    def page_records(self, collection: str, count: int = 1000, after: str | None = None) -> dict[str, Any]:
        """A page of the visible records in id order (the same cursors as ``Engine.page_records``)."""
        rule = self.rule(collection)
        page: dict[str, Any] = self.engine.page_records(collection, count, after, rule)
        return page
