"""The delete path of a node group: delete every machine, then the rows.

Deletes always finish: "not found" is done, a refused delete is retried with
backoff, and the group row goes only when the cloud lists none of its machines.
A group its provider deletes whole (one Heat stack) is asked at once by the first
pass that sees its deletion, without a listing (its provider deletes whatever the
group holds; a listing read Nova's servers first, a second on a busy cloud); every
pass after it lists the group, and the row goes when the listing finds nothing.
"""

from __future__ import annotations

from shoal.conductor.nodegroup import status
from shoal.conductor.nodegroup.state import Pass, Path
from shoal.conductor.pacing import Pacing
from shoal.db import writes
from shoal.domain import conditions as cond
from shoal.domain import status as st
from shoal.domain.model import NodeState
from shoal.drivers.contract import MachineState


def plan(p: Pass, vms_left: int = 0) -> None:
    """Before the calls: mark every node DELETING and choose the machines to delete;
    with no machine left, the group row goes (nothing to ask the cloud). Virt hosts
    of a cluster being deleted go last: while `vms_left` VM nodes remain on them,
    they wait (their VMs' groups must still reach them to delete the VMs)."""
    g = p.snap.group
    if vms_left and p.machines:
        p.path = Path.CONCLUDE
        p.hosts_wait = f"waiting for {vms_left} VM node(s) on these virt hosts to be deleted"
        return
    if p.unlisted:  # its provider deletes it whole: asked before any listing
        _mark_deleting(p)
        p.to_delete = [g.uuid]
        p.event("Deleting", f"node group {g.name}: deleting it with its {len(p.nodes)} node(s)")
        return
    if not p.machines:
        p.path = Path.CONCLUDE
        p.w.delete_group = True
        p.event("NodeGroupDeleted", f"node group {g.name} deleted")
        return
    for node in list(p.nodes.values()):
        if node.uuid not in p.machines:
            p.deleted(node)
    _mark_deleting(p)
    p.to_delete = [
        m.machine_id for m in p.machines.values() if m.state is not MachineState.DELETING
    ]
    if p.to_delete:
        p.event("Deleting", f"node group {g.name}: deleting {len(p.to_delete)} machine(s)")


def _mark_deleting(p: Pass) -> None:
    """Every node of the group still here is DELETING (its machine asked to go)."""
    for node in list(p.nodes.values()):
        if node.state is not NodeState.DELETING:
            p.set(node, state=NodeState.DELETING)


def conclude(pace: Pacing, p: Pass) -> None:
    """After the calls: say what is left and look again when the pacing rule says
    (conductor/pacing.py: as the deletes have gone so far; later after a refusal), or
    sooner while the provider deletes the group whole (grouped.py)."""
    g, now = p.snap.group, p.now
    status.retry_events(p)
    left = len(p.nodes) if p.unlisted else len(p.machines)
    msg = p.hosts_wait or f"waiting for {left} machine(s) to be deleted"
    conds = cond.set_false(g.conditions, cond.READY, cond.DELETION_IN_PROGRESS, msg, now)
    delay = pace.requeue_seconds if p.delete_errors else status.recheck_in(pace, p)
    nxt = pace.at(now, delay)
    if p.look_again_by is not None:  # its provider deletes the group whole (grouped.py)
        nxt = min(nxt, max(p.look_again_by, now))
    p.w.status = writes.StatusWrite(
        g.generation,
        st.derive(g.status, st.Outcome.IN_PROGRESS, deleting=True),
        msg,
        conds,
        True,  # the deletion was seen: the next pass lists the group (reconcile.py)
        nxt,
        p.memory.to_json() if p.memory != p.snap.memory else None,
    )
