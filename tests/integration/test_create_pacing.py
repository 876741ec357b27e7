"""Creates against a rate-limited cloud: the throttle learns the provider's pace
from its 429s, and a paced pass hands its worker back after its time budget
instead of waiting for every create of a large group (the rest stay intent rows
for the next pass). Real conductor context, real sim world on SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.conductor import calls
from shoal.conductor.context import Provider
from shoal.conductor.loop import Conductor
from shoal.db import migrations
from shoal.db.engine import Database
from shoal.drivers.contract import TAG_NODEGROUP, MachineSpec
from shoal.drivers.providers import Providers
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from shoal.settings import ConductorSettings

ZONES = ["az-1"]


def specs(n: int) -> list[MachineSpec]:
    return [
        MachineSpec(
            f"00000000-0000-4000-8000-{i:012d}",
            f"n-{i}",
            "p",
            "c",
            "ng",
            "worker",
            "m1.small",
            "fedora-coreos-40",
            "az-1",
        )  # fmt: skip
        for i in range(n)
    ]


def sim(conductor: Conductor) -> Provider:
    p = conductor.ctx.provider("sim")
    assert p is not None
    return p


def ensure(conductor: Conductor, want: list[MachineSpec]) -> list[calls.Ensure]:
    return [calls.Ensure(sim(conductor), w, ZONES) for w in want]


@pytest.fixture
def conductor(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Conductor]:
    url = f"sqlite:///{tmp_path / 'shoal.db'}"
    db = Database(url)
    migrations.upgrade(db)
    rate, burst = request.param
    sim = SimSettings(boot_seconds=0, delete_seconds=0, api_latency_ms=0, jitter=0,
                      rate_limit_per_s=rate, rate_limit_burst_s=burst)  # fmt: skip
    world = SimWorld.open(url, sim)
    c = Conductor(
        db, Providers.of({"sim": SimDriver(world)}), ConductorSettings(driver_concurrency=8)
    )
    try:
        yield c
    finally:
        c.stop()
        world.close()
        db.close()


@pytest.mark.parametrize("conductor", [(40.0, 0.25)], indirect=True)
def test_a_paced_pass_stops_creating_after_its_budget(conductor: Conductor) -> None:
    want = specs(200)
    done = calls.ensure_all(conductor.ctx, ensure(conductor, want), budget=0.5)
    # The bucket's 10 tokens, then 40/s for about the budget: far from all 200.
    assert sim(conductor).create_throttle.rate is not None, "no 429 taught the pace"
    assert 10 < len(done) < 100, len(done)
    assert all(r.machine is not None and r.error is None for r in done)
    # Exactly the attempted ones exist, in order; the rest are left for the next pass.
    made = {m.machine_id for m in sim(conductor).driver.list_machines({TAG_NODEGROUP: "ng"})}
    assert made == {s.machine_id for s in want[: len(done)]}
    # The next pass picks up where this one stopped.
    more = calls.ensure_all(conductor.ctx, ensure(conductor, want[len(done) :]), budget=0.5)
    assert len(more) > 0 and all(r.machine is not None for r in more)


@pytest.mark.parametrize("conductor", [(0.0, 1.0)], indirect=True)
def test_an_unpaced_pass_ignores_the_budget(conductor: Conductor) -> None:
    done = calls.ensure_all(conductor.ctx, ensure(conductor, specs(150)), budget=0.0)
    assert sim(conductor).create_throttle.rate is None
    assert len(done) == 150 and all(r.machine is not None for r in done)
