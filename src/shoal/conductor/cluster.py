"""The cluster reconciler: cluster-wide facts under the cluster lease.

Phases: api_address (as soon as the first master is up, long before the last
worker boots; moved to another ready master when that one goes away; the load
balancer's address where the masters' provider has one),
control-plane and readiness conditions, the Magnum status aggregated from the
node groups, and the separate delete path (the cluster row goes once every node
group is gone, after which the API answers 404).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from shoal.conductor import journal
from shoal.conductor.context import Context
from shoal.conductor.guard import Guard
from shoal.db import outcomes, queue, snapshots, writes
from shoal.domain import conditions as cond
from shoal.domain import release as rel
from shoal.domain import status as st
from shoal.domain.model import ROLE_MASTER, Cluster, Condition
from shoal.drivers.contract import (
    ApiLoadBalancingDriver,
    EarlyReleasingDriver,
    Feature,
    ReleasingDriver,
    TransientError,
)

API_PORT = 6443
log = logging.getLogger(__name__)


@dataclass
class Pass:
    snap: snapshots.ClusterSnapshot
    now: datetime
    w: writes.ClusterWrite = field(default_factory=writes.ClusterWrite)
    conds: tuple[Condition, ...] = ()

    def event(self, reason: str, message: str, *, warning: bool = False) -> None:
        self.w.events.append(writes.EventIn(reason, message, "Warning" if warning else "Normal"))


def reconcile_batch(ctx: Context, uuids: list[str]) -> None:
    """One pass over some clusters (the caller holds their leases): each on its own,
    their snapshots read in one transaction and their writes made in one. An
    unexpected exception in one cluster's phases or write is that cluster's
    `ReconcileError` alone (conductor/guard.py)."""
    snaps = snapshots.load_clusters(ctx.db, uuids)
    now = ctx.now()
    guard = Guard(queue.CLUSTER, now)
    started = [
        Pass(s, now, conds=cond.remove(s.cluster.conditions, cond.RECONCILE_ERROR))
        for u in uuids
        if (s := snaps.get(u)) is not None
    ]
    passes = guard.keep(started, _uuid, lambda p: _phases(ctx, p))
    passes = guard.written(
        passes,
        _uuid,
        lambda ps: outcomes.apply_clusters(
            ctx.db, [(p.snap, p.w) for p in ps], now, holder=ctx.holder
        ),
    )
    for p in passes:
        journal.events(p.snap.cluster.uuid, p.w.events)
    guard.record(ctx)


def _uuid(p: Pass) -> str:
    return p.snap.cluster.uuid


def _phases(ctx: Context, p: Pass) -> None:
    if p.snap.cluster.deleting:
        _delete_path(ctx, p)
    else:
        api_address(p, balanced_address(ctx, p))
        control_plane(p)
        _finish(ctx, p)


def balanced_address(ctx: Context, p: Pass) -> str | None:
    """The cluster's API address when its masters' provider serves it through a load
    balancer of its own (feature API_LOAD_BALANCER) and the masters run Kubernetes
    (the conductor renders it: `nodegroup/kube.py`): the address the provider holds
    for the cluster (asking for it also starts the balancer again if it stopped)."""
    c = p.snap.cluster
    if ctx.kube_secrets is None or c.attrs.get("coe", "kubernetes") != "kubernetes":
        return None
    for g in p.snap.groups:
        prov = ctx.provider(g.provider) if g.role == ROLE_MASTER else None
        if prov is not None and prov.has(Feature.API_LOAD_BALANCER):
            driver = cast(ApiLoadBalancingDriver, prov.driver)
            return str(ctx.call(prov, functools.partial(driver.reserve_address, c.uuid)))
    return None


def api_address(p: Pass, balanced: str | None = None) -> None:
    """api_address points at the masters' load balancer (`balanced`) once a master is
    up; without one, at a ready master: the oldest one as soon as it is up, and it
    moves to another when that master goes away (a lost machine, a removal)."""
    c, up = p.snap.cluster, p.snap.master_addresses
    if up and balanced is not None:
        if c.api_address != _url(balanced):
            p.w.api_address = _url(balanced)
            p.event(
                "APIAddressKnown", f"API address {p.w.api_address} (the masters' load balancer)"
            )
    elif up and c.api_address not in {_url(a) for a in up}:
        p.w.api_address = _url(up[0])
        if c.api_address:
            p.event(
                "APIAddressChanged",
                f"API address {c.api_address} -> {p.w.api_address}: "
                "the master it pointed at is no longer ready",
                warning=True,
            )
        else:
            p.event("APIAddressKnown", f"API address {p.w.api_address}")
    addr = p.w.api_address or c.api_address
    if up and addr:
        p.conds = cond.set_true(p.conds, cond.API_ADDRESS_KNOWN, cond.AS_EXPECTED, addr, p.now)
    else:
        msg = f"no master is ready (last API address {addr})" if addr else "no master is up yet"
        p.conds = cond.set_false(
            p.conds, cond.API_ADDRESS_KNOWN, cond.WAITING_FOR_MASTERS, msg, p.now
        )


def _url(address: str) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"https://{host}:{API_PORT}"


def control_plane(p: Pass) -> None:
    """ControlPlaneReady: every desired master is up."""
    s = p.snap
    msg = f"{s.masters_ready} of {s.masters_total} master(s) ready"
    if s.masters_total and s.masters_ready >= s.masters_total:
        p.conds = cond.set_true(p.conds, cond.CONTROL_PLANE_READY, cond.AS_EXPECTED, msg, p.now)
    else:
        p.conds = cond.set_false(
            p.conds, cond.CONTROL_PLANE_READY, cond.WAITING_FOR_MASTERS, msg, p.now
        )


def _finish(ctx: Context, p: Pass) -> None:
    c = p.snap.cluster
    seen: list[st.Outcome] = []
    reasons = []
    for g in p.snap.groups:
        o = st.outcome_of(g.status) or st.Outcome.IN_PROGRESS
        seen.append(o)
        # A complete group whose listings fail says so too (it changes nothing meanwhile).
        listing = cond.has_reason(g.conditions, cond.READY, cond.LISTING_FAILED)
        if (o is not st.Outcome.COMPLETE or listing) and g.status_reason:
            reasons.append((o is not st.Outcome.FAILED, f"node group {g.name}: {g.status_reason}"))
    outcome = st.aggregate(seen)
    reasons.sort(key=lambda r: r[0])  # failed groups first
    reason = "; ".join(r for _, r in reasons[:3]) or None
    if outcome is st.Outcome.COMPLETE:
        p.conds = cond.set_true(
            p.conds, cond.READY, cond.AS_EXPECTED, "all node groups ready", p.now
        )
    else:
        why = cond.FAILED if outcome is st.Outcome.FAILED else cond.NODE_GROUPS_NOT_READY
        p.conds = cond.set_false(
            p.conds, cond.READY, why, reason or "node groups in progress", p.now
        )
    health(p, outcome)
    new_status = st.derive(c.status, outcome)
    if new_status != c.status:
        msg = f"cluster {c.name}: {c.status} -> {new_status}" + (f" ({reason})" if reason else "")
        p.event("".join(w.capitalize() for w in new_status.split("_")), msg,
                warning=outcome is st.Outcome.FAILED)  # fmt: skip
    nxt = (
        ctx.requeue_at(p.now, ctx.settings.requeue_seconds)
        if outcome is st.Outcome.IN_PROGRESS
        else None
    )
    p.w.status = writes.StatusWrite(
        c.generation, new_status, reason, p.conds, outcome is not st.Outcome.IN_PROGRESS, nxt
    )


def health(p: Pass, outcome: st.Outcome) -> None:
    """Magnum's health_status from what shoal observes: UNHEALTHY when a group failed
    or has unhealthy nodes (its `Healthy` condition: silent agents, failed machines,
    Nodes Kubernetes does not report Ready), or, once complete, when its Kubernetes API
    server does not answer; HEALTHY when every group is ready and healthy, UNKNOWN
    while work is under way; the reason maps each group (and the API) to what was
    seen."""
    c = p.snap.cluster
    reason = {g.name: g.status_reason or g.status for g in p.snap.groups}
    sick = {}
    for g in p.snap.groups:
        h = cond.get(g.conditions, cond.HEALTHY)
        if h is not None and h.status == cond.FALSE:
            sick[g.name] = h.message
    reason.update(sick)
    reason["api"] = c.api_address or p.w.api_address or "no API address yet"
    # Where shoal reads the cluster's Kubernetes API server: whether it answered.
    unreachable = next(
        (
            k.message
            for g in p.snap.groups
            if (k := cond.get(g.conditions, cond.KUBERNETES_API)) is not None
            and k.status == cond.FALSE
        ),
        None,
    )
    if unreachable:
        reason["api"] = f"{reason['api']}: {unreachable}"
    status = {
        st.Outcome.COMPLETE: "HEALTHY",
        st.Outcome.FAILED: "UNHEALTHY",
    }.get(outcome, "UNKNOWN")
    if sick or (unreachable and outcome is st.Outcome.COMPLETE):
        status = "UNHEALTHY"
    if (status, reason) != (c.health_status, c.health_status_reason):
        p.w.health = (status, reason)


def begin_release(ctx: Context, c: Cluster) -> None:
    """Drivers whose cluster-wide things nothing needs while the groups are deleted
    (feature RELEASE_EARLY: a Heat cluster stack's server groups) start removing them
    now, beside the groups; `release` confirms it later. A refusal only waits for it."""
    early = [n for n, prov in ctx.providers.items() if prov.has(Feature.RELEASE_EARLY)]
    for name in rel.targets(c.providers, early, ctx.default_provider):
        prov = ctx.providers[name]
        driver = cast(EarlyReleasingDriver, prov.driver)
        try:
            ctx.call(prov, functools.partial(driver.begin_release, c.project_id, c.uuid))
        except TransientError as exc:
            log.info("cluster %s: %s's early release waits for its release: %s",
                     c.uuid, name, exc.reason)  # fmt: skip


def release(ctx: Context, c: Cluster) -> None:
    """Drivers that made things for the cluster besides machines (feature RELEASE)
    remove them, now that no machine is left and before its credential goes: those
    its groups were made in (domain/release.py), so that a provider it never used,
    down or slow, does not hold its deletion."""
    releasing = [n for n, prov in ctx.providers.items() if prov.has(Feature.RELEASE)]
    for name in rel.targets(c.providers, releasing, ctx.default_provider):
        prov = ctx.providers[name]
        driver = cast(ReleasingDriver, prov.driver)
        ctx.call(prov, functools.partial(driver.release_cluster, c.project_id, c.uuid))


def _delete_path(ctx: Context, p: Pass) -> None:
    c = p.snap.cluster
    if not p.snap.groups:
        release(ctx, c)
        if ctx.kube is not None:  # its API server's client goes with it
            ctx.kube.forget(c.uuid)
        if ctx.delegations is not None:  # its trust goes next; the row then with the cluster
            ctx.delegations.forget(c.uuid)
        p.w.delete_cluster = True
        return
    begin_release(ctx, c)
    p.w.mark_groups_deleting = [g.uuid for g in p.snap.groups if not g.deleting]
    msg = f"deleting {len(p.snap.groups)} node group(s)"
    p.conds = cond.set_false(p.conds, cond.READY, cond.DELETION_IN_PROGRESS, msg, p.now)
    p.w.status = writes.StatusWrite(
        c.generation,
        st.derive(c.status, st.Outcome.IN_PROGRESS, deleting=True),
        msg,
        p.conds,
        False,
        ctx.requeue_at(p.now, ctx.settings.requeue_seconds),
    )
