"""The wire: JSON bodies in, JSON out, and every failure as ``{"status", "data"}``.

Owns: reading a request body within the size limit, requiring a JSON content type, decoding JSON
and building responses. Called by the route handlers of ``server/app.py``.

Invariants:
- a body over the limit is a 413 before it is buffered: refused on ``Content-Length`` when declared,
  otherwise as soon as the streamed bytes pass the limit;
- a body is JSON only under ``application/json`` (or a ``+json`` type); a missing Content-Type is
  read as JSON too (scripts often leave it out), any other type is a 400;
- anything the decoder refuses is a 400 naming the line and column: malformed JSON, text that is
  not UTF-8, nesting deeper than Python's recursion limit, and ``NaN``/``Infinity`` (not JSON, and
  a record holding one could never be sent back as JSON);
- the server does not look inside a body: shapes and fields are the engine's to check, so the
  library and the service give the same errors.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import Response

from roarsearch.errors import BadRequestError, PayloadTooLargeError, SearchError

#: Bodies larger than this are decoded in a worker thread, so that ``/health`` and small requests
#: keep being answered while a 10 MB body is parsed (benchmarks/responsiveness.py).
THREAD_DECODE_BYTES = 256 * 1024


class JSONResponse(Response):
    """Compact UTF-8 JSON.

    Encoded by orjson (measured 16x faster than the standard library on a page of 30 films:
    0.19 ms against 3.0 ms, which was most of a search's time over HTTP); values orjson refuses
    (integers past 64 bits) fall back to the standard encoder, with ``allow_nan=False`` because
    the wire format has no NaN.
    """

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson_or_json(content)


def orjson_or_json(content: Any) -> bytes:
    """``content`` as compact JSON: orjson, or the standard encoder for what orjson refuses."""
    try:
        return orjson.dumps(content)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def error_response(error: SearchError, headers: dict[str, str] | None = None) -> JSONResponse:
    """The Error object ``{"status", "data"}`` with the same HTTP status."""
    return JSONResponse(error.to_dict(), status_code=error.status, headers=headers)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_content_type(request: Request) -> None:
    content_type = request.headers.get("content-type")
    if content_type is not None:
        check_content_type(content_type)


def check_content_type(content_type: str) -> None:
    """A 400 unless ``content_type`` is JSON's."""
    media_type = content_type.split(";")[0].strip().lower()
    if media_type != "application/json" and not (media_type.startswith("application/") and media_type.endswith("+json")):
        raise BadRequestError(f"Content-Type must be application/json, got {content_type!r}", field="body")


def ascii_digits(text: str) -> bool:
    """Whether ``text`` is digits that ``int`` reads (``"²".isdigit()`` is true, ``int("²")`` fails)."""
    return text.isascii() and text.isdigit()


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, at most ``limit`` bytes (413 past it)."""
    declared = request.headers.get("content-length")
    if declared is not None and ascii_digits(declared.strip()) and int(declared) > limit:
        raise PayloadTooLargeError(f"request body is {int(declared)} bytes; the limit is {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_json(request: Request, limit: int, *, required: bool = True) -> Any:
    """The decoded JSON body; None for an empty body when not ``required``.

    Raises: PayloadTooLargeError (413) over ``limit``; BadRequestError (400) for a missing body,
    a wrong content type or anything that is not JSON.
    """
    raw = await read_body(request, limit)
    if not raw.strip():
        if required:
            raise BadRequestError("request body: a JSON body is required", field="body")
        return None
    _check_content_type(request)
    if len(raw) > THREAD_DECODE_BYTES:  # megabytes of JSON take the event loop for a while
        return await anyio.to_thread.run_sync(decode_json, raw)
    return decode_json(raw)


def decode_json(raw: bytes) -> Any:
    """A body's bytes as JSON, or a 400 naming the problem."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequestError(f"request body: not UTF-8 ({error.reason} at byte {error.start})", field="body") from error
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise BadRequestError(
            f"request body: malformed JSON: {error.msg} at line {error.lineno} column {error.colno}", field="body"
        ) from error
    except ValueError as error:  # NaN, Infinity, -Infinity
        raise BadRequestError(f"request body: {error}", field="body") from error
    except RecursionError as error:
        raise BadRequestError("request body: JSON nested too deeply", field="body") from error
