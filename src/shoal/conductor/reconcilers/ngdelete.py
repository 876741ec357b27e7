"""The delete path of a node group: delete every machine, then the rows.

Deletes always finish: "not found" is done, a refused delete is retried with
backoff, and the group row goes only when the cloud lists none of its machines.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from shoal.conductor.context import Context
from shoal.conductor.reconcilers import actions
from shoal.db import work
from shoal.domain import conditions as cond
from shoal.domain import status as st
from shoal.domain.model import NodeState
from shoal.drivers.contract import MachineState

if TYPE_CHECKING:
    from shoal.conductor.reconcilers.nodegroup import Pass


def run(ctx: Context, p: Pass) -> None:
    """One delete pass over the group of `p`."""
    g, now = p.snap.group, p.now
    if not p.machines:
        p.w.delete_group = True
        p.event("NodeGroupDeleted", f"node group {g.name} deleted")
        work.apply_group(ctx.db, p.snap, p.w, now, holder=ctx.holder)
        return
    for node in list(p.nodes.values()):
        if node.uuid not in p.machines:
            p.drop(node)
        elif node.state is not NodeState.DELETING:
            p.set(node, state=NodeState.DELETING)
    targets = [m.machine_id for m in p.machines.values() if m.state is not MachineState.DELETING]
    p.flush_updates()
    if targets:
        p.event("Deleting", f"node group {g.name}: deleting {len(targets)} machine(s)")
        # DELETING marks committed before the calls
        work.apply_group(ctx.db, p.snap, p.w, now, holder=ctx.holder)
        p.w = work.GroupWrite()
    errors = actions.delete_all(ctx, targets)
    for mid, err in list(errors.items())[:10]:
        p.event("DeleteRetry", f"delete of machine {mid} will be retried: {err.reason}",
                warning=True, node=mid)  # fmt: skip
    left = len(p.machines)
    msg = f"waiting for {left} machine(s) to be deleted"
    conds = cond.set_false(g.conditions, cond.READY, cond.DELETION_IN_PROGRESS, msg, now)
    delay = ctx.settings.requeue_seconds if errors else min(ctx.settings.requeue_seconds, 0.2)
    p.w.status = work.StatusWrite(
        g.generation,
        st.derive(g.status, st.Outcome.IN_PROGRESS, deleting=True),
        msg,
        conds,
        False,
        now + timedelta(seconds=ctx.backoff.jittered(delay)),
    )
    work.apply_group(ctx.db, p.snap, p.w, now, holder=ctx.holder)
