"""The orphan sweeper: delete tagged machines that no node row owns.

The listing is taken BEFORE the rows are read: a node row is always committed
before its machine is created (intent before action), so a machine seen in
the listing whose row is missing afterwards truly has no owner.
"""

from __future__ import annotations

import logging

from shoal.conductor import calls
from shoal.conductor.context import Context
from shoal.db import snapshots
from shoal.drivers.contract import TAG_NODE, MachineState

log = logging.getLogger(__name__)


def sweep(ctx: Context) -> int:
    """One sweep over every machine the driver holds; the number of orphans deleted."""
    machines = ctx.call(lambda: ctx.driver.list_machines({}))
    tagged = {
        m.tags[TAG_NODE]: m
        for m in machines
        if TAG_NODE in m.tags and m.state is not MachineState.DELETING
    }
    if not tagged:
        return 0
    owned = snapshots.existing_node_uuids(ctx.db, tagged)
    orphans = [m.machine_id for node, m in tagged.items() if node not in owned]
    if orphans:
        log.warning("sweeper: deleting %d orphaned machine(s)", len(orphans))
        calls.delete_all(ctx, orphans)
    return len(orphans)
