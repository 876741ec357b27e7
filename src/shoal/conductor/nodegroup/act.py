"""Act: the driver calls of a batch of passes, after their intent is committed.

Per machine: deletes first, then creates as one set of waves for all the groups
(masters' waves first: the control plane boots before the workers queue), each
through its provider's limits. A provider that realises whole node groups
(feature PER_GROUP) gets one call per group instead: the group's members, or the
group's deletion, the batch's groups at once. Each answer is folded into its own
pass's view.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta

from shoal.conductor import calls, pacing
from shoal.conductor.context import Context, CreateRefused, Provider
from shoal.conductor.nodegroup import grouped, operate, spec
from shoal.conductor.nodegroup.observe import fold
from shoal.conductor.nodegroup.state import Pass, Path
from shoal.domain import health
from shoal.domain import operations as ops
from shoal.domain.model import ROLE_MASTER, NodeState
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    DriverError,
    Feature,
    GroupDriver,
    GroupRequest,
)


def act(ctx: Context, passes: list[Pass]) -> None:
    """Call the providers for the passes of a batch; fold the answers into each pass.
    An unexpected exception in a group's calls or in folding their answers is kept
    on its pass (`Pass.crash`), never raised: the other groups' calls go on."""
    per_machine: list[tuple[Pass, Provider]] = []
    per_group: list[tuple[Pass, Provider]] = []
    for p in passes:
        provider = ctx.provider(p.provider)
        if provider is None:
            continue  # plan() made it a pass that only concludes
        (per_group if provider.has(Feature.PER_GROUP) else per_machine).append((p, provider))
    _per_groups(ctx, per_group)
    _deletes(ctx, per_machine)
    _operations(ctx, passes)
    _creates(ctx, per_machine)


def _deletes(ctx: Context, passes: list[tuple[Pass, Provider]]) -> None:
    owner = {mid: p for p, _ in passes for mid in p.to_delete}
    if owner:
        machines = [(prov, mid, _zone(p, mid)) for p, prov in passes for mid in p.to_delete]
        crashes: dict[str, Exception] = {}
        for mid, err in calls.delete_all(ctx, machines, crashes).items():
            owner[mid].delete_errors[mid] = err
        for mid, exc in crashes.items():
            owner[mid].crashed(exc)


def _zone(p: Pass, machine_id: str) -> str | None:
    """The zone a machine is in (a call about it counts against that target's limit)."""
    m = p.machines.get(machine_id)
    node = p.nodes.get(machine_id)
    return (m.availability_zone if m else None) or (node.availability_zone if node else None)


def _operations(ctx: Context, passes: list[Pass]) -> None:
    """The driver calls operations make this pass (reboot, rebuild), in parallel; a
    refusal fails that node's task (and so the operation)."""

    def one(p: Pass, call: operate.DriverOp) -> None:
        provider = ctx.provider(p.provider)
        if provider is None:
            return
        driver, zone = provider.driver, _zone(p, call.node_uuid)
        try:
            if call.kind == ops.REBOOT:
                ctx.call(provider, lambda: driver.reboot_machine(call.node_uuid), zone)
            else:
                image = call.params.get("image_id") or spec.probe(p).image_id
                ctx.call(provider, lambda: driver.rebuild_machine(call.node_uuid, image), zone)
        except DriverError as exc:
            operate.call_failed(p, call, f"{call.kind} refused by the cloud: {exc.reason}")
        except Exception as exc:
            p.crashed(exc)

    futures = [ctx.pool.submit(one, p, c) for p in passes for c in p.driver_ops]
    for f in futures:
        f.result()


def _creates(ctx: Context, passes: list[tuple[Pass, Provider]]) -> None:
    owner: dict[str, Pass] = {}
    tiers: tuple[list[calls.Ensure], ...] = ([], [])
    for p, provider in passes:
        # Every row is committed here, with its id (the snapshot's, or the intent
        # write's RETURNING). A group whose specs cannot be made creates nothing.
        with _guarded(p):
            zones = p.open_zones()
            mine = [
                calls.Ensure(
                    provider,
                    spec.machine_spec(
                        p,
                        p.nodes[u],
                        ctx.api_url,
                        ctx.node_token,
                        provider.driver,
                        ctx.kube_secrets,
                    ),
                    zones,
                )
                for u in p.to_ensure
                if u in p.nodes
            ]
            tiers[0 if p.snap.group.spec.role == ROLE_MASTER else 1].extend(mine)
            owner.update((e.spec.machine_id, p) for e in mine)
    if not owner:
        return
    errors_before = {id(p): len(p.errors) for p, _ in passes}
    asked = {id(p): 0 for p, _ in passes}
    answered = dict(asked)
    for uid in owner:
        asked[id(owner[uid])] += 1
    results = [r for t in tiers if t for r in calls.ensure_all(ctx, t, pacing.CREATE_PASS_BUDGET_S)]
    for r in results:
        p = owner[r.spec.machine_id]
        answered[id(p)] += 1
        if r.crash is not None:
            p.crashed(r.crash)
        with _guarded(p):
            _answered(p, r)
    for p, provider in passes:
        # Stopped by the time budget, not by an error: the rest go in the next pass.
        stopped = answered[id(p)] < asked[id(p)] and len(p.errors) == errors_before[id(p)]
        if stopped:  # due when its provider takes creates again
            p.defer_until(p.now + timedelta(seconds=provider.create_throttle.free_in()))


def _answered(p: Pass, r: calls.EnsureResult) -> None:
    """Fold one create's answer into its pass."""
    if r.crash is not None:
        return
    node = p.nodes[r.spec.machine_id]
    for frm, to, why in r.moves:
        p.memory = health.block_zone(p.memory, frm, p.now, pacing.HEALTH)
        p.event(
            "NoValidHost",
            f"no valid host in {frm} for node {node.name} ({why}); placed it in {to}",
            warning=True,
            node=node.uuid,
        )
    if r.machine is not None:
        fold(p, node, r.machine, r.made_at)
        p.progress = True
    elif isinstance(r.error, CreateRefused):  # the provider's pace: not a failure
        p.defer_until(p.now + timedelta(seconds=r.error.retry_after or 0.0))
    elif r.error is not None:
        _refused(p, r.error)
        if node.reason != r.error.reason:
            p.set(node, reason=r.error.reason)


@contextlib.contextmanager
def _guarded(p: Pass) -> Iterator[None]:
    """Keep an unexpected exception on the pass instead of raising it."""
    try:
        yield
    except Exception as exc:
        p.crashed(exc)


def _refused(p: Pass, err: DriverError) -> None:
    """A refusal of a create: kept for the outcome; a zone without room is avoided."""
    p.errors.append(err)
    if isinstance(err, BlockedError) and err.kind is BlockedKind.NO_VALID_HOST and err.az:
        p.memory = health.block_zone(p.memory, err.az, p.now, pacing.HEALTH)


def _per_groups(ctx: Context, items: list[tuple[Pass, Provider]]) -> None:
    """Each group's one call, the batch's calls at once on the driver pool: a cluster's
    Heat stacks are asked for together, not each after the last one's answer."""

    def one(p: Pass, provider: Provider) -> None:
        with _guarded(p):
            _per_group(ctx, p, provider)

    if len(items) == 1:
        one(*items[0])
        return
    for done in [ctx.pool.submit(one, p, provider) for p, provider in items]:
        done.result()


def _per_group(ctx: Context, p: Pass, provider: Provider) -> None:
    """One call for the whole group: its members (what is not being deleted), or its
    deletion. Progress shows in the next pass's listing."""
    driver = provider.driver
    assert isinstance(driver, GroupDriver)
    g = p.snap.group
    try:
        if p.path is Path.DELETE:
            if p.to_delete:
                ctx.call(provider, lambda: driver.delete_group(g.uuid))
                grouped.working(p, ctx.pacing.requeue_seconds)  # its provider deletes it
            return
        if not (p.to_ensure or p.to_delete):
            return  # nothing changes: the listing tells the rest
        members = tuple(
            spec.machine_spec(p, n, ctx.api_url, ctx.node_token, driver, ctx.kube_secrets)
            for n in p.nodes.values()
            if n.state is not NodeState.DELETING
        )
        request = GroupRequest(g.uuid, g.project_id, g.cluster_id, members, spec.options(p))
        ctx.call(provider, lambda: driver.apply_group(request))
        p.progress = True
        grouped.working(p, ctx.pacing.requeue_seconds)  # not when its boots say
    except DriverError as exc:
        if p.path is Path.DELETE:
            p.delete_errors[g.uuid] = exc
        else:
            _refused(p, exc)
