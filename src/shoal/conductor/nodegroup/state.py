"""The working state of one pass over one node group: its snapshot, what the cloud
listed, the node rows as this pass changes them, and the write it builds up.

Phases change a `Pass`; only `reconcile.py` writes it to the database.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from shoal.conductor import pacing
from shoal.db import snapshots, writes
from shoal.db.virthosts import VirtView
from shoal.domain import conditions as cond
from shoal.domain import health, kubenodes
from shoal.domain.kubenodes import Drain
from shoal.domain.model import Node, NodeState
from shoal.domain.rollout import Standing
from shoal.drivers.contract import (
    TAG_NODE,
    DriverError,
    Feature,
    Machine,
    MachineState,
    TransientError,
)

LIVE = (NodeState.PENDING, NodeState.BUILDING, NodeState.ACTIVE)


class Path(enum.Enum):
    """What a pass does with its group."""

    RECONCILE = "reconcile"  # observe, remove, scale, act, conclude
    DELETE = "delete"  # delete every machine, then the group
    CONCLUDE = "conclude"  # nothing to ask the cloud: only the outcome is written


@dataclass(frozen=True)
class DriverOp:
    """A driver call an operation or a repair makes this pass (act runs it): which, on
    what node, and the task it is part of (none for a repair)."""

    kind: str
    node_uuid: str
    params: dict[str, Any]
    task_uuid: str


@dataclass
class Pass:
    """The working state of one pass over one node group."""

    snap: snapshots.GroupSnapshot
    now: datetime
    machines: dict[str, Machine]  # by node uuid (the shoal-node tag)
    nodes: dict[str, Node]  # by uuid; the view as this pass changes it
    provider: str  # the provider the group's machines live in
    memory: health.GroupMemory  # what the conductor remembers, as this pass changes it
    path: Path = Path.RECONCILE
    listing_error: TransientError | None = None
    # Not listed: its provider deletes it whole and is asked before any listing (delete.py).
    unlisted: bool = False
    w: writes.GroupWrite = field(default_factory=writes.GroupWrite)
    to_ensure: list[str] = field(default_factory=list)  # node uuids
    to_delete: list[str] = field(default_factory=list)  # machine ids
    errors: list[DriverError] = field(default_factory=list)
    delete_errors: dict[str, DriverError] = field(default_factory=dict)
    progress: bool = False
    deferred: bool = False  # creates left for the next pass (due at once, or by `paced_until`)
    paced_until: datetime | None = None  # its provider takes no create before then (429s)
    failed_boots: list[str] = field(default_factory=list)  # the cloud's faults, this pass
    unhealthy: list[Node] = field(default_factory=list)  # were ready; machine failed or gone
    held: list[tuple[Node, str]] = field(default_factory=list)  # unhealthy, not repaired: why
    repairs_stopped: str | None = None  # why, when the health policy's breaker tripped
    waiting_until: datetime | None = None  # no create before then (failures, full zones)
    look_again_by: datetime | None = None  # a deadline comes then (a repair rung's time)
    rollout: Standing = Standing()  # where the group's rollout stands (rollout.py)
    provider_working: str | None = None  # its provider works on the group whole (grouped.py)
    operation_note: str = ""  # how the group's operation goes, for a person
    driver_ops: list[DriverOp] = field(default_factory=list)  # act calls them
    features: frozenset[Feature] = frozenset()  # what the group's provider can do
    restart_seconds: float | None = None  # its provider's longest reboot (None: unknown)
    agents_expected: bool = False  # its provider's nodes run shoal-agent
    # The labels its provider's driver reads as options (label -> option: provider_options.py).
    option_labels: dict[str, str] = field(default_factory=dict)
    virt: VirtView | None = None  # its cluster's virt hosts, on a hosted provider
    hosts_wait: str = ""  # virt hosts being deleted: why they wait for their VMs
    # An unexpected exception in this group's driver calls or their answers (act): the
    # per-pass guard makes it the group's ReconcileError (conductor/guard.py).
    crash: Exception | None = None
    # The cluster's Kubernetes API as read this pass (None: not read: shoal does not run
    # Kubernetes on this group's provider), and the calls to make to it (kubefeed.act).
    kube: kubenodes.ClusterView | None = None
    kube_ops: list[kubenodes.Op] = field(default_factory=list)
    drain_timeout_s: float = 120.0
    # The delete times (marked to gone) of the machines this pass saw go (`deleted`).
    deletes_done: list[float] = field(default_factory=list)
    _drain_steps: dict[str, bool] = field(default_factory=dict)
    _updates: dict[int, dict[str, Any]] = field(default_factory=dict)

    def crashed(self, exc: Exception) -> None:
        """Something unexpected went wrong in this group's part of act (the first kept)."""
        if self.crash is None:
            self.crash = exc

    def defer_until(self, at: datetime) -> None:
        """Creates are left for a pass at `at` or later (the provider's rate limit)."""
        self.deferred = True
        self.paced_until = at if self.paced_until is None else max(self.paced_until, at)

    def look_again(self, at: datetime) -> None:
        """Be due again by `at` at the latest (a timeout that ends then)."""
        self.look_again_by = at if self.look_again_by is None else min(self.look_again_by, at)

    @classmethod
    def start(
        cls,
        snap: snapshots.GroupSnapshot,
        now: datetime,
        listed: list[Machine] | TransientError,
        provider: str,
    ) -> Pass:
        """A pass over `snap` in `provider`, given the group's listing (or the error
        listing it)."""
        # Every pass that ends starts from conditions without a ReconcileError: the
        # condition says that passes fail, and this one did not.
        group = replace(
            snap.group, conditions=cond.remove(snap.group.conditions, cond.RECONCILE_ERROR)
        )
        snap = replace(snap, group=group)
        memory = health.expire_blocks(snap.memory, now)
        memory = health.for_generation(memory, snap.group.generation)
        p = cls(snap, now, {}, {n.uuid: n for n in snap.nodes}, provider, memory)
        if isinstance(listed, TransientError):
            p.listing_error = listed
        else:
            p.machines = {m.tags.get(TAG_NODE, m.machine_id): m for m in listed}
            p.memory = health.listed(p.memory)
        return p

    @property
    def group_uuid(self) -> str:
        return self.snap.group.uuid

    @property
    def zones(self) -> tuple[str, ...]:
        """The zones the group spreads over (none: the cloud chooses)."""
        return self.snap.group.spec.availability_zones

    def open_zones(self) -> list[str]:
        """The group's zones not blocked by "no valid host" now."""
        return health.open_zones(self.zones, self.memory, self.now)

    def set(self, node: Node, **changes: Any) -> Node:
        """Change a node in the view and queue the same change for the database."""
        new = replace(node, **changes, updated_at=self.now)
        self.nodes[node.uuid] = new
        row = self._updates.setdefault(node.id, {"id": node.id})
        for k, v in changes.items():
            row[k] = v.value if isinstance(v, NodeState) else v
        row["updated_at"] = self.now
        return new

    def drained(self, node: Node) -> bool:
        """Whether `node`'s machine may go now: its Node cordoned and its pods evicted,
        or the drain timeout passed (then an event says what was left), or there is
        nothing to drain (no Kubernetes read, a node never ready, a machine in
        ERROR or being deleted, no Node object). Decided once a pass per node."""
        done = self._drain_steps.get(node.uuid)
        if done is not None:
            return done
        m = self.machines.get(node.uuid)
        step = Drain.SKIP
        alive = m is not None and m.state not in (MachineState.ERROR, MachineState.DELETING)
        if self.kube is not None and node.ready_at is not None and node.name and alive:
            started = self.memory.drains.get(node.uuid)
            step = kubenodes.drain_step(
                self.kube, node.name, started, self.now, self.drain_timeout_s
            )
        done = self._drain(node, step)
        self._drain_steps[node.uuid] = done
        return done

    def _drain(self, node: Node, step: Drain) -> bool:
        name, timeout = node.name, self.drain_timeout_s
        if step is Drain.SKIP:
            return True
        if step in (Drain.START, Drain.NO_WAIT):
            self.kube_ops.append(kubenodes.Op(kubenodes.CORDON_OP, name))
        if step is not Drain.DONE and step is not Drain.GIVE_UP:
            self.kube_ops.append(kubenodes.Op(kubenodes.EVICT_OP, name))
        if step is Drain.NO_WAIT:
            self.event(
                "Drained",
                f"node {name} is not Ready in Kubernetes, so its kubelet cannot act on "
                "evictions: cordoned and its pods evicted without waiting",
                node=node.uuid,
            )
            return True
        if step is Drain.START:
            self.memory = health.drain_started(self.memory, node.uuid, self.now)
            self.event(
                "Draining",
                f"draining node {name} (cordon, evict its pods) before its machine goes; "
                f"at most {timeout:g} s",
                node=node.uuid,
            )
        if step in (Drain.START, Drain.WAIT):
            self.progress = True
            self.look_again(self.now + timedelta(seconds=pacing.DRAIN_POLL_S))
            return False
        if step is Drain.DONE:
            self.event("Drained", f"node {name} drained: no pod left to evict", node=node.uuid)
        else:
            self.event(
                "DrainTimedOut",
                f"drain of node {name} did not finish in {timeout:g} s "
                f"({kubenodes.left_over(self.kube, name)}); removing it anyway",
                warning=True,
                node=node.uuid,
            )
        return True

    def drop(self, node: Node) -> None:
        """Forget a node row (its machine is gone); its Node object goes too."""
        if self.kube is not None and node.name in self.kube.nodes:
            self.kube_ops.append(kubenodes.Op(kubenodes.DELETE_OP, node.name))
        self.nodes.pop(node.uuid, None)
        self._updates.pop(node.id, None)
        self.w.delete_ids.append(node.id)

    def deleted(self, node: Node) -> None:
        """A node whose machine was being deleted is gone: the time the delete took
        (since the node was marked DELETING, as far as this pass can tell) teaches the
        group's delete time (conductor/pacing.py), and the row goes."""
        if node.state is NodeState.DELETING and node.updated_at is not None:
            took = (self.now - node.updated_at).total_seconds()
            self.memory = replace(self.memory, delete_s=pacing.learned(self.memory.delete_s, took))
            self.deletes_done.append(took)
        self.drop(node)

    def flush_updates(self) -> None:
        """Move queued node changes into the write."""
        self.w.updates.extend(self._updates.values())
        self._updates.clear()

    def event(
        self, reason: str, message: str, *, warning: bool = False, node: str | None = None
    ) -> None:
        self.w.events.append(
            writes.EventIn(
                reason, message, "Warning" if warning else "Normal", self.snap.group.uuid, node
            )
        )

    def retire(self, node: Node) -> None:
        """Mark a node for deletion: its machine is deleted, then its row. A node
        Kubernetes runs on is drained first: it stays (marked `to_delete`, so the
        next passes go on with it) until `drained` lets it go."""
        if node.uuid in self.to_ensure:
            self.to_ensure.remove(node.uuid)
        m = self.machines.get(node.uuid)
        if m is None:
            self.drop(node)  # never created (or already gone): nothing to delete
            return
        if not self.drained(node):
            if not node.to_delete:
                self.set(node, to_delete=True)
            return
        self.set(node, state=NodeState.DELETING)
        if m.state is not MachineState.DELETING:
            self.to_delete.append(node.uuid)
