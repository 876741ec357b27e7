"""The sim under the driver contract suite: a world with a manual clock, so booting
takes simulated time but no real time; each error class from a fault rule that
fires once, for the provoked spec's group only."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from shoal.drivers.contract import MachineSpec
from shoal.drivers.harness import ContractHarness, DriverHarness, Provocation, Provoke
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld

RULES: dict[Provocation, dict[str, object]] = {
    Provocation.QUOTA: {"kind": "quota_exceeded"},
    Provocation.NO_VALID_HOST: {"kind": "no_valid_host"},
    Provocation.NO_VALID_HOST_ASYNC: {"kind": "no_valid_host_async"},
    Provocation.TRANSIENT: {"kind": "transient", "status": 429, "retry_after": 2},
}


def provoker(world: SimWorld) -> Provoke:
    """Each error class from a fault rule that fires once, for the spec's group only."""

    def provoke(kind: Provocation, spec: MachineSpec) -> MachineSpec:
        group = f"provoked-{uuid.uuid4().hex[:8]}"
        world.add_fault({**RULES[kind], "nodegroup": group, "count": 1})
        return dataclasses.replace(spec, nodegroup_id=group)

    return provoke


def sim_harness(
    url: str,
    *,
    per_group: bool = False,
    zone: str = "az-1",
    settings: SimSettings | None = None,
    close: Callable[[], None] = lambda: None,
) -> DriverHarness:
    """The sim on the world at `url` with a manual clock; `close` runs after the world's."""
    clock = ManualClock()
    settings = settings or SimSettings(
        boot_seconds=20, delete_seconds=5, api_latency_ms=50, jitter=0.2
    )
    world = SimWorld.open(url, settings, clock=clock)

    def close_all() -> None:
        world.close()
        close()

    return DriverHarness(
        driver=SimDriver(world, per_group=per_group),
        flavor="m1.small",
        image="fedora-coreos-40",
        other_image="ubuntu-24.04",
        zone=zone,
        advance=clock.advance,
        close=close_all,
        provoke=provoker(world),
    )


HARNESSES = {
    "sim": ContractHarness(lambda tmp: sim_harness(f"sqlite:///{tmp / 'sim.db'}")),
    "sim-per-group": ContractHarness(
        lambda tmp: sim_harness(f"sqlite:///{tmp / 'sim.db'}", per_group=True)
    ),
}
