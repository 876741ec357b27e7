"""Rollout: replace the nodes that are not on the group's revision (a new image,
flavor or volume), a few at a time, planned together with scaling
(`domain/rollout.py`).

Masters go first and one at a time; a worker group starts only when every master
group of its cluster is up to date, and at most `ROLLING_PER_CLUSTER` worker
groups of a cluster roll at once (each under its own lease). A new node that
fails to boot, or is not ready within the policy's `progress_deadline_s`, stops
the rollout: no further old node is retired, and the group says which node and
why. A rollout held by request (`rollout_hold`) is paused (nothing moves) or
aborted (plain scaling goes on, the group usable as it is).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from shoal.conductor.nodegroup import operate, scale, spec
from shoal.conductor.nodegroup.state import Pass
from shoal.db.snapshots import Sibling
from shoal.domain import conditions as cond
from shoal.domain import deletion, health, revision
from shoal.domain import rollout as plan
from shoal.domain.model import ROLE_MASTER, Condition, Node, NodeState
from shoal.domain.rollout import RolloutState, Standing

ROLLING_PER_CLUSTER = 2  # worker groups of one cluster rolling at once


def roll(p: Pass, siblings: Callable[[], list[Sibling]]) -> bool:
    """One rollout step for the group of `p`, where it stands kept on the pass
    (`p.rollout`); False when there is nothing to roll (or the rollout was aborted):
    plain scaling then does the rest."""
    p.rollout = _step(p, siblings)
    return p.rollout.holds_scaling


def _step(p: Pass, siblings: Callable[[], list[Sibling]]) -> Standing:
    """The rollout's step for the group of `p` (its calls queued on the pass): where it
    stands then."""
    g = p.snap.group
    attrs = p.snap.cluster_attrs
    target = revision.of_group(g.spec, attrs)
    live = [n for n in p.nodes.values() if n.state in scale.HOLDING and not n.to_delete]
    old = [n for n in live if revision.of_node(n, g.spec, attrs) != target]
    behind = len(old)
    if not old:
        return Standing()
    hold = g.spec.rollout_hold
    if hold == RolloutState.ABORTED:
        return Standing(behind, RolloutState.ABORTED, f"{behind} node(s) left on an older revision")
    if hold == RolloutState.PAUSED:
        return Standing(behind, RolloutState.PAUSED, f"{behind} of {len(live)} node(s) to replace")
    if p.memory.stalled:
        return Standing(behind, RolloutState.STALLED, p.memory.stalled)
    new = [n for n in live if n not in old]
    if stalled := _stalled(p, new):
        p.memory = health.stall(p.memory, stalled, g.generation)
        p.event("RolloutStalled", f"node group {g.name}: {stalled}", warning=True)
        return Standing(behind, RolloutState.STALLED, stalled)
    master = g.spec.role == ROLE_MASTER
    if not master and (why := _waits(p, siblings())):
        return Standing(behind, RolloutState.WAITING, why)
    if p.snap.operation is not None:
        state = RolloutState.ROLLING if _strategy(p) != REPLACE else RolloutState.WAITING
        return Standing(behind, state, f"{p.snap.operation.kind} of {behind} node(s) under way")
    if _strategy(p) != REPLACE:
        return _in_place(p, old, master)
    return _replace(p, live, old, new, master)


def _replace(p: Pass, live: list[Node], old: list[Node], new: list[Node], master: bool) -> Standing:
    """Replace old nodes by new ones, within the group's rollout policy."""
    g = p.snap.group
    census = plan.Census(
        current=len(new),
        current_ready=sum(1 for n in new if n.state is NodeState.ACTIVE),
        old=len(old),
        old_ready=sum(1 for n in old if n.state is NodeState.ACTIVE),
    )
    step = plan.step(census, g.spec.node_count, plan.policy_for(g.spec.rollout, master))
    note = f"{census.current} of {g.spec.node_count} node(s) on the new revision"
    if step.retire:
        for n in deletion.choose(old, step.retire, g.spec.deletion_policy):
            p.event("RollingOut", f"retiring node {n.name} (older revision)", node=n.uuid)
            p.retire(n)
    if step.create:
        scale.add(p, step.create, [n for n in live if n.uuid in p.nodes])
        for uid in p.to_ensure[-step.create :]:
            node = p.nodes[uid]
            p.event("RollingOut", f"adding node {node.name} on the new revision", node=uid)
    return Standing(len(old), RolloutState.ROLLING, note)


REPLACE, REBUILD = plan.REPLACE, plan.REBUILD


def _strategy(p: Pass) -> str:
    """How the group's nodes move to a new revision: the label `upgrade_strategy` of the
    group, else of its cluster (replace: new machines; rebuild: the same machines
    reinstalled; in-place: an rpm-ostree rebase through the node agent)."""
    labels = {**(p.snap.cluster_attrs.get("labels") or {}), **p.snap.group.spec.labels}
    strategy = str(labels.get("upgrade_strategy", REPLACE))
    return strategy if strategy in plan.STRATEGIES else REPLACE  # checked when set


def _in_place(p: Pass, old: list[Node], master: bool) -> Standing:
    """Start the operation that moves the old nodes keeping their machines: rebuild
    (the driver) or rebase (the agent), one at a time for masters."""
    g = p.snap.group
    image = spec.probe(p).image_id
    strategy = _strategy(p)
    if strategy == REBUILD:
        kind, params = "rebuild", {"image_id": image}
    else:
        labels = {**(p.snap.cluster_attrs.get("labels") or {}), **g.spec.labels}
        ref = labels.get("ostree_ref")
        if not ref:
            why = (
                "rollout stopped: upgrade_strategy in-place rebases each node's rpm-ostree "
                "image, and the label ostree_ref (the ref to rebase to) is not set. Set it "
                "on the node group or cluster, or use upgrade_strategy replace or rebuild"
            )
            p.memory = health.stall(p.memory, why, g.generation)
            p.event("RolloutStalled", f"node group {g.name}: {why}", warning=True)
            return Standing(len(old), RolloutState.STALLED, why)
        kind, params = "rebase", {"ref": ref}
    batch = 1 if master else max(1, g.spec.rollout.max_unavailable)
    targets = [n.uuid for n in old if n.state is NodeState.ACTIVE]
    if not targets:
        return Standing(len(old), RolloutState.WAITING, "no ready node to move yet")
    operate.begin(p, kind, params, targets, batch)
    note = f"{kind} of {len(targets)} node(s) in place, {batch} at a time"
    p.event("RollingOut", f"node group {g.name}: {note} ({strategy})")
    return Standing(len(old), RolloutState.ROLLING, note)


def _stalled(p: Pass, new: list[Node]) -> str | None:
    """Why the rollout must stop: a new node failed to boot this pass, or one is not
    ready past the policy's progress deadline."""
    g = p.snap.group
    if p.failed_boots:
        return (
            f"rollout stopped: a node on the new revision failed to boot ({p.failed_boots[-1]}); "
            "the old nodes are kept. Abort it, or fix the image and upgrade again"
        )
    deadline = timedelta(seconds=g.spec.rollout.progress_deadline_s)
    for n in new:
        late = n.created_at is not None and p.now - n.created_at > deadline
        if n.state is not NodeState.ACTIVE and late:
            why = f" ({n.reason})" if n.reason else ""
            return (
                f"rollout stopped: node {n.name} is not ready {deadline.total_seconds():g} s "
                f"after it was made{why}; the old nodes are kept. Abort it, or fix the cause "
                "and upgrade again"
            )
    return None


def _waits(p: Pass, groups: list[Sibling]) -> str | None:
    """Why a worker group must wait before it rolls: masters first, and a bound on
    worker groups of one cluster rolling at once."""
    me = p.snap.group.uuid
    masters = [s for s in groups if s.role == ROLE_MASTER and not s.deleting]
    if not all(s.settled and cond.is_true(s.conditions, cond.UP_TO_DATE) for s in masters):
        return "waiting for the masters to be replaced first"
    rolling = [
        s for s in groups if s.uuid != me and s.role != ROLE_MASTER and _rolling(s.conditions)
    ]
    if not _rolling(p.snap.group.conditions) and len(rolling) >= ROLLING_PER_CLUSTER:
        return f"waiting: {len(rolling)} other worker group(s) of the cluster are rolling out"
    return None


def _rolling(conds: tuple[Condition, ...]) -> bool:
    """Whether a group said, at its last pass, that it is rolling out."""
    c = cond.get(conds, cond.UP_TO_DATE)
    return c is not None and c.reason == cond.ROLLING_OUT
