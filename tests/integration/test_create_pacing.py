"""Creates against a rate-limited cloud: the throttle learns the provider's pace
from its 429s, and a paced pass hands its worker back after its time budget, or at
a refusal, instead of waiting for every create of a large group or sleeping out the
refusals (the rest stay intent rows for the next pass, due when the refusal says).
Real conductor context, real sim world on SQLite."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from shoal.conductor import calls
from shoal.conductor.context import CreateRefused, Provider
from shoal.conductor.loop import Conductor
from shoal.conductor.pacing import CREATE_SLOT_WAIT_MAX_S
from shoal.db import migrations
from shoal.db.engine import Database
from shoal.drivers.contract import TAG_NODEGROUP, MachineSpec
from shoal.drivers.providers import Providers
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld
from shoal.settings import ConductorSettings
from tests.integration.conductor_support import FAST_SIM, env_at
from tests.support.waiting import scaled

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
    started = time.monotonic()
    done = calls.ensure_all(conductor.ctx, ensure(conductor, want), budget=0.5)
    took = time.monotonic() - started
    # The bucket's 10 tokens, then the pace the 429s taught: far from all 200.
    assert sim(conductor).create_throttle.rate is not None, "no 429 taught the pace"
    assert 10 <= len(done) < 100, len(done)
    # No worker waited out the refusals: the pass ended (budget, or a refusal's wave).
    assert took < scaled(0.5 + CREATE_SLOT_WAIT_MAX_S + 1.0), took
    made = [r for r in done if r.machine is not None]
    refused = [r for r in done if r.error is not None]
    assert len(made) + len(refused) == len(done) and made
    # A refusal is the provider's pace, with its hint, not a failure.
    assert all(isinstance(r.error, CreateRefused) and r.error.retry_after for r in refused)
    listed = {m.machine_id for m in sim(conductor).driver.list_machines({TAG_NODEGROUP: "ng"})}
    assert listed == {r.spec.machine_id for r in made}
    # The next passes pick up where this one stopped, each when the refusal said.
    deadline = time.monotonic() + scaled(60)
    for passes in range(1, 200):
        left = [w for w in want if w.machine_id not in listed]
        if not left:
            break
        assert time.monotonic() < deadline, f"{len(left)} left after {passes} passes"
        more = calls.ensure_all(conductor.ctx, ensure(conductor, left), budget=0.5)
        hints = [r.error.retry_after or 0.0 for r in more if isinstance(r.error, CreateRefused)]
        assert all(r.error is None or isinstance(r.error, CreateRefused) for r in more)
        listed |= {r.spec.machine_id for r in more if r.machine is not None}
        time.sleep(max(hints, default=0.0))
    assert listed == {w.machine_id for w in want}


@pytest.mark.parametrize("conductor", [(0.0, 1.0)], indirect=True)
def test_an_unpaced_pass_ignores_the_budget(conductor: Conductor) -> None:
    done = calls.ensure_all(conductor.ctx, ensure(conductor, specs(150)), budget=0.0)
    assert sim(conductor).create_throttle.rate is None
    assert len(done) == 150 and all(r.machine is not None for r in done)


def test_a_conductor_creates_a_group_through_refusals_without_failing_it(tmp_path: Path) -> None:
    """Real passes (`run_once`) against a sim that refuses creates past 20/s: every
    refusal ends its pass with the group due when the hint says, the group is never
    reported failing or retrying for it, and every node is created once."""
    sim_settings = replace(FAST_SIM, rate_limit_per_s=20.0, rate_limit_burst_s=0.25)
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", sim=sim_settings) as env:
        workers = {"name": "w", "flavor_id": "m1.small", "node_count": 40}
        master = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
        cid = env.create("paced", [master, workers])
        env.step_until(env.complete(cid), timeout=60)
        assert sim(env.conductor).create_throttle.refusals > 0, "the sim refused nothing"
        assert len(env.servers(cid)) == 41
        warned = [e.reason for e in env.events(cid) if e.type == "Warning"]
        assert warned == [], warned
