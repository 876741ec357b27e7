"""One pass over a batch of node groups: the phase list, and where the pass's writes are applied.

Skeleton (Cluster API style): list each group's machines in one driver call,
load the snapshots, choose each group's path (reconcile, delete, or only
conclude), run the phases (observe, remove, operate, roll out or scale), commit the
**intent** (new node rows with final names and ids, DELETING marks) before any
cloud call, act (parallel driver
calls), conclude (status, conditions, events, requeue) and commit the
**outcome**. Nothing else in the node group reconciler writes to the database.

Small groups due together go through one pass as a batch (see
`db.queue.claim_due_groups`): each keeps its own phases, status and requeue
time; the reads, writes and calls are shared.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from shoal.conductor import journal
from shoal.conductor.context import Context, Provider
from shoal.conductor.guard import Guard
from shoal.conductor.nodegroup import (
    act,
    delete,
    grouped,
    kubefeed,
    observe,
    operate,
    rollout,
    scale,
    spec,
    status,
)
from shoal.conductor.nodegroup.state import Pass, Path
from shoal.db import outcomes, queue, snapshots, virthosts, writes
from shoal.db.virthosts import VirtView
from shoal.domain import status as st
from shoal.domain.model import ROLE_VIRT
from shoal.drivers.contract import (
    TAG_CLUSTER,
    TAG_NODEGROUP,
    TAG_PROJECT,
    GroupReport,
    Machine,
    TransientError,
)


def reconcile_batch(ctx: Context, uuids: list[str]) -> None:
    """One pass over node groups `uuids` (the caller holds their leases). What each
    group does on its own runs under the per-pass guard (conductor/guard.py): an
    unexpected exception there is that group's `ReconcileError`, and the other
    groups of the batch go on."""
    now = ctx.now()
    guard = Guard(queue.NODEGROUP, now)
    places = ctx.places_of(uuids, lambda us: snapshots.places_of(ctx.db, us))
    providers = {u: str(place.provider) for u, place in places.items()}
    # VMs of virt hosts: the driver learns the cluster's hosts before any call.
    views = guard.each(providers, lambda u: _virt_hosts(ctx, providers[u], u))
    # Machines are listed on this worker's thread, not the driver pool's: a listing
    # does not take a create's place among the driver's `driver_concurrency` calls.
    # Groups a provider realises whole make no per-machine creates: a batch's (a
    # cluster's Heat stacks) are listed at once, as their calls are made (act.py);
    # those whose deletion no pass has seen yet are not listed: their provider is
    # asked to delete them whole at once (delete.py), and the next pass lists them.
    reports: dict[str, GroupReport] = {}
    whole = {u for u in views if _reports(ctx, places[u].provider)}
    unlisted = snapshots.deletes_unasked(ctx.db, whole) if whole else set()
    listed = guard.each([u for u in views if u not in whole],
                        lambda u: _listing(ctx, places[u], u, reports))  # fmt: skip
    listed |= guard.each_at_once(
        whole - unlisted, lambda u: _listing(ctx, places[u], u, reports), ctx.pool
    )
    listed |= {u: [] for u in unlisted}
    # The snapshots are read after the listings: every machine listed had its node
    # row committed before it was created (intent before action).
    snaps = snapshots.load_groups(ctx.db, list(listed))
    started = guard.each(
        [u for u in uuids if u in snaps and u in listed],
        lambda u: Pass.start(snaps[u], now, listed[u], providers[u]),
    )
    for p in started.values():
        p.virt = views.get(p.group_uuid)
        p.unlisted = p.group_uuid in unlisted
        grouped.record(p, reports.get(p.group_uuid), ctx.pacing.requeue_seconds)
    # The clusters' Kubernetes API servers, read before anything is decided.
    kubefeed.read(ctx, guard, started.values())
    passes = guard.keep(started.values(), _uuid, lambda p: plan(ctx, p))
    acting = [p for p in passes if p.path is not Path.CONCLUDE]
    scale.settle_names(acting, lambda c, names: snapshots.taken_names(ctx.db, c, names))
    # Intent before action: a group whose intent could not be written does not act.
    acting = guard.written(acting, _uuid, lambda ps: commit_intent(ctx, ps, now))
    act.act(ctx, acting)
    kubefeed.act(ctx, guard, acting)
    for p in acting:
        if p.crash is not None:  # an unexpected exception in its calls or their answers
            guard.fail(p.group_uuid, p.crash)
    guard.keep(acting, _uuid, lambda p: _conclude(ctx, p))
    passes = guard.written(
        passes,
        _uuid,
        lambda ps: outcomes.apply_groups(
            ctx.db, [(p.snap, p.w) for p in ps], now, holder=ctx.holder
        ),
    )
    _journal(passes)
    guard.record(ctx)


def _uuid(p: Pass) -> str:
    return p.group_uuid


def _conclude(ctx: Context, p: Pass) -> None:
    """The outcome of a pass that acted. What it saw finish teaches its provider's
    other groups of its flavor first (conductor/priors.py)."""
    p.flush_updates()
    flavor = spec.flavor_of(p)
    provider = ctx.provider(p.provider)
    if provider is not None:
        provider.moves.saw(flavor, *status.finished_moves(p))
    pace = ctx.pacing_for(p.provider, flavor)
    if p.path is Path.DELETE:
        delete.conclude(pace, p)
    else:
        status.conclude(pace, p)


def _checked(p: Pass, provider: Provider) -> list[str]:
    """What the driver finds wrong with the group's spec (its cheap `validate`), the
    labels it reads as options learned first: they are part of the options it checks."""
    p.option_labels = dict(provider.capabilities().option_labels)
    return spec.validate(p, provider.driver.validate)


def plan(ctx: Context, p: Pass) -> None:
    """Choose the pass's path and run the phases that come before any cloud call."""
    g = p.snap.group
    provider = ctx.provider(p.provider)
    if provider is None:
        p.path = Path.CONCLUDE
        status.conclude(ctx.pacing_for(p.provider), p, permanent=unconfigured(ctx, p.provider))
    elif p.listing_error is not None:
        p.path = Path.CONCLUDE
        status.listing_failed(ctx.pacing_for(p.provider), p)
    elif g.deleting or p.snap.cluster_deleting:
        p.path = Path.DELETE
        hosts_last = p.snap.cluster_deleting and g.spec.role == ROLE_VIRT
        delete.plan(p, virthosts.vm_nodes_left(ctx.db, g.cluster_id) if hosts_last else 0)
        if p.hosts_wait:
            delete.conclude(ctx.pacing_for(p.provider), p)
    elif st.is_failed(g.status) and g.observed_generation >= g.generation:
        p.path = Path.CONCLUDE
        status.resting(p)  # FAILED waits for a retry (new generation)
    elif problems := _checked(p, provider):
        p.path = Path.CONCLUDE
        status.conclude(ctx.pacing_for(p.provider), p, permanent="; ".join(problems))
    else:
        caps = provider.capabilities()
        p.features = frozenset(caps.features)
        p.restart_seconds = caps.restart_seconds
        p.agents_expected = provider.agents
        observe.observe(p)
        scale.remove_marked(p)
        operate.operate(p)
        if not rollout.roll(p, lambda: snapshots.siblings(ctx.db, g.cluster_id)):
            scale.scale(p, first_wave=max(queue.BATCH_NODES, ctx.settings.driver_concurrency))
        kubefeed.plan(p)
    p.flush_updates()
    journal.decided(
        g.cluster_id,
        g.uuid,
        f"node group {g.name}: {p.path.value}; {len(p.to_ensure)} to create, "
        f"{len(p.to_delete)} to delete, {len(p.w.inserts)} new row(s)",
    )


def _journal(passes: list[Pass]) -> None:
    """Log the events just committed (the state changes of each pass)."""
    for p in passes:
        journal.events(p.snap.group.cluster_id, p.w.events)


def commit_intent(ctx: Context, passes: list[Pass], now: datetime) -> None:
    """Intent before action: write what the calls are about to do, then start each
    pass's outcome afresh (the new rows keep the ids the write returned)."""
    intents = [(p.snap, p.w) for p in passes if not p.w.empty()]
    if not intents:
        return
    ids = outcomes.apply_groups(ctx.db, intents, now, holder=ctx.holder)
    _journal(passes)
    for p in passes:
        for uid in p.nodes.keys() & ids.keys():
            p.nodes[uid] = replace(p.nodes[uid], id=ids[uid])
        p.w = writes.GroupWrite()


def _listing(
    ctx: Context, place: snapshots.GroupPlace, ng_uuid: str, reports: dict[str, GroupReport]
) -> list[Machine] | TransientError:
    """The group's machines, in one driver call; the error when it failed (nothing
    when the provider is not configured: the pass says so). The listing names the
    group's project and cluster too: a driver lists each with the identity that made
    its machines (a cluster's trust, in its creator's project), and a hosted driver
    looks only at that cluster's hosts."""
    provider = ctx.provider(place.provider)
    if provider is None:
        return []
    tags = {TAG_PROJECT: place.project_id, TAG_CLUSTER: place.cluster_uuid, TAG_NODEGROUP: ng_uuid}
    driver = provider.driver
    try:
        if grouped.reports(driver):  # a whole group at once: it reports itself too
            return ctx.call(provider, lambda: grouped.listing(driver, ng_uuid, tags, reports))
        return ctx.call(provider, lambda: driver.list_machines(tags))
    except TransientError as exc:
        return exc


def _reports(ctx: Context, name: str | None) -> bool:
    """Whether the group's provider realises it whole (and reports it in its listing)."""
    provider = ctx.provider(name)
    return provider is not None and grouped.reports(provider.driver)


def _virt_hosts(ctx: Context, name: str, ng_uuid: str) -> VirtView | None:
    """For a group on a hosted provider: its cluster's virt hosts."""
    provider = ctx.provider(name)
    if provider is None or not provider.hosted:
        return None
    return virthosts.load(ctx.db, ng_uuid)


def unconfigured(ctx: Context, name: str) -> str:
    """Why a group whose provider left the configuration cannot be reconciled."""
    known = ", ".join(ctx.providers)
    return (
        f"provider {name!r} is not configured in this deployment (providers: {known}); "
        "name it again in the config file (SHOAL_CONFIG): its machines are left as they are"
    )
