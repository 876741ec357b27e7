"""How the API is served: one uvicorn configuration for `shoal serve`, the demo's
embedded server and the tests, so that all of them bound requests alike.

- HTTP/1.1 through h11 (pinned, not "auto": the request-header bound below is
  h11's, and another parser would bring other limits).
- The request line plus headers are bounded by `settings.max_header_bytes`:
  h11 refuses a header block that grows past it while still incomplete with a
  plain 400 and closes the connection before the app sees it (uvicorn's own
  answer), so a slow sender cannot make it hold more. A longer block that arrives
  whole in one read is parsed by h11 all the same; the app refuses that one
  with 431 (`bodylimit.BodyLimit`).
- Bodies are bounded by the app (`bodylimit.BodyLimit`, 413).
- No logging configuration of uvicorn's own: its `uvicorn.error` and
  `uvicorn.access` loggers propagate to the root logger that `shoal.logs`
  configures at the entry point, so they share its format and level.
"""

from __future__ import annotations

import socket
from typing import Any

import uvicorn

from shoal.settings import Settings


def config(app: Any, settings: Settings, *, port: int | None = None) -> uvicorn.Config:
    """The uvicorn configuration for `app` on settings.host and `port` (settings.port)."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port if port is None else port,
        http="h11",
        h11_max_incomplete_event_size=settings.max_header_bytes,
        lifespan="on",
        log_config=None,
        log_level=None,
        server_header=False,
    )


class PortTaken(OSError):
    """The address cannot be bound (in use, or not this machine's)."""


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound now, as uvicorn would bind it, so that a
    taken port is known before anything says the server serves (and no other process
    can take it between the check and the start). PortTaken names the address."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, as asyncio binds: it sets TCP_NODELAY only on sockets that say TCP
    # (without it, every answer waits ~40 ms for a delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise PortTaken(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock
