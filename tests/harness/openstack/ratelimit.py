"""A rate-limiting HTTP proxy in front of one OpenStack API, as clouds put one there
(Nova itself has no rate limit): it forwards every request to the upstream API and,
when told to, answers the next creates with `429 Too Many Requests` and a
`Retry-After` header instead.

    with RateLimitProxy(nova_url) as proxy:     # nova_url: http://127.0.0.1:P/v2.1
        proxy.url                               # the same API through the proxy
        proxy.refuse(1, retry_after=2)          # the next POST .../servers gets a 429

It listens on 127.0.0.1 (a free port) and stops with the context (a daemon thread).
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

# Not forwarded. The Host header is: Nova builds its links from it, so they name the proxy.
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade"}


def _server_create(method: str, path: str) -> bool:
    return method == "POST" and path.rstrip("/").endswith("/servers")


class RateLimitProxy:
    def __init__(
        self, upstream: str, refusing: Callable[[str, str], bool] = _server_create
    ) -> None:
        self._refusing = refusing  # which requests `refuse` applies to (method, path)
        parts = urllib.parse.urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.path = parts.path.rstrip("/")
        self._refuse = 0
        self._retry_after = 1.0
        self.refused = 0
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy._take(self.command, self.path):
                    proxy._too_many(self)
                    return
                conn = http.client.HTTPConnection(
                    proxy.upstream_host, proxy.upstream_port, timeout=120
                )
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                self.send_response(answer.status, answer.reason)
                for k, v in answer.getheaders():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def refuse(self, count: int, retry_after: float = 1.0) -> None:
        """Answer the next `count` requests `refusing` picks (by default creates,
        `POST .../servers`) with 429."""
        with self._lock:
            self._refuse, self._retry_after = count, retry_after

    def _take(self, method: str, path: str) -> bool:
        with self._lock:
            if self._refusing(method, path) and self._refuse:
                self._refuse -= 1
                self.refused += 1
                return True
            return False

    def _too_many(self, handler: BaseHTTPRequestHandler) -> None:
        body = json.dumps(
            {"overLimit": {"code": 429, "message": "Too many requests: slow down"}}
        ).encode()
        handler.send_response(429, "Too Many Requests")
        handler.send_header("Retry-After", str(max(1, round(self._retry_after))))
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def __enter__(self) -> RateLimitProxy:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
