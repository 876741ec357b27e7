"""The real HTTP server on 127.0.0.1 and a free port, in a background thread.

Tests get a base URL and talk to it over TCP with real clients. The server
(and its conductor, when enabled) stops when the context exits.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from shoal.runtime import Runtime, build_runtime
from shoal.settings import Settings
from tests.support.waiting import scaled


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    def __init__(self, runtime: Runtime, port: int) -> None:
        from shoal.api import serving
        from shoal.api.app import create_app

        self.runtime = runtime
        # Bound here and handed to uvicorn (port 0: the kernel's choice), so no other
        # process can take the port between choosing it and serving on it.
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port = port = int(self._sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{port}"
        self.v1 = f"{self.url}/v1"
        # The configuration `shoal serve` uses (h11, header bound), on 127.0.0.1.
        config = serving.config(create_app(runtime), runtime.settings, port=port)
        config.host = "127.0.0.1"
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._sock]},
            name="live-server",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()
        deadline = time.monotonic() + scaled(20)
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=20)
        self._sock.close()

    def token(self, project: str = "default", role: str = "admin") -> str:
        """A token of this server's own (auth mode local) for `project` and `role`, issued
        as an operator would with `shoal token create`."""
        from shoal.services import tokens
        from shoal.services.context import Caller

        body = {"project_id": project, "role": role}
        _, token = tokens.issue(self.runtime.db, Caller("operator"), body)
        return token


@contextmanager
def live_server(settings: Settings) -> Iterator[LiveServer]:
    """Build a runtime from `settings`, serve it, and tear everything down."""
    runtime = build_runtime(settings)
    server = LiveServer(runtime, settings.port or 0)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        runtime.close()
