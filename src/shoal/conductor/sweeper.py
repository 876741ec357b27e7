"""The orphan sweeper: delete tagged machines that no node row owns.

The listing is taken BEFORE the rows are read: a node row is always committed
before its machine is created (intent before action), so a machine seen in
the listing whose row is missing afterwards truly has no owner.
"""

from __future__ import annotations

import logging

from shoal.conductor import calls
from shoal.conductor.context import Context, Provider
from shoal.db import snapshots
from shoal.drivers.contract import TAG_NODE, DriverError, MachineState

log = logging.getLogger(__name__)


def sweep(ctx: Context) -> int:
    """One sweep over every provider's machines; the number of orphans deleted. A
    provider that cannot be listed now is skipped (and said so) until the next sweep."""
    deleted = 0
    for p in ctx.providers.values():
        try:
            deleted += sweep_provider(ctx, p)
        except DriverError as exc:
            log.warning("sweeper: cannot list the machines of %s: %s", p.name, exc.reason)
    return deleted


def sweep_provider(ctx: Context, p: Provider) -> int:
    """One sweep over the machines of provider `p` (one listing)."""
    machines = ctx.call(p, lambda: p.driver.list_machines({}))
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
        log.warning("sweeper: deleting %d orphaned machine(s) of %s", len(orphans), p.name)
        calls.delete_all(ctx, [(p, mid) for mid in orphans])
    return len(orphans)
