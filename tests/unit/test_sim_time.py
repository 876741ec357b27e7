"""The sim's time model: lazy states, jittered boot/delete, API latency, time_scale."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.drivers.contract import MachineSpec, MachineState
from shoal.drivers.sim.clock import ManualClock
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld


def spec(n: int, **over: object) -> MachineSpec:
    values: dict[str, object] = dict(
        machine_id=f"m-{n}", name=f"node-{n}", project_id="p", cluster_id="c",
        nodegroup_id="ng", role="worker", flavor_id="m1.small", image_id="ubuntu-24.04",
    )  # fmt: skip
    values.update(over)
    return MachineSpec(**values)  # type: ignore[arg-type]


def open_world(tmp_path: Path, clock: ManualClock, **settings: object) -> SimWorld:
    return SimWorld.open(f"sqlite:///{tmp_path / 'sim.db'}", SimSettings(**settings), clock)  # type: ignore[arg-type]


def test_building_until_boot_time_then_active_with_address(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, boot_seconds=20, jitter=0, api_latency_ms=0)
    s = w.create(spec(1))
    assert s.state is MachineState.BUILDING and s.address is None
    clock.advance(19.9)
    assert w.find({})[0].state is MachineState.BUILDING
    clock.advance(0.2)
    up = w.find({})[0]
    assert up.state is MachineState.ACTIVE
    assert up.address is not None and up.address.startswith("10.")


def test_boot_jitter_is_bounded_and_per_machine(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, boot_seconds=100, jitter=0.2, api_latency_ms=0)
    for n in range(50):
        w.create(spec(n))
    clock.advance(79.9)
    assert all(s.state is MachineState.BUILDING for s in w.find({}))
    clock.advance(20)
    mid = [s.state for s in w.find({})]
    assert MachineState.ACTIVE in mid and MachineState.BUILDING in mid  # spread out
    clock.advance(20.2)
    assert all(s.state is MachineState.ACTIVE for s in w.find({}))


def test_time_scale_compresses_boot(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, boot_seconds=20, jitter=0, time_scale=100, api_latency_ms=0)
    w.create(spec(1))
    clock.advance(0.19)
    assert w.find({})[0].state is MachineState.BUILDING
    clock.advance(0.02)
    assert w.find({})[0].state is MachineState.ACTIVE


def test_changing_time_scale_keeps_time_continuous(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, boot_seconds=20, jitter=0, api_latency_ms=0)
    w.create(spec(1))
    clock.advance(10)
    before = w.now()
    w.patch_config({"time_scale": 10})
    assert w.now() == pytest.approx(before)
    clock.advance(0.9)  # 9 more simulated seconds
    assert w.find({})[0].state is MachineState.BUILDING
    clock.advance(0.2)
    assert w.find({})[0].state is MachineState.ACTIVE


def test_api_latency_sleeps_latency_over_time_scale(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, api_latency_ms=100, jitter=0, time_scale=10)
    d = SimDriver(w)
    d.ensure_machine(spec(1))
    d.list_machines({})
    assert clock.slept == pytest.approx(2 * 0.100 / 10)


def test_api_latency_jitter_bounds_and_zero_means_no_sleep(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, api_latency_ms=100, jitter=0.5)
    d = SimDriver(w)
    for _ in range(20):
        before = clock.slept
        d.list_machines({})
        assert 0.05 <= clock.slept - before <= 0.15
    w.patch_config({"api_latency_ms": 0})
    before = clock.slept
    d.list_machines({})
    assert clock.slept == before


def test_delete_shows_deleting_then_gone(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, boot_seconds=0, delete_seconds=5, jitter=0, api_latency_ms=0)
    w.create(spec(1))
    w.delete("m-1")
    s = w.find({})[0]
    assert s.state is MachineState.DELETING and s.address is not None
    clock.advance(5.1)
    assert w.find({}) == []
    w.create(spec(1))  # the id may be used again once the old one is gone
    assert len(w.find({})) == 1


def test_reboot_clears_error_and_rebuild_changes_image(tmp_path: Path) -> None:
    clock = ManualClock()
    w = open_world(tmp_path, clock, boot_seconds=20, jitter=0, api_latency_ms=0)
    w.add_fault({"kind": "server_error", "count": 1})
    w.create(spec(1))
    clock.advance(21)
    s = w.find({})[0]
    assert s.state is MachineState.ERROR and s.fault and s.address is None
    w.reboot("m-1")
    assert w.find({})[0].state is MachineState.BUILDING
    clock.advance(5.1)  # a reboot takes a quarter of a boot
    assert w.find({})[0].state is MachineState.ACTIVE
    w.rebuild("m-1", "fedora-coreos-40")
    s = w.find({})[0]
    assert s.state is MachineState.BUILDING and s.image == "fedora-coreos-40"
    assert s.address is not None  # rebuilding keeps the address
