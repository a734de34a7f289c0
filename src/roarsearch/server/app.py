"""The HTTP service (contract §5): a thin ASGI shell around one :class:`Engine` per application.

Owns: routes, authentication, the choice of application from the ``Host`` header, CORS, and
turning every failure into ``{"status", "data"}`` with the same HTTP status. Validation lives in
the engine, so the service answers exactly what the library raises. Engine calls run in worker
threads (``run_in_threadpool``): searches do not queue behind one another on the event loop.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
import anyio
import anyio.to_thread
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from roarsearch import Engine
from roarsearch.errors import (
    BadRequestError,
    InternalError,
    MethodNotAllowedError,
    NotFoundError,
    SearchError,
    error_for_status,
)
from roarsearch.server.auth import KeyRing
from roarsearch.server.config import ServerConfig
from roarsearch.server.openapi import openapi_document
from roarsearch.server.wire import JSONResponse, error_response, read_json

log = logging.getLogger("roarsearch.server")
STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")


#: Engine calls run in at most this many worker threads. Searches hold the GIL for most of their
#: work, so more threads only add switching: a few keep both cores busy while numpy and pyroaring
#: release the GIL, and requests wait in order (a short, fair queue: a low tail latency).
ENGINE_THREADS = 4


async def run_in_threadpool(function: Any, *args: Any) -> Any:
    return await anyio.to_thread.run_sync(lambda: function(*args), limiter=_limiter())


_limiters: dict[int, anyio.CapacityLimiter] = {}


def _limiter() -> anyio.CapacityLimiter:
    # One limiter per event loop thread (a limiter belongs to the loop that created it).
    import threading

    key = threading.get_ident()
    if key not in _limiters:
        _limiters[key] = anyio.CapacityLimiter(ENGINE_THREADS)
    return _limiters[key]


class Service:
    """The engines of the served applications and the request handlers."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.keys = KeyRing(config.admin_keys, config.search_keys)
        self.engines: dict[str, Engine] = {}

    def open(self) -> None:
        for app in self.config.apps:
            self.engines[app] = Engine(self.config.app_path(app))

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
        self.engines.clear()

    def engine_for(self, request: Request) -> Engine:
        """The application named by the first label of Host (minus a trailing "-fast"), else the default."""
        host = request.headers.get("host", "").split(":")[0]
        label = host.split(".")[0] if host else ""
        if label.endswith("-fast"):
            label = label[: -len("-fast")]
        app = label if label in self.engines else self.config.apps[0]
        return self.engines[app]

    # ------------------------------------------------------------------ routes

    async def search(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), admin=False)
        body = await read_json(request, self.config.max_body_bytes)
        engine = self.engine_for(request)
        return JSONResponse(await run_in_threadpool(engine.search, body))

    async def add_records(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), admin=True)
        body = await read_json(request, self.config.max_body_bytes)
        engine = self.engine_for(request)
        result = await run_in_threadpool(engine.add_records, request.path_params["collection_id"], body)
        return JSONResponse(result, status_code=201)

    async def delete_records(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), admin=True)
        body = await read_json(request, self.config.max_body_bytes, required=False)
        clear_flags = [request.query_params.get(name) for name in ("clear", "isClear")]
        for name, flag in zip(("clear", "isClear"), clear_flags):
            if flag is not None and flag.lower() not in ("true", "false", "1", "0"):
                raise BadRequestError(f"{name}: must be true or false, got {flag!r}", field=name)
        clear = any(flag is not None and flag.lower() in ("true", "1") for flag in clear_flags)
        ids: list[Any] | None = None
        filter_text: str | None = None
        if isinstance(body, list):
            ids = body
        elif isinstance(body, dict):
            unknown = [key for key in body if key not in ("filter", "ids")]
            if unknown:
                raise BadRequestError(f"{unknown[0]}: unknown field; send a JSON array of ids, "
                                      "{\"filter\": \"...\"}, or ?clear=true", field=str(unknown[0]))
            filter_text = body.get("filter")
            ids = body.get("ids")
        elif body is not None:
            raise BadRequestError("request body: must be a JSON array of ids or {\"filter\": \"...\"}", field="body")
        engine = self.engine_for(request)
        result = await run_in_threadpool(
            engine.delete_records, request.path_params["collection_id"], ids, filter_text, clear
        )
        return JSONResponse(result)

    async def facet_values(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), admin=False)
        body = await read_json(request, self.config.max_body_bytes)
        engine = self.engine_for(request)
        result = await run_in_threadpool(
            engine.search_facet_values, request.path_params["collection_id"], request.path_params["facet"], body
        )
        return JSONResponse(result)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok", "apps": list(self.engines)})

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())


def _method_guard(methods: set[str]) -> Any:
    async def not_allowed(request: Request) -> Response:
        raise MethodNotAllowedError(f"method {request.method} is not allowed on {request.url.path}; "
                                    f"allowed: {', '.join(sorted(methods))}")
    return not_allowed


def create_app(config: ServerConfig) -> Starlette:
    """The ASGI application; engines open at startup and close (durably) at shutdown."""
    service = Service(config)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(service.open)
        try:
            yield
        finally:
            await run_in_threadpool(service.close)

    async def on_search_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, SearchError)
        if error.status >= 500:
            request_id = uuid.uuid4().hex[:12]
            log.error("request %s %s %s failed: %s", request_id, request.method, request.url.path, error.data)
        return error_response(error)

    async def on_http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        if error.status_code == 404:
            return error_response(NotFoundError(f"no route {request.method} {request.url.path}"))
        if error.status_code == 405:
            return error_response(MethodNotAllowedError(f"method {request.method} is not allowed on {request.url.path}"))
        return error_response(error_for_status(error.status_code, str(error.detail)))

    async def on_unexpected(request: Request, error: Exception) -> Response:
        request_id = uuid.uuid4().hex[:12]
        log.exception("request %s %s %s failed", request_id, request.method, request.url.path)
        return error_response(InternalError(f"internal error, request id {request_id}"))

    routes: list[Any] = [
        Route("/v2", service.search, methods=["POST"]),
        Route("/v2/collections/{collection_id}/records", service.add_records, methods=["POST"]),
        Route("/v2/collections/{collection_id}/records", service.delete_records, methods=["DELETE"]),
        Route("/v2/collections/{collection_id}/facet/{facet}/query", service.facet_values, methods=["POST"]),
        Route("/health", service.health, methods=["GET"]),
        Route("/openapi.json", service.openapi, methods=["GET"]),
    ]
    static_dir = config.static_dir or STATIC_DIR
    if os.path.isfile(os.path.join(static_dir, "index.html")):
        routes.append(Mount("/", StaticFiles(directory=static_dir, html=True), name="static"))
    middleware = [Middleware(CORSMiddleware, allow_origins=list(config.cors_origins),
                             allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
                             allow_headers=["Authorization", "Content-Type"], max_age=600)]
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={SearchError: on_search_error, HTTPException: on_http_error, Exception: on_unexpected},
    )
