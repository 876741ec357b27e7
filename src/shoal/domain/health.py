"""Failing machines, as pure decisions: how long a group waits before it replaces
machines that keep failing, which zones it avoids after "no valid host", and
when it stops repairing (the health policy's circuit breaker).

- **Boot failures.** A machine that fails before it was ever ready (ERROR while
  booting, or a quota fault) is a failed attempt. The first failure seen after
  the group may replace machines again is one more round; failures seen before
  then belong to the round already counted (the machines of one round often fail
  over several passes). The next replacement waits `failure_delay(rounds)`
  (with the conductor's delays: 3 s, 6 s, 12 s, ... up to 10 minutes), so a group
  whose every boot fails makes at most five rounds of machines in its first minute.
  A node that becomes ready resets the count.
- **Zones without room.** "No valid host" in a zone, synchronous or as a machine's
  fault, blocks that zone for the group for `Delays.zone_block_s`; new machines go
  to the group's other zones meanwhile.
- **Repairs.** A node that was ready and whose machine failed or vanished is
  unhealthy. It is replaced unless more than `max_unhealthy_percent` of the
  group's desired nodes (rounded down, at least one) are unhealthy: then
  repairs stop, the unhealthy nodes are kept for inspection, and the group says
  why (Cluster API's maxUnhealthy).

The delays are the conductor's (`conductor/pacing.py`, `HEALTH`, with its other
budgets): these rules take them as a `Delays` value, since the layers below the
conductor may not import it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

FAULT_MAX = 300  # characters of the cloud's fault message kept


@dataclass(frozen=True)
class Delays:
    """How long the health rules make a group wait: before failed boots are replaced
    again (`first_retry_s` after the first round, doubling each round, at most
    `max_retry_s`), and how long a zone without room is avoided (`zone_block_s`)."""

    first_retry_s: float
    max_retry_s: float
    zone_block_s: float


@dataclass(frozen=True)
class GroupMemory:
    """What the conductor remembers about a group between passes."""

    failures: int = 0  # rounds of failed boots since a node of the group was last ready
    generation: int = 0  # the desired state's generation they happened under
    last_failure_at: datetime | None = None
    last_fault: str | None = None  # the cloud's words for the last failure
    zone_blocks: Mapping[str, datetime] = field(default_factory=dict)  # zone -> until
    stalled: str | None = None  # why the rollout of this generation stopped itself
    # Passes in a row whose listing of the group's machines failed, since when.
    listing_failures: int = 0
    listing_failing_since: datetime | None = None
    # Nodes being drained before their machine goes: node uuid -> when it began.
    drains: Mapping[str, datetime] = field(default_factory=dict)
    # Nodes the repair ladder replaced, by name -> why: the group stays unhealthy until
    # their successors are ready.
    replaced: Mapping[str, str] = field(default_factory=dict)
    # How long a machine of the group takes to be deleted, as learned from those that
    # went (seconds; None: none went yet): conductor/pacing.py paces deletes by it.
    delete_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "failures": self.failures,
            "generation": self.generation,
            "last_failure_at": self.last_failure_at.isoformat() if self.last_failure_at else None,
            "last_fault": self.last_fault,
            "zone_blocks": {z: t.isoformat() for z, t in self.zone_blocks.items()},
            "stalled": self.stalled,
            "listing_failures": self.listing_failures,
            "listing_failing_since": (
                self.listing_failing_since.isoformat() if self.listing_failing_since else None
            ),
            "drains": {n: t.isoformat() for n, t in self.drains.items()},
            "replaced": dict(self.replaced),
            "delete_s": self.delete_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> GroupMemory:
        if not data:
            return cls()
        at = data.get("last_failure_at")
        listing_since = data.get("listing_failing_since")
        return cls(
            failures=int(data.get("failures") or 0),
            generation=int(data.get("generation") or 0),
            last_failure_at=datetime.fromisoformat(at) if at else None,
            last_fault=data.get("last_fault"),
            zone_blocks={
                z: datetime.fromisoformat(t) for z, t in (data.get("zone_blocks") or {}).items()
            },
            stalled=data.get("stalled"),
            listing_failures=int(data.get("listing_failures") or 0),
            listing_failing_since=(
                datetime.fromisoformat(listing_since) if listing_since else None
            ),
            drains={n: datetime.fromisoformat(t) for n, t in (data.get("drains") or {}).items()},
            replaced=dict(data.get("replaced") or {}),
            delete_s=float(d) if (d := data.get("delete_s")) is not None else None,
        )


def failure_delay(rounds: int, delays: Delays) -> float:
    """Seconds to wait before replacing machines after `rounds` rounds of failures."""
    if rounds <= 0:
        return 0.0
    return min(delays.max_retry_s, delays.first_retry_s * 2.0 ** (rounds - 1))


def failed(
    mem: GroupMemory, now: datetime, fault: str, generation: int, delays: Delays
) -> GroupMemory:
    """Failed boots seen now under desired-state `generation`; `fault` is the cloud's
    message. Before the group's next replacement (`retry_at`) they belong to the round
    already counted: only the message is kept. Otherwise they are one more round."""
    due = retry_at(mem, delays)
    if mem.generation == generation and due is not None and now < due:
        return replace(mem, last_fault=fault[:FAULT_MAX])
    return replace(
        mem,
        failures=mem.failures + 1,
        generation=generation,
        last_failure_at=now,
        last_fault=fault[:FAULT_MAX],
    )


def for_generation(mem: GroupMemory, generation: int) -> GroupMemory:
    """Failures under an older desired state do not slow a new request down (a retry,
    a corrected spec), and a rollout stopped under it may go on (resume, abort, a new
    upgrade); zones without room stay avoided."""
    if mem.generation == generation:
        return mem
    return replace(recovered(mem), stalled=None, generation=generation)


def stall(mem: GroupMemory, why: str, generation: int) -> GroupMemory:
    """The rollout of desired-state `generation` stopped itself, and why."""
    return replace(mem, stalled=why[:FAULT_MAX], generation=generation)


def recovered(mem: GroupMemory) -> GroupMemory:
    """A node became ready: failures so far no longer slow the group down."""
    if mem.failures == 0 and mem.last_fault is None:
        return mem
    return replace(mem, failures=0, generation=0, last_failure_at=None, last_fault=None)


def retry_at(mem: GroupMemory, delays: Delays) -> datetime | None:
    """When the group may replace failed machines again (None: now)."""
    if mem.failures == 0 or mem.last_failure_at is None:
        return None
    return mem.last_failure_at + timedelta(seconds=failure_delay(mem.failures, delays))


def listing_failed(mem: GroupMemory, now: datetime) -> GroupMemory:
    """One more pass whose listing of the group's machines failed, seen now."""
    return replace(
        mem,
        listing_failures=mem.listing_failures + 1,
        listing_failing_since=mem.listing_failing_since or now,
    )


def listed(mem: GroupMemory) -> GroupMemory:
    """The group's machines were listed: listing failures so far are over."""
    if mem.listing_failures == 0 and mem.listing_failing_since is None:
        return mem
    return replace(mem, listing_failures=0, listing_failing_since=None)


def listing_reason(provider: str, reason: str, mem: GroupMemory) -> str:
    """The status_reason of a group whose listings fail (`mem` counts this one)."""
    since = mem.listing_failing_since
    if since is not None and since.tzinfo is not None:
        since = since.astimezone(UTC)
    when = f"since {since:%H:%M} UTC, " if since is not None else ""
    n = mem.listing_failures
    return (
        f"cannot list the machines of provider {provider}: {reason} "
        f"({when}{n} attempt{'' if n == 1 else 's'}); shoal keeps trying with a growing "
        "delay and changes nothing meanwhile: check that the provider answers "
        "(endpoint, credentials, rate limits)"
    )


def drain_started(mem: GroupMemory, node_uuid: str, now: datetime) -> GroupMemory:
    """Node `node_uuid` began to be drained now."""
    return replace(mem, drains={**mem.drains, node_uuid: now})


def drains_kept(mem: GroupMemory, node_uuids: set[str]) -> GroupMemory:
    """Forget the drains of nodes not among `node_uuids` (gone, or on their way)."""
    live = {n: t for n, t in mem.drains.items() if n in node_uuids}
    return mem if len(live) == len(mem.drains) else replace(mem, drains=live)


def replacing(mem: GroupMemory, name: str, why: str) -> GroupMemory:
    """The ladder replaces node `name`, unhealthy because `why`."""
    return replace(mem, replaced={**mem.replaced, name: why[:FAULT_MAX]})


def successors_ready(mem: GroupMemory) -> GroupMemory:
    """The nodes that replaced unhealthy ones are ready: the group is healthy again."""
    return mem if not mem.replaced else replace(mem, replaced={})


def block_zone(mem: GroupMemory, zone: str, now: datetime, delays: Delays) -> GroupMemory:
    """`zone` had no valid host: avoid it for `delays.zone_block_s`."""
    blocks = {**mem.zone_blocks, zone: now + timedelta(seconds=delays.zone_block_s)}
    return replace(mem, zone_blocks=blocks)


def expire_blocks(mem: GroupMemory, now: datetime) -> GroupMemory:
    """Forget zone blocks that ended."""
    live = {z: t for z, t in mem.zone_blocks.items() if t > now}
    return mem if len(live) == len(mem.zone_blocks) else replace(mem, zone_blocks=live)


def open_zones(zones: Sequence[str], mem: GroupMemory, now: datetime) -> list[str]:
    """The group's zones not blocked now, in the group's order."""
    return [z for z in zones if mem.zone_blocks.get(z, now) <= now]


def blocked_zones(mem: GroupMemory, now: datetime) -> list[str]:
    """Zones blocked now, sorted."""
    return sorted(z for z, t in mem.zone_blocks.items() if t > now)


def unhealthy_allowed(desired: int, max_unhealthy_percent: int) -> int:
    """How many unhealthy nodes a group of `desired` nodes repairs at once: the
    percentage of the desired nodes, rounded down, but never less than one, so
    that the first unhealthy node of any group is repaired (with 40 %, a group of
    one or two nodes would otherwise stop at its first failure)."""
    return max(1, max(desired, 0) * max_unhealthy_percent // 100)


def repairs_allowed(unhealthy: int, desired: int, max_unhealthy_percent: int) -> bool:
    """Whether a group with `unhealthy` unhealthy nodes (of `desired`) may repair them:
    not when they are more than `unhealthy_allowed` (the circuit breaker)."""
    return unhealthy <= unhealthy_allowed(desired, max_unhealthy_percent)


# The repair ladder: the rungs, in order, and how an event says each.
REBOOT, REBUILD, REPLACE = "reboot", "rebuild", "replace"
RUNGS = (REBOOT, REBUILD, REPLACE)
RUNG_WORDS = {REBOOT: "rebooting", REBUILD: "rebuilding", REPLACE: "replacing"}


def next_rung(
    step: int, has_machine: bool, can_reboot: bool, can_rebuild: bool, host_up: bool = True
) -> str:
    """The next rung for a node whose last rung was `step` (0: none yet): reboot,
    then rebuild, then replace; a rung the provider cannot do, or that needs a
    machine the node no longer has, is skipped. A VM whose virt host is not ready
    (`host_up` false) is replaced at once on another host (failover): a reboot or a
    rebuild in place cannot work while its host is down."""
    if not has_machine or not host_up:
        return REPLACE
    if step < 1 and can_reboot:
        return REBOOT
    if step < 2 and can_rebuild:
        return REBUILD
    return REPLACE
