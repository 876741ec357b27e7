"""The conductor under the failures real clouds produce, and with several providers:
real database, real sim worlds, passes stepped with `run_once()` and the
conductor's clock moved forward, so minutes of backoff take seconds."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import update

from shoal.db.tables import NodeGroupRow
from shoal.domain import conditions as cond
from shoal.domain import model as m
from shoal.drivers.contract import GroupReport, GroupRequest, GroupState, Machine
from shoal.drivers.sim.driver import SimDriver
from shoal.drivers.sim.world import SimWorld
from shoal.services import nodegroups
from tests.integration.conductor_support import FAST_SIM, Env, env_at, make_env

MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "flavor_id": "m1.small", "node_count": 3}
T = TypeVar("T")


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


def advance(env: Env, seconds: float, *, real: float = 0.0, step: float = 1.0) -> None:
    """Let `seconds` pass on the conductor's clock, a pass after each `step` (and
    `real` seconds of real time per step, for the sim's boots to progress)."""
    for _ in range(int(seconds / step)):
        env.skew[0] += timedelta(seconds=step)
        env.conductor.run_once()
        if real:
            time.sleep(real)


def step_until(
    env: Env, done: Callable[[], bool], *, step: float = 1.0, timeout: float = 60
) -> None:
    """Run passes, moving the conductor's clock `step` seconds each time, until `done()`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the conductor did not converge in time"
        env.skew[0] += timedelta(seconds=step)
        env.conductor.run_once()
        time.sleep(0.05)


def fault(env: Env, **rule: Any) -> dict[str, Any]:
    added: dict[str, Any] = env.world.add_fault(rule)
    return added


def fired(env: Env, rule: dict[str, Any]) -> int:
    return int(env.world.fault(rule["id"])["fired"])


def test_two_providers_keep_each_group_in_its_own_world(tmp_path: Path) -> None:
    worlds = {
        "east": f"sqlite:///{tmp_path / 'east.db'}",
        "west": f"sqlite:///{tmp_path / 'west.db'}",
    }
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", worlds=worlds) as env:
        workers = {**WORKER, "labels": {"provider": "west"}}  # as a Magnum client says it
        cid = env.create("two", [MASTER, workers])
        assert env.group(cid, "m").spec.provider == "east"  # the default provider
        assert env.group(cid, "w").spec.provider == "west"
        env.step_until(env.complete(cid))
        east, west = (sorted(s.machine_id for s in env.worlds[n].servers()) for n in worlds)
        assert east == sorted(n.uuid for n in env.nodes(cid, "m"))
        assert west == sorted(n.uuid for n in env.nodes(cid, "w"))
        env.resize(cid, "w", 5)
        env.step_until(lambda: len(env.nodes(cid, "w")) == 5 and env.complete(cid)())
        assert sorted(s.machine_id for s in env.worlds["east"].servers()) == east
        assert len(env.worlds["west"].servers()) == 5


def test_every_boot_failing_backs_off_quotes_the_fault_and_recovers(lite: Env) -> None:
    env = lite
    cid = env.create("fails", [MASTER, WORKER])
    rule = fault(env, kind="server_error", nodegroup=env.group(cid, "w").uuid)
    # One simulated minute: a pass every 2 s, each after the sim's boots (0.3 s) end.
    advance(env, 60, real=0.35, step=2.0)
    made = fired(env, rule)
    assert 3 <= made <= 15, f"{made} machines in a minute"
    g = env.group(cid, "w")
    assert g.status == "CREATE_IN_PROGRESS"
    assert "Failed to allocate the network(s)" in (g.status_reason or ""), g.status_reason
    assert "trying again in" in (g.status_reason or "")
    ready = cond.get(g.conditions, cond.READY)
    assert ready is not None and ready.reason == cond.MACHINES_FAILING
    env.world.delete_fault(rule["id"])
    step_until(env, env.complete(cid), step=5.0)
    assert len(env.nodes(cid, "w")) == 3


def test_an_unexpected_driver_error_waits_longer_each_time(lite: Env) -> None:
    env = lite
    cid = env.create("bug", [MASTER, WORKER])
    gid = env.group(cid, "w").uuid
    rule = fault(env, kind="driver_bug", op="list", nodegroup=gid)
    advance(env, 60, step=0.5)  # a pass every half second for a minute
    calls = fired(env, rule)
    assert 3 <= calls <= 10, f"listed {calls} times in a minute"
    g = env.group(cid, "w")
    error = cond.get(g.conditions, cond.RECONCILE_ERROR)
    assert error is not None and error.status == cond.TRUE
    assert "KeyError" in error.message and "flavorRef" in error.message
    env.world.delete_fault(rule["id"])
    step_until(env, env.complete(cid), step=60.0)
    assert cond.get(env.group(cid, "w").conditions, cond.RECONCILE_ERROR) is None


def test_async_no_valid_host_places_the_nodes_in_the_other_zones(lite: Env) -> None:
    env = lite
    zoned = {**WORKER, "node_count": 4, "availability_zones": ["az-1", "az-2"]}
    cid = env.create("nvh", [MASTER, zoned])
    fault(env, kind="no_valid_host_async", az="az-1")
    reasons: list[str] = []

    def done() -> bool:
        reasons.append(env.group(cid, "w").status_reason or "")
        return env.complete(cid)()

    step_until(env, done, step=0.5)
    assert {n.availability_zone for n in env.nodes(cid, "w")} == {"az-2"}
    assert any(r.startswith("BLOCKED: no valid host in az-1") for r in reasons), reasons
    assert any(e.reason == "NoValidHost" for e in env.events(cid))


def test_a_machine_deleted_outside_shoal_is_repaired_with_its_reason(tmp_path: Path) -> None:
    """A ready node whose machine someone else deletes (seen DELETING: the sim takes
    seconds to delete) is unhealthy like a lost one: a Repairing event says why and a
    new node replaces it; nothing is asked of the machine on its way out."""
    sim = dataclasses.replace(FAST_SIM, delete_seconds=30.0)
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", sim=sim) as env:
        cid = env.create("outside", [MASTER, WORKER])
        env.step_until(env.complete(cid))
        victim = env.nodes(cid, "w")[0]
        env.world.delete(victim.uuid)  # an operator's `server delete`; still DELETING
        step_until(env, lambda: victim.uuid not in {n.uuid for n in env.nodes(cid, "w")})
        step_until(env, env.complete(cid))
        said = [e.message for e in env.events(cid) if e.reason == "Repairing"]
        assert said == [
            f"node {victim.name} was ready, but its machine is being deleted in the provider, "
            "not by shoal; replacing it"
        ], said
        now = env.nodes(cid, "w")
        assert len(now) == 3 and all(n.state is m.NodeState.ACTIVE for n in now)
        assert env.world.api_calls().get("delete", 0) == 0  # shoal deleted nothing itself


def test_repairs_stop_when_too_many_nodes_are_unhealthy(lite: Env) -> None:
    env = lite
    cid = env.create("heal", [MASTER, WORKER])  # max_unhealthy_percent: 40 by default
    env.step_until(env.complete(cid))
    first = [n.uuid for n in env.nodes(cid, "w")]
    env.world.delete(first[0])  # one of three lost: 33 %, repaired
    step_until(env, lambda: first[0] not in {n.uuid for n in env.nodes(cid, "w")})
    step_until(env, env.complete(cid))
    assert len(env.nodes(cid, "w")) == 3
    assert any(e.reason == "Repairing" for e in env.events(cid))
    now = [n.uuid for n in env.nodes(cid, "w")]
    for uid in now[:2]:  # two of three: 67 %, more than 40 %
        env.world.delete(uid)
    step_until(env, lambda: env.group(cid, "w").status.endswith("FAILED"))
    g = env.group(cid, "w")
    assert "repairs stopped: 2 of 3 node(s) are unhealthy" in (g.status_reason or "")
    kept = {n.uuid: n for n in env.nodes(cid, "w")}
    assert set(now[:2]) <= set(kept) and all(kept[u].state is m.NodeState.ERROR for u in now[:2])
    assert len(env.world.servers(cluster=cid, nodegroup=g.uuid)) == 1  # nothing new made
    # Raising the limit is a new request: the two are repaired.
    patch = [{"op": "replace", "path": "/health_policy", "value": {"max_unhealthy_percent": 100}}]
    nodegroups.update(env.db, env.caller, cid, "w", patch)
    step_until(env, env.complete(cid))
    assert not set(now[:2]) & {n.uuid for n in env.nodes(cid, "w")}


def test_a_per_group_provider_gets_one_call_per_group(tmp_path: Path) -> None:
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", per_group=True) as env:
        cid = env.create("stack", [MASTER, WORKER])
        env.step_until(env.complete(cid))
        victim = env.nodes(cid, "w")[1].uuid
        env.resize(cid, "w", 3, remove=[victim])
        env.step_until(lambda: victim not in env.servers(cid) and env.complete(cid)())
        assert len(env.nodes(cid, "w")) == 3
        env.delete(cid)
        env.step_until(lambda: env.cluster(cid) is None)
        assert env.servers(cid) == []
        calls = env.world.api_calls()
        assert calls.get("create", 0) == calls.get("delete", 0) == 0, calls
        assert calls["apply_group"] >= 3 and calls["delete_group"] >= 2


class TimedGroupCalls(SimDriver):
    """The sim's per-group driver, each group call taking CALL_S and its span kept."""

    CALL_S = 0.3

    def __init__(self, world: SimWorld) -> None:
        super().__init__(world, per_group=True)
        self.spans: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()

    def _timed(self, what: str, call: Callable[[], T]) -> T:
        start = time.monotonic()
        time.sleep(self.CALL_S)
        got = call()
        with self._lock:
            self.spans.append((what, start, time.monotonic()))
        return got

    def apply_group(self, request: GroupRequest) -> None:
        self._timed("apply", functools.partial(super().apply_group, request))

    def delete_group(self, nodegroup_id: str) -> None:
        self._timed("delete", functools.partial(super().delete_group, nodegroup_id))


class TimedReportingCalls(TimedGroupCalls):
    """The same, also reporting each group in its listing (as the heat driver does),
    each listing taking CALL_S and its span kept."""

    def list_group(
        self, nodegroup_id: str, tags: Mapping[str, str]
    ) -> tuple[list[Machine], GroupReport]:
        machines = self._timed("list", functools.partial(self.list_machines, tags))
        return machines, GroupReport(None, GroupState.COMPLETE if machines else GroupState.ABSENT)


def overlapping(spans: list[tuple[float, float]]) -> bool:
    """Whether a span began before an earlier-begun one ended."""
    spans = sorted(spans)
    return any(b[0] < a[1] for a, b in itertools.pairwise(spans))


@contextlib.contextmanager
def four_stacks(
    tmp_path: Path, kind: type[TimedGroupCalls]
) -> Iterator[tuple[Env, str, list[TimedGroupCalls]]]:
    """A cluster of a master and three worker groups on a timed per-group driver,
    created and complete; the drivers made, whose spans the test reads."""
    made: list[TimedGroupCalls] = []

    def driver(w: SimWorld) -> SimDriver:
        made.append(kind(w))
        return made[-1]

    workers = [{**WORKER, "name": f"w{i}"} for i in range(3)]
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", driver=driver) as env:
        cid = env.create("stacks", [MASTER, *workers])
        env.step_until(env.complete(cid))
        yield env, cid, made


def spans_of(made: list[TimedGroupCalls], what: str) -> list[tuple[float, float]]:
    return [(a, b) for w, a, b in made[0].spans if w == what]


def test_a_batchs_reported_groups_are_listed_at_once(tmp_path: Path) -> None:
    with four_stacks(tmp_path, TimedReportingCalls) as (_, _, made):
        pass
    lists = spans_of(made, "list")
    assert len(lists) >= 4
    # A pass over several groups listed them together, not each after the last.
    assert overlapping(lists), lists


def test_a_reported_groups_deletion_is_asked_before_any_listing(tmp_path: Path) -> None:
    with four_stacks(tmp_path, TimedReportingCalls) as (env, cid, made):
        asked = time.monotonic()
        env.delete(cid)
        env.step_until(lambda: env.cluster(cid) is None)
        assert env.servers(cid) == []
    first_list = min(a for a, _ in spans_of(made, "list") if a >= asked)
    # Each of the four groups was asked to go before any of them was listed again.
    assert sum(asked <= a < first_list for a, _ in spans_of(made, "delete")) == 4, made[0].spans


def test_a_clusters_groups_are_deleted_by_calls_at_once(tmp_path: Path) -> None:
    with four_stacks(tmp_path, TimedGroupCalls) as (env, cid, made):
        env.delete(cid)
        env.step_until(lambda: env.cluster(cid) is None)
    deletes = spans_of(made, "delete")
    assert len(deletes) >= 4
    # The groups' deletes were asked together: more than one began before the first ended.
    first_end = min(b for _, b in deletes)
    assert sum(a < first_end for a, _ in deletes) >= 2, deletes


def test_a_group_whose_provider_left_the_configuration_says_so(lite: Env) -> None:
    env = lite
    cid = env.create("gone", [MASTER, WORKER])
    with env.db.write() as s:
        s.execute(update(NodeGroupRow).where(NodeGroupRow.name == "w").values(provider="east"))
    env.step_until(lambda: env.group(cid, "w").status.endswith("FAILED"))
    reason = env.group(cid, "w").status_reason or ""
    assert "provider 'east' is not configured in this deployment (providers: sim)" in reason
