"""Serve the dashboard's files under /ui/ with strict security headers.

The files are read once, at import, from this package's `static/` directory: a
fixed set of names, so no request path reaches the file system. Each answer carries
an ETag (the file's digest) and is revalidated on every load (`no-cache`), so a new
shoal version is picked up at once without a stale module mixing in.
"""

from __future__ import annotations

import hashlib
from importlib import resources

from fastapi import APIRouter, Request, Response

PREFIX = "/ui"
INDEX = "index.html"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
# No inline script or style, nothing from another origin, never framed; the page talks
# to this origin's /v1 only.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-cache",
}


class StaticFile:
    """One file of the dashboard, in memory, with its type and ETag."""

    def __init__(self, body: bytes, media_type: str) -> None:
        self.body = body
        self.media_type = media_type
        self.etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def load(package: str = f"{__package__}.static") -> dict[str, StaticFile]:
    """Every file under `package` with a known type, by its path relative to it."""
    files: dict[str, StaticFile] = {}

    def walk(node: resources.abc.Traversable, prefix: str) -> None:
        for child in node.iterdir():
            name = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, name + "/")
                continue
            suffix = "." + child.name.rsplit(".", 1)[-1] if "." in child.name else ""
            if suffix in TYPES:
                files[name] = StaticFile(child.read_bytes(), TYPES[suffix])

    walk(resources.files(package), "")
    return files


FILES = load()


def answer(request: Request, name: str) -> Response:
    """The file `name` (404 for any other), or 304 when the browser has this version."""
    found = FILES.get(name)
    if found is None:
        return Response(
            b"Not found: the dashboard is at /ui/",
            status_code=404,
            media_type="text/plain; charset=utf-8",
            headers=SECURITY_HEADERS,
        )
    headers = {**SECURITY_HEADERS, "ETag": found.etag}
    if request.headers.get("if-none-match") == found.etag:
        return Response(status_code=304, headers=headers)
    return Response(found.body, media_type=found.media_type, headers=headers)


router = APIRouter(include_in_schema=False)


@router.get(PREFIX)
def index(request: Request) -> Response:
    """/ui and /ui/ (the app strips the trailing slash): the page."""
    return answer(request, INDEX)


@router.get(PREFIX + "/{name:path}")
def static_file(request: Request, name: str) -> Response:
    return answer(request, name or INDEX)
