"""The orphan sweeper: delete machines whose node group is gone, and nothing else.

A machine tagged for a node group that exists is that group's business: its
pass adopts it when its row is missing (a restored backup, a database copied
half-way), instead of deleting and making it anew. The sweeper deletes only
machines whose group is not in the database, and only once it has seen them so
for `sweep_grace_seconds`. The listing is taken BEFORE the groups are read: a
group row is committed before any machine of it is made, and removed only
after its last machine is gone, so a machine listed whose group is missing
afterwards truly has no owner.

A breaker stops a sweep that would delete more than `sweep_breaker_share` of a
provider's machines (and more than `sweep_breaker_min`): a database that lost
its rows must not cost a fleet. It deletes nothing, logs an error and says why
on the provider (`GET /v1/providers`), until the count falls or an operator
raises the share.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from shoal.conductor import calls
from shoal.conductor.context import Context, Provider
from shoal.db import providers, snapshots
from shoal.drivers.contract import TAG_NODE, TAG_NODEGROUP, DriverError, MachineState

log = logging.getLogger(__name__)


class Sweeper:
    """The orphan sweeper of one conductor process (it remembers, per machine, when it
    first saw it without a group: a restart starts the grace period again)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.first_seen: dict[str, datetime] = {}

    def sweep(self) -> int:
        """One sweep over every provider's machines; the number of orphans deleted. A
        provider that cannot be listed now is skipped (and said so) until the next."""
        deleted = 0
        for p in self.ctx.providers.values():
            try:
                deleted += self.sweep_provider(p)
            except DriverError as exc:
                log.warning("sweeper: cannot list the machines of %s: %s", p.name, exc.reason)
        return deleted

    def sweep_provider(self, p: Provider) -> int:
        """One sweep over the machines of provider `p` (one listing)."""
        ctx, now = self.ctx, self.ctx.now()
        machines = [
            m
            for m in ctx.call(p, lambda: p.driver.list_machines({}))
            if TAG_NODE in m.tags and m.state is not MachineState.DELETING
        ]
        groups = {m.tags.get(TAG_NODEGROUP, "") for m in machines}
        alive = snapshots.existing_groups(ctx.db, groups)
        orphans = [m for m in machines if m.tags.get(TAG_NODEGROUP, "") not in alive]
        seen = {m.machine_id for m in orphans}
        for mid in list(self.first_seen):
            if mid not in seen:
                del self.first_seen[mid]  # gone, or owned again
        grace = timedelta(seconds=ctx.settings.sweep_grace_seconds)
        due = [m for m in orphans if now - self.first_seen.setdefault(m.machine_id, now) >= grace]
        halted = breaker(len(due), len(machines), ctx)
        providers.record_sweep(ctx.db, p.name, halted and f"{halted} (seen {now:%H:%M:%S} UTC)")
        if halted:
            log.error("sweeper: %s: %s", p.name, halted)
            return 0
        if due:
            log.warning(
                "sweeper: deleting %d machine(s) of %s whose node groups are gone",
                len(due),
                p.name,
            )
            calls.delete_all(ctx, [(p, m.machine_id, m.availability_zone) for m in due])
            for m in due:
                self.first_seen.pop(m.machine_id, None)
        return len(due)


def breaker(due: int, total: int, ctx: Context) -> str | None:
    """Why the sweep must not delete `due` of `total` machines, or None."""
    share, floor = ctx.settings.sweep_breaker_share, ctx.settings.sweep_breaker_min
    if due <= floor or due <= share * total:
        return None
    return (
        f"the sweeper stopped: it would delete {due} of {total} machines whose node groups "
        "are not in the database (a restored backup or a half-copied database?); it deleted "
        "none. If they truly have no owner, raise SHOAL_CONDUCTOR_SWEEP_BREAKER_SHARE "
        f"(now {share:g}) for one sweep"
    )
