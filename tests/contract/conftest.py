"""The driver contract suite's fixtures: one harness per driver under test.

To run the suite against a new driver, write a factory that returns a
`DriverHarness` (the driver, a way to let time pass, and names of a flavor,
image and zone it knows) and add it to FACTORIES. Factories may skip (for
example when libvirt is not installed) and may use session fixtures through
`request` (the openstack factory takes the real test cloud).
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal.drivers import contract
from shoal.drivers.contract import MachineSpec
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.world import SimWorld
from shoal.settings import SimSettings
from tests.contract.harness import DriverHarness, Provocation, Provoke
from tests.contract.libvirt_factory import libvirt_factory
from tests.contract.local_factory import local_factory
from tests.support.databases import throwaway_pg
from tests.support.openstack_cloud import OPENSTACK_MARKS, openstack_cloud

__all__ = ["openstack_cloud"]  # the session's OpenStack test cloud, for the openstack factory


def sim_provoke(world: SimWorld) -> Provoke:
    """Each error class from a fault rule that fires once, for the spec's group only."""
    rules = {
        Provocation.QUOTA: {"kind": "quota_exceeded"},
        Provocation.NO_VALID_HOST: {"kind": "no_valid_host"},
        Provocation.NO_VALID_HOST_ASYNC: {"kind": "no_valid_host_async"},
        Provocation.TRANSIENT: {"kind": "transient", "status": 429, "retry_after": 2},
    }

    def provoke(kind: Provocation, spec: MachineSpec) -> MachineSpec:
        group = f"provoked-{uuid.uuid4().hex[:8]}"
        world.add_fault({**rules[kind], "nodegroup": group, "count": 1})
        return dataclasses.replace(spec, nodegroup_id=group)

    return provoke


def sim_factory(tmp_path: Path, *, per_group: bool = False) -> DriverHarness:
    """The sim with a manual clock: booting takes simulated time but no real time."""
    clock = ManualClock()
    settings = SimSettings(boot_seconds=20, delete_seconds=5, api_latency_ms=50, jitter=0.2)
    world = SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", settings, clock=clock)
    return DriverHarness(
        driver=SimDriver(world, per_group=per_group),
        flavor="m1.small",
        image="fedora-coreos-40",
        other_image="ubuntu-24.04",
        zone="az-1",
        advance=clock.advance,
        close=world.close,
        provoke=sim_provoke(world),
    )


def sim_postgresql_factory(tmp_path: Path) -> DriverHarness:
    """The sim on a throwaway PostgreSQL database (skips when the server is unreachable)."""
    stack = contextlib.ExitStack()
    url = stack.enter_context(throwaway_pg())
    clock = ManualClock()
    world = SimWorld.open(url, SimSettings(boot_seconds=20, delete_seconds=5), clock=clock)

    def close() -> None:
        world.close()
        stack.close()

    return DriverHarness(
        driver=SimDriver(world),
        flavor="m1.small",
        image="fedora-coreos-40",
        other_image="ubuntu-24.04",
        zone="az-2",
        advance=clock.advance,
        close=close,
        provoke=sim_provoke(world),
    )


def real_time(seconds: float) -> None:
    """`advance` for drivers of real clouds: time passes by waiting."""
    time.sleep(seconds)


def openstack_factory(tmp_path: Path, request: pytest.FixtureRequest) -> DriverHarness:
    """The openstack driver on the real test cloud (tests/contract/openstack_harness.py)."""
    from tests.contract.openstack_harness import openstack_factory as factory

    return factory(tmp_path, request.getfixturevalue("openstack_cloud"))


FACTORIES: dict[str, Callable[[Path, pytest.FixtureRequest], DriverHarness]] = {
    "sim": lambda tmp_path, _: sim_factory(tmp_path),
    "sim-per-group": lambda tmp_path, _: sim_factory(tmp_path, per_group=True),
    "sim-postgresql": lambda tmp_path, _: sim_postgresql_factory(tmp_path),
    "libvirt": lambda tmp_path, _: libvirt_factory(tmp_path),  # libvirt's test driver
    "openstack": openstack_factory,
    "local": lambda tmp_path, _: local_factory(tmp_path),  # namespace machines (root)
}
MARKS = {
    "sim-postgresql": [pytest.mark.postgres],
    "libvirt": [pytest.mark.libvirt],
    "openstack": OPENSTACK_MARKS,
    "local": [pytest.mark.kubernetes],
}


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in sorted(FACTORIES)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DriverHarness]:
    h = FACTORIES[request.param](tmp_path, request)
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def driver(harness: DriverHarness) -> contract.Driver:
    return harness.driver
