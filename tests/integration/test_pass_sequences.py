"""Sequences: the real phases run pass after pass against the real sim, each round
taking the cluster's node groups in a random order (a seeded shuffle, as several
conductors might take them), whether they are due or not, then the cluster's pass.
After every group's pass the rules of the rollout or the operation hold, and the
sequence ends where it should: every node on the new revision, every task done.

Passes are run by the reconcilers themselves (`conductor/nodegroup/reconcile.py`,
`conductor/cluster.py`) under leases this test takes, so nothing but the order
differs from the conductor's own loop."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from shoal.conductor import cluster
from shoal.conductor.nodegroup import reconcile
from shoal.db import leases, queue
from shoal.domain import conditions as cond
from shoal.services import operations, resize, templates
from tests.integration.conductor_support import Env, make_env
from tests.support.waiting import scaled

V1, V2 = "fedora-coreos-40", "fedora-coreos-41"
SEEDS = [7, 2024]
# Worker groups and their sizes: three, so that the bound on worker groups of one
# cluster rolling at once (two) is met.
WORKERS = {"a": 3, "b": 2, "c": 2}
MAX_ROUNDS = 600


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


def one_pass(env: Env, kind: queue.Kind, uuid: str) -> None:
    """One real pass over one resource, under its lease, as a conductor runs it."""
    ctx = env.conductor.ctx
    key = leases.key(kind.name, uuid)
    with env.db.core_write() as s:
        assert leases.claim(s, key, ctx.holder, ctx.now(), 60), f"{key} is held"
    try:
        if kind is queue.NODEGROUP:
            reconcile.reconcile_batch(ctx, [uuid])
        else:
            cluster.reconcile_batch(ctx, [uuid])
    finally:
        with env.db.core_write() as s:
            leases.release(s, ctx.holder, [key])


def run_rounds(
    env: Env,
    cid: str,
    rng: random.Random,
    check: Callable[[], None],
    done: Callable[[], bool],
    tick: timedelta = timedelta(0),
) -> int:
    """Rounds until `done()`: every group's pass in a random order, `check()` after
    each, then the cluster's pass; the conductor's clock moves `tick` a round. The
    number of rounds run; fails past MAX_ROUNDS or a minute (scaled)."""
    names = ["m", *WORKERS]
    deadline = time.monotonic() + scaled(60)
    for rounds in range(1, MAX_ROUNDS + 1):
        rng.shuffle(names)
        for name in names:
            one_pass(env, queue.NODEGROUP, env.group(cid, name).uuid)
            check()
        one_pass(env, queue.CLUSTER, cid)
        if done():
            return rounds
        assert time.monotonic() < deadline, f"not done after {rounds} rounds"
        env.skew[0] += tick
        time.sleep(0.02)  # the sim's machines boot in real time
    raise AssertionError(f"not done after {MAX_ROUNDS} rounds")


def ready_cluster(env: Env, rng: random.Random, **attrs: object) -> str:
    # The template's groups, which the cluster's node_groups entries of the same names
    # override.
    named = [{"name": "m", "role": "master"}, *({"name": n} for n in WORKERS)]
    for name, image in (("v1", V1), ("v2", V2)):
        body = {"name": name, "coe": "kubernetes", "image_id": image, "coe_version": "v1.20.2",
                "node_group_templates": named}  # fmt: skip
        templates.create(env.db, env.caller, body)
    groups = [{"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}]
    groups += [{"name": n, "flavor_id": "m1.small", "node_count": c} for n, c in WORKERS.items()]
    cid = env.create("seq", groups, cluster_template_id="v1", **attrs)
    run_rounds(env, cid, rng, lambda: None, env.complete(cid))
    return cid


def servers(env: Env, cid: str, group: str) -> list[tuple[str, str]]:
    """(image, state) of the group's machines the cloud lists, those not going."""
    g = env.group(cid, group)
    found = env.world.servers(cluster=cid, nodegroup=g.uuid)
    return [(s.image, s.state) for s in found if s.state != "DELETING"]


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rollout_in_random_order_keeps_its_rules_at_every_pass(env: Env, seed: int) -> None:
    rng = random.Random(seed)
    cid = ready_cluster(env, rng)
    resize.upgrade_cluster(env.db, env.caller, cid, {"cluster_template": "v2", "max_batch_size": 1})
    sizes = {"m": 1, **WORKERS}
    seen = {"workers_started": False, "most_rolling": 0}

    def check() -> None:
        live = {name: servers(env, cid, name) for name in sizes}
        for name, machines in live.items():
            ready = sum(1 for _, state in machines if state == "ACTIVE")
            surge = 1  # masters: one at a time; workers: the default surge
            unavailable = 0 if name == "m" else 1  # max_batch_size
            assert len(machines) <= sizes[name] + surge, f"{name}: over the surge"
            assert ready >= sizes[name] - unavailable, f"{name}: too many unavailable"
        if any(image == V2 for name in WORKERS for image, _ in live[name]):
            seen["workers_started"] = True
        if seen["workers_started"]:  # masters first: done before any worker moved
            assert live["m"] == [(V2, "ACTIVE")], "a worker moved before the masters"
        rolling = [
            name
            for name in WORKERS
            if cond.has_reason(env.group(cid, name).conditions, cond.UP_TO_DATE, cond.ROLLING_OUT)
        ]
        assert len(rolling) <= 2, f"{rolling}: more than two worker groups rolling at once"
        seen["most_rolling"] = max(seen["most_rolling"], len(rolling))

    def done() -> bool:
        c = env.cluster(cid)
        return c is not None and c.status == "UPDATE_COMPLETE"

    run_rounds(env, cid, rng, check, done)
    for name, count in sizes.items():
        assert servers(env, cid, name) == [(V2, "ACTIVE")] * count
        g = env.group(cid, name)
        assert g.status == "UPDATE_COMPLETE" and cond.is_true(g.conditions, cond.UP_TO_DATE)
    assert seen["workers_started"] and seen["most_rolling"] >= 1


@pytest.mark.parametrize("seed", SEEDS)
def test_operations_in_random_order_go_batch_by_batch_to_the_end(env: Env, seed: int) -> None:
    rng = random.Random(seed)
    cid = ready_cluster(env, rng)
    before = sorted(s.machine_id for s in env.world.servers(cluster=cid))
    batches = {"a": 1, "b": 2}
    ops = {
        name: operations.start(env.db, env.caller, cid, {"kind": "reboot", "nodegroup": name,
                                                         "batch_size": size})[0]
        for name, size in batches.items()
    }  # fmt: skip

    def views() -> dict[str, operations.OperationView]:
        return {name: operations.get(env.db, env.caller, cid, u) for name, u in ops.items()}

    def check() -> None:
        for name, view in views().items():
            states = [t.state for t in view.tasks]
            under_way = sum(1 for s in states if s in ("PENDING", "RUNNING"))
            assert under_way <= batches[name], f"{name}: more than a batch at once"
            assert "FAILED" not in states, f"{name}: {[t.output for t in view.tasks]}"
            started = [t.node_id for t in view.tasks]
            assert started == list(view.operation.nodes)[: len(started)], "out of order"

    def done() -> bool:
        return all(v.operation.state != "RUNNING" for v in views().values())

    # The clock moves 5 s a round: a reboot too quick to be seen counts as done
    # once the machine has been ready a while (operate.py).
    run_rounds(env, cid, rng, check, done, tick=timedelta(seconds=5))
    for name, view in views().items():
        assert view.operation.state == "SUCCEEDED"
        assert [t.state for t in view.tasks] == ["SUCCEEDED"] * WORKERS[name]
    assert env.world.api_calls().get("reboot") == WORKERS["a"] + WORKERS["b"]
    assert sorted(s.machine_id for s in env.world.servers(cluster=cid)) == before
    run_rounds(env, cid, rng, lambda: None, env.complete(cid), tick=timedelta(seconds=5))


@pytest.mark.parametrize("seed", SEEDS)
def test_a_rollout_that_rebuilds_in_random_order_goes_group_by_group(env: Env, seed: int) -> None:
    """A rollout that keeps the machines (upgrade_strategy rebuild) is an operation per
    group: the masters' ends before any worker group's starts, at most two worker
    groups move at once, each one node at a time (the default policy)."""
    rng = random.Random(seed)
    cid = ready_cluster(env, rng, labels={"upgrade_strategy": "rebuild"})
    machines = env.servers(cid)
    masters = env.group(cid, "m").uuid
    resize.upgrade_cluster(env.db, env.caller, cid, {"cluster_template": "v2"})

    def check() -> None:
        assert env.servers(cid) == machines, "a machine was replaced"
        views = operations.list_for(env.db, env.caller, cid)
        workers = [v for v in views if v.operation.nodegroup_id != masters]
        if workers:
            (m,) = [v for v in views if v.operation.nodegroup_id == masters]
            assert m.operation.state == "SUCCEEDED", "a worker group moved before the masters"
        moving = [v for v in workers if v.operation.state == "RUNNING"]
        assert len(moving) <= 2, "more than two worker groups rolling at once"
        for v in views:
            under_way = sum(1 for t in v.tasks if t.state in ("PENDING", "RUNNING"))
            assert under_way <= 1, "more than one node of a group rebuilt at once"
            assert "FAILED" not in [t.state for t in v.tasks]

    def done() -> bool:
        c = env.cluster(cid)
        return c is not None and c.status == "UPDATE_COMPLETE"

    run_rounds(env, cid, rng, check, done, tick=timedelta(seconds=5))
    assert env.servers(cid) == machines
    assert {s.image for s in env.world.servers(cluster=cid)} == {V2}
    views = operations.list_for(env.db, env.caller, cid)
    assert sorted(v.operation.kind for v in views) == ["rebuild"] * (1 + len(WORKERS))
    assert all(v.operation.state == "SUCCEEDED" for v in views)
