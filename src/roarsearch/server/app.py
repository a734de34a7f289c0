"""The HTTP service (contract §5): a thin ASGI shell around one :class:`Engine` per application.

Owns: the routes, authentication, the choice of application from the ``Host`` header, CORS, the
search page at ``/``, and turning every failure into ``{"status", "data"}`` with the same HTTP
status. Built by :func:`create_app`, which ``roarsearch serve`` (``cli/main.py``) hands to uvicorn;
the tests in ``tests/http/`` drive it through a real server and in process.

Invariants:
- validation lives in the engine: a body goes to the engine as decoded, so the service answers
  exactly what the library raises (the service checks only what the engine cannot see: keys, the
  body's size, content type and JSON syntax, the delete route's query flags);
- every response of an API path is JSON; a bad request is never a 500 and never shows a traceback;
  an unexpected exception is logged with a request id and answered 500 with that id only;
- :data:`ROUTES` is the one list of (path, method) the service serves: the router, the 405 answers
  (with ``Allow``) and the OpenAPI test all read it;
- engine calls run in a few worker threads (:data:`ENGINE_THREADS`), so that ``/health`` answers
  during a long write and a long search does not hold short ones behind it; the one exception is
  a search of a shape this worker has run before in less than a switch interval of CPU, which runs
  on the event loop (:mod:`roarsearch.server.placement`);
- engines open before the first request and close (durably) after the last in-flight one.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
import orjson
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from roarsearch import Engine
from roarsearch.engine.engine import MULTI_SEARCH_THREADS, run_multi_search
from roarsearch.engine.follower import FollowerEngine
from roarsearch.errors import (
    BadRequestError,
    InternalError,
    MethodNotAllowedError,
    NotFoundError,
    SearchError,
    ServiceUnavailableError,
    UnauthorizedError,
    error_for_status,
)
from roarsearch.keys import ApiKey, KeyStore
from roarsearch.server.auth import Access, KeyRing, Role
from roarsearch.server.config import ServerConfig
from roarsearch.server.openapi import openapi_document
from roarsearch.server.placement import SearchPlacement, search_shape
from roarsearch.server.wire import (
    THREAD_DECODE_BYTES,
    JSONResponse,
    ascii_digits,
    check_content_type,
    decode_json,
    error_response,
    orjson_or_json,
    read_body,
    read_json,
)
from roarsearch.server.workers import CATCH_UP_WAIT_S, READERS_POLL_S, READERS_WAIT_S, Balancer, forward

log = logging.getLogger("roarsearch.server")

#: The search page written by the front-end engineer; mounted at ``/`` when the folder exists.
STATIC_DIR = os.path.join(os.path.dirname(__file__), "static")

#: Engine calls run in at most this many worker threads. A search holds the GIL for much of its
#: work, so more threads only add switching; a few keep both cores busy while numpy and pyroaring
#: release the GIL, and the rest wait in a short first-come queue, which keeps the tail latency low.
ENGINE_THREADS = 4
#: Writes run in their own threads (:meth:`Service.call_write`); each collection takes one at a time.
WRITE_THREADS = 2

#: Every (path, method) served, with the :class:`Service` method that answers it. Path parameters
#: are named as in the OpenAPI document. HEAD is answered wherever GET is.
ROUTES: dict[str, dict[str, str]] = {
    "/v2": {"POST": "search"},
    "/v2/multi-search": {"POST": "multi_search"},
    "/v2/collections": {"GET": "list_collections"},
    "/v2/collections/{collectionId}": {"GET": "collection_info", "DELETE": "drop_collection"},
    "/v2/collections/{collectionId}/settings": {"GET": "get_settings", "PUT": "update_settings"},
    "/v2/collections/{collectionId}/records": {"GET": "page_records", "POST": "add_records",
                                               "DELETE": "delete_records"},
    "/v2/collections/{collectionId}/records/{id}": {"GET": "get_record"},
    "/v2/collections/{collectionId}/facet/{facetName}/query": {"POST": "facet_values"},
    "/v2/keys": {"GET": "list_keys", "POST": "create_key"},
    "/v2/keys/{uid}": {"GET": "get_key", "PATCH": "update_key", "DELETE": "revoke_key"},
    "/health": {"GET": "health"},
    "/openapi.json": {"GET": "openapi"},
}
#: Body limit of the search routes (search, multi-search, facet value search), under the service's
#: own limit: no valid search needs more (the request bounds of contract §3), and decoding a 30 MB
#: body only to refuse it held the event loop for a second (benchmarks/responsiveness.py).
SEARCH_BODY_BYTES = 4 * 1024 * 1024
#: Methods routed to an API path, so that any other method on it gets a 405 rather than falling
#: through to the search page's 404.
ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]

#: The delete route's flags; each says "delete every record" when true.
CLEAR_FLAGS = ("clear", "isClear")
#: A record id path segment that names an integer id (when a record has it; contract §8).
CANONICAL_INTEGER = re.compile(r"-?(0|[1-9][0-9]{0,18})")
INT64 = (-(1 << 63), (1 << 63) - 1)
TRUE_WORDS, FALSE_WORDS = ("true", "1"), ("false", "0")

Handler = Callable[[Request], Awaitable[Response]]


def new_request_id() -> str:
    return uuid.uuid4().hex[:12]


class Service:
    """The engines of the served applications and the request handlers."""

    def __init__(self, config: ServerConfig, engines: Mapping[str, Engine] | None = None, *,
                 writer_socket: str | None = None, publish: Callable[..., None] | None = None,
                 readers_applied: Callable[[str], bool] | None = None,
                 worker: int | None = None, balancer: Balancer | None = None) -> None:
        self.config = config
        #: With several workers: evens out their connections (see :class:`~roarsearch.server.workers.Balancer`).
        self.balancer = balancer
        self.keys = KeyRing(config.admin_keys, config.search_keys,
                            KeyStore(config.data, config.master_key or config.admin_keys[0]))
        self.engines: dict[str, Engine] = dict(engines or {})
        self._limiter: anyio.CapacityLimiter | None = None
        #: A reader worker's: writes are forwarded to the writer listening on this Unix socket.
        self.writer_socket = writer_socket
        #: The writer's (with readers): ``publish(app, dropped=False)`` after each write, before the answer.
        self.publish = publish
        #: The writer's (with readers): ``readers_applied(app)``, whether every reader has applied
        #: the writes announced as logged.
        self.readers_applied = readers_applied
        #: With several workers, this one's number (0: the writer), sent by ``/health`` as ``X-Roarsearch-Worker``.
        self.worker = worker
        self._write_limiter: anyio.CapacityLimiter | None = None
        #: Which searches run on the event loop (:class:`~roarsearch.server.placement.SearchPlacement`).
        self.placement = SearchPlacement()

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        """Open the engine of every application not handed in already (an engine owns its directory)."""
        if self.writer_socket is None:  # the writer (or the only worker) speaks for the key store
            changed = self.keys.store.adopt_master()
            if changed:
                log.warning("the %d stored keys were created under another master secret (the admin key changed): "
                            "their secrets and the tenant tokens they signed are refused from now on; "
                            "create new keys (docs/security.md, \"Changing the admin key\")", changed)
        try:
            for app in self.config.apps:
                if app not in self.engines:
                    self.engines[app] = Engine(self.config.app_path(app))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close every engine: logged batches are snapshotted and the directory locks released."""
        engines, self.engines = list(self.engines.values()), {}
        for engine in engines:
            engine.close()

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run a blocking engine call in a worker thread."""
        if self._limiter is None:  # created on the event loop that will use it
            self._limiter = anyio.CapacityLimiter(ENGINE_THREADS)
        return await anyio.to_thread.run_sync(functools.partial(function, *args), limiter=self._limiter)

    async def call_write(self, function: Callable[..., Any], *args: Any) -> Any:
        """Run a write in a thread of its own: a write never queues behind searches for a thread
        (a steady writer was starved that way), and searches go on while it runs (it holds them
        out only while it commits; see ``Collection.apply_concurrently``)."""
        if self._write_limiter is None:
            self._write_limiter = anyio.CapacityLimiter(WRITE_THREADS)
        return await anyio.to_thread.run_sync(functools.partial(function, *args), limiter=self._write_limiter)

    def app_for(self, request: Request) -> str:
        return self.app_of(request.headers.get("host", ""))

    def app_of(self, host: str) -> str:
        """The application named by the first label of Host (minus a trailing "-fast"), else the default."""
        label = host.split(":", 1)[0].split(".", 1)[0].lower()
        label = label.removesuffix("-fast")
        for app in self.engines:
            if app.lower() == label:
                return app
        return self.config.default_app

    def engine_for(self, request: Request) -> Engine:
        return self.engines[self.app_for(request)]

    async def reader(self, request: Request) -> Engine:
        """The request's engine for a read; a reader worker's first applies every write the writer
        has acknowledged (docs/service.md, "Workers": read-your-writes on every worker)."""
        engine = self.engines[self.app_for(request)]
        if isinstance(engine, FollowerEngine) and engine.stale():
            await self.caught_up(engine)
        return engine

    async def caught_up(self, engine: FollowerEngine) -> None:
        """Return once a reader worker's ``engine`` has applied every write the writer acknowledged.
        Its follow thread applies them (one catch-up for every read waiting, none of which takes
        a thread: sixteen reads each handing a catch-up to a thread, four at a time, waited up to
        66 ms); a read still waiting after :data:`CATCH_UP_WAIT_S` applies them itself."""
        if not await polled(lambda: not engine.stale(), CATCH_UP_WAIT_S):
            await self.call(engine.catch_up)

    async def write(self, request: Request, method: Callable[..., Any], *args: Any, dropped: bool = False) -> Any:
        """Run a write on the writer; with readers, publish its log position before answering, once
        the readers have applied it (:meth:`wait_for_readers`)."""
        app = self.app_for(request)
        publish = self.publish
        if publish is None:
            return await self.call_write(method, *args)

        def write_only() -> Any:
            try:
                return method(*args)
            except BaseException:
                publish(app)  # a failed batch changed nothing, but a snapshot may have been taken
                raise

        result = await self.call_write(write_only)
        await self.wait_for_readers(app)
        publish(app, dropped=dropped)  # the acknowledgement: readers hold reads until they have it
        return result

    async def wait_for_readers(self, app: str) -> None:
        """Before a write is acknowledged: wait (on the loop, at most :data:`READERS_WAIT_S`) until
        every reader has applied what the writer announced as logged, so that reads reaching them
        once it is acknowledged find nothing left to apply (``server.workers.ReaderProgress``)."""
        readers_applied = self.readers_applied
        if readers_applied is not None:
            await polled(lambda: readers_applied(app), READERS_WAIT_S)

    async def forward(self, request: Request) -> Response:
        """A reader worker's write: the same request, sent to the writer; its answer, unchanged."""
        assert self.writer_socket is not None
        body = await read_body(request, self.config.max_body_bytes)
        target = request.scope.get("raw_path", request.url.path.encode()).decode("latin-1")
        if request.scope.get("query_string"):
            target += "?" + request.scope["query_string"].decode("latin-1")
        try:
            status, headers, content = await forward(self.writer_socket, request.method, target,
                                                     list(request.scope["headers"]), body)
        except OSError as error:  # the writer is stopping or restarting: nothing was written
            raise ServiceUnavailableError(f"the writer process cannot take writes now ({error.strerror or error}); "
                                          "nothing was written, retry") from error
        return Response(content, status_code=status, headers=dict(headers))

    # ------------------------------------------------------------------ routes

    async def search(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "search")
        body = await read_json(request, min(self.config.max_body_bytes, SEARCH_BODY_BYTES))
        return JSONResponse(await self.call(searcher(access, await self.reader(request)), body))

    async def add_records(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), "records.write", request.path_params["collectionId"])
        if self.writer_socket is not None:
            return await self.forward(request)
        body = await read_json(request, self.config.max_body_bytes)
        engine = self.engine_for(request)
        result = await self.write(request, engine.add_records, request.path_params["collectionId"], body)
        return JSONResponse(result, status_code=201)

    async def delete_records(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), "records.write", request.path_params["collectionId"])
        if self.writer_socket is not None:
            return await self.forward(request)
        clear = False
        for name in CLEAR_FLAGS:
            flag = request.query_params.get(name)
            if flag is None:
                continue
            if flag.lower() not in TRUE_WORDS + FALSE_WORDS:
                raise BadRequestError(f"{name}: must be true or false, got {flag!r}", field=name)
            clear |= flag.lower() in TRUE_WORDS
        body = await read_json(request, self.config.max_body_bytes, required=False)
        ids: Any = None
        filter_text: Any = None
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
        result = await self.write(request, engine.delete_records, request.path_params["collectionId"], ids,
                                  filter_text, clear)
        return JSONResponse(result)

    async def facet_values(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "search", request.path_params["collectionId"])
        body = await read_json(request, min(self.config.max_body_bytes, SEARCH_BODY_BYTES))
        engine = access.view(await self.reader(request))
        result = await self.call(engine.search_facet_values, request.path_params["collectionId"],
                                 request.path_params["facetName"], body)
        return JSONResponse(result)

    async def multi_search(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "search")
        body = await read_json(request, min(self.config.max_body_bytes, SEARCH_BODY_BYTES))
        if not isinstance(body, dict) or "searches" not in body or set(body) != {"searches"}:
            extra = [key for key in body if key != "searches"] if isinstance(body, dict) else []
            where = str(extra[0]) if extra else "searches"
            raise BadRequestError(f"{where}: the body must be {{\"searches\": [SearchRequestBody, ...]}}", field=where)
        engine = await self.reader(request)
        if access.key is None:
            results = await self.call(engine.multi_search, body["searches"])
        else:  # each search checked (and restricted) alone: one out of reach is its own 403
            results = await self.call(run_multi_search, searcher(access, engine), body["searches"], MULTI_SEARCH_THREADS)
        return JSONResponse({"results": results})

    async def list_collections(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "collections.read")
        listed = await self.call((await self.reader(request)).collections)
        if access.narrowed:  # only what the key may see: the others are not said to exist
            listed = [entry for entry in listed if access.sees(entry["collection"])]
        return JSONResponse(listed)

    async def collection_info(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), "collections.read", request.path_params["collectionId"])
        engine = await self.reader(request)
        return JSONResponse(await self.call(engine.collection_info, request.path_params["collectionId"]))

    async def drop_collection(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), "collections.write", request.path_params["collectionId"])
        if self.writer_socket is not None:
            return await self.forward(request)
        async for _ in request.stream():
            # The body means nothing here, but it is read whole: answering before it has arrived
            # makes the close reset the connection, and a forwarding reader would lose the answer.
            pass
        engine = self.engine_for(request)
        return JSONResponse(await self.write(request, engine.drop_collection, request.path_params["collectionId"],
                                             dropped=True))

    async def get_settings(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), "settings.read", request.path_params["collectionId"])
        engine = await self.reader(request)
        return JSONResponse(await self.call(engine.get_settings, request.path_params["collectionId"]))

    async def update_settings(self, request: Request) -> Response:
        self.keys.require(request.headers.get("authorization"), "settings.write", request.path_params["collectionId"])
        if self.writer_socket is not None:
            return await self.forward(request)
        body = await read_json(request, self.config.max_body_bytes)
        engine = self.engine_for(request)
        return JSONResponse(await self.write(request, engine.update_settings, request.path_params["collectionId"], body))

    async def page_records(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "records.read", request.path_params["collectionId"])
        unknown = [name for name in request.query_params if name not in ("count", "after")]
        if unknown:
            raise BadRequestError(f"{unknown[0]}: unknown query parameter (expected count, after)", field=unknown[0])
        text = request.query_params.get("count", "1000")
        if not ascii_digits(text):
            raise BadRequestError(f"count: must be an integer between 1 and 1000, got {text!r}", field="count")
        engine = access.view(await self.reader(request), "records.read")
        result = await self.call(engine.page_records, request.path_params["collectionId"], int(text),
                                 request.query_params.get("after"))
        return JSONResponse(result)

    async def get_record(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "records.read", request.path_params["collectionId"])
        segment = request.path_params["id"]
        ids: list[int | str] = [segment]
        if CANONICAL_INTEGER.fullmatch(segment) and INT64[0] <= int(segment) <= INT64[1]:
            ids.insert(0, int(segment))  # an integer id when one exists, else the string id
        collection = request.path_params["collectionId"]
        found = await self.call(access.view(await self.reader(request), "records.read").get_records, collection, ids)
        if not found:
            raise NotFoundError(f"record {segment!r} not found in collection '{collection}'", field="id")
        return JSONResponse(found[0])

    # ------------------------------------------------------------------ keys (docs/security.md)

    async def list_keys(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "keys")
        store = self.keys.store
        keys = await self.call(store.keys)
        within = access.managing()
        return JSONResponse({"results": [key.to_dict(store.secret(key)) for key in keys
                                         if within is None or key.within(within)]})

    async def create_key(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "keys")
        body = await read_json(request, SEARCH_BODY_BYTES)
        key, secret = await self.call_write(functools.partial(self.keys.store.create, body, within=access.managing()))
        log.info("created key %s (actions %s, collections %s)", key.uid, ",".join(key.actions), ",".join(key.collections))
        return JSONResponse(key.to_dict(secret, whole=True), status_code=201)

    def _managed_key(self, access: Access, uid: str) -> ApiKey:
        key = self.keys.store.get(uid)
        within = access.managing()
        if within is not None and not key.within(within):  # as if absent: a key learns nothing beyond its scope
            raise NotFoundError(f"key '{uid[:64]}' not found", field="uid")
        return key

    async def get_key(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "keys")
        key = await self.call(self._managed_key, access, request.path_params["uid"])
        return JSONResponse(key.to_dict(self.keys.store.secret(key)))

    async def update_key(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "keys")
        body = await read_json(request, SEARCH_BODY_BYTES)
        key = await self.call_write(functools.partial(self.keys.store.update, request.path_params["uid"], body,
                                                      within=access.managing()))
        return JSONResponse(key.to_dict(self.keys.store.secret(key)))

    async def revoke_key(self, request: Request) -> Response:
        access = self.keys.require(request.headers.get("authorization"), "keys")
        uid = request.path_params["uid"]
        await self.call_write(functools.partial(self.keys.store.revoke, uid, within=access.managing()))
        log.info("revoked key %s", uid)
        return JSONResponse({"status": 200, "uid": uid})

    async def health(self, request: Request) -> Response:
        headers = None if self.worker is None else {"X-Roarsearch-Worker": str(self.worker)}
        return JSONResponse({"status": "ok", "apps": list(self.config.apps)}, headers=headers)

    async def openapi(self, request: Request) -> Response:
        return JSONResponse(openapi_document())

    # ------------------------------------------------------------------ dispatch

    def dispatcher(self, path: str) -> Handler:
        """One endpoint per API path: the method's handler, or 405 naming the allowed methods."""
        handlers = {method: getattr(self, name) for method, name in ROUTES[path].items()}
        if "GET" in handlers:
            handlers["HEAD"] = handlers["GET"]
        allowed = ", ".join(sorted(handlers))

        async def endpoint(request: Request) -> Response:
            handler = handlers.get(request.method)
            try:
                if handler is None:
                    raise MethodNotAllowedError(f"method {request.method} is not allowed on {request.url.path}; "
                                                f"allowed: {allowed}")
                response: Response = await handler(request)
                return response
            except SearchError as error:
                return failure_response(request.method, request.url.path, error, {"Allow": allowed})
            except Exception:  # an internal failure: the log has the traceback, the client the id
                request_id = new_request_id()
                log.exception("request %s %s %s failed", request_id, request.method, request.url.path)
                return error_response(InternalError(f"internal error, request id {request_id}"))

        return endpoint


def failure_response(method: str, path: str, error: SearchError, allow: dict[str, str] | None = None) -> Response:
    """The Error object for ``error`` (of a ``method`` request to ``path``), with the headers its status calls for."""
    headers: dict[str, str] = {}
    if isinstance(error, UnauthorizedError):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, MethodNotAllowedError) and allow:
        headers.update(allow)
    if error.status == 503:
        headers["Retry-After"] = "1"  # a shard is being restarted
    if error.status >= 500:
        request_id = new_request_id()
        log.error("request %s %s %s failed: %s", request_id, method, path, error.data)
        if error.status == 500:  # an internal message (paths, state) stays in the log
            error = InternalError(f"internal error, request id {request_id}")
    return error_response(error, headers)


class FastSearch:
    """``POST /v2`` without the framework: the one hot route, answered in a few ASGI calls.

    A search over HTTP spent more time in the stack than in the engine (on 100k packages a
    rare-word search: 0.9 ms in the engine, 2.2 ms per request over HTTP; ``/health``: 0.37 ms);
    this path skips routing, the ``Request`` object and the CORS middleware, and decodes with orjson. It answers exactly as the routed handler does: same checks in the same
    order (key, body size, content type, JSON), same Error objects; anything it does not handle
    itself (a browser's request with ``Origin``, a 413 that needs the streamed body refused, a
    body orjson refuses) goes to the routed handler or the standard decoder.

    A search runs on the event loop when searches of its shape have run here before, each in less
    than a switch interval of CPU; otherwise in a worker thread (:mod:`roarsearch.server.placement`).
    All on the loop, one long search held every short one behind it (an earlier engine's 30 ms
    searches, the HTTP load benchmark's mix, 2 workers: p99 467 ms on the loop, 189 ms in threads); all in threads,
    the hand-offs cost about a fifth of a short search's time over HTTP. Searches go on while a
    write runs in this process (the write has its own thread, and holds searches out only while it
    commits its prepared batch).
    """

    def __init__(self, app: ASGIApp, service: Service) -> None:
        self.app = app
        self.service = service
        self.limit = min(service.config.max_body_bytes, SEARCH_BODY_BYTES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/v2" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if b"origin" in headers or length is None or not length.isdigit() or int(length) > min(self.limit, THREAD_DECODE_BYTES):
            await self.app(scope, receive, send)  # CORS, chunked or large bodies: the routed handler
            return
        service = self.service
        try:
            authorization = headers.get(b"authorization")
            access = service.keys.require(None if authorization is None else authorization.decode("latin-1"), "search")
            chunks = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            raw = b"".join(chunks)
            if not raw.strip():
                raise BadRequestError("request body: a JSON body is required", field="body")
            content_type = headers.get(b"content-type")
            if content_type is not None:
                check_content_type(content_type.decode("latin-1"))
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:  # not JSON, or JSON orjson refuses (huge integers): the standard decoder says which
                body = decode_json(raw)
            engine = service.engines[service.app_of(headers.get(b"host", b"").decode("latin-1"))]
            if isinstance(engine, FollowerEngine) and engine.stale():
                await service.caught_up(engine)
            search = searcher(access, engine)
            shape = search_shape(body)
            if service.placement.on_loop(shape):  # short and seen before: no thread hand-offs
                result, cpu_s = timed_search(search, body)
            else:
                result, cpu_s = await service.call(timed_search, search, body)
            service.placement.note(shape, cpu_s)
            content = orjson_or_json(result)
            status = 200
            if service.balancer is not None and service.balancer.shed():
                await send_json(send, status, content, [(b"connection", b"close")])
                return
        except SearchError as error:
            answer = failure_response("POST", "/v2", error)
            await send_json(send, answer.status_code, bytes(answer.body),
                            [(key, value) for key, value in answer.raw_headers if key not in (b"content-type", b"content-length")])
            return
        except Exception:
            request_id = new_request_id()
            log.exception("request %s POST /v2 failed", request_id)
            status, content = 500, orjson.dumps(InternalError(f"internal error, request id {request_id}").to_dict())
        await send_json(send, status, content)


def searcher(access: Access, engine: Engine) -> Callable[[Any], dict[str, Any]]:
    """The search function of a request: the engine's, or for a stored key one that first checks
    the body's collection against the key's patterns, and for a tenant token one that also ANDs
    the token's rule to everything the search computes (:class:`~roarsearch.keys.TenantView`)."""
    if access.role is Role.TOKEN:
        return access.view(engine).search  # type: ignore[no-any-return]
    if access.role is not Role.KEY or not access.narrowed:
        return engine.search

    def search(body: Any) -> dict[str, Any]:
        if isinstance(body, dict):
            access.require("search", body.get("collection"))
        return engine.search(body)

    return search


def timed_search(search: Callable[[Any], dict[str, Any]], body: Any) -> tuple[dict[str, Any], float]:
    """``search(body)`` and the CPU seconds it took (on the loop or in a worker thread)."""
    started = time.thread_time()
    result = search(body)
    return result, time.thread_time() - started


async def polled(done: Callable[[], bool], seconds: float) -> bool:
    """Whether ``done()`` came true within ``seconds``, asked every :data:`READERS_POLL_S` on the
    event loop (waits between workers: a shared file, no thread of its own)."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() >= deadline:
            return False
        await anyio.sleep(READERS_POLL_S)
    return True


async def send_json(send: Send, status: int, content: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": content})


class SearchPage(StaticFiles):
    """The search page at ``/``: GET and HEAD only; any other method is "no route" (404). Files of
    ``overlay`` (an application's ``embed.js``, ...) are found before the page's own."""

    def __init__(self, directory: str, overlay: str | None = None) -> None:
        super().__init__(directory=directory, html=True)
        if overlay is not None:
            self.all_directories = [overlay, *self.all_directories]

    async def get_response(self, path: str, scope: Scope) -> Response:
        if scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(status_code=404)
        return await super().get_response(path, scope)


class JSONCORSMiddleware(CORSMiddleware):
    """Starlette's CORS handling, with a refused preflight answered as an Error object."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        cors_headers = {key: value for key, value in response.headers.items()
                        if key.lower().startswith("access-control-") or key.lower() == "vary"}
        message = bytes(response.body).decode("utf-8", "replace")
        return error_response(error_for_status(response.status_code, message), cors_headers)


def create_app(config: ServerConfig, engines: Mapping[str, Engine] | None = None, *, writer_socket: str | None = None,
               publish: Callable[..., None] | None = None, readers_applied: Callable[[str], bool] | None = None,
               worker: int | None = None, balancer: Balancer | None = None) -> Starlette:
    """The ASGI application.

    Args:
        config: data directory, applications, keys, CORS origins, body limit, page folder.
        engines: engines already open, by application id (``roarsearch serve`` opens them first so
            that a locked directory is a clear error before the port is bound); the app closes them
            at shutdown. Applications without one get ``Engine(config.app_path(app))`` at startup.
        writer_socket: a reader worker's (``serve --workers N``): its engines are followers and its
            writes are forwarded to the writer on this Unix socket.
        publish: the writer's, with readers: called with the application after each write.
        readers_applied: the writer's, with readers: whether every reader has applied the
            writes announced as logged (a write's acknowledgement waits for it, briefly).
        worker: with several workers, this one's number (0: the writer), named by ``/health``.
        balancer: with several workers, this one's share of the connections (searches on the short
            path may close theirs to even them out).
    """
    service = Service(config, engines, writer_socket=writer_socket, publish=publish, readers_applied=readers_applied,
                      worker=worker, balancer=balancer)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(service.open)
        try:
            yield
        finally:
            await anyio.to_thread.run_sync(service.close)

    async def on_http_error(request: Request, error: Exception) -> Response:
        # The router's own 404 and the search page's: every answer is an Error object.
        assert isinstance(error, HTTPException)
        if error.status_code == 404:
            return error_response(NotFoundError(f"no route {request.method} {request.url.path}"))
        return failure_response(request.method, request.url.path, error_for_status(error.status_code, str(error.detail)))

    async def on_unexpected(request: Request, error: Exception) -> Response:
        # A backstop for failures outside the API endpoints (they catch their own).
        request_id = new_request_id()
        log.error("request %s %s %s failed", request_id, request.method, request.url.path, exc_info=error)
        return error_response(InternalError(f"internal error, request id {request_id}"))

    routes: list[BaseRoute] = [Route(path, service.dispatcher(path), methods=ANY_METHOD) for path in ROUTES]
    static_dir = config.static_dir or STATIC_DIR
    if os.path.isdir(static_dir):  # after the API routes: the page never shadows them
        routes.append(Mount("/", SearchPage(static_dir, config.page_files), name="page"))
    middleware = [Middleware(FastSearch, service=service), Middleware(JSONCORSMiddleware, allow_origins=list(config.cors_origins),
                             allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"],
                             allow_headers=["Authorization", "Content-Type"], max_age=600)]
    return Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: on_http_error, Exception: on_unexpected},
    )
