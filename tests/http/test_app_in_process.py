"""This module tests the following properties of ``create_app``, in process (httpx's ASGI transport,
with the app's lifespan run around it), for failures a real server cannot be made to produce on
demand:

- a 507 from the engine (the disk refused a write) reaches the client with its message;
- a 500 from the engine (CorruptionError) and any unexpected exception reach the client as
  "internal error, request id <id>" only, and the log has the id and the real cause;
- the search page is served at ``/`` from the configured folder, never shadows an API path (GET /v2
  is still a 405), and an empty folder gives Error objects, not a failure;
- engines handed to ``create_app`` are closed at shutdown.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from roarsearch import Engine
from roarsearch.errors import CorruptionError, StorageError
from roarsearch.server.app import create_app
from roarsearch.server.config import ServerConfig

ADMIN = {"Authorization": "Bearer admin"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def client_for(engine: Engine, static_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a fresh app serving ``engine``; the app's startup and shutdown run around it."""
    config = ServerConfig(admin_keys=("admin",), static_dir=str(static_dir))
    app = create_app(config, {"default": engine})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield client


def failing(error: BaseException) -> Any:
    def fail(*args: Any) -> Any:
        raise error
    return fail


@pytest.mark.anyio
async def test_engine_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    engine = Engine(tmp_path / "data")
    async with client_for(engine, tmp_path / "no-page") as client:
        monkeypatch.setattr(engine, "add_records", failing(StorageError("c: the batch could not be made durable "
                                                                        "(No space left on device); nothing was written")))
        response = await client.post("/v2/collections/c/records", json={"id": 1}, headers=ADMIN)
        assert (response.status_code, response.json()) == (507, {
            "status": 507, "data": "c: the batch could not be made durable (No space left on device); nothing was written"})

        monkeypatch.setattr(engine, "search", failing(CorruptionError("/secret/path/snapshot.rsnap: offset 12: bad crc")))
        with caplog.at_level(logging.ERROR, logger="roarsearch.server"):
            response = await client.post("/v2", json={"collection": "c"}, headers=ADMIN)
        found = re.fullmatch(r"internal error, request id ([0-9a-f]{12})", response.json()["data"])
        assert response.status_code == 500 and found and "secret" not in response.text
        assert any(found[1] in record.getMessage() and "bad crc" in record.getMessage() for record in caplog.records)

        caplog.clear()
        monkeypatch.setattr(engine, "search", failing(KeyError("boom")))
        with caplog.at_level(logging.ERROR, logger="roarsearch.server"):
            response = await client.post("/v2", json={"collection": "c"}, headers=ADMIN)
        found = re.fullmatch(r"internal error, request id ([0-9a-f]{12})", response.json()["data"])
        assert response.status_code == 500 and found and "boom" not in response.text
        assert any(found[1] in record.getMessage() and record.exc_info for record in caplog.records)
    with Engine(tmp_path / "data"):  # the lifespan closed the engine it was handed: the directory is free
        pass


@pytest.mark.anyio
async def test_search_page(tmp_path: Path) -> None:
    (tmp_path / "index.html").write_text("<!doctype html><title>search</title>")
    async with client_for(Engine(), tmp_path) as client:
        page = await client.get("/")
        assert page.status_code == 200 and "<title>search</title>" in page.text
        assert (await client.get("/v2")).json() == {"status": 405, "data": "method GET is not allowed on /v2; allowed: POST"}
        assert (await client.get("/missing.js")).json() == {"status": 404, "data": "no route GET /missing.js"}
        assert (await client.post("/")).json() == {"status": 404, "data": "no route POST /"}
    empty = tmp_path / "empty"
    empty.mkdir()
    async with client_for(Engine(), empty) as client:
        assert (await client.get("/")).json() == {"status": 404, "data": "no route GET /"}
        assert (await client.get("/health")).status_code == 200
    async with client_for(Engine(), tmp_path / "absent") as client:
        assert (await client.get("/")).json() == {"status": 404, "data": "no route GET /"}
