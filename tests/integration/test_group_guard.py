"""The per-pass guard against the real database and the real sim: an unexpected
exception in one node group's part of a pass (here, a driver whose listing of one
group raises `KeyError`) is that group's `ReconcileError`; the other groups of
its batch, those of another cluster included, go on in the same pass."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from shoal.conductor.kinds import KINDS
from shoal.db import leases
from shoal.domain import conditions as cond
from shoal.drivers.contract import TAG_NODEGROUP, Machine, MachineSpec
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.world import SimWorld
from tests.integration.conductor_support import Env, env_at
from tests.support.waiting import scaled

MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "flavor_id": "m1.small", "node_count": 3}


class ListingBug(SimDriver):
    """The sim driver with a bug: listing the machines of the groups in `bad` raises
    `KeyError` (what a driver's parsing of an unexpected answer would raise)."""

    def __init__(self, world: SimWorld) -> None:
        super().__init__(world)
        self.bad: set[str] = set()
        self.bad_creates: set[str] = set()  # creates in these groups raise RuntimeError
        self.listed: dict[str, int] = {}  # listings by node group

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        group = tags.get(TAG_NODEGROUP, "")
        self.listed[group] = self.listed.get(group, 0) + 1
        if group in self.bad:
            raise KeyError("flavorRef")
        return super().list_machines(tags)

    def ensure_machine(self, spec: MachineSpec) -> Machine:
        if spec.tags.get(TAG_NODEGROUP) in self.bad_creates:
            raise RuntimeError("unexpected answer from the cloud")
        return super().ensure_machine(spec)


def merged_batches(env: Env) -> list[list[str]]:
    """The node group batches a busy SQLite conductor would take now (leases released)."""
    claims = env.conductor.claims
    batches = claims.claim(KINDS[0], 100, merge=True)
    claims.release([leases.key("nodegroup", u) for b in batches for u in b])
    return batches


def test_one_groups_listing_bug_leaves_the_other_cluster_of_its_batch_alone(
    tmp_path: Path,
) -> None:
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", driver=ListingBug) as env:
        driver = env.conductor.ctx.providers["sim"].driver
        assert isinstance(driver, ListingBug)
        good = env.create("good", [MASTER, WORKER])
        bad = env.create("bad", [MASTER, WORKER])
        victim = env.group(bad, "w").uuid
        driver.bad.add(victim)
        everyone = {env.group(c, g).uuid for c in (good, bad) for g in ("m", "w")}
        assert [set(b) for b in merged_batches(env)] == [everyone]  # one batch, two clusters
        env.conductor.run_once(merge=True)  # that batch's pass
        # In that same pass, every other group went on: its machines are being made.
        assert len(env.servers(good)) == 4 and len(env.servers(bad)) == 1
        for c, name in ((good, "m"), (good, "w"), (bad, "m")):
            assert cond.get(env.group(c, name).conditions, cond.RECONCILE_ERROR) is None
        error = cond.get(env.group(bad, "w").conditions, cond.RECONCILE_ERROR)
        assert error is not None and "KeyError" in error.message
        deadline = time.monotonic() + scaled(60)
        while not env.complete(good)():
            assert time.monotonic() < deadline, "the healthy cluster did not converge"
            env.conductor.run_once(merge=True)
            env.skew[0] += timedelta(seconds=1)
            time.sleep(0.05)
        assert len(env.nodes(good)) == 4 and len(env.servers(good)) == 4
        assert all(n.state.value == "ACTIVE" for n in env.nodes(good))
        for name in ("m", "w"):
            assert cond.get(env.group(good, name).conditions, cond.RECONCILE_ERROR) is None
        # The other group of the faulty cluster went on too.
        env.step_until(lambda: env.group(bad, "m").status == "CREATE_COMPLETE")
        assert cond.get(env.group(bad, "m").conditions, cond.RECONCILE_ERROR) is None
        # The faulty group says why ...
        g = env.group(bad, "w")
        error = cond.get(g.conditions, cond.RECONCILE_ERROR)
        assert error is not None and error.status == cond.TRUE
        assert "KeyError" in error.message and "flavorRef" in error.message
        assert env.nodes(bad, "w") == [] and g.status == "CREATE_IN_PROGRESS"
        # ... and is looked at with a growing delay: a pass every half second for a
        # minute lists it a few times, not 120.
        before = driver.listed[victim]
        for _ in range(120):
            env.skew[0] += timedelta(seconds=0.5)
            env.conductor.run_once(merge=True)
        assert 2 <= driver.listed[victim] - before <= 10, driver.listed[victim] - before
        # Fixed, it catches up.
        driver.bad.clear()
        deadline = time.monotonic() + scaled(60)
        while not env.complete(bad)():
            assert time.monotonic() < deadline, "the faulty group did not recover"
            env.conductor.run_once(merge=True)
            env.skew[0] += timedelta(seconds=30)
            time.sleep(0.05)
        assert len(env.nodes(bad, "w")) == 3
        assert cond.get(env.group(bad, "w").conditions, cond.RECONCILE_ERROR) is None


def test_a_create_that_raises_fails_its_group_alone(tmp_path: Path) -> None:
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", driver=ListingBug) as env:
        driver = env.conductor.ctx.providers["sim"].driver
        assert isinstance(driver, ListingBug)
        good = env.create("good", [MASTER, WORKER])
        bad = env.create("bad", [MASTER, WORKER])
        driver.bad_creates.add(env.group(bad, "w").uuid)
        env.conductor.run_once(merge=True)
        assert len(env.servers(good)) == 4 and len(env.servers(bad)) == 1
        error = cond.get(env.group(bad, "w").conditions, cond.RECONCILE_ERROR)
        assert error is not None and "RuntimeError: unexpected answer" in error.message
        # Its intent was written before the calls: the rows wait for the next pass.
        assert len(env.nodes(bad, "w")) == 3
        env.step_until(env.complete(good))
        driver.bad_creates.clear()
        deadline = time.monotonic() + scaled(60)
        while not env.complete(bad)():
            assert time.monotonic() < deadline, "the faulty group did not recover"
            env.conductor.run_once(merge=True)
            env.skew[0] += timedelta(seconds=30)
            time.sleep(0.05)
        assert len(env.servers(bad)) == 4
