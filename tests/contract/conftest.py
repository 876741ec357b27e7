"""The driver contract suite's fixtures: one harness per driver under test.

Every registered driver kind (shoal/drivers/registry.py) runs the suite with the
harnesses its package ships (`DriverKind.contract`: its `testing.HARNESSES`), so
a new driver brings its own. Two more need this test session's resources: the sim
on a throwaway PostgreSQL database, and the openstack driver on the real test cloud
(tests/contract/openstack_harness.py). A harness that cannot run here raises
`Unavailable`: the test skips, or fails under CI where ./run test installs what it
needs; a provocation a driver cannot make raises `Unsupported`: that check skips.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal.drivers import contract, registry
from shoal.drivers.harness import ContractHarness, DriverHarness, Unavailable
from shoal.drivers.sim.testing import sim_harness
from tests.support.databases import throwaway_pg
from tests.support.libvirt_host import skip_or_fail
from tests.support.openstack_cloud import OPENSTACK_MARKS, openstack_cloud, openstack_heat

# the session's OpenStack test cloud (with Heat), for the openstack and heat factories
__all__ = ["openstack_cloud", "openstack_heat"]


def sim_postgresql_factory(tmp_path: Path) -> DriverHarness:
    """The sim on a throwaway PostgreSQL database (skips when the server is unreachable)."""
    stack = contextlib.ExitStack()
    url = stack.enter_context(throwaway_pg())
    try:
        return sim_harness(url, zone="az-2", close=stack.close)
    except BaseException:
        stack.close()
        raise


def real_time(seconds: float) -> None:
    """`advance` for drivers of real clouds: time passes by waiting."""
    time.sleep(seconds)


def openstack_factory(tmp_path: Path, request: pytest.FixtureRequest) -> DriverHarness:
    """The openstack driver on the real test cloud (tests/contract/openstack_harness.py)."""
    from tests.contract.openstack_harness import openstack_factory as factory

    return factory(tmp_path, request.getfixturevalue("openstack_cloud"))


def heat_factory(tmp_path: Path, request: pytest.FixtureRequest) -> DriverHarness:
    """The heat driver on the real test cloud with Heat (tests/contract/heat_harness.py)."""
    from tests.contract.heat_harness import heat_factory as factory

    return factory(tmp_path, request.getfixturevalue("openstack_heat"))


Factory = Callable[[Path, pytest.FixtureRequest], DriverHarness]


def registered() -> dict[str, ContractHarness]:
    """The harnesses every registered driver kind ships."""
    out: dict[str, ContractHarness] = {}
    for name in registry.names():
        path = registry.kind(name).contract
        if path is not None:
            out.update(registry.load(path))
    return out


SHIPPED = registered()
FACTORIES: dict[str, Factory] = {
    **{n: (lambda tmp_path, _, h=h: h.make(tmp_path)) for n, h in SHIPPED.items()},
    "sim-postgresql": lambda tmp_path, _: sim_postgresql_factory(tmp_path),
    "openstack": openstack_factory,
    "heat": heat_factory,
}
MARKS = {
    **{n: [getattr(pytest.mark, m) for m in h.marks] for n, h in SHIPPED.items()},
    "sim-postgresql": [pytest.mark.postgres],
    "openstack": OPENSTACK_MARKS,
    "heat": OPENSTACK_MARKS,
}


@pytest.fixture(params=[pytest.param(n, marks=MARKS.get(n, [])) for n in sorted(FACTORIES)])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DriverHarness]:
    try:
        h = FACTORIES[request.param](tmp_path, request)
    except Unavailable as exc:
        skip_or_fail(str(exc))
        raise  # unreachable: skip and fail raise
    try:
        yield h
    finally:
        h.close()


@pytest.fixture
def driver(harness: DriverHarness) -> contract.Driver:
    return harness.driver
