"""Service configuration: where data lives, which applications are served, keys, limits.

Owns: :class:`ServerConfig`, an immutable value built by ``roarsearch serve`` (``cli/main.py``) from
its options and environment, and read by :func:`roarsearch.server.app.create_app`.

Invariants (checked in ``__post_init__``, so a bad configuration fails before any engine opens):
at least one application, every application id a valid directory name, at least one admin key
(the service never runs open: the CLI generates one when none is configured), a positive body limit.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

DEFAULT_APP = "default"
DEFAULT_DATA = "./roarsearch-data"
DEFAULT_MAX_BODY_BYTES = 100 * 1024 * 1024
#: Application ids become directory names and Host labels: the collection-id alphabet fits both.
APP_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ServerConfig:
    data: str = DEFAULT_DATA
    #: The served applications; the first is the default (requests whose Host names no served app).
    apps: tuple[str, ...] = (DEFAULT_APP,)
    admin_keys: tuple[str, ...] = ()
    search_keys: tuple[str, ...] = ()
    #: Origins allowed to call the API from a browser; ``"*"`` allows any (search keys are public).
    cors_origins: tuple[str, ...] = ("*",)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    #: Directory of the search page served at ``/``; None means the one bundled in the package.
    static_dir: str | None = field(default=None)
    #: A directory whose files are served at ``/`` ahead of the page's own (``serve --page-files``):
    #: an application's ``embed.js`` and whatever it loads, from the page's origin.
    page_files: str | None = None
    #: The secret stored keys are derived from (``roarsearch.keys``); None: the first admin key.
    master_key: str | None = None

    def __post_init__(self) -> None:
        if not self.apps:
            raise ValueError("at least one application is required")
        for app in self.apps:
            if not APP_ID.fullmatch(app):
                raise ValueError(f"application id {app!r}: must match [A-Za-z0-9_-]{{1,64}}")
        if len(set(self.apps)) != len(self.apps):
            raise ValueError(f"application ids must be distinct, got {', '.join(self.apps)}")
        if not self.admin_keys:
            raise ValueError("at least one admin key is required: the service never runs open")
        if any(not key for key in (*self.admin_keys, *self.search_keys)) or self.master_key == "":
            raise ValueError("keys must not be empty")
        if self.max_body_bytes <= 0:
            raise ValueError(f"max body bytes must be positive, got {self.max_body_bytes}")

    @property
    def default_app(self) -> str:
        return self.apps[0]

    def app_path(self, app: str) -> str:
        """The data directory of one application: ``DATA/ID``."""
        return os.path.join(self.data, app)
