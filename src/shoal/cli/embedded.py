"""An embedded shoal (API + conductor) served from a thread on 127.0.0.1: used by `shoal demo`."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from shoal import admin_token, datadir, keys
from shoal.api import serving
from shoal.runtime import Runtime, build_runtime
from shoal.settings import Settings


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class EmbeddedServer:
    """build_runtime + uvicorn in a background thread; `stop()` tears both down."""

    def __init__(self, settings: Settings) -> None:
        from shoal.api.app import create_app
        from shoal.services import certificates

        self.settings = settings
        datadir.secure(settings)
        sealer = keys.load(settings)
        self.runtime: Runtime = build_runtime(settings)
        certificates.seal_stored_keys(self.runtime.db, sealer)
        self.token = admin_token.for_embedded(settings, self.runtime.db)
        self.url = f"http://{settings.host}:{settings.port}"
        config = serving.config(create_app(self.runtime, sealer), settings)
        # Stopping does not wait on a browser's open requests longer than this.
        config.timeout_graceful_shutdown = 5
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="shoal-embedded", daemon=True)

    def start(self, timeout: float = 30) -> None:
        """Start serving; raise RuntimeError if the server does not come up."""
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.runtime.close()
                raise RuntimeError(f"the embedded server did not start on {self.url}")
            time.sleep(0.02)

    def running(self) -> bool:
        """Whether the server thread still serves (it ends on its own only on a crash)."""
        return self._thread.is_alive()

    def stop(self) -> None:
        """Stop serving (the app's lifespan stops the conductor) and close the runtime."""
        self._server.should_exit = True
        self._thread.join(timeout=30)
        self.runtime.close()
