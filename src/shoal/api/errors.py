"""Every error leaves in Magnum's shape: {"errors": [{request_id, code, status, title, ...}]}.

Domain errors are mapped to HTTP here and only here.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from shoal.domain import errors as e

log = logging.getLogger("shoal.api")

STATUS = (
    (e.SecretUnavailable, 503),  # the operator's key is missing or wrong; says which
    (e.Unavailable, 503),  # Keystone cannot be reached
    (e.NotFound, 404),
    (e.NotAuthenticated, 401),
    (e.Forbidden, 403),
    (e.Conflict, 409),
    (e.Invalid, 400),
)
TITLES = {
    404: "The resource could not be found",
    405: "Method not allowed",
    406: "Not acceptable",
    415: "Unsupported media type: send application/json",
}


class HTTPError(Exception):
    """An API-level refusal (content type, malformed JSON, microversion gates)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", ""))


def body(status: int, message: str, req_id: str, **extra: Any) -> dict[str, Any]:
    detail = message if message.endswith(".") else message + "."
    return {
        "errors": [
            {
                "request_id": req_id,
                "code": "server" if status >= 500 else "client",
                "status": status,
                "title": message.rstrip("."),
                "detail": detail,
                "links": [],
                **extra,
            }
        ]
    }


def respond(request: Request, status: int, message: str) -> JSONResponse:
    return JSONResponse(body(status, message, request_id(request)), status_code=status)


def status_of(exc: e.ShoalError) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 400


HTTP_METHODS = ("GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS")


def _matches(template: str, path: str) -> bool:
    want, got = template.rstrip("/").split("/"), path.rstrip("/").split("/")
    return len(want) == len(got) and all(
        w == g or (w.startswith("{") and w.endswith("}") and g != "")
        for w, g in zip(want, got, strict=True)
    )


def allowed_methods(request: Request) -> list[str]:
    """Every method the API documents at this request's path, from its OpenAPI paths
    (Starlette's own 405 names only the first route that matched the path)."""
    methods: set[str] = set()
    for template, operations in request.app.openapi().get("paths", {}).items():
        if _matches(template, request.url.path):
            methods |= {m.upper() for m in operations if m.upper() in HTTP_METHODS}
    if "GET" in methods:
        methods.add("HEAD")  # Starlette answers HEAD wherever it answers GET
    return sorted(methods)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err.get("loc", ()) if x not in ("body", "query", "path"))
        parts.append(f"{loc or 'request'}: {err.get('msg', 'invalid')}")
    return "Invalid input: " + "; ".join(parts)


def install(app: FastAPI) -> None:
    """Register the handlers that turn every failure into Magnum's error shape."""

    @app.exception_handler(e.ShoalError)
    async def _domain(request: Request, exc: e.ShoalError) -> JSONResponse:
        response = respond(request, status_of(exc), exc.message)
        if isinstance(exc, e.NotAuthenticated):  # where to get a token (Keystone's uri)
            challenge = request.app.state.runtime.auth.challenge
            if challenge:
                response.headers["WWW-Authenticate"] = challenge
        return response

    @app.exception_handler(HTTPError)
    async def _http_error(request: Request, exc: HTTPError) -> JSONResponse:
        return respond(request, exc.status, exc.message)

    @app.exception_handler(HTTPException)
    async def _starlette(request: Request, exc: HTTPException) -> JSONResponse:
        msg = exc.detail if isinstance(exc.detail, str) and exc.status_code not in TITLES else None
        response = respond(request, exc.status_code, msg or TITLES.get(exc.status_code, "Error"))
        if exc.status_code == 405:  # RFC 9110: say which methods the path takes
            response.headers["Allow"] = ", ".join(allowed_methods(request))
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return respond(request, 400, _validation_message(exc))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error in %s %s", request.method, request.url.path)
        return respond(
            request, 500, "Internal error; see the server log for " + request_id(request)
        )
