"""Conclude: the outcome of a node group pass (status, conditions, events, requeue),
decided in one place and added to the pass's write: the pass's facts are gathered
here, the rules that decide are a table in `domain/outcome.py`.

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

from shoal.conductor.nodegroup.state import Pass
from shoal.conductor.pacing import Moving, Pacing
from shoal.db import writes
from shoal.domain import conditions as cond
from shoal.domain import health, node_programs, outcome
from shoal.domain import status as st
from shoal.domain.model import ROLE_MASTER, Condition, Node, NodeState
from shoal.drivers.contract import BlockedError, BlockedKind, PermanentError, TransientError

DEFAULT_CREATE_TIMEOUT_MIN = 60


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


def conclude(pace: Pacing, p: Pass, permanent: str | None = None) -> None:
    """Decide the outcome of the pass (gather its facts, take the first rule of
    `domain/outcome.py` that matches, apply it): its status, events and requeue time
    join the pass's write (`p.w`), which the caller commits."""
    g = p.snap.group
    retry_events(p)
    p.errors.extend(p.delete_errors.values())
    facts = gather(p, permanent, create_timeout(p.snap.cluster_attrs))
    d = outcome.decide(facts)
    conds = cond.set_condition(
        g.conditions, cond.READY, cond.TRUE if d.ready else cond.FALSE, d.reason, d.message, p.now
    )
    conds = _up_to_date(p, conds)
    if d.outcome is st.Outcome.COMPLETE and _kube_ready(p):
        p.memory = health.successors_ready(p.memory)
    conds = _healthy(p, conds)
    conds = _kube_api(p, conds)
    new_status = st.derive(g.status, d.outcome)
    _events(p, new_status, d.status_reason, facts.ready)
    nxt = _requeue_at(pace, p, d.requeue, conds)
    memory = p.memory.to_json() if p.memory != p.snap.memory else None
    p.w.status = writes.StatusWrite(
        g.generation,
        new_status,
        d.status_reason,
        conds,
        d.outcome is not st.Outcome.IN_PROGRESS,
        nxt,
        memory,
    )
    # The cluster pass follows status changes, a block or failing listings starting
    # or ending (the cluster's reason quotes them) and masters (API address,
    # ControlPlaneReady); plain worker progress waits for the cluster's regular requeue.
    p.w.poke_cluster = (
        p.w.poke_cluster
        or new_status != g.status
        or _is_blocked(d.status_reason) != _is_blocked(g.status_reason)
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


def gather(p: Pass, permanent: str | None, limit: timedelta) -> outcome.Facts:
    """The facts the outcome rules read, from the pass (after its calls)."""
    g, now = p.snap.group, p.now
    nodes = list(p.nodes.values())
    live = [n for n in nodes if n.state is not NodeState.DELETING]
    blocked = next((e for e in p.errors if isinstance(e, BlockedError)), None)
    transient = next((e for e in p.errors if isinstance(e, TransientError)), None)
    lacking = next((n for n in live if node_programs.is_missing_reason(n.reason)), None)
    started = p.snap.operation_started_at or g.updated_at or now
    full = [z for z in health.blocked_zones(p.memory, now) if z in p.zones] if p.zones else []
    return outcome.Facts(
        desired=g.spec.node_count,
        live=len(live),
        ready=sum(1 for n in live if n.state is NodeState.ACTIVE),
        going=len(nodes) - len(live),
        errors=bool(p.errors),
        permanent=permanent
        or next((e.reason for e in p.errors if isinstance(e, PermanentError)), None),
        lacking=f"node {lacking.name}: {lacking.reason}" if lacking is not None else None,
        repairs_stopped=p.repairs_stopped,
        rollout=p.rollout.state,
        rollout_note=p.rollout.note,
        operating=p.snap.operation is not None and p.w.operation is None,
        operation_note=p.operation_note,
        blocked=blocked.reason if blocked is not None else None,
        blocked_no_valid_host=blocked is not None and blocked.kind is BlockedKind.NO_VALID_HOST,
        full_zones=tuple(full),
        open_zones=tuple(p.open_zones()) if full else (),
        wait_left=p.waiting_until - now if p.waiting_until is not None else None,
        failures=p.memory.failures,
        last_fault=p.memory.last_fault,
        transient=transient.reason if transient is not None else None,
        failed_boot=p.failed_boots[-1] if p.failed_boots else None,
        progressed=p.progress,
        deferred=p.deferred,
        provider_working=p.provider_working,
        elapsed=outcome.elapsed(started, cond.get(g.conditions, cond.READY), now),
        limit=limit,
    )


def _requeue_at(
    pace: Pacing, p: Pass, requeue: outcome.Requeue, conds: tuple[Condition, ...]
) -> datetime | None:
    """The time a group wants to be looked at again, for the kind the rules chose; never
    later than a deadline of the pass (`look_again_by`)."""
    now, R = p.now, outcome.Requeue
    nxt: datetime | None
    if requeue is R.NEVER:
        return None
    if requeue is R.RESYNC:
        nxt = pace.at(now, pace.sweep_seconds)
    elif requeue is R.PERIOD:
        nxt = pace.at(now, pace.requeue_seconds)  # for the others to finish
    elif requeue is R.WAIT:
        # Machines keep failing, or no zone has room: look again when the wait ends,
        # or sooner when nodes are booting.
        assert p.waiting_until is not None
        nxt = min(p.waiting_until, pace.at(now, recheck_in(pace, p)))
    elif requeue is R.BACKOFF:
        nxt = now + timedelta(seconds=_backoff(pace, p, conds))
    elif requeue is R.AT_ONCE:
        # Creates left over by the pass's time budget: due at once, but behind
        # every resource that became due while this pass ran (the pass's start
        # time would put this group ahead of them, the masters among them).
        nxt = max(now, pace.clock(), p.paced_until or now)
    else:
        nxt = pace.at(now, recheck_in(pace, p))
    if p.look_again_by is not None:
        nxt = min(nxt, max(p.look_again_by, now))
    return nxt


def _backoff(pace: Pacing, p: Pass, conds: tuple[Condition, ...]) -> float:
    """Seconds before a group the cloud refuses tries again: a delay that grows with
    the time it has not been ready, at least what the cloud asked for."""
    since = cond.get(conds, cond.READY)
    waited = (
        (p.now - since.last_transition).total_seconds() if since and since.last_transition else 0
    )
    transient = next((e for e in p.errors if isinstance(e, TransientError)), None)
    retry_after = transient.retry_after if transient is not None else None
    return pace.after_waiting(waited, retry_after)


def retry_events(p: Pass, limit: int = 10) -> None:
    """An event for each of the first `limit` deletes the cloud refused this pass."""
    for mid, err in list(p.delete_errors.items())[:limit]:
        p.event(
            "DeleteRetry",
            f"delete of machine {mid} will be retried: {err.reason}",
            warning=True,
            node=mid,
        )


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


def _up_to_date(p: Pass, conds: tuple[Condition, ...]) -> tuple[Condition, ...]:
    """UpToDate: is every node on the group's revision (domain/outcome.py)."""
    ok, why, note = outcome.up_to_date(p.rollout)
    return cond.set_condition(
        conds, cond.UP_TO_DATE, cond.TRUE if ok else cond.FALSE, why, note, p.now
    )


def _is_blocked(reason: str | None) -> bool:
    return (reason or "").startswith("BLOCKED")


def recheck_in(pace: Pacing, p: Pass) -> float:
    """Seconds until a group in progress is looked at again: with machines moving
    (booting, being deleted), as the pacing rule says from how long they have taken
    so far and how long they take in this group (conductor/pacing.py); else the
    progress period after progress, the requeue period otherwise."""
    moves = moving(p, pace.boot_prior, pace.delete_prior)
    if moves:
        return pace.moving(moves)
    return pace.progress_seconds if p.progress else pace.requeue_seconds


def moving(
    p: Pass, boot_prior: float | None = None, delete_prior: float | None = None
) -> list[Moving]:
    """How the group's machines move now: the oldest booting one since its provider
    took its create (one still waiting for its create: since its row was written) and
    the boot time learned from its ready nodes (the median, each from its create to
    when its provider says it was ready); the oldest being
    deleted since it was marked, and the delete time the group remembers. A group
    that has learned neither yet expects its provider's (`boot_prior`, `delete_prior`)."""
    nodes, now = p.nodes.values(), p.now
    out = []
    waiting = [n for n in nodes if n.state in (NodeState.PENDING, NodeState.BUILDING)]
    if waiting:
        boots = [
            b for n in nodes if n.state is NodeState.ACTIVE and (b := boot_time(n)) is not None
        ]
        first = min((n.building_at or n.created_at or now) for n in waiting)
        boot = statistics.median(boots) if boots else boot_prior
        out.append(Moving((now - first).total_seconds(), boot))
    deleting = [n for n in nodes if n.state is NodeState.DELETING]
    if deleting:
        first = min((n.updated_at or now) for n in deleting)
        learned = p.memory.delete_s if p.memory.delete_s is not None else delete_prior
        out.append(Moving((now - first).total_seconds(), learned))
    return out


def boot_time(n: Node) -> float | None:
    """How long a node took from its create to ready (None: not known): from when its
    provider took the create, not from a wait for the provider's rate limit before."""
    since = n.building_at or n.created_at
    if n.ready_at is None or since is None or n.ready_at < since:
        return None  # not ready, or its machine replaced since it was (Heat's repair)
    return (n.ready_at - since).total_seconds()


def finished_moves(p: Pass) -> tuple[list[float], list[float]]:
    """What this pass saw finish: the boot times of the nodes that became ready, and
    the delete times of the machines that went (`Pass.deleted`); what their provider's
    other groups learn from (conductor/priors.py)."""
    was_booting = {
        n.uuid for n in p.snap.nodes if n.state in (NodeState.PENDING, NodeState.BUILDING)
    }
    boots = [
        b
        for n in p.nodes.values()
        if n.state is NodeState.ACTIVE and n.uuid in was_booting and (b := boot_time(n)) is not None
    ]
    return boots, list(p.deletes_done)


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


def listing_failed(pace: Pacing, p: Pass) -> None:
    """The listing itself failed: keep everything, say so (in status_reason too: since
    when, how many attempts), retry with a delay that grows with the attempts."""
    g, now, exc = p.snap.group, p.now, p.listing_error
    assert exc is not None
    p.memory = health.listing_failed(p.memory, now)
    reason = health.listing_reason(p.provider, exc.reason, p.memory)
    conds = cond.set_false(g.conditions, cond.READY, cond.LISTING_FAILED, reason, now)
    attempts = p.memory.listing_failures
    delay = pace.after_attempts(attempts + 1)
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
