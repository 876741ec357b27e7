"""The node group reconciler's phases on plain values: a snapshot, a listing, and
what each phase decides. No database, no driver, no clock but the one given."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shoal.conductor import pacing
from shoal.conductor.backoff import Backoff
from shoal.conductor.nodegroup import delete, grouped, observe, rollout, scale, spec, status
from shoal.conductor.nodegroup.state import Pass, Path
from shoal.conductor.pacing import Pacing
from shoal.db.snapshots import GroupSnapshot, Sibling
from shoal.domain import conditions as cond
from shoal.domain import health, revision
from shoal.domain import model as m
from shoal.domain.rollout import RolloutState, Standing
from shoal.drivers.contract import (
    TAG_NODE,
    BlockedKind,
    GroupReport,
    GroupState,
    Machine,
    MachineState,
    PlacementPolicy,
    TransientError,
)
from shoal.settings import ConductorSettings

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
ZONES = ("az-1", "az-2")


def group(count: int = 3, **spec_changes: Any) -> m.NodeGroup:
    s = m.NodeGroupSpec(
        role="worker", flavor_id="m1.small", image_id="img", node_count=count, **spec_changes
    )
    return m.NodeGroup(1, "g-1", "c-1", "p-1", "w", False, s, generation=2, observed_generation=1)


def node(i: int, state: m.NodeState = m.NodeState.ACTIVE, **kw: Any) -> m.Node:
    ready = T0 - timedelta(minutes=5) if state is m.NodeState.ACTIVE else None
    values: dict[str, Any] = dict(ready_at=ready, created_at=T0 - timedelta(minutes=6))
    values.update(kw)
    return m.Node(i, f"n-{i}", f"c-w-{i}", "c-1", "g-1", "p-1", state, "az-1", **values)


def machine(n: m.Node, state: MachineState = MachineState.ACTIVE, **kw: Any) -> Machine:
    return Machine(n.uuid, n.name, state, {TAG_NODE: n.uuid}, n.availability_zone, **kw)


def start(g: m.NodeGroup, nodes: list[m.Node], machines: list[Machine], **snap: Any) -> Pass:
    values: dict[str, Any] = dict(
        group=g,
        cluster_name="c",
        cluster_attrs={"keypair": "ops", "fixed_network": "net-1"},
        cluster_deleting=False,
        operation_started_at=T0 - timedelta(minutes=10),
        nodes=nodes,
    )
    values.update(snap)
    return Pass.start(GroupSnapshot(**values), T0, machines, "sim")


def pace() -> Pacing:
    """The conductor's default periods, no jitter, the clock at T0."""
    return Pacing.of(ConductorSettings(), Backoff(rand=lambda: 0.5), lambda: T0)


def test_observe_folds_addresses_and_readiness() -> None:
    n = node(1, m.NodeState.BUILDING)
    p = start(group(1), [n], [machine(n, address="10.0.0.9")])
    observe.observe(p)
    got = p.nodes[n.uuid]
    assert (got.state, got.address, got.ready_at) == (m.NodeState.ACTIVE, "10.0.0.9", T0)
    assert p.progress and p.to_ensure == [] and p.to_delete == []


def test_a_failed_boot_is_replaced_after_a_growing_delay() -> None:
    n = node(1, m.NodeState.BUILDING)
    p = start(group(1), [n], [machine(n, MachineState.ERROR, fault="disk full")])
    observe.observe(p)
    assert p.to_delete == [n.uuid] and p.nodes[n.uuid].state is m.NodeState.DELETING
    assert (p.memory.failures, p.memory.last_fault) == (1, "disk full")
    scale.scale(p, first_wave=32)
    assert p.w.inserts == [] and p.waiting_until == T0 + timedelta(seconds=3)
    status.conclude(pace(), p)
    # Looked at again when the wait ends, or sooner while its machine is deleted.
    assert p.w.status is not None and p.w.status.next_reconcile_at is not None
    assert T0 < p.w.status.next_reconcile_at <= p.waiting_until
    assert "disk full" in (p.w.status.status_reason or "")
    assert p.w.status.memory == p.memory.to_json()


def test_after_the_delay_the_group_tries_again() -> None:
    mem = health.failed(
        health.GroupMemory(), T0 - timedelta(seconds=10), "disk full", 2, pacing.HEALTH
    )
    p = start(group(1), [], [], memory=mem)
    scale.scale(p, first_wave=32)
    assert len(p.w.inserts) == 1 and p.waiting_until is None


def test_a_new_request_forgets_failures_of_the_old_one() -> None:
    mem = health.failed(health.GroupMemory(), T0, "disk full", 1, pacing.HEALTH)  # generation 1
    p = start(group(1), [], [], memory=mem)  # the group is at generation 2
    assert p.memory.failures == 0


def test_async_no_valid_host_blocks_the_zone_and_places_the_node_elsewhere() -> None:
    n = node(1, m.NodeState.BUILDING)
    fault = "No valid host was found. "
    nvh = machine(n, MachineState.ERROR, fault=fault, fault_kind=BlockedKind.NO_VALID_HOST)
    p = start(group(1, availability_zones=ZONES), [n], [nvh])
    observe.observe(p)
    assert p.memory.failures == 0  # not a broken machine: the zone is full
    assert health.blocked_zones(p.memory, T0) == ["az-1"]
    scale.scale(p, first_wave=32)
    assert [r["availability_zone"] for r in p.w.inserts] == ["az-2"]
    status.conclude(pace(), p)
    assert p.w.status is not None
    assert (p.w.status.status_reason or "").startswith("BLOCKED: no valid host in az-1")


def test_every_zone_blocked_waits_for_the_first_to_open() -> None:
    mem = health.block_zone(
        health.GroupMemory(), "az-1", T0 - timedelta(seconds=100), pacing.HEALTH
    )
    mem = health.block_zone(mem, "az-2", T0, pacing.HEALTH)
    p = start(group(1, availability_zones=ZONES), [], [], memory=mem)
    scale.scale(p, first_wave=32)
    assert p.w.inserts == []
    assert p.waiting_until == T0 + timedelta(seconds=pacing.ZONE_BLOCK_S - 100)
    assert any(getattr(e, "kind", None) is BlockedKind.NO_VALID_HOST for e in p.errors)


def test_an_unhealthy_node_is_repaired_within_the_limit() -> None:
    nodes = [node(i) for i in range(3)]
    machines = [machine(n) for n in nodes[1:]]  # node 0's machine vanished
    p = start(group(3), nodes, machines)
    observe.observe(p)
    assert nodes[0].uuid not in p.nodes  # no machine to delete: the row goes
    assert p.repairs_stopped is None
    scale.scale(p, first_wave=32)
    assert len(p.w.inserts) == 1


def test_a_machine_replaced_in_the_provider_is_followed_not_replaced_again() -> None:
    """Heat replaced a member's server (marked unhealthy, stack updated: the
    magnum-auto-healer's way): the node keeps its row and follows the new server, booting
    until it is up; nothing is deleted or added, and an event says what happened."""
    n = node(1, provider_id="srv-old", address="10.0.0.1")
    p = start(group(1), [n], [machine(n, MachineState.BUILDING, provider_id="srv-new")])
    observe.observe(p)
    got = p.nodes[n.uuid]
    assert (got.state, got.provider_id, got.ready_at) == (
        m.NodeState.BUILDING,
        "srv-new",
        n.ready_at,
    )
    assert p.to_delete == [] and p.unhealthy == []
    scale.scale(p, first_wave=32)
    assert p.w.inserts == []
    assert [e.reason for e in p.w.events] == ["MachineReplaced"]
    assert "srv-old" in p.w.events[0].message and "srv-new" in p.w.events[0].message
    up = start(group(1), [got], [machine(got, address="10.0.0.2", provider_id="srv-new")])
    observe.observe(up)
    again = up.nodes[n.uuid]
    assert (again.state, again.address, again.ready_at) == (
        m.NodeState.ACTIVE,
        "10.0.0.2",
        n.ready_at,
    )
    assert up.w.events == []  # the same machine: nothing more to say
    first = start(group(1), [node(2)], [machine(node(2), provider_id="srv-2")])
    observe.observe(first)  # a node's first provider id is no replacement
    assert first.w.events == [] and first.nodes[node(2).uuid].provider_id == "srv-2"


def test_too_many_unhealthy_nodes_stop_repairs_and_keep_them() -> None:
    nodes = [node(i) for i in range(3)]
    broken = [machine(n, MachineState.ERROR, fault="kernel panic") for n in nodes[:2]]
    p = start(group(3), nodes, [*broken, machine(nodes[2])])
    observe.observe(p)
    assert p.repairs_stopped and "2 of 3 node(s) are unhealthy" in p.repairs_stopped
    assert p.to_delete == []
    assert all(p.nodes[n.uuid].state is m.NodeState.ERROR for n in nodes[:2])
    scale.scale(p, first_wave=32)
    assert p.w.inserts == []  # the kept nodes hold their places
    status.conclude(pace(), p)
    assert p.w.status is not None and p.w.status.status == "CREATE_FAILED"
    ready = cond.get(p.w.status.conditions, cond.READY)
    assert ready is not None and ready.reason == cond.MAX_UNHEALTHY


def test_named_nodes_go_exactly() -> None:
    nodes = [node(i) for i in range(3)]
    nodes[1] = dataclasses.replace(nodes[1], to_delete=True)
    p = start(group(2), nodes, [machine(n) for n in nodes])
    observe.observe(p)
    scale.remove_marked(p)
    scale.scale(p, first_wave=32)
    assert p.to_delete == [nodes[1].uuid] and p.w.inserts == []


def test_a_big_new_group_starts_with_one_wave() -> None:
    p = start(group(100, availability_zones=ZONES), [], [])
    scale.scale(p, first_wave=32)
    assert len(p.w.inserts) == 32 and p.deferred
    assert {r["availability_zone"] for r in p.w.inserts} == set(ZONES)


def test_the_machine_spec_carries_what_a_real_machine_needs() -> None:
    g = group(1, provider_options={"flavor_hint": "x"}, boot_volume_size=None)
    g = dataclasses.replace(g, spec=dataclasses.replace(g.spec, labels={"boot_volume_size": "40"}))
    p = start(g, [], [])
    s = spec.machine_spec(p, node(1), "http://shoal:9511")
    assert (s.keypair, s.networks, s.boot_volume_size) == ("ops", ("net-1",), 40)
    assert s.placement_group is not None
    assert s.placement_group.policy is PlacementPolicy.SOFT_ANTI_AFFINITY
    assert s.placement_group.name == "shoal-g-1"
    assert s.options == {"flavor_hint": "x"}
    assert s.user_data is not None and "http://shoal:9511" in s.user_data
    masters = dataclasses.replace(g, spec=dataclasses.replace(g.spec, role="master"))
    mp = spec.machine_spec(start(masters, [], []), node(1), "")
    assert mp.placement_group is not None
    assert mp.placement_group.policy is PlacementPolicy.ANTI_AFFINITY
    off = dataclasses.replace(g, spec=dataclasses.replace(g.spec, placement_policy="none"))
    assert spec.machine_spec(start(off, [], []), node(1), "").placement_group is None


def test_validation_asks_the_driver_about_every_zone() -> None:
    p = start(group(1, availability_zones=ZONES), [], [])
    seen: list[str | None] = []

    def check(s: Any) -> list[str]:
        seen.append(s.availability_zone)
        return ["bad zone"] if s.availability_zone == "az-2" else []

    assert spec.validate(p, check) == ["bad zone"]
    assert seen == [None, "az-1", "az-2"]


def test_a_failed_listing_keeps_everything_and_retries() -> None:
    p = start(group(1), [node(1)], [])
    p = Pass.start(p.snap, T0, TransientError("HTTP 503", retry_after=30), "sim")
    status.listing_failed(pace(), p)
    assert p.w.status is not None and p.w.status.next_reconcile_at == T0 + timedelta(seconds=30)
    assert p.w.inserts == p.w.delete_ids == []


def test_the_delete_path_marks_then_removes_the_group() -> None:
    nodes = [node(1), node(2)]
    p = start(group(2), nodes, [machine(nodes[0])], cluster_deleting=True)
    delete.plan(p)
    assert p.to_delete == [nodes[0].uuid] and nodes[1].id in p.w.delete_ids
    gone = start(group(2), [], [], cluster_deleting=True)
    delete.plan(gone)
    assert gone.path is Path.CONCLUDE and gone.w.delete_group


def test_a_reconcile_error_condition_is_cleared_by_a_pass() -> None:
    g = group(1)
    err = m.Condition(cond.RECONCILE_ERROR, cond.TRUE, cond.UNEXPECTED_ERROR, "KeyError", T0)
    p = start(dataclasses.replace(g, conditions=(err,)), [], [])
    assert cond.get(p.snap.group.conditions, cond.RECONCILE_ERROR) is None


def _old(i: int) -> m.Node:
    return node(i, image_id="old-img", flavor_id="m1.small")


def test_a_rollout_adds_on_the_new_revision_before_retiring_old_nodes() -> None:
    nodes = [_old(i) for i in range(3)]
    p = start(group(3), nodes, [machine(n) for n in nodes])
    observe.observe(p)
    assert rollout.roll(p, lambda: [])  # a master-less cluster: nothing to wait for
    assert p.rollout == Standing(3, RolloutState.ROLLING, "0 of 3 node(s) on the new revision")
    target = revision.of_group(p.snap.group.spec, p.snap.cluster_attrs)
    assert [r["revision"] for r in p.w.inserts] == [target]  # surge 1
    assert p.to_delete == []  # unavailable 0: no old node goes before a new one is ready
    status.conclude(pace(), p)
    assert p.w.status is not None and p.w.status.status == "CREATE_IN_PROGRESS"
    up = cond.get(p.w.status.conditions, cond.UP_TO_DATE)
    assert up is not None and up.reason == cond.ROLLING_OUT


def test_workers_wait_for_the_masters() -> None:
    nodes = [_old(i) for i in range(2)]
    p = start(group(2), nodes, [machine(n) for n in nodes])
    observe.observe(p)
    behind = Sibling("g-m", "master", (), False, "UPDATE_IN_PROGRESS", False)
    assert rollout.roll(p, lambda: [behind])
    assert p.rollout.state is RolloutState.WAITING and p.w.inserts == [] and p.to_delete == []


def test_a_new_node_late_past_the_deadline_stops_the_rollout() -> None:
    late = T0 - timedelta(seconds=601)
    new = node(9, m.NodeState.BUILDING, image_id="img", flavor_id="m1.small", created_at=late)
    nodes = [_old(0), _old(1), new]
    p = start(
        group(2), nodes, [machine(n) for n in nodes[:2]] + [machine(new, MachineState.BUILDING)]
    )
    observe.observe(p)
    assert rollout.roll(p, lambda: [])
    assert p.rollout.state is RolloutState.STALLED
    assert p.memory.stalled and "not ready 600 s" in p.memory.stalled
    assert p.to_delete == [] and p.w.inserts == []
    status.conclude(pace(), p)
    assert p.w.status is not None and p.w.status.status == "CREATE_FAILED"


def test_a_paused_rollout_moves_nothing() -> None:
    nodes = [_old(i) for i in range(2)]
    p = start(group(2, rollout_hold="paused"), nodes, [machine(n) for n in nodes])
    observe.observe(p)
    assert rollout.roll(p, lambda: [])
    assert p.rollout.state is RolloutState.PAUSED and p.w.inserts == [] and p.to_delete == []


LEARNED_BOOT_S = min(60.0, pacing.MOVING_CAP_S)  # the first machines' boot, within the cap


@pytest.mark.parametrize(
    ("report", "due_in_s"),
    [
        (None, LEARNED_BOOT_S),  # a per-machine provider: when the learned boot says
        (GroupReport("stack-1", GroupState.COMPLETE), LEARNED_BOOT_S),
        (GroupReport("stack-1", GroupState.IN_PROGRESS), pacing.GROUP_POLL_S),
        (GroupReport("stack-1", GroupState.FAILED, "boom"), LEARNED_BOOT_S),
    ],
)
def test_a_group_its_provider_works_on_is_looked_at_within_the_group_poll(
    report: GroupReport | None, due_in_s: float
) -> None:
    """A group grown by 2 whose first machines took 60 s to boot: looked at again when
    that boot time says, unless its provider reports it is working on it (Heat starts
    the new members among the unchanged ones, one a second)."""
    booted = [node(i) for i in range(3)]  # made at T0 - 6 min, ready a minute later
    new = [node(i, m.NodeState.BUILDING, created_at=T0) for i in (3, 4)]
    nodes = booted + new
    p = start(group(5), nodes, [machine(n) for n in booted] +
              [machine(n, MachineState.BUILDING) for n in new])  # fmt: skip
    grouped.record(p, report, pace().requeue_seconds)
    observe.observe(p)
    status.conclude(pace(), p)
    assert p.w.status is not None and p.w.status.next_reconcile_at is not None
    assert (p.w.status.next_reconcile_at - T0).total_seconds() == pytest.approx(due_in_s)


@pytest.mark.parametrize(
    ("report", "due_in_s"),
    [
        # a per-machine provider: a quarter of the time the deletes have taken (40 s)
        (None, pacing.MOVING_FRACTION * 40),
        (GroupReport("stack-1", GroupState.DELETING), pacing.GROUP_DELETE_POLL_S),
        (GroupReport("stack-1", GroupState.COMPLETE), pacing.MOVING_FRACTION * 40),
    ],
)
def test_a_group_its_provider_deletes_whole_is_looked_at_within_the_delete_poll(
    report: GroupReport | None, due_in_s: float
) -> None:
    """A group being deleted for 40 s, nothing learned of its deletes: looked at again
    after a fraction of that time, unless its provider reports it is deleting the group
    whole (a Heat stack delete: gone all at once, the cluster's own stack after it)."""
    marked = T0 - timedelta(seconds=40)
    nodes = [node(i, m.NodeState.DELETING, updated_at=marked) for i in range(3)]
    g = dataclasses.replace(group(3), deleting=True)
    p = start(g, nodes, [machine(n, MachineState.DELETING) for n in nodes])
    grouped.record(p, report, pace().requeue_seconds)
    delete.plan(p)
    delete.conclude(pace(), p)
    assert p.w.status is not None and p.w.status.next_reconcile_at is not None
    assert (p.w.status.next_reconcile_at - T0).total_seconds() == pytest.approx(due_in_s)


@pytest.mark.parametrize(
    ("boot_prior", "due_in_s"),
    [
        (None, pacing.MOVING_FRACTION * 8),  # nothing learned anywhere: a quarter of 8 s
        (20.0, 12.0),  # its provider's machines took 20 s lately: when that says
    ],
)
def test_a_group_with_nothing_learned_expects_its_providers_boot_time(
    boot_prior: float | None, due_in_s: float
) -> None:
    """A new group booting for 8 s, none of its own nodes ready yet: looked at again as
    its provider's recent boots say when there are some (conductor/priors.py)."""
    booting = [node(i, m.NodeState.BUILDING, created_at=T0 - timedelta(seconds=8)) for i in (1, 2)]
    p = start(group(2), booting, [machine(n, MachineState.BUILDING) for n in booting])
    observe.observe(p)
    status.conclude(dataclasses.replace(pace(), boot_prior=boot_prior), p)
    assert p.w.status is not None and p.w.status.next_reconcile_at is not None
    assert (p.w.status.next_reconcile_at - T0).total_seconds() == pytest.approx(due_in_s)


def test_a_pass_reports_the_boots_and_deletes_it_saw_finish() -> None:
    """What a pass saw end teaches its provider's other groups: the nodes that became
    ready (create to ready), the machines that went (marked to gone); nodes ready
    before the pass, or still moving, teach nothing."""
    ready_before = node(1)
    booted = node(2, m.NodeState.BUILDING, created_at=T0 - timedelta(seconds=21))
    booting = node(3, m.NodeState.BUILDING, created_at=T0 - timedelta(seconds=5))
    gone = node(4, m.NodeState.DELETING, updated_at=T0 - timedelta(seconds=6))
    nodes = [ready_before, booted, booting, gone]
    p = start(group(4), nodes, [machine(ready_before), machine(booted),
                                machine(booting, MachineState.BUILDING)])  # fmt: skip
    observe.observe(p)
    assert status.finished_moves(p) == ([21.0], [6.0])
