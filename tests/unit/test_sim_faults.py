"""Injected faults with Nova's failure classes, matched and counted, deterministic."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.domain.errors import Invalid, NotFound
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    MachineSpec,
    MachineState,
    TransientError,
)
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld


def spec(n: int, **over: object) -> MachineSpec:
    values: dict[str, object] = dict(
        machine_id=f"m-{n}", name=f"node-{n}", project_id="p", cluster_id="c",
        nodegroup_id="ng", role="worker", flavor_id="m1.small", image_id="ubuntu-24.04",
        availability_zone="az-1",
    )  # fmt: skip
    values.update(over)
    return MachineSpec(**values)  # type: ignore[arg-type]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def open_world(path: Path, clock: ManualClock, seed: int = 42) -> SimWorld:
    s = SimSettings(seed=seed, api_latency_ms=0, boot_seconds=10, delete_seconds=1, jitter=0)
    return SimWorld.open(f"sqlite:///{path}", s, clock)


@pytest.fixture
def world(tmp_path: Path, clock: ManualClock) -> SimWorld:
    return open_world(tmp_path / "sim.db", clock)


def test_quota_fault(world: SimWorld) -> None:
    world.add_fault({"kind": "quota_exceeded", "count": 1})
    with pytest.raises(BlockedError) as err:
        world.create(spec(1))
    assert err.value.kind is BlockedKind.QUOTA and "quota exceeded" in err.value.reason
    world.create(spec(1))  # count 1: spent
    assert world.faults()[0]["fired"] == 1


def test_no_valid_host_fault_matches_its_zone_only(world: SimWorld) -> None:
    world.add_fault({"kind": "no_valid_host", "az": "az-2"})
    world.create(spec(1, availability_zone="az-1"))
    for _ in range(3):  # no count: it keeps firing
        with pytest.raises(BlockedError) as err:
            world.create(spec(2, availability_zone="az-2"))
        assert err.value.kind is BlockedKind.NO_VALID_HOST and err.value.az == "az-2"
        assert "No valid host was found" in err.value.reason


def test_server_error_fault_matches_node_group_and_flavor(
    world: SimWorld, clock: ManualClock
) -> None:
    world.add_fault({"kind": "server_error", "nodegroup": "gpu", "flavor": "g1.large",
                     "message": "PCI device not available"})  # fmt: skip
    world.create(spec(1, nodegroup_id="gpu", flavor_id="g1.large"))
    world.create(spec(2, nodegroup_id="gpu", flavor_id="m1.small"))
    world.create(spec(3, flavor_id="g1.large"))
    clock.advance(10)
    states = {s.machine_id: (s.state, s.fault) for s in world.find({})}
    assert states["m-1"] == (MachineState.ERROR, "PCI device not available")
    assert states["m-2"] == (MachineState.ACTIVE, None)
    assert states["m-3"] == (MachineState.ACTIVE, None)
    again = world.create(spec(1, nodegroup_id="gpu", flavor_id="g1.large"))
    assert again.state is MachineState.ERROR  # returned as is: the conductor replaces it


def test_transient_faults_on_create_and_list(world: SimWorld) -> None:
    world.add_fault({"kind": "transient", "status": 429, "retry_after": 3, "count": 1})
    world.add_fault({"kind": "transient", "op": "list", "status": 503, "count": 1})
    with pytest.raises(TransientError) as err:
        world.create(spec(1))
    assert "429" in err.value.reason and err.value.retry_after == 3
    world.create(spec(1))
    with pytest.raises(TransientError, match="503"):
        world.find({})
    assert len(world.find({})) == 1


def test_delete_fails_once_per_machine(world: SimWorld, clock: ManualClock) -> None:
    world.add_fault({"kind": "delete_fails_once", "nodegroup": "ng"})
    world.create(spec(1))
    world.create(spec(2))
    for mid in ("m-1", "m-2"):
        with pytest.raises(TransientError):
            world.delete(mid)
        world.delete(mid)
    clock.advance(2)
    assert world.find({}) == []


def test_driver_maps_faults_through(world: SimWorld) -> None:
    world.add_fault({"kind": "transient", "op": "reboot", "count": 1})
    d = SimDriver(world)
    d.ensure_machine(spec(1))
    with pytest.raises(TransientError):
        d.reboot_machine("m-1")
    d.reboot_machine("m-1")


def test_probability_is_deterministic_under_the_seed(tmp_path: Path, clock: ManualClock) -> None:
    def errored(seed: int, name: str) -> list[str]:
        w = open_world(tmp_path / name, clock, seed=seed)
        w.add_fault({"kind": "server_error", "probability": 0.3})
        for n in range(100):
            w.create(spec(n))
        clock.advance(11)
        return sorted(s.machine_id for s in w.find({}) if s.state is MachineState.ERROR)

    first, again = errored(7, "a.db"), errored(7, "b.db")
    assert first == again
    assert 10 <= len(first) <= 50
    assert errored(8, "c.db") != first


def test_rules_are_listed_removed_and_checked(world: SimWorld) -> None:
    a = world.add_fault({"kind": "transient"})
    b = world.add_fault({"kind": "no_valid_host", "az": "az-3", "count": 2})
    assert (a["op"], a["probability"], a["fired"]) == ("create", 1.0, 0)
    assert [f["id"] for f in world.faults()] == [a["id"], b["id"]]
    world.delete_fault(a["id"])
    with pytest.raises(NotFound):
        world.delete_fault(a["id"])
    world.clear_faults()
    assert world.faults() == []
    world.create(spec(1))
    bad_rules = (
        {"kind": "meteor"},
        {"kind": "quota_exceeded", "op": "delete"},
        {"kind": "transient", "probability": 2},
        {"kind": "transient", "color": 1},
    )
    for bad in bad_rules:
        with pytest.raises(Invalid):
            world.add_fault(bad)
