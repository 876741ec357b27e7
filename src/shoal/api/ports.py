"""What the API needs of the process it runs in (`shoal.runtime.Runtime`), typed
as ports: the API never imports the composition root, nor a driver."""

from __future__ import annotations

from typing import Any, Protocol

from shoal.auth.base import Authenticator
from shoal.db.engine import Database
from shoal.settings import Settings


class Conductor(Protocol):
    """The process's conductor, which the app's lifespan stops."""

    def stop(self) -> None: ...


class Providers(Protocol):
    """The process's providers, as far as the /v1/sim admin API reaches them."""

    def sim_world(self, name: str | None = None) -> Any | None:
        """The world of sim provider `name` (default: the first), None when there is none."""
        ...


class Runtime(Protocol):
    """The handles one process shares between its API and its conductor."""

    @property
    def settings(self) -> Settings: ...
    @property
    def db(self) -> Database: ...
    @property
    def auth(self) -> Authenticator: ...
    @property
    def providers(self) -> Providers: ...
    @property
    def conductor(self) -> Conductor | None: ...

    def start(self) -> None:
        """Start the conductor (or the process's presence reports)."""
        ...
