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
    driver: Any  # shoal.drivers.contract.Driver
    sim: Any | None = None  # shoal.drivers.sim.world.SimWorld (or its proxy) when driver == "sim"
    conductor: Any | None = None  # shoal.conductor.loop.Conductor when running
    sim_process: Any | None = None  # shoal.drivers.sim.process.SimProcess when it has one

    def start(self) -> None:
        if self.conductor is not None:
            self.conductor.start()

    def close(self) -> None:
        if self.conductor is not None:
            self.conductor.stop()
        if self.sim_process is not None:
            self.sim_process.close()
        elif self.sim is not None:
            self.sim.close()
        self.db.close()


def build_driver(settings: Settings) -> tuple[Any, Any | None, Any | None]:
    """The configured driver and, for `sim`, its world (for the admin API) and the
    child process that hosts the world when it runs in one."""
    if settings.driver == "sim":
        from shoal.drivers.sim.driver import SimDriver
        from shoal.drivers.sim.world import SimWorld

        if settings.sim.own_process:
            from shoal.drivers.sim.process import SimProcess

            proc = SimProcess(settings.sim_db_url, settings.sim)
            return SimDriver(proc.world), proc.world, proc
        world = SimWorld.open(settings.sim_db_url, settings.sim)
        return SimDriver(world), world, None
    from shoal.settings import SettingsError

    raise SettingsError(f"SHOAL_DRIVER={settings.driver!r} is not a known driver; use: sim")


def build_runtime(settings: Settings, *, with_conductor: bool | None = None) -> Runtime:
    """Open the database (applying migrations), the driver and, if asked, the conductor.

    `with_conductor` defaults to `settings.conductor`. The conductor is built
    but not started; `Runtime.start()` starts it.
    """
    from shoal.db import migrations
    from shoal.db.engine import Database

    if settings.database_url is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(settings.db_url)
    migrations.upgrade(db)
    driver, sim, sim_process = build_driver(settings)
    runtime = Runtime(settings=settings, db=db, driver=driver, sim=sim, sim_process=sim_process)
    if settings.conductor if with_conductor is None else with_conductor:
        from shoal.conductor.loop import Conductor

        runtime.conductor = Conductor(db, driver, settings.conductor_settings)
    from shoal.db import notify

    # Every desired-state commit wakes conductors: NOTIFY on PostgreSQL, and
    # this process's own conductor directly (the embedded SQLite setup).
    notify.install(db, runtime.conductor.wake if runtime.conductor is not None else None)
    return runtime
