"""The simulated cloud: the reference driver and the embedded default (docs/drivers.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.settings import SimSettings


def open_provider(
    url: str, settings: SimSettings
) -> tuple[Any, Any, Any | None, Callable[[], None]]:
    """A sim provider's driver, its world (or the proxy of a world in a process of
    its own), that process (None when embedded), and how to close them."""
    from shoal.drivers.sim.driver import SimDriver
    from shoal.drivers.sim.world import SimWorld

    if settings.own_process:
        from shoal.drivers.sim.process import SimProcess

        proc = SimProcess(url, settings)
        return SimDriver(proc.world, per_group=settings.per_group), proc.world, proc, proc.close
    world = SimWorld.open(url, settings)
    return SimDriver(world, per_group=settings.per_group), world, None, world.close
