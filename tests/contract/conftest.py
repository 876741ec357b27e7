"""The driver contract suite's fixtures: one harness per driver under test.

Every registered driver kind (shoal/drivers/registry.py) runs the suite with the
harnesses its package ships (`DriverKind.contract`: its `testing.HARNESSES`), so
a new driver brings its own. A driver of a real cloud ships a `CloudHarness`: the
suite brings it the cloud it names, made ready from the session's OpenStack test
cloud (tests/contract/clouds.py: `openstack`, Nova's API behind a rate-limiting
proxy; `heat`, the same cloud with Heat, Heat's API behind it). One more harness
needs this test session's resources: the sim on a throwaway PostgreSQL database.
A harness that cannot run here raises `Unavailable`: the test skips, or fails under
CI where ./run test installs what it needs. An error-class check needs its harness to
provoke that error (`@pytest.mark.provokes(Provocation...)`): it is not run against a
harness that declares it cannot (`cannot`, with why; listed as deselected, the why
printed with `-v`); a provocation found impossible only when tried raises `Unsupported`:
that check skips.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from shoal.drivers import contract, registry
from shoal.drivers.harness import (
    CloudHarness,
    ContractHarness,
    DriverHarness,
    Provocation,
    ReadyCloud,
    Unavailable,
)
from shoal.drivers.sim.testing import sim_harness
from tests.contract import clouds
from tests.support.databases import throwaway_pg
from tests.support.libvirt_host import skip_or_fail
from tests.support.openstack_cloud import OPENSTACK_MARKS, openstack_cloud, openstack_heat

if TYPE_CHECKING:
    from tests.harness.openstack.cloud import OpenStackCloud

# the session's OpenStack test cloud (with Heat), which the ready clouds are made from
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


# The clouds the suite makes ready for a `CloudHarness`, by the name it gives: the
# session fixture of the test cloud they are made from, how, and the tests' marks.
Ready = Callable[["OpenStackCloud", Path], contextlib.AbstractContextManager[ReadyCloud]]
CLOUDS: Mapping[str, tuple[str, Ready, list[pytest.MarkDecorator]]] = {
    "openstack": ("openstack_cloud", clouds.nova_ready, OPENSTACK_MARKS),
    "heat": ("openstack_heat", clouds.heat_ready, OPENSTACK_MARKS),
}


def registered() -> dict[str, ContractHarness | CloudHarness]:
    """The harnesses every registered driver kind ships."""
    out: dict[str, ContractHarness | CloudHarness] = {}
    for name in registry.names():
        path = registry.kind(name).contract
        if path is not None:
            out.update(registry.load(path))
    return out


def marks(h: ContractHarness | CloudHarness) -> list[pytest.MarkDecorator]:
    if isinstance(h, CloudHarness):
        return CLOUDS[h.cloud][2]
    return [getattr(pytest.mark, m) for m in h.marks]


def make(
    h: ContractHarness | CloudHarness, tmp_path: Path, request: pytest.FixtureRequest
) -> DriverHarness:
    """The harness `h` builds; a cloud harness on its cloud, made ready for this test
    (ready until the test's end: `request` closes it after the harness)."""
    if isinstance(h, ContractHarness):
        return h.make(tmp_path)
    fixture, ready, _ = CLOUDS[h.cloud]
    cloud = request.getfixturevalue(fixture)
    stack = contextlib.ExitStack()
    request.addfinalizer(stack.close)
    return h.make(tmp_path, stack.enter_context(ready(cloud, tmp_path)))


Factory = Callable[[Path, pytest.FixtureRequest], DriverHarness]


def factory(h: ContractHarness | CloudHarness) -> Factory:
    return lambda tmp_path, request: make(h, tmp_path, request)


SHIPPED = registered()
FACTORIES: dict[str, Factory] = {
    **{n: factory(h) for n, h in SHIPPED.items()},
    "sim-postgresql": lambda tmp_path, _: sim_postgresql_factory(tmp_path),
}
CANNOT: dict[str, Mapping[Provocation, str]] = {n: h.cannot for n, h in SHIPPED.items()}
MARKS = {
    **{n: marks(h) for n, h in SHIPPED.items()},
    "sim-postgresql": [pytest.mark.postgres],
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect each error-class check whose harness declares it cannot provoke that error."""
    kept, dropped = [], []
    for item in items:
        mark = item.get_closest_marker("provokes")
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("harness") if callspec is not None else None
        why = CANNOT.get(str(name), {}).get(mark.args[0]) if mark and name else None
        if why is None:
            kept.append(item)
            continue
        dropped.append(item)
        if config.option.verbose > 0:
            print(f"\n{item.nodeid}: not run: {why}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
