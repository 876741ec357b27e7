"""The FastAPI application: Magnum-compatible /v1 plus shoal's extensions.

`create_app(runtime)` keeps the runtime in `app.state.runtime`; its lifespan sets
how many requests run at once (`settings.api_threads`: the event loop's thread
limiter, on which the sync routes run), starts the conductor (if the runtime has
one) and stops it at shutdown.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anyio import to_thread
from fastapi import Depends, FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shoal.api import bodylimit, browsers, deps, errors, microversion, openapi, ports
from shoal.api.routes import (
    agent,
    caller,
    certificates,
    clusters,
    clustertemplates,
    credentials,
    misc,
    nodegroups,
    nodegrouptemplates,
    operations,
    orphans,
    providers,
    sim,
    tokens,
)
from shoal.db import errors as db_errors
from shoal.domain import sealing
from shoal.web import serving as dashboard

log = logging.getLogger(__name__)
UNVERSIONED = ("/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect")
RETRY_AFTER_S = 2  # what a 503 for a crowded database suggests (Retry-After)


class NormalizePath:
    """Trailing slashes are accepted; a path without /v1 is served as /v1 (Magnum), but
    the dashboard's /ui."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if len(path) > 1:
                path = path.rstrip("/") or "/"
            if (
                path != "/"
                and path not in UNVERSIONED
                and not (path == "/v1" or path.startswith("/v1/"))
                and not (path == dashboard.PREFIX or path.startswith(dashboard.PREFIX + "/"))
            ):
                path = "/v1" + path
            if path != scope["path"]:
                scope = dict(scope, path=path, raw_path=path.encode())
        await self.app(scope, receive, send)


def _version_headers(version: tuple[int, int]) -> list[tuple[bytes, bytes]]:
    return [
        (b"openstack-api-minimum-version", b"container-infra " + _fmt(microversion.MIN)),
        (b"openstack-api-maximum-version", b"container-infra " + _fmt(microversion.MAX)),
        (b"openstack-api-version", b"container-infra " + _fmt(version)),
        (b"vary", microversion.HEADER.encode()),
    ]


def _fmt(version: tuple[int, int]) -> bytes:
    return microversion.fmt(version).encode()


class PerRequest:
    """Request id, microversion negotiation, version headers on every answer, and a
    last-resort 500 in Magnum's shape. Plain ASGI (not BaseHTTPMiddleware, which
    costs a task group and two streams per request)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        req_id = f"req-{uuid.uuid4()}"
        state = scope.setdefault("state", {})
        state["request_id"] = req_id
        version = microversion.DEFAULT
        extra = [(b"x-openstack-request-id", req_id.encode())]
        try:
            version = microversion.parse(Headers(scope=scope).get(microversion.HEADER))
        except microversion.UnsupportedVersion as exc:
            body = _unsupported(exc, req_id)
            await self._reply(scope, receive, send, body, 406, extra + _version_headers(version))
            return
        except microversion.BadVersion as exc:
            body = errors.body(400, str(exc), req_id)
            await self._reply(scope, receive, send, body, 400, extra + _version_headers(version))
            return
        state["version"] = version
        extra += _version_headers(version)
        if _has_nul(scope):
            msg = "The request URL must not contain NUL (%00)"
            await self._reply(scope, receive, send, errors.body(400, msg, req_id), 400, extra)
            return
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = dict(message, headers=[*message.get("headers", []), *extra])
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        except Exception:
            errors.log.exception("unhandled error in %s %s", scope["method"], scope["path"])
            if started:  # too late for a clean answer; the connection is closed
                raise
            msg = f"Internal error; see the server log for {req_id}"
            await self._reply(scope, receive, send, errors.body(500, msg, req_id), 500, extra)

    @staticmethod
    async def _reply(
        scope: Scope,
        receive: Receive,
        send: Send,
        body: dict[str, Any],
        status: int,
        headers: list[tuple[bytes, bytes]],
    ) -> None:
        response = JSONResponse(body, status_code=status)
        response.raw_headers.extend(headers)
        await response(scope, receive, send)


def _has_nul(scope: Scope) -> bool:
    """A NUL in the decoded path or the query string (PostgreSQL refuses it in text,
    so an identifier or filter holding one could only fail inside the database)."""
    query: bytes = scope.get("query_string", b"")
    return "\x00" in scope["path"] or b"\x00" in query or b"%00" in query


def _unsupported(exc: Exception, req_id: str) -> dict[str, Any]:
    lo, hi = microversion.fmt(microversion.MIN), microversion.fmt(microversion.MAX)
    body = errors.body(406, "Requested microversion is unsupported", req_id)
    body["errors"][0].update(
        code="magnum.microversion-unsupported",
        title="Requested microversion is unsupported",
        detail=f"Version {exc} was requested but the minimum supported version is "
        f"{lo} and the maximum is {hi}.",
        min_version=lo,
        max_version=hi,
    )
    return body


def create_app(runtime: ports.Runtime, sealer: sealing.Sealer | None = None) -> FastAPI:
    """The ASGI app for one `shoal.runtime.Runtime` (database, driver, optional conductor).

    Typed through `ports.Runtime`: the API layer does not import the runtime (which
    builds drivers), only what it needs of it.
    `sealer` seals cluster CA keys at rest (`shoal serve` loads it, and seals the
    keys still stored as plaintext, before it serves); without one, the key the
    settings name is loaded when a request first needs it (`deps.sealer`).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Sync routes and dependencies (most of the API) run on anyio's default thread
        # limiter of this event loop: at most `api_threads` at once, the rest in order.
        to_thread.current_default_thread_limiter().total_tokens = runtime.settings.api_threads
        runtime.start()
        try:
            yield
        finally:
            if runtime.conductor is not None:
                runtime.conductor.stop()

    app = FastAPI(
        title="shoal",
        description="Cluster lifecycle service speaking the OpenStack Magnum v1 API",
        version="1.14",
        lifespan=lifespan,
        redirect_slashes=False,
    )
    app.state.runtime = runtime
    app.state.sealer = sealer
    errors.install(app)
    openapi.install(app)

    @app.exception_handler(db_errors.DatabaseError)
    async def _concurrent(request: Request, exc: Exception) -> Response:
        """A request that lost a race inside PostgreSQL (deadlock, serialization
        failure, lock timeout) is a conflict to retry, not a server error."""
        if db_errors.lost_race(exc):
            msg = "The resource was changed by a concurrent request; retry"
            return errors.respond(request, 409, msg)
        return _unavailable(request, exc)

    @app.exception_handler(db_errors.PoolExhausted)
    async def _crowded(request: Request, exc: Exception) -> Response:
        return _unavailable(request, exc)

    def _unavailable(request: Request, exc: Exception) -> Response:
        """The database cannot take the request now (out of connections, restarting,
        unreachable): 503 with a hint to retry, nothing changed; any other database
        failure is a server error."""
        why = db_errors.unavailable(exc)
        if why is None:
            raise exc
        log.warning("%s %s: %s (%s)", request.method, request.url.path, why, exc)
        msg = f"Service unavailable: {why}; nothing was changed, retry in a few seconds"
        response = errors.respond(request, 503, msg)
        response.headers["Retry-After"] = str(RETRY_AFTER_S)
        return response

    settings = runtime.settings
    app.add_middleware(
        bodylimit.BodyLimit,
        max_bytes=settings.max_body_bytes,
        max_header_bytes=settings.max_header_bytes,
    )
    hosts = browsers.allowed_hosts(settings.host, settings.public_url, settings.allowed_hosts)
    origins = browsers.split(settings.cors_origins)
    app.add_middleware(browsers.BrowserGuard, hosts=hosts, origins=origins)
    if origins:  # CORS only when the operator names the web pages that may call
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "PATCH", "PUT", "DELETE"],
            allow_headers=["X-Auth-Token", "Authorization", "Content-Type", microversion.HEADER],
            expose_headers=["X-OpenStack-Request-Id", "OpenStack-API-Version"],
        )
    app.add_middleware(PerRequest)  # outermost but one: every refusal gets the request id

    @app.get("/", tags=["meta"])
    def root(request: Request) -> dict[str, Any]:
        return {
            "name": "OpenStack Magnum API (shoal)",
            "description": "shoal: Kubernetes clusters of independently managed node groups, "
            "Magnum v1 compatible.",
            "versions": [misc.version_entry(request)],
        }

    app.include_router(misc.public, prefix="/v1")
    app.include_router(agent.router, prefix="/v1")  # nodes: their own token each
    app.include_router(dashboard.router)  # /ui/: static files; their data comes from /v1
    for r in (
        misc.router,
        caller.router,
        clustertemplates.router,
        nodegrouptemplates.router,
        nodegroups.router,
        clusters.router,
        certificates.router,
        credentials.router,
        providers.router,
        orphans.router,
        operations.router,
        tokens.router,
        sim.router,
    ):
        app.include_router(r, prefix="/v1", dependencies=[Depends(deps.authenticated)])
    app.add_middleware(NormalizePath)
    return app
