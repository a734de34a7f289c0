"""Shared by the server's in-process tests: the anyio backend and a client of an app, its
startup and shutdown run around it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from starlette.applications import Starlette


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def app_client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    """A client of ``app`` (in process); the app's lifespan runs around it."""
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver") as client:
            yield client
