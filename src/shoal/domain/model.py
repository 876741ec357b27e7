"""The resources as plain, immutable values: what the repository returns, what
services and the conductor reason about, what the API serializes.

Specs are *desired* configuration; the resource objects add identity and
observed status. Mutable-looking dict fields are never mutated in place:
build a new value with `dataclasses.replace`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

ROLE_MASTER = "master"
ROLE_WORKER = "worker"
ROLE_VIRT = "virt"  # hosts that carry VMs other groups' nodes run on (domain/virt.py)

DEFAULT_MASTER_GROUP = "default-master"
DEFAULT_WORKER_GROUP = "default-worker"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class DeletionPolicy(enum.StrEnum):
    """Which nodes go first on an unnamed scale-down (after failed and not-ready ones)."""

    NEWEST = "newest"
    OLDEST = "oldest"
    AZ_BALANCED = "az-balanced"


class NodeState(enum.StrEnum):
    """Life of one node row. PENDING = intent written, provider not yet asked."""

    PENDING = "PENDING"
    BUILDING = "BUILDING"
    ACTIVE = "ACTIVE"
    ERROR = "ERROR"
    DELETING = "DELETING"


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "value": self.value, "effect": self.effect}


@dataclass(frozen=True)
class RolloutPolicy:
    """How a node group replaces nodes on an image/flavor/version change."""

    max_surge: int = 1
    max_unavailable: int = 0
    # A new node not ready this long after it was made stops the rollout (old nodes kept).
    progress_deadline_s: int = 600


@dataclass(frozen=True)
class HealthPolicy:
    """When a node counts as failed, and when to stop repairing (circuit breaker)."""

    startup_timeout_s: int = 1800
    unhealthy_timeout_s: int = 300
    max_unhealthy_percent: int = 40


@dataclass(frozen=True)
class NodeGroupSpec:
    """Desired configuration of a node group; also the body of a NodeGroupTemplate."""

    role: str = ROLE_WORKER
    flavor_id: str | None = None
    image_id: str | None = None
    docker_volume_size: int | None = None
    availability_zones: tuple[str, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    node_count: int = 1
    min_node_count: int = 0
    max_node_count: int | None = None
    deletion_policy: DeletionPolicy = DeletionPolicy.NEWEST
    rollout: RolloutPolicy = field(default_factory=RolloutPolicy)
    health: HealthPolicy = field(default_factory=HealthPolicy)
    merge_labels: bool = False
    coe_version: str | None = None
    vms: tuple[dict[str, Any], ...] = ()  # role "virt": its VM slots (domain/virt.py)
    vm_template: str | None = None  # role "virt": its VMs' domain XML template
    provider: str | None = None  # the provider its machines live in (fixed at creation)
    networks: tuple[str, ...] = ()  # default: the cluster's fixed_network
    security_groups: tuple[str, ...] = ()
    # How its machines are spread over hosts: None = anti-affinity for masters and
    # soft-anti-affinity for workers; "none" = no placement group.
    placement_policy: str | None = None
    boot_volume_size: int | None = None  # GB; default: the label boot_volume_size
    provider_options: dict[str, str] = field(default_factory=dict)  # the driver checks them
    # A rollout held by request: "paused" (resume continues it) or "aborted" (stopped
    # where it is; an upgrade to the previous template rolls back). None: rolling.
    rollout_hold: str | None = None


@dataclass(frozen=True)
class ProviderNames:
    """The providers a deployment names, and its default (what services check
    a requested provider against)."""

    names: tuple[str, ...] = ("sim",)
    default: str = "sim"


@dataclass(frozen=True)
class Condition:
    """One observed fact about a resource, Cluster API style. status: True|False|Unknown."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: datetime | None = None


@dataclass(frozen=True)
class NodeGroupTemplate:
    id: int
    uuid: str
    project_id: str
    name: str
    spec: NodeGroupSpec
    cluster_template_id: str | None = None  # uuid of the CT that embeds it, if any
    source_id: str | None = None  # uuid of the node group or NGT it was made from, for display
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class NodeGroupTemplateRef:
    """An entry of a cluster template that references a standalone NGT instead of
    embedding one: a cluster made from the template copies that NGT's spec as it is
    then, with `overrides` (node group attributes, wire form) on top."""

    id: int
    uuid: str
    project_id: str
    name: str
    nodegroup_template_id: str  # uuid of the standalone NGT it references
    overrides: dict[str, Any] = field(default_factory=dict)
    cluster_template_id: str | None = None  # uuid of the CT it belongs to
    created_at: datetime | None = None
    updated_at: datetime | None = None


# One entry of a cluster template's node group templates: embedded, or a reference.
TemplateEntry = NodeGroupTemplate | NodeGroupTemplateRef


@dataclass(frozen=True)
class ClusterTemplate:
    """Magnum attributes live in `attrs` (coe, image_id, flavor_id, labels, …);
    `node_group_templates` are its entries, in order: embedded NGTs and references
    to standalone ones."""

    id: int
    uuid: str
    project_id: str
    user_id: str
    name: str
    attrs: dict[str, Any]
    node_group_templates: tuple[TemplateEntry, ...] = ()
    source_id: str | None = None  # uuid of the cluster or template it was made from, for display
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class NodeGroup:
    id: int
    uuid: str
    cluster_id: str  # cluster uuid
    project_id: str
    name: str
    is_default: bool
    spec: NodeGroupSpec
    generation: int = 1
    observed_generation: int = 0
    status: str = "CREATE_IN_PROGRESS"
    status_reason: str | None = None
    conditions: tuple[Condition, ...] = ()
    deleting: bool = False
    source_id: str | None = None  # NGT or node group it was made from, for display
    version: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    provider_ref: str | None = None  # the provider's id of the group (a Heat stack's)


@dataclass(frozen=True)
class Cluster:
    """`attrs` holds the copied Magnum attributes (coe, image, network, labels, keypair…)."""

    id: int
    uuid: str
    project_id: str
    user_id: str
    name: str
    attrs: dict[str, Any]
    cluster_template_id: str | None = None
    source_id: str | None = None  # cluster it was cloned from, for display
    generation: int = 1
    observed_generation: int = 0
    status: str = "CREATE_IN_PROGRESS"
    status_reason: str | None = None
    health_status: str | None = None
    health_status_reason: dict[str, str] = field(default_factory=dict)
    api_address: str | None = None
    conditions: tuple[Condition, ...] = ()
    deleting: bool = False
    created_at: datetime | None = None
    updated_at: datetime | None = None
    # The providers its node groups were made in (None in it: the default); None: not
    # known (domain/release.py).
    providers: tuple[str | None, ...] | None = None


@dataclass(frozen=True)
class Node:
    id: int
    uuid: str  # also the machine id given to the driver
    name: str
    cluster_id: str
    nodegroup_id: str
    project_id: str
    state: NodeState
    availability_zone: str | None = None
    address: str | None = None
    provider_id: str | None = None
    image_id: str | None = None
    flavor_id: str | None = None
    reason: str | None = None
    to_delete: bool = False
    created_at: datetime | None = None
    ready_at: datetime | None = None
    updated_at: datetime | None = None
    revision: str | None = None  # what it was made from (domain/revision.py)
    # When its provider took its create, or a replacement began (it began to build):
    # its boot is timed from here, not from a wait for the provider's rate limit.
    building_at: datetime | None = None
    agent_seen_at: datetime | None = None  # its agent's last heartbeat
    repair_step: int = 0  # auto-repair: the last rung tried (1 reboot, 2 rebuild)
    repair_at: datetime | None = None
    vm_slot: str | None = None  # the virt host VM it took (domain/virt.py)
    provider_index: str | None = None  # its index in its provider's group (a Heat member)


@dataclass(frozen=True)
class Event:
    id: int
    cluster_id: str
    time: datetime
    type: str  # Normal | Warning
    reason: str
    message: str
    nodegroup_id: str | None = None
    node_id: str | None = None


@dataclass(frozen=True)
class NodeTask:
    """One node's part of an operation."""

    id: int
    uuid: str
    operation_id: str
    node_id: str
    kind: str
    params: dict[str, Any]
    state: str
    output: str | None = None
    exit_code: int | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class Operation:
    """An operation on nodes of one node group (domain/operations.py)."""

    id: int
    uuid: str
    cluster_id: str
    nodegroup_id: str
    kind: str
    params: dict[str, Any]
    nodes: tuple[str, ...]  # target node uuids, in order
    batch_size: int
    state: str
    message: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
