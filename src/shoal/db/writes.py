"""What a conductor pass writes, as values: its phases build these, and the
reconciler alone hands them to `outcomes.py`, which applies a pass's writes in one
transaction fenced by its leases."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from shoal.domain import model as m


@dataclass(frozen=True)
class EventIn:
    """An event to append with the pass's writes."""

    reason: str
    message: str
    type: str = "Normal"
    nodegroup_uuid: str | None = None
    node_uuid: str | None = None


@dataclass
class StatusWrite:
    """The status part of a pass, applied only if the generation did not move."""

    generation: int
    status: str
    status_reason: str | None
    conditions: tuple[m.Condition, ...]
    observed: bool  # set observed_generation = generation
    next_reconcile_at: datetime | None
    # What the conductor remembers about the group (health.GroupMemory as JSON), written
    # whatever the generation: it is about the cloud, not the spec. None: unchanged.
    memory: dict[str, Any] | None = None


@dataclass
class GroupWrite:
    """Everything a node group pass writes, in one transaction."""

    inserts: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)  # each has "id"
    delete_ids: list[int] = field(default_factory=list)
    events: list[EventIn] = field(default_factory=list)
    status: StatusWrite | None = None
    delete_group: bool = False
    poke_cluster: bool = False
    task_inserts: list[dict[str, Any]] = field(default_factory=list)  # node_tasks rows
    task_updates: list[dict[str, Any]] = field(default_factory=list)  # each has "uuid"
    operation: dict[str, Any] | None = None  # the running operation's changes ("uuid")
    operation_insert: dict[str, Any] | None = None  # an operation the conductor starts
    provider_ref: str | None = None  # the group's new id in its provider (a Heat stack's)

    def empty(self) -> bool:
        return not (
            self.inserts or self.updates or self.delete_ids or self.events or self.task_inserts
        ) and (
            self.status is None
            and not self.delete_group
            and not self.poke_cluster
            and not self.task_updates
            and self.operation is None
            and self.operation_insert is None
            and self.provider_ref is None
        )


@dataclass
class ClusterWrite:
    """Everything a cluster pass writes."""

    events: list[EventIn] = field(default_factory=list)
    status: StatusWrite | None = None
    api_address: str | None = None
    health: tuple[str, dict[str, str]] | None = None  # (health_status, reason) when changed
    mark_groups_deleting: list[str] = field(default_factory=list)
    delete_cluster: bool = False
