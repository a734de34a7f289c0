"""Service configuration: where data lives, which applications are served, keys, limits."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_APP = "default"
DEFAULT_MAX_BODY_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class ServerConfig:
    data: str = "./roarsearch-data"
    apps: tuple[str, ...] = (DEFAULT_APP,)
    admin_keys: tuple[str, ...] = ()
    search_keys: tuple[str, ...] = ()
    cors_origins: tuple[str, ...] = ("*",)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    static_dir: str | None = field(default=None)

    def app_path(self, app: str) -> str:
        return os.path.join(self.data, app)
