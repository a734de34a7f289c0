"""The wire: JSON bodies in, JSON out, and every failure as ``{"status", "data"}``.

Owns: reading a request body within the size limit (413 past it, checked on ``Content-Length``
and while streaming), requiring ``application/json``, decoding JSON (400 with the parser's
message and position), and building responses. camelCase lives here and in the engine's request
module only.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from roarsearch.errors import BadRequestError, PayloadTooLargeError, SearchError


class JSONResponse(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def error_response(error: SearchError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.to_dict(), status_code=error.status, headers=headers)


async def read_json(request: Request, limit: int, *, required: bool = True) -> Any:
    """The decoded JSON body; 413 over ``limit`` bytes, 400 for a wrong type or malformed JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"request body is {declared} bytes; the limit is {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"request body is over the limit of {limit} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        if required:
            raise BadRequestError("request body: a JSON body is required", field="body")
        return None
    content_type = request.headers.get("content-type", "")
    if content_type and "json" not in content_type.split(";")[0].lower():
        raise BadRequestError(f"Content-Type must be application/json, got {content_type!r}", field="body")
    try:
        return json.loads(raw)
    except UnicodeDecodeError as error:
        raise BadRequestError(f"request body: not UTF-8 ({error.reason} at byte {error.start})", field="body") from error
    except json.JSONDecodeError as error:
        raise BadRequestError(
            f"request body: malformed JSON: {error.msg} at line {error.lineno} column {error.colno}", field="body"
        ) from error
