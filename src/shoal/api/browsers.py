"""What keeps web pages from using a shoal they can reach (one on localhost, say).

- **Host**: the `Host` header must name this server (localhost, its listen address, its
  public URL's host, or `SHOAL_ALLOWED_HOSTS`), so a page on a domain an attacker
  re-points at 127.0.0.1 (DNS rebinding) gets 400.
- **Origin**: a request that changes something and carries another site's `Origin`
  gets 403, unless that origin is in `SHOAL_CORS_ORIGINS`.
- **Content type**: a request with a body that changes something must say the body is
  JSON (415 otherwise): a page can send `text/plain` or no type without asking the
  browser first, but not `application/json`.
- **CORS** is off unless `SHOAL_CORS_ORIGINS` names origins.

Plain ASGI, inside `app.PerRequest` (so refusals carry the request id).
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from shoal.api import errors

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")


def split(csv: str | None) -> list[str]:
    return [x.strip() for x in (csv or "").split(",") if x.strip()]


def allowed_hosts(
    listen: str, public_url: str | None, configured: str | None
) -> frozenset[str] | None:
    """The Host names the API answers, lower case and without port; None for any (`*`,
    or a server listening on every address with no public URL to go by)."""
    names = split(configured)
    if "*" in names:
        return None
    if not names and listen in WILDCARDS and not public_url:
        return None
    hosts = {*LOCAL_HOSTS, *(n.lower() for n in names)}
    if listen not in WILDCARDS:
        hosts.add(listen.lower().strip("[]"))
    if public_url:
        hosts.add((urlsplit(public_url).hostname or "").lower())
    return frozenset(hosts)


def host_name(header: str) -> str:
    """`example.org:9511` -> `example.org`; `[::1]:9511` -> `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1 : header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


class BrowserGuard:
    def __init__(
        self, app: ASGIApp, hosts: frozenset[str] | None, origins: Iterable[str] = ()
    ) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = frozenset(o.rstrip("/").lower() for o in origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        refusal = self._refusal(scope["method"], headers)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        status, message = refusal
        req_id = str(scope.get("state", {}).get("request_id", ""))
        response = JSONResponse(errors.body(status, message, req_id), status_code=status)
        await response(scope, receive, send)

    def _refusal(self, method: str, headers: Headers) -> tuple[int, str] | None:
        host = host_name(headers.get("host", ""))
        if self.hosts is not None and host not in self.hosts:
            return 400, (
                f"Host {host!r} is not a name of this server: add it to SHOAL_ALLOWED_HOSTS "
                "(or set SHOAL_PUBLIC_URL)"
            )
        if method in SAFE_METHODS:
            return None
        origin = headers.get("origin")
        if origin and not self._same_or_allowed(origin, headers.get("host", "")):
            return 403, (
                f"Requests from web pages of {origin} may not change anything here: add the "
                "origin to SHOAL_CORS_ORIGINS to allow it"
            )
        has_body = headers.get("content-length", "0").strip() not in ("", "0") or (
            "transfer-encoding" in headers
        )
        if has_body and not is_json(headers.get("content-type", "")):
            given = headers.get("content-type") or "none"
            return 415, f"Unsupported Content-Type {given!r}: send application/json"
        return None

    def _same_or_allowed(self, origin: str, host: str) -> bool:
        origin = origin.rstrip("/").lower()
        if origin in self.origins:
            return True
        parts = urlsplit(origin)
        return bool(parts.netloc) and parts.netloc == host.strip().lower()
