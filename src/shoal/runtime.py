"""The composition root: build every long-lived part of a shoal process from
one Settings object, in one place. Entry points (cli `serve`, `conductor`,
tests) call `build_runtime`; nothing else constructs engines or drivers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.settings import Settings


@dataclass
class Runtime:
    """Handles shared by the API app and the conductor of one process."""

    settings: Settings
    db: Any  # shoal.db.engine.Database
    providers: Any  # shoal.drivers.registry.Providers
    conductor: Any | None = None  # shoal.conductor.loop.Conductor when running

    @property
    def sim(self) -> Any | None:
        """The world of the first sim provider (the /v1/sim admin API's default)."""
        return self.providers.sim_world()

    def start(self) -> None:
        if self.conductor is not None:
            self.conductor.start()

    def close(self) -> None:
        if self.conductor is not None:
            self.conductor.stop()
        self.providers.close()
        self.db.close()


def build_runtime(settings: Settings, *, with_conductor: bool | None = None) -> Runtime:
    """Open the database (applying migrations), the providers' drivers and, if asked,
    the conductor.

    `with_conductor` defaults to `settings.conductor`. The conductor is built
    but not started; `Runtime.start()` starts it.
    """
    from shoal.db import migrations
    from shoal.db.engine import Database
    from shoal.drivers import registry

    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.db_url)
    migrations.upgrade(db)
    try:
        providers = registry.build(settings)
    except BaseException:
        db.close()
        raise
    runtime = Runtime(settings=settings, db=db, providers=providers)
    if settings.conductor if with_conductor is None else with_conductor:
        from shoal.conductor.loop import Conductor

        api_url = settings.public_url or f"http://{settings.host}:{settings.port}"
        runtime.conductor = Conductor(db, providers, settings.conductor_settings, api_url=api_url)
    from shoal.db import notify

    # Every desired-state commit wakes conductors: NOTIFY on PostgreSQL, and
    # this process's own conductor directly (the embedded SQLite setup).
    notify.install(db, runtime.conductor.wake if runtime.conductor is not None else None)
    return runtime
