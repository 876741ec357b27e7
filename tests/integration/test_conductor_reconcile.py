"""The conductor against the real database and the real sim cloud, stepped
deterministically with `run_once()`. Desired state is written by the same
service functions the API calls (`shoal.services`), and the outcome is checked
from both sides (node rows and the cloud's own server list)."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from shoal.conductor import cluster
from shoal.conductor.kinds import KINDS
from shoal.conductor.loop import Conductor
from shoal.conductor.nodegroup import reconcile as nodegroup
from shoal.conductor.nodegroup import scale
from shoal.conductor.nodegroup.state import Pass
from shoal.db import leases, queue, registry, snapshots
from shoal.db.tables import ClusterRow, NodeGroupRow, NodeRow
from shoal.db.types import utcnow
from shoal.domain import conditions as cond
from shoal.domain import model as m
from shoal.drivers.contract import MachineSpec
from shoal.drivers.providers import Providers
from shoal.drivers.sim.driver import SimDriver
from shoal.services import orphans
from shoal.services.context import Caller
from tests.integration.conductor_support import FAST_CONDUCTOR, Env, make_env


@pytest.fixture
def env(db_url: str) -> Iterator[Env]:
    yield from make_env(db_url)


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


HETERO = [
    {"name": "masters", "role": "master", "flavor_id": "m1.small", "node_count": 3,
     "availability_zones": ["az-1", "az-2", "az-3"]},
    {"name": "workers", "flavor_id": "m1.small", "node_count": 4,
     "availability_zones": ["az-1", "az-2"]},
    {"name": "gpu", "flavor_id": "g1.large", "node_count": 2},
    {"name": "ssd", "flavor_id": "s1.large", "node_count": 3, "availability_zones": ["az-2"]},
]  # fmt: skip
MASTER = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
WORKER = {"name": "w", "role": "worker", "flavor_id": "m1.small", "node_count": 2}


def test_heterogeneous_cluster_converges_and_deletes_cleanly(env: Env) -> None:
    cid = env.create("hetero", HETERO)
    env.step_until(env.complete(cid))
    c = env.cluster(cid)
    assert c is not None and c.status == "CREATE_COMPLETE" and c.observed_generation == 1
    assert cond.is_true(c.conditions, cond.READY)
    assert cond.is_true(c.conditions, cond.CONTROL_PLANE_READY)
    masters = env.nodes(cid, "masters")
    assert sorted(n.availability_zone or "" for n in masters) == ["az-1", "az-2", "az-3"]
    assert c.api_address in {f"https://{n.address}:6443" for n in masters}
    assert {n.availability_zone for n in env.nodes(cid, "ssd")} == {"az-2"}
    assert Counter(n.availability_zone for n in env.nodes(cid, "workers")) == {
        "az-1": 2, "az-2": 2,
    }  # fmt: skip
    every = env.nodes(cid)
    assert len(every) == 12 and all(n.state == "ACTIVE" and n.address for n in every)
    assert len({n.address for n in every}) == 12 and len({n.name for n in every}) == 12
    for g in ("masters", "workers", "gpu", "ssd"):
        assert all(n.name.startswith(f"hetero-{g}-") for n in env.nodes(cid, g))
    # The cloud's side: one server per node row, with that node's id, flavor, zone.
    servers = {s.machine_id: s for s in env.world.servers(cluster=cid)}
    assert set(servers) == {n.uuid for n in every}
    assert {servers[n.uuid].flavor for n in env.nodes(cid, "gpu")} == {"g1.large"}
    assert all(servers[n.uuid].az == n.availability_zone for n in every)
    for name in ("masters", "workers", "gpu", "ssd"):
        grp = env.group(cid, name)
        assert grp.status == "CREATE_COMPLETE" and grp.status_reason is None
    reasons = {e.reason for e in env.events(cid)}
    assert {"ScalingUp", "NodesReady", "CreateComplete", "APIAddressKnown"} <= reasons

    env.delete(cid)
    env.step_until(lambda: env.cluster(cid) is None)
    assert env.world.servers() == []
    with env.db.read() as s:
        left = s.scalar(select(func.count()).where(NodeRow.cluster_uuid == cid))
    assert left == 0


def test_a_new_cluster_is_passed_after_its_master_group_not_before(lite: Env) -> None:
    """A pass of a new cluster would find nothing observed yet: it waits for its
    master group's first pass, which pokes it, and then says what it found."""
    cid = lite.create("fresh", [MASTER, WORKER])
    now = utcnow()
    assert queue.claim_due(lite.db, queue.CLUSTER, "probe", now, 15, 10) == []
    groups = queue.claim_due(lite.db, queue.NODEGROUP, "probe", now, 15, 10)
    assert len(groups) == 2
    with lite.db.write() as s:
        leases.release(s, "probe", [leases.key(queue.NODEGROUP.name, g) for g in groups])
    lite.conductor.run_once()  # node groups first (the master group pokes), then clusters
    c = lite.cluster(cid)
    assert c is not None and cond.get(c.conditions, cond.CONTROL_PLANE_READY) is not None
    assert cond.get(c.conditions, cond.READY) is not None
    lite.step_until(lite.complete(cid))
    c = lite.cluster(cid)
    assert c is not None and c.status == "CREATE_COMPLETE"
    assert c.api_address and cond.is_true(c.conditions, cond.READY)


def test_claims_take_the_longest_due_first_and_skip_leased_ones(lite: Env) -> None:
    """Claims scan the due index in order: the earliest requeue time first, a
    resource leased by someone else skipped, one not yet due left alone."""
    cids = [lite.create(f"o{i}", [MASTER]) for i in range(4)]
    groups = [lite.group(c, "m").uuid for c in cids]
    now = utcnow()
    with lite.db.write() as s:  # due 3 s ago, 2 s ago, 1 s ago, in an hour
        for g, at in zip(groups, (-3, -2, -1, 3600), strict=True):
            s.execute(
                update(NodeGroupRow)
                .where(NodeGroupRow.uuid == g)
                .values(next_reconcile_at=now + timedelta(seconds=at))
            )
        leases.claim(s, leases.key(queue.NODEGROUP.name, groups[0]), "peer", now, 15)
        s.execute(update(ClusterRow).values(next_reconcile_at=None))
    got = queue.claim_due(lite.db, queue.NODEGROUP, "me", now, 15, 10)
    assert got == [groups[1], groups[2]]
    # Next: not the leased group's old due time, but the first lease to expire.
    assert queue.next_due_at(lite.db, now) == now + timedelta(seconds=15)
    with lite.db.write() as s:
        leases.release(s, "me", [leases.key(queue.NODEGROUP.name, g) for g in got])
        leases.release(s, "peer", [leases.key(queue.NODEGROUP.name, groups[0])])
    assert queue.next_due_at(lite.db, now) == now - timedelta(seconds=3)


def test_a_claim_says_what_is_left_to_claim(lite: Env) -> None:
    """A claim's transaction reads what is left after its own claims: the worker
    wakes another only when some is, and knows when to look next without a read."""
    cids = [lite.create(f"l{i}", [MASTER]) for i in range(2)]
    groups = [lite.group(c, "m").uuid for c in cids]
    now = utcnow()
    with lite.db.write() as s:  # due 2 s ago and 1 s ago; the clusters not at all
        for g, ago in zip(groups, (2, 1), strict=True):
            s.execute(
                update(NodeGroupRow)
                .where(NodeGroupRow.uuid == g)
                .values(next_reconcile_at=now - timedelta(seconds=ago))
            )
        s.execute(update(ClusterRow).values(next_reconcile_at=None))
    assert queue.look(lite.db, now).due(queue.NODEGROUP.name)
    seen = queue.Seen()
    assert queue.claim_due(lite.db, queue.NODEGROUP, "me", now, 15, 1, seen=seen) == groups[:1]
    assert seen.look is not None and seen.look.due(queue.NODEGROUP.name)  # one left
    assert seen.look.next_at == now - timedelta(seconds=1)
    seen = queue.Seen()
    assert queue.claim_due_groups(lite.db, "me", now, 15, 1, looked=True, seen=seen) == [groups[1:]]
    assert seen.look is not None and not seen.look.any_due  # none left: its own leases count
    assert seen.look.next_at == now + timedelta(seconds=15)  # the first of them to expire
    assert not queue.look(lite.db, now).any_due


@pytest.mark.parametrize(
    ("mine", "waited", "capped_for"),
    [
        (1, 1.0, None),  # below its share (2 of 4 due, 2 conductors): it claims
        (2, 1.0, 14.0),  # at its share: peers take the rest; it would in 14 s
        (3, 1.0, 14.0),
        (2, 16.0, None),  # the oldest waited a lease period: taken regardless
    ],
)
def test_a_conductor_at_its_share_says_when_it_takes_more(
    lite: Env, mine: int, waited: float, capped_for: float | None
) -> None:
    """With a peer live, a process holding its share of the due work claims no more
    (capped) and says in how long it would take the oldest regardless (a slow or
    dead peer), so that its workers wait for that instead of polling."""
    cids = [lite.create(f"s{i}", [MASTER]) for i in range(4)]
    groups = [lite.group(c, "m").uuid for c in cids]
    now = utcnow()
    with lite.db.write() as s:
        s.execute(
            update(NodeGroupRow)
            .where(NodeGroupRow.uuid.in_(groups))
            .values(next_reconcile_at=now - timedelta(seconds=waited))
        )
        s.execute(update(ClusterRow).values(next_reconcile_at=None))
        for host in ("me", "peer"):  # two live conductors
            registry.report_alive(s, host, now, 5.0)
    claims = lite.conductor.claims
    held = queue.claim_due(lite.db, queue.NODEGROUP, claims.holder, now, 15, mine)
    claims.hold([leases.key(queue.NODEGROUP.name, u) for u in held])
    take = claims.claim_fair(KINDS[0])
    if capped_for is None:
        assert take.capped_for is None and len(take.batches) == 1
    else:
        assert take.batches == [] and take.capped_for is not None
        assert capped_for - 1.0 < take.capped_for <= capped_for


def test_small_groups_of_a_cluster_are_claimed_and_passed_together(lite: Env) -> None:
    """The small groups of a cluster due together make one batch (one claim, one
    pass: one snapshot, one intent write, one outcome write); a big group is a
    batch of its own, and other clusters' groups are not mixed in."""
    big = {**WORKER, "name": "big", "node_count": queue.BATCH_NODES + 1}
    a = lite.create("a", [MASTER, WORKER, big])
    b = lite.create("b", [MASTER])
    ga = {g: lite.group(a, g).uuid for g in ("m", "w", "big")}
    now = utcnow()
    first = queue.claim_due_groups(lite.db, "me", now, 15, 1)
    assert first == [[ga["m"], ga["w"]]]
    rest = queue.claim_due_groups(lite.db, "me", now, 15, 10)
    assert rest == [[ga["big"]], [lite.group(b, "m").uuid]]
    with lite.db.write() as s:
        keys = [leases.key(queue.NODEGROUP.name, u) for batch in first + rest for u in batch]
        leases.release(s, "me", keys)
    lite.conductor.run_once()
    scaling = {e.nodegroup_id: e.time for e in lite.events(a) if e.reason == "ScalingUp"}
    assert set(scaling) == set(ga.values())
    assert scaling[ga["m"]] == scaling[ga["w"]]  # one pass, one clock reading
    lite.step_until(lite.complete(a))
    lite.step_until(lite.complete(b))
    assert len(lite.servers(a)) == 1 + 2 + queue.BATCH_NODES + 1


def test_a_busy_conductor_takes_several_small_clusters_in_one_pass(lite: Env) -> None:
    """With `merge` (every worker busy), the small groups of several clusters make one
    batch, a big group still one of its own; several clusters make one cluster
    pass. Each resource keeps its own lease and its own writes."""
    big = {**WORKER, "name": "big", "node_count": queue.BATCH_NODES + 1}
    a = lite.create("a", [MASTER, WORKER])
    b = lite.create("b", [MASTER])
    c = lite.create("c", [MASTER, big])
    me, ctx = lite.conductor.holder, lite.conductor.ctx
    batches = queue.claim_due_groups(lite.db, me, utcnow(), 15, 8, merge=True)
    small = [lite.group(a, "m").uuid, lite.group(a, "w").uuid, lite.group(b, "m").uuid]
    # The big group is left for later: not claimed ahead of time behind this pass.
    assert batches == [[*small, lite.group(c, "m").uuid]]
    nodegroup.reconcile_batch(ctx, batches[0])
    scaling = [e.time for cid in (a, b, c) for e in lite.events(cid) if e.reason == "ScalingUp"]
    assert len(scaling) == 4 and len(set(scaling)) == 1  # one pass, one clock reading
    assert lite.nodes(c, "big") == []
    with lite.db.write() as s:
        leases.release(s, me, [leases.key(queue.NODEGROUP.name, u) for b_ in batches for u in b_])
    # The master groups poked their clusters: all three are due, one pass for them.
    due = queue.claim_due(lite.db, queue.CLUSTER, me, utcnow(), 15, 10)
    assert sorted(due) == sorted([a, b, c])
    cluster.reconcile_batch(ctx, due)
    seen = set()
    for cid in (a, b, c):
        got = lite.cluster(cid)
        ready = cond.get(got.conditions, cond.CONTROL_PLANE_READY) if got else None
        assert ready is not None
        seen.add(ready.last_transition)
    assert len(seen) == 1
    with lite.db.write() as s:
        leases.release(s, me, [leases.key(queue.CLUSTER.name, u) for u in due])
    for cid in (a, b, c):
        lite.step_until(lite.complete(cid))


def test_a_new_group_starts_with_one_wave(lite: Env) -> None:
    """A new big group's first pass writes the intent of one wave (driver_concurrency
    nodes, at least a small group's size) and creates it; the next pass, due at
    once, adds the rest."""
    wave = max(queue.BATCH_NODES, lite.conductor.settings.driver_concurrency)
    cid = lite.create("wave", [{**WORKER, "node_count": wave + 8}, MASTER])
    g = lite.group(cid, "w").uuid
    me, ctx = lite.conductor.holder, lite.conductor.ctx
    claimed = queue.claim_due_groups(lite.db, me, utcnow(), 15, 10)
    assert [g] in claimed  # a big group: a batch of its own
    nodegroup.reconcile_batch(ctx, [g])
    assert len(lite.nodes(cid, "w")) == wave and len(lite.servers(cid)) == wave
    with lite.db.read() as s:
        due = s.scalar(select(NodeGroupRow.next_reconcile_at).where(NodeGroupRow.uuid == g))
    assert due is not None and due <= utcnow()
    with lite.db.write() as s:
        leases.release(s, me, [leases.key(queue.NODEGROUP.name, u) for b in claimed for u in b])
    lite.step_until(lite.complete(cid))
    assert len(lite.nodes(cid, "w")) == wave + 8


def test_new_node_names_are_unique_in_the_cluster(lite: Env) -> None:
    """New names are drawn against the group's own, then checked against the whole
    cluster in one query for a batch: one taken by another group's node, or drawn
    twice in the batch, is drawn again."""
    cid = lite.create("names", [MASTER, WORKER])
    lite.step_until(lite.complete(cid))
    existing = {n.name for n in lite.nodes(cid)}
    taken = next(n.name for n in lite.nodes(cid, "m"))
    gid = lite.group(cid, "w").uuid
    snap = snapshots.load_groups(lite.db, [gid])[gid]
    p = Pass.start(snap, utcnow(), [], "sim")
    for name in (taken, "twice", "twice", "fresh"):
        uid = f"uuid-{len(p.w.inserts)}"
        p.w.inserts.append({"uuid": uid, "name": name})
        p.nodes[uid] = m.Node(0, uid, name, cid, snap.group.uuid, "p1", m.NodeState.PENDING)
    scale.settle_names([p], lambda c, names: snapshots.taken_names(lite.db, c, names))
    names = [row["name"] for row in p.w.inserts]
    assert len(set(names)) == 4 and not set(names) & existing
    assert names[3] == "fresh" and "twice" in names
    assert [p.nodes[row["uuid"]].name for row in p.w.inserts] == names


def test_heartbeat_requeues_a_new_generation_left_without_a_due_time(lite: Env) -> None:
    """The safety net: desired state whose write set no requeue time is picked up
    by the next heartbeat, not lost."""
    cid = lite.create("net", [MASTER])
    lite.step_until(lite.complete(cid))
    g = lite.group(cid, "m")
    with lite.db.write() as s:  # a desired-state write that forgot next_reconcile_at
        s.execute(
            update(NodeGroupRow)
            .where(NodeGroupRow.uuid == g.uuid)
            .values(node_count=2, generation=NodeGroupRow.generation + 1, next_reconcile_at=None)
        )
    assert queue.claim_due(lite.db, queue.NODEGROUP, "me", utcnow(), 15, 10) == []
    lite.conductor.heartbeat()
    assert queue.claim_due(lite.db, queue.NODEGROUP, "me", utcnow(), 0.001, 10) == [g.uuid]
    lite.step_until(lambda: len(lite.nodes(cid, "m")) == 2 and lite.complete(cid)())


def test_resize_up_down_and_named_removal(lite: Env) -> None:
    env = lite
    cid = env.create("rs", [MASTER, {**WORKER, "node_count": 5}])
    env.step_until(env.complete(cid))
    env.resize(cid, "w", 8)
    env.step_until(env.complete(cid))
    before = env.nodes(cid, "w")
    assert len(before) == 8 and env.cluster(cid).status == "UPDATE_COMPLETE"  # type: ignore[union-attr]
    named = [before[1].uuid, before[4].name, before[6].address or ""]
    gone = {before[1].uuid, before[4].uuid, before[6].uuid}
    env.resize(cid, "w", 5, remove=named)
    env.step_until(lambda: env.complete(cid)() and len(env.nodes(cid, "w")) == 5)
    after = env.nodes(cid, "w")
    assert {n.uuid for n in after} == {n.uuid for n in before} - gone
    masters = {n.uuid for n in env.nodes(cid, "m")}
    assert set(env.servers(cid)) - masters == {n.uuid for n in after}
    # Named removal and growth in one step: exactly the named node goes, one is added.
    keep = {n.uuid for n in after if n.uuid != after[0].uuid}
    env.resize(cid, "w", 6, remove=[after[0].uuid])
    env.step_until(lambda: env.complete(cid)() and len(env.nodes(cid, "w")) == 6)
    final = {n.uuid for n in env.nodes(cid, "w")}
    assert keep < final and after[0].uuid not in final
    # Unnamed scale-down picks the newest (policy default) and leaves the rest.
    newest = max(env.nodes(cid, "w"), key=lambda n: (n.created_at, n.id))
    env.resize(cid, "w", 5)
    env.step_until(lambda: env.complete(cid)() and len(env.nodes(cid, "w")) == 5)
    assert newest.uuid not in {n.uuid for n in env.nodes(cid, "w")}


def test_quota_block_reports_the_reason_and_resumes_by_itself(lite: Env) -> None:
    env = lite
    env.world.set_quota("p1", {"cores": 4})  # m1.small = 1 core: 4 of 6 fit
    cid = env.create("q", [MASTER, {**WORKER, "node_count": 5}])

    def blocked() -> bool:
        g = env.group(cid, "w")
        return (g.status_reason or "").startswith("BLOCKED: quota exceeded")

    env.step_until(blocked)
    g = env.group(cid, "w")
    assert g.status == "CREATE_IN_PROGRESS"
    ready = cond.get(g.conditions, cond.READY)
    assert ready is not None and ready.reason == cond.BLOCKED and "cores" in ready.message
    assert len(env.servers(cid)) == 4  # what succeeded is kept
    c = env.cluster(cid)
    assert c is not None and "BLOCKED: quota exceeded" in (c.status_reason or "")
    env.world.set_quota("p1", {"cores": 100})
    env.step_until(env.complete(cid))
    assert len(env.servers(cid)) == 6


def test_no_valid_host_moves_the_node_to_the_next_zone(lite: Env) -> None:
    env = lite
    env.world.add_fault({"kind": "no_valid_host", "az": "az-1"})
    cid = env.create("nvh", [HETERO[0]])
    env.step_until(env.complete(cid))
    zones = Counter(n.availability_zone for n in env.nodes(cid, "masters"))
    assert zones == {"az-2": 2, "az-3": 1}
    nvh = [e for e in env.events(cid) if e.reason == "NoValidHost"]
    assert len(nvh) == 1 and "az-1" in nvh[0].message and "az-2" in nvh[0].message


def test_error_server_is_replaced(lite: Env) -> None:
    env = lite
    env.world.add_fault({"kind": "server_error", "count": 1, "message": "disk on fire"})
    cid = env.create("err", [MASTER, {**WORKER, "node_count": 3}])
    env.step_until(env.complete(cid))
    assert len(env.nodes(cid, "w")) == 3
    assert set(env.servers(cid)) == {n.uuid for n in env.nodes(cid)}
    errs = [e for e in env.events(cid) if e.reason == "MachineError"]
    assert len(errs) == 1 and "disk on fire" in errs[0].message


def test_timeout_fails_the_group_and_a_retry_recovers(lite: Env) -> None:
    env = lite
    # The master (1 core) and one m1.medium worker (2 cores) fit, whatever the order.
    env.world.set_quota("p1", {"cores": 3})
    w = {**WORKER, "flavor_id": "m1.medium", "node_count": 3}
    cid = env.create("to", [MASTER, w], create_timeout=1)
    env.step_until(lambda: env.group(cid, "m").status == "CREATE_COMPLETE")
    env.step_until(lambda: (env.group(cid, "w").status_reason or "").startswith("BLOCKED"))
    # The worker that fits is up before the clock moves, so the boot time the
    # group learns from it is the real one, not the two minutes skipped below.
    env.step_until(lambda: [n.state for n in env.nodes(cid, "w")].count(m.NodeState.ACTIVE) == 1)
    assert env.group(cid, "w").status == "CREATE_IN_PROGRESS"
    env.skew[0] = timedelta(minutes=2)  # the conductor's clock passes create_timeout
    env.step_until(lambda: env.group(cid, "w").status == "CREATE_FAILED")
    g = env.group(cid, "w")
    assert (g.status_reason or "").startswith("timed out after 1 minutes: BLOCKED: quota")
    env.step_until(lambda: env.cluster(cid).status == "CREATE_FAILED")  # type: ignore[union-attr]
    env.world.set_quota("p1", {"cores": 100})
    for _ in range(3):  # FAILED rests until someone retries
        env.conductor.run_once()
    assert env.group(cid, "w").status == "CREATE_FAILED" and len(env.servers(cid)) == 2
    env.skew[0] = timedelta(0)
    env.resize(cid, "w", 3)  # the retry: the same request again
    env.step_until(env.complete(cid))
    assert env.group(cid, "w").status == "UPDATE_COMPLETE"
    assert len(env.servers(cid)) == 4


def test_permanent_error_fails_at_once_with_the_reason(lite: Env) -> None:
    env = lite
    cid = env.create("bad", [MASTER, {**WORKER, "flavor_id": "x9.huge"}])
    env.step_until(lambda: env.group(cid, "w").status == "CREATE_FAILED")
    assert "x9.huge" in (env.group(cid, "w").status_reason or "")
    assert env.servers(cid) == [n.uuid for n in env.nodes(cid, "m")]


def test_sweeper_holds_a_machine_of_an_unknown_group_until_asked_and_leases_exclude(
    lite: Env,
) -> None:
    env = lite
    spec = MachineSpec("4d1c0c1e-0000-4000-8000-000000000001", "ghost", "p1", "gone-cluster",
                       "gone-ng", "worker", "m1.small", "fedora-coreos-40")  # fmt: skip
    SimDriver(env.world).ensure_machine(spec)
    cid = env.create("sw", [MASTER, WORKER])
    env.step_until(env.complete(cid))
    assert env.conductor.sweep() == 0  # seen now: held
    # A second conductor cannot claim what the first holds.
    other = Conductor(env.db, Providers.of({"sim": SimDriver(env.world)}), FAST_CONDUCTOR)
    env.resize(cid, "w", 3)
    now = env.conductor.ctx.now()
    mine = queue.claim_due(env.db, queue.NODEGROUP, env.conductor.holder, now, 30, 10)
    theirs = queue.claim_due(env.db, queue.NODEGROUP, other.holder, now, 30, 10)
    assert len(mine) == 1 and theirs == []
    other.stop()
    env.skew[0] += timedelta(seconds=FAST_CONDUCTOR.sweep_grace_seconds + 1)
    assert env.conductor.sweep() == 0  # shoal never deleted "gone-ng": held, not deleted
    assert spec.machine_id in {s.machine_id for s in env.world.servers(state="ACTIVE")}
    orphans.request_delete(env.db, Caller("p1"), [spec.machine_id])  # an admin says so
    assert env.conductor.sweep() == 1
    assert spec.machine_id not in {s.machine_id for s in env.world.servers(state="ACTIVE")}


def test_a_repair_long_after_the_create_gets_its_own_timeout(lite: Env) -> None:
    """A machine lost on a COMPLETE group, long after create_timeout has passed
    since the request, is replaced; the repair is not failed as timed out."""
    env = lite
    cid = env.create("rep", [MASTER, WORKER], create_timeout=1)
    env.step_until(env.complete(cid))
    before = {n.uuid for n in env.nodes(cid)}
    env.skew[0] = timedelta(minutes=5)  # well past create_timeout since the create
    lost = env.nodes(cid, "w")[0].uuid
    env.world.delete(lost)  # gone behind shoal's back, as an operator's `server delete`
    env.step_until(lambda: lost not in env.servers(cid) and len(env.servers(cid)) == 3)
    env.step_until(lambda: env.group(cid, "w").status == "CREATE_COMPLETE")
    g = env.group(cid, "w")
    assert g.status == "CREATE_COMPLETE", (g.status, g.status_reason)
    assert len(env.servers(cid)) == 3
    assert set(env.servers(cid)) == {n.uuid for n in env.nodes(cid)}
    assert {n.uuid for n in env.nodes(cid)} - before  # a replacement was made


def test_api_address_moves_when_its_master_goes_away(lite: Env) -> None:
    env = lite
    cid = env.create("api", [HETERO[0]])
    env.step_until(env.complete(cid))
    c = env.cluster(cid)
    assert c is not None and c.api_address
    masters = env.nodes(cid, "masters")
    first = next(n for n in masters if c.api_address == f"https://{n.address}:6443")
    env.world.delete(first.uuid)  # its machine is lost
    env.skew[0] = timedelta(seconds=env.conductor.settings.sweep_seconds + 1)  # next resync

    def moved() -> bool:
        now = env.cluster(cid)
        return now is not None and now.api_address != c.api_address

    env.step_until(moved)
    env.step_until(env.complete(cid))
    after = env.cluster(cid)
    assert after is not None
    alive = {f"https://{n.address}:6443" for n in env.nodes(cid, "masters")}
    assert after.api_address in alive and first.uuid not in env.servers(cid)
    changed = [e for e in env.events(cid) if e.reason == "APIAddressChanged"]
    assert len(changed) == 1 and c.api_address in changed[0].message


def test_masters_are_created_before_workers(tmp_path: Path) -> None:
    """Groups are claimed by due time, then id; masters get the lowest ids even when
    the request lists them last, so one worker thread boots the control plane first."""
    one = dataclasses.replace(FAST_CONDUCTOR, workers=1)
    for env in make_env(f"sqlite:///{tmp_path / 'shoal.db'}", one):
        cid = env.create("mf", [HETERO[2], HETERO[1], HETERO[0]])
        env.step_until(env.complete(cid))
        born = {s.machine_id: s.created_at for s in env.world.servers(cluster=cid)}
        master_ids = {n.uuid for n in env.nodes(cid, "masters")}
        masters = [born[i] for i in master_ids]
        workers = [t for i, t in born.items() if i not in master_ids]
        assert len(masters) == 3 and len(workers) == 6
        assert max(masters) <= min(workers)


def test_transient_cloud_errors_are_retried_without_duplicates(lite: Env) -> None:
    env = lite
    env.world.add_fault({"kind": "transient", "op": "create", "count": 4, "status": 503})
    env.world.add_fault({"kind": "transient", "op": "list", "count": 2, "status": 429,
                         "retry_after": 0.05})  # fmt: skip
    cid = env.create("tr", [MASTER, {**WORKER, "node_count": 4}])
    env.step_until(env.complete(cid))
    assert set(env.servers(cid)) == {n.uuid for n in env.nodes(cid)}
    assert len(env.servers(cid)) == 5
    assert all(f["fired"] == f["count"] for f in env.world.faults())
    retries = [e for e in env.events(cid) if e.reason == "Retrying"]
    assert retries and all(e.type == "Warning" for e in retries)


def test_a_delete_the_cloud_refuses_once_still_finishes(lite: Env) -> None:
    env = lite
    cid = env.create("df", [MASTER, WORKER])
    env.step_until(env.complete(cid))
    env.world.add_fault({"kind": "delete_fails_once"})
    env.delete(cid)
    env.step_until(lambda: env.cluster(cid) is None)
    assert env.servers(cid) == []
    assert env.world.servers() == []
