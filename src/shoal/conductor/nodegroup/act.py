"""Act: the driver calls of a batch of passes, after their intent is committed.

Deletes first, then creates as one set of waves for all the groups (masters'
waves first: the control plane boots before the workers queue). Each answer is
folded into its own pass's view.
"""

from __future__ import annotations

from shoal.conductor import calls
from shoal.conductor.context import Context
from shoal.conductor.nodegroup import spec
from shoal.conductor.nodegroup.observe import fold
from shoal.conductor.nodegroup.state import Pass
from shoal.domain.model import ROLE_MASTER, NodeState
from shoal.drivers.contract import MachineSpec, MachineState

# While creates are paced by the provider's rate limit (the throttle learned a
# pace), a pass starts no create after this long; its remaining intent rows are
# created by the next pass, due at once but behind groups waiting longer, so that
# a provider's rate limit is shared by every group (no tail of late groups) and
# no group waits long for a free worker.
CREATE_PASS_BUDGET_S = 0.5


def act(ctx: Context, passes: list[Pass]) -> None:
    """Call the provider for the passes of a batch; fold the answers into each pass."""
    deletes = {mid: p for p in passes for mid in p.to_delete}
    if deletes:
        for mid, err in calls.delete_all(ctx, list(deletes)).items():
            deletes[mid].delete_errors[mid] = err
    owner: dict[str, Pass] = {}
    tiers: tuple[list[tuple[MachineSpec, list[str]]], ...] = ([], [])
    for p in passes:
        # Every row is committed here, with its id (the snapshot's, or the intent
        # write's RETURNING).
        zones = list(p.snap.group.spec.availability_zones)
        tier = tiers[0 if p.snap.group.spec.role == ROLE_MASTER else 1]
        for uid in p.to_ensure:
            if uid in p.nodes:
                owner[uid] = p
                tier.append((spec.machine_spec(p, p.nodes[uid]), zones))
    if not owner:
        return
    errors_before = {id(p): len(p.errors) for p in passes}
    asked = {id(p): 0 for p in passes}
    answered = dict(asked)
    for uid in owner:
        asked[id(owner[uid])] += 1
    results = [r for t in tiers if t for r in calls.ensure_all(ctx, t, CREATE_PASS_BUDGET_S)]
    for r in results:
        p = owner[r.spec.machine_id]
        answered[id(p)] += 1
        node = p.nodes[r.spec.machine_id]
        for frm, to, why in r.moves:
            p.event(
                "NoValidHost",
                f"no valid host in {frm} for node {node.name} ({why}); placed it in {to}",
                warning=True,
                node=node.uuid,
            )
        if r.machine is not None:
            fold(p, node, r.machine)
            node = p.nodes[node.uuid]
            if r.machine.state is MachineState.BUILDING and node.state is NodeState.PENDING:
                p.set(node, state=NodeState.BUILDING)
            p.progress = True
        elif r.error is not None:
            p.errors.append(r.error)
            if node.reason != r.error.reason:
                p.set(node, reason=r.error.reason)
    for p in passes:
        # Stopped by the time budget, not by an error: the rest go in the next pass.
        stopped = answered[id(p)] < asked[id(p)] and len(p.errors) == errors_before[id(p)]
        p.deferred = p.deferred or stopped
