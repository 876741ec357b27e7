"""The orphan sweeper: hold the machines whose node group the database does not know,
and delete only those shoal itself deleted, or an admin named.

A machine tagged for a node group that exists is that group's business: its
pass adopts it when its row is missing (a restored backup, a database copied
half-way), instead of deleting and making it anew. A machine whose group is not
in the database is held: listed in the `orphans` table (`GET /v1/orphans`, `shoal
orphan list`) from its first sighting, refreshed by every sweep of every
conductor. It is deleted only when

- shoal recorded deleting its node group or cluster (a tombstone, written in the
  transaction that removed the row), once it has been held `sweep_grace_seconds`;
- or an admin asked for it (`shoal orphan delete`): the next sweep deletes it.

Anything else (the clusters a restored backup does not know) stays until adopted
(`shoal orphan adopt`) or named for deletion: the sweeper cannot destroy what it
does not know. The listing is taken BEFORE the groups are read: a group row is
committed before any machine of it is made, and removed only after its last
machine is gone, so a machine listed whose group is missing afterwards truly has
no owner.

A breaker still stops a sweep that would delete, for tombstones, more than
`sweep_breaker_share` of a provider's machines (and more than
`sweep_breaker_min`); an admin's explicit deletions are not counted.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from shoal.conductor import calls
from shoal.conductor.context import Context, Provider
from shoal.db import orphans, providers, snapshots
from shoal.drivers.contract import (
    TAG_CLUSTER,
    TAG_NODE,
    TAG_NODEGROUP,
    TAG_PROJECT,
    TAG_ROLE,
    DriverError,
    Machine,
    MachineState,
)

log = logging.getLogger(__name__)


class Sweeper:
    """The orphan sweeper of one conductor process (what it holds is in the database)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def sweep(self) -> int:
        """One sweep over every provider's machines; the number of orphans deleted. A
        provider that cannot be listed now is skipped (and said so) until the next."""
        deleted = 0
        ctx = self.ctx
        orphans.purge_tombstones(ctx.db, ctx.now() - timedelta(days=ctx.settings.tombstone_days))
        # Providers over one backend (the sim and its VMs) list alike: a machine is held
        # once, under the first that lists it (the default provider first).
        listed: set[str] = set()
        ordered = sorted(ctx.providers.values(), key=lambda p: p.name != ctx.default_provider)
        for p in ordered:
            try:
                deleted += self.sweep_provider(p, listed)
            except DriverError as exc:
                log.warning("sweeper: cannot list the machines of %s: %s", p.name, exc.reason)
        return deleted

    def sweep_provider(self, p: Provider, listed: set[str] | None = None) -> int:
        """One sweep over the machines of provider `p` (one listing), but those an
        earlier provider of this sweep listed (`listed`, which it extends)."""
        ctx, now = self.ctx, self.ctx.now()
        skip = listed if listed is not None else set()
        machines = [
            m
            for m in ctx.call(p, lambda: p.driver.list_machines({}))
            if TAG_NODE in m.tags
            and m.state is not MachineState.DELETING
            and m.machine_id not in skip
        ]
        skip.update(m.machine_id for m in machines)
        groups = {m.tags.get(TAG_NODEGROUP, "") for m in machines}
        alive = snapshots.existing_groups(ctx.db, groups)
        unknown = [m for m in machines if m.tags.get(TAG_NODEGROUP, "") not in alive]
        held = orphans.refresh(ctx.db, p.name, [seen(p.name, m) for m in unknown], now)
        claims = {h.seen.nodegroup_uuid or "" for h in held} | {
            h.seen.cluster_uuid or "" for h in held
        }
        dead = orphans.buried(ctx.db, claims - {""})
        grace = timedelta(seconds=ctx.settings.sweep_grace_seconds)
        asked, buried = to_delete(held, dead, now, grace)
        halted = breaker(len(buried), len(machines), ctx)
        providers.record_sweep(ctx.db, p.name, halted and f"{halted} (seen {now:%H:%M:%S} UTC)")
        if halted:
            log.error("sweeper: %s: %s", p.name, halted)
            buried = []
        kept = len(held) - len(asked) - len(buried)
        if kept:
            log.warning(
                "sweeper: holding %d machine(s) of %s whose node groups this database does "
                "not know (see shoal orphan list)",
                kept,
                p.name,
            )
        gone = asked + buried
        if gone:
            log.warning(
                "sweeper: deleting %d machine(s) of %s: %d of node groups shoal deleted, "
                "%d an admin asked for",
                len(gone),
                p.name,
                len(buried),
                len(asked),
            )
            calls.delete_all(ctx, [(p, h.seen.machine_id, h.seen.availability_zone) for h in gone])
        return len(gone)


def seen(provider: str, m: Machine) -> orphans.Seen:
    """A listed machine as the sweeper holds it (what it claims, from its tags)."""
    return orphans.Seen(
        provider=provider,
        machine_id=m.machine_id,
        name=m.name,
        state=str(m.state),
        tags=dict(m.tags),
        project_id=m.tags.get(TAG_PROJECT),
        cluster_uuid=m.tags.get(TAG_CLUSTER),
        nodegroup_uuid=m.tags.get(TAG_NODEGROUP),
        role=m.tags.get(TAG_ROLE),
        flavor_id=m.flavor_id,
        image_id=m.image_id,
        availability_zone=m.availability_zone,
    )


def to_delete(
    held: Sequence[orphans.Held], dead: Collection[str], now: datetime, grace: timedelta
) -> tuple[list[orphans.Held], list[orphans.Held]]:
    """Which held machines to delete now: those an admin asked for, and those whose
    node group or cluster shoal deleted (`dead`) held at least `grace`. The rest
    (nothing says shoal is done with them) are kept."""
    gone = set(dead)
    asked = [h for h in held if h.delete_requested_at is not None]
    buried = [
        h
        for h in held
        if h.delete_requested_at is None
        and ({h.seen.nodegroup_uuid, h.seen.cluster_uuid} & gone)
        and now - h.first_seen >= grace
    ]
    return asked, buried


def breaker(due: int, total: int, ctx: Context) -> str | None:
    """Why the sweep must not delete `due` of `total` machines, or None."""
    share, floor = ctx.settings.sweep_breaker_share, ctx.settings.sweep_breaker_min
    if due <= floor or due <= share * total:
        return None
    return (
        f"the sweeper stopped: it would delete {due} of {total} machines of node groups "
        "shoal deleted; it deleted none. If they truly have no owner, raise "
        f"SHOAL_CONDUCTOR_SWEEP_BREAKER_SHARE (now {share:g}) for one sweep, or name them "
        "with shoal orphan delete"
    )
