"""Requests are bounded before they are read whole: bodies 413, headers 431 (Magnum's shape).

A declared `Content-Length` above the limit is refused before a byte of the
body is read; a body without one (chunked) is counted as it streams in and
refused at the chunk that crosses the limit, so the server never holds more
than the limit plus one chunk. Plain ASGI, like `app.PerRequest`.

The request line plus headers are bounded twice: h11 refuses a header block that
grows past `SHOAL_MAX_HEADER_BYTES` while it is still incomplete (a plain 400, see
`serving`), but parses a longer one that arrives whole in one read; that one is
refused here with 431, before any route sees it.
"""

from __future__ import annotations

from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shoal.api import errors

# Content-Length digits past which the value is surely above any limit (and
# int() of thousands of digits is refused by Python itself).
_LENGTH_DIGITS_MAX = 18
_BEYOND: int = 10**_LENGTH_DIGITS_MAX


class BodyTooLarge(HTTPException):
    """The body is past the limit. An HTTPException, so that FastAPI's own body
    parsing (the pydantic-typed routes) passes it on as it is rather than as a
    400, and the errors module answers it like any other refusal."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large(limit))


def too_large(limit: int) -> str:
    return (
        f"The request body is larger than {limit} bytes, the most this server accepts "
        "(SHOAL_MAX_BODY_BYTES)"
    )


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length as a number (None when absent or not a number,
    which the HTTP server refuses before the app sees it)."""
    for key, value in scope.get("headers", ()):
        if key == b"content-length":
            text: bytes = value.strip()
            if not text.isdigit():
                return None
            if len(text.lstrip(b"0")) > _LENGTH_DIGITS_MAX:
                return _BEYOND
            return int(text)
    return None


def header_block_size(scope: Scope) -> int:
    """Bytes of the request line plus headers as sent (HTTP/1.1 framing)."""
    query: bytes = scope.get("query_string", b"")
    line = (
        len(scope.get("method", ""))
        + 1
        + len(scope.get("raw_path") or scope.get("path", "").encode())
        + (1 + len(query) if query else 0)
        + len(" HTTP/1.1\r\n")
    )
    return line + sum(len(k) + len(v) + 4 for k, v in scope.get("headers", ())) + 2


def headers_too_large(limit: int) -> str:
    return (
        f"The request line plus headers are larger than {limit} bytes, the most this server "
        "accepts (SHOAL_MAX_HEADER_BYTES)"
    )


class BodyLimit:
    """413 for a request body above `max_bytes`, declared or streamed; 431 for a request
    line plus headers above `max_header_bytes`."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_header_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_header_bytes = max_header_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.max_header_bytes is not None and header_block_size(scope) > self.max_header_bytes:
            req_id = str(scope.get("state", {}).get("request_id", ""))
            body = errors.body(431, headers_too_large(self.max_header_bytes), req_id)
            await JSONResponse(body, status_code=431)(scope, receive, send)
            return
        length = declared_length(scope)
        if length is not None and length > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLarge:
            if started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        """413 without reading the body: the HTTP server discards what the client
        still sends once the answer is complete, and keeps the connection."""
        req_id = str(scope.get("state", {}).get("request_id", ""))
        body = errors.body(413, too_large(self.max_bytes), req_id)
        await JSONResponse(body, status_code=413)(scope, receive, send)
