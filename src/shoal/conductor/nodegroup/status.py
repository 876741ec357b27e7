"""Conclude: the outcome of a node group pass (status, conditions, events, requeue),
decided in one place and added to the pass's write.

Outcome rules: a permanent error fails the group at once; a group with every
desired node ready and nothing left to delete is COMPLETE; otherwise it stays
IN_PROGRESS (with `BLOCKED: <reason>` when the cloud refuses) until the
cluster's `create_timeout` passes, then it is FAILED with the last reason. The
timeout counts from the last request, or from when a ready group stopped being
ready by itself (a repair gets a full timeout of its own).
A FAILED group waits for new desired state (a retry bumps its generation).
"""

from __future__ import annotations

import statistics
from datetime import datetime, timedelta

from shoal.conductor.context import Context
from shoal.conductor.nodegroup.state import Pass
from shoal.db import writes
from shoal.domain import conditions as cond
from shoal.domain import health, node_programs
from shoal.domain import status as st
from shoal.domain.model import ROLE_MASTER, Condition, NodeState
from shoal.drivers.contract import BlockedError, BlockedKind, PermanentError, TransientError

DEFAULT_CREATE_TIMEOUT_MIN = 60
PROGRESS_REQUEUE_S = 0.2


def create_timeout(attrs: dict[str, object]) -> timedelta:
    """The cluster's create_timeout (minutes; Magnum's default 60)."""
    raw = attrs.get("create_timeout")
    try:
        minutes = float(raw) if raw is not None else DEFAULT_CREATE_TIMEOUT_MIN  # type: ignore[arg-type]
    except (TypeError, ValueError):
        minutes = DEFAULT_CREATE_TIMEOUT_MIN
    return timedelta(minutes=minutes if minutes > 0 else DEFAULT_CREATE_TIMEOUT_MIN)


def _camel(status: str) -> str:
    return "".join(w.capitalize() for w in status.split("_"))


def conclude(ctx: Context, p: Pass, permanent: str | None = None) -> None:
    """Decide the outcome of the pass: its status, events and requeue time join the
    pass's write (`p.w`), which the caller commits."""
    g, now = p.snap.group, p.now
    retry_events(p)
    p.errors.extend(p.delete_errors.values())
    operating = p.snap.operation is not None and p.w.operation is None
    rolling = p.rollout in ("rolling", "waiting", "paused") or operating
    nodes = list(p.nodes.values())
    live = [n for n in nodes if n.state is not NodeState.DELETING]
    ready = sum(1 for n in live if n.state is NodeState.ACTIVE)
    going = len(nodes) - len(live)
    desired = g.spec.node_count
    blocked = next((e for e in p.errors if isinstance(e, BlockedError)), None)
    perm = permanent or next((e.reason for e in p.errors if isinstance(e, PermanentError)), None)
    transient = next((e for e in p.errors if isinstance(e, TransientError)), None)
    conds = g.conditions
    started = p.snap.operation_started_at or g.updated_at or now
    progress = f"{ready} of {desired} node(s) ready"
    if going:
        progress += f", {going} being deleted"
    lacking = next((n for n in live if node_programs.is_missing_reason(n.reason)), None)
    if perm:
        outcome, reason = st.Outcome.FAILED, f"{perm} (fix the node group and retry)"
        conds = cond.set_false(conds, cond.READY, cond.FAILED, perm, now)
    elif lacking is not None:
        outcome, reason = st.Outcome.FAILED, f"node {lacking.name}: {lacking.reason}"
        conds = cond.set_false(conds, cond.READY, cond.FAILED, reason, now)
    elif p.repairs_stopped:
        outcome, reason = st.Outcome.FAILED, p.repairs_stopped
        conds = cond.set_false(conds, cond.READY, cond.MAX_UNHEALTHY, reason, now)
    elif p.rollout == "stalled":
        outcome, reason = st.Outcome.FAILED, p.rollout_note
        conds = cond.set_false(conds, cond.READY, cond.ROLLOUT_STALLED, reason, now)
    elif ready == desired == len(live) and not going and not p.errors and not rolling:
        outcome, reason = st.Outcome.COMPLETE, None
        conds = cond.set_true(conds, cond.READY, cond.AS_EXPECTED, progress, now)
        if p.rollout == "aborted":
            reason = (
                f"rollout aborted: {p.rollout_note}; upgrade to the previous template to "
                "roll back, or upgrade again to go on"
            )
    else:
        outcome = st.Outcome.IN_PROGRESS
        why, reason = _in_progress(
            p, progress, blocked, transient, bool(going) or len(live) > desired
        )
        conds = cond.set_false(conds, cond.READY, why, reason, now)
        limit = create_timeout(p.snap.cluster_attrs)
        # A rollout's pace is its policy's: its stall is told by the progress deadline.
        if not rolling and now - _clock_start(started, conds) > limit:
            outcome = st.Outcome.FAILED
            reason = f"timed out after {limit.total_seconds() / 60:g} minutes: {reason}"
            conds = cond.set_false(conds, cond.READY, cond.TIMED_OUT, reason, now)
    conds = _up_to_date(p, conds)
    if outcome is st.Outcome.COMPLETE and _kube_ready(p):
        p.memory = health.successors_ready(p.memory)
    conds = _healthy(p, conds)
    conds = _kube_api(p, conds)
    new_status = st.derive(g.status, outcome)
    _events(p, new_status, reason, ready)
    if outcome is st.Outcome.COMPLETE:
        nxt: datetime | None = ctx.requeue_at(now, ctx.settings.sweep_seconds)  # resync
    elif outcome is st.Outcome.FAILED:
        nxt = None
    elif p.rollout == "paused":
        nxt = ctx.requeue_at(now, ctx.settings.sweep_seconds)  # held: nothing moves
    elif p.rollout == "waiting" or operating:
        nxt = ctx.requeue_at(now, ctx.settings.requeue_seconds)  # for the others to finish
    elif p.waiting_until is not None:
        # Machines keep failing, or no zone has room: look again when the wait ends,
        # or sooner when nodes are booting.
        nxt = min(p.waiting_until, ctx.requeue_at(now, recheck_in(ctx, p)))
    elif (blocked is not None and not p.progress) or transient is not None:
        since = cond.get(conds, cond.READY)
        waited = (
            (now - since.last_transition).total_seconds() if since and since.last_transition else 0
        )
        retry_after = transient.retry_after if transient is not None else None
        delay = min(
            ctx.backoff.after_waiting(waited, retry_after), ctx.settings.backoff_max_seconds
        )
        nxt = now + timedelta(seconds=delay)
    elif p.deferred:
        # Creates left over by the pass's time budget: due at once, but behind
        # every resource that became due while this pass ran (the pass's start
        # time would put this group ahead of them, the masters among them).
        nxt = max(now, ctx.now())
    else:
        nxt = ctx.requeue_at(now, recheck_in(ctx, p))
    if nxt is not None and p.look_again_by is not None:
        nxt = min(nxt, max(p.look_again_by, now))
    memory = p.memory.to_json() if p.memory != p.snap.memory else None
    p.w.status = writes.StatusWrite(
        g.generation,
        new_status,
        reason,
        conds,
        outcome is not st.Outcome.IN_PROGRESS,
        nxt,
        memory,
    )
    # The cluster pass follows status changes, a block or failing listings starting
    # or ending (the cluster's reason quotes them) and masters (API address,
    # ControlPlaneReady); plain worker progress waits for the cluster's regular requeue.
    p.w.poke_cluster = (
        p.w.poke_cluster
        or new_status != g.status
        or _is_blocked(reason) != _is_blocked(g.status_reason)
        or cond.has_reason(g.conditions, cond.READY, cond.LISTING_FAILED)
        or (p.progress and g.spec.role == ROLE_MASTER)
        or _changed(g.conditions, conds, cond.HEALTHY)
        or _changed(g.conditions, conds, cond.KUBERNETES_API)
    )


def _changed(before: tuple[Condition, ...], after: tuple[Condition, ...], type_: str) -> bool:
    """Whether condition `type_` changed its status or message (the cluster's
    health_status_reason quotes it)."""
    a, b = cond.get(before, type_), cond.get(after, type_)
    return (a.status, a.message) != (b.status, b.message) if a and b else a is not b


def _kube_ready(p: Pass) -> bool:
    """Whether Kubernetes reports every ready node of the group Ready (true where the
    cluster's API server is not read)."""
    if p.kube is None:
        return True
    ready = [n for n in p.nodes.values() if n.state is NodeState.ACTIVE]
    return p.kube.reachable and all(
        (k := p.kube.nodes.get(n.name)) is not None and k.ready == "True" for n in ready
    )


def _kube_api(p: Pass, conds: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """KubernetesAPIReachable: whether the cluster's API server answered this pass's
    read (kept as it was by a pass that did not read it; absent where shoal does not
    run Kubernetes)."""
    if p.kube is None:
        return conds
    if p.kube.error is None:
        return cond.set_true(conds, cond.KUBERNETES_API, cond.AS_EXPECTED, "", p.now)
    return cond.set_false(conds, cond.KUBERNETES_API, cond.API_UNREACHABLE, p.kube.error, p.now)


def _in_progress(
    p: Pass,
    progress: str,
    blocked: BlockedError | None,
    transient: TransientError | None,
    scaling_down: bool,
) -> tuple[str, str]:
    """The Ready condition's reason and the status_reason of a group in progress: the
    cloud's own words when it refuses or fails machines, and what happens next."""
    mem, now = p.memory, p.now
    if p.rollout == "paused":
        return cond.ROLLOUT_PAUSED, (
            f"rollout paused by request ({p.rollout_note}); resume or abort it; {progress}"
        )
    if p.rollout == "waiting":
        return cond.ROLLOUT_PENDING, f"rollout {p.rollout_note}; {progress}"
    full = [z for z in health.blocked_zones(mem, now) if z in p.zones]
    if blocked is not None or full:
        if full and p.open_zones():
            text = (
                f"no valid host in {', '.join(full)} lately; placing nodes in "
                f"{', '.join(p.open_zones())}"
            )
            if blocked is not None and blocked.kind is BlockedKind.NO_VALID_HOST:
                text += f" (the cloud said: {blocked.reason})"
        else:
            text = blocked.reason if blocked is not None else "no valid host in any zone"
        if p.waiting_until is not None:
            text += f"; trying again in {_seconds(p.waiting_until - now)}"
        return cond.BLOCKED, f"BLOCKED: {text}; {progress}"
    if p.waiting_until is not None and mem.failures:
        return cond.MACHINES_FAILING, (
            f"{progress}; machines failed to boot {mem.failures} time(s) in a row, the cloud "
            f"says: {mem.last_fault!r}; trying again in {_seconds(p.waiting_until - now)} "
            "(if it keeps failing, check the image, flavor, network and the cloud's "
            "capacity; nothing else is needed once the cause is fixed)"
        )
    if transient is not None:
        return cond.RETRYING, (
            f"retrying after a transient cloud error: {transient.reason}; {progress}"
        )
    if p.failed_boots:
        return cond.MACHINES_FAILING, (
            f"{progress}; a machine failed to boot, the cloud says: {p.failed_boots[-1]!r}; "
            "replacing it"
        )
    if p.rollout == "rolling":
        return cond.ROLLING_OUT, f"rolling out: {p.rollout_note}; {progress}"
    if p.operation_note:
        return cond.OPERATING, f"{p.operation_note}; {progress}"
    return (cond.SCALING_DOWN if scaling_down else cond.PROVISIONING), progress


def _seconds(delta: timedelta) -> str:
    return f"{max(0.0, delta.total_seconds()):.0f} s"


def retry_events(p: Pass, limit: int = 10) -> None:
    """An event for each of the first `limit` deletes the cloud refused this pass."""
    for mid, err in list(p.delete_errors.items())[:limit]:
        p.event(
            "DeleteRetry",
            f"delete of machine {mid} will be retried: {err.reason}",
            warning=True,
            node=mid,
        )


def _clock_start(started: datetime, conds: tuple[Condition, ...]) -> datetime:
    """When the work under way began: the last user request, or later, when the
    group stopped being ready on its own (a lost or ERROR machine being replaced
    on a COMPLETE group starts a repair with a full create_timeout of its own)."""
    ready = cond.get(conds, cond.READY)
    since = ready.last_transition if ready is not None else None
    return max(started, since) if since is not None else started


def _healthy(p: Pass, conds: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """Healthy: no node is unhealthy (failed after it was ready, its agent silent, its
    Node not Ready in Kubernetes), being repaired, or replaced by the ladder with its
    successor not ready yet; the message names them and why (Magnum's
    health_status_reason)."""
    sick = {n.name: n.reason or "unhealthy" for n in p.unhealthy}
    sick.update({n.name: n.reason or "being repaired" for n in p.nodes.values() if n.repair_step})
    for node, why in p.held:
        sick[node.name] = (
            f"{why}; not repaired: it is the cluster's only master (a new machine would "
            "lose etcd's data): look at its kubelet (the node agent's services)"
        )
    for name, why in p.memory.replaced.items():
        sick.setdefault(name, f"{why}; replaced, its successor is not ready yet")
    if not sick:
        return cond.set_true(conds, cond.HEALTHY, cond.AS_EXPECTED, "", p.now)
    text = "; ".join(f"{name}: {why}" for name, why in sorted(sick.items())[:20])
    return cond.set_false(conds, cond.HEALTHY, cond.UNHEALTHY_NODES, text, p.now)


# The UpToDate condition's reason for each rollout state (rollout.py).
_ROLLOUT_REASONS = {
    "rolling": cond.ROLLING_OUT,
    "waiting": cond.ROLLOUT_PENDING,
    "paused": cond.ROLLOUT_PAUSED,
    "aborted": cond.ROLLOUT_ABORTED,
    "stalled": cond.ROLLOUT_STALLED,
}


def _up_to_date(p: Pass, conds: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """UpToDate: is every node on the group's revision, and if not, what the rollout
    does about it."""
    if p.behind == 0:
        return cond.set_true(conds, cond.UP_TO_DATE, cond.AS_EXPECTED, "", p.now)
    why = _ROLLOUT_REASONS.get(p.rollout or "waiting", cond.ROLLOUT_PENDING)
    note = p.rollout_note or f"{p.behind} node(s) on an older revision"
    return cond.set_false(conds, cond.UP_TO_DATE, why, note, p.now)


def _is_blocked(reason: str | None) -> bool:
    return (reason or "").startswith("BLOCKED")


def recheck_in(ctx: Context, p: Pass) -> float:
    """Seconds until a group in progress is looked at again. Booting nodes are due
    when the boot time learned in this group (median of its ready nodes) says the
    first of them should be up, bounded by the progress period below and by
    max(requeue period, that boot time) above; before anything is learned the
    fixed periods apply, and machines being deleted are looked at every progress
    period."""
    base = ctx.settings.requeue_seconds
    fast = min(base, PROGRESS_REQUEUE_S)
    nodes = p.nodes.values()
    waiting = [n for n in nodes if n.state in (NodeState.PENDING, NodeState.BUILDING)]
    boots = [
        (n.ready_at - n.created_at).total_seconds()
        for n in nodes
        if n.state is NodeState.ACTIVE and n.ready_at is not None and n.created_at is not None
    ]
    if any(n.state is NodeState.DELETING for n in nodes):
        return fast  # machines being deleted: their end is not predicted
    if not waiting or not boots:
        return fast if p.progress else base
    boot = statistics.median(boots)
    first = min((n.created_at or p.now) for n in waiting)
    due = (first - p.now).total_seconds() + boot
    return min(max(due, fast), max(base, boot))


def _events(p: Pass, new_status: str, reason: str | None, ready: int) -> None:
    g = p.snap.group
    if new_status != g.status:
        msg = f"node group {g.name}: {g.status} -> {new_status}"
        p.event(_camel(new_status), msg + (f" ({reason})" if reason else ""),
                warning=new_status.endswith("FAILED"))  # fmt: skip
    elif reason != g.status_reason and reason and reason.startswith("BLOCKED"):
        p.event("Blocked", f"node group {g.name}: {reason}", warning=True)
    before = sum(1 for n in p.snap.nodes if n.state is NodeState.ACTIVE)
    if ready > before:
        p.event("NodesReady", f"node group {g.name}: {ready} of {g.spec.node_count} ready")


def listing_failed(ctx: Context, p: Pass) -> None:
    """The listing itself failed: keep everything, say so (in status_reason too: since
    when, how many attempts), retry with a delay that grows with the attempts."""
    g, now, exc = p.snap.group, p.now, p.listing_error
    assert exc is not None
    p.memory = health.listing_failed(p.memory, now)
    reason = health.listing_reason(p.provider, exc.reason, p.memory)
    conds = cond.set_false(g.conditions, cond.READY, cond.LISTING_FAILED, reason, now)
    attempts = p.memory.listing_failures
    delay = min(ctx.backoff.after_attempts(attempts + 1), ctx.settings.backoff_max_seconds)
    if exc.retry_after:
        delay = max(delay, exc.retry_after)
    if attempts == 1:  # one event when it starts, not one per attempt
        p.event("Retrying", f"listing machines failed: {exc.reason}", warning=True)
    p.w.status = writes.StatusWrite(
        g.generation,
        g.status,
        reason,
        conds,
        False,
        now + timedelta(seconds=delay),
        p.memory.to_json(),
    )
    p.w.poke_cluster = True  # the cluster's status_reason quotes it


def resting(p: Pass) -> None:
    """A FAILED group with no new desired state: nothing to do until a retry."""
    g = p.snap.group
    p.w.status = writes.StatusWrite(
        g.generation, g.status, g.status_reason, g.conditions, True, None
    )
