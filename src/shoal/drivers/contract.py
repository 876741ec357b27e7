"""The driver contract: the one small seam between the conductor and a cloud.

Every method is keyed by identifiers that shoal assigns *before* it calls the
driver (the node uuid is the machine id), so that a call repeated after a crash
finds what the first call made instead of making a second machine. Drivers see
plain values from this module, never database rows, and map their SDK's
exceptions into the three error classes below at their own edge.

The full written contract is docs/drivers.md; tests/contract/ checks it against
every driver.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

# Tag keys every machine carries, so that the conductor can find (and adopt or
# sweep) machines by tag after a crash.
TAG_CLUSTER = "shoal-cluster"
TAG_NODEGROUP = "shoal-nodegroup"
TAG_NODE = "shoal-node"
TAG_PROJECT = "shoal-project"
# The node group's role (master, worker, ...): what `shoal orphan adopt` rebuilds a
# group from, with the machines' listed flavor, image and zone.
TAG_ROLE = "shoal-role"


class DriverError(Exception):
    """Base of the three classes a driver may raise; `reason` is for a person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TransientError(DriverError):
    """Retry soon with backoff: 5xx, 429, timeouts, connection resets.

    `retry_after` (seconds, real time) is a hint from the provider, if it gave one.
    """

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after

    def __reduce__(self) -> Any:  # picklable across a process boundary
        return (type(self), (self.reason, self.retry_after))


class BlockedKind(enum.StrEnum):
    """Why the cloud cannot take a machine now (also why a machine failed, in
    `Machine.fault_kind`, when it failed for that reason after its create)."""

    QUOTA = "quota"
    NO_VALID_HOST = "no_valid_host"


class BlockedError(DriverError):
    """The cloud cannot take this now (quota, capacity): keep what exists, wait, retry.

    `az` names the availability zone that is full when the block is local to
    one zone (no valid host), so that the caller may try the next zone.
    """

    def __init__(self, reason: str, kind: BlockedKind, az: str | None = None) -> None:
        super().__init__(reason)
        self.kind = kind
        self.az = az

    def __reduce__(self) -> Any:
        return (type(self), (self.reason, self.kind, self.az))


class PermanentError(DriverError):
    """Retrying the same request will not help (unknown flavor or image, bad spec)."""


# Nova's words for the failures that block (the sim speaks Nova's language too).
_FAULT_WORDS = (
    ("no valid host", BlockedKind.NO_VALID_HOST),
    ("quota exceeded", BlockedKind.QUOTA),
)


def fault_kind_of(fault: str | None) -> BlockedKind | None:
    """The blocking reason a cloud's fault message names (Nova: "No valid host was
    found", "Quota exceeded for instances"), or None for any other failure."""
    text = (fault or "").lower()
    return next((kind for words, kind in _FAULT_WORDS if words in text), None)


class MachineState(enum.StrEnum):
    BUILDING = "BUILDING"
    ACTIVE = "ACTIVE"
    ERROR = "ERROR"
    DELETING = "DELETING"


class Feature(enum.StrEnum):
    """Optional capabilities a driver declares in `Capabilities.features`."""

    REBOOT = "reboot"  # reboot_machine works
    REBUILD = "rebuild"  # rebuild_machine works
    PER_GROUP = "per-group"  # realises a whole node group at once (GroupDriver)
    HOSTED = "hosted"  # machines are VMs on the virt hosts of each cluster (VirtHosts)
    RELEASE = "release"  # makes things per cluster besides machines (ReleasingDriver)
    # its release may start beside its groups' deletion (EarlyReleasingDriver)
    RELEASE_EARLY = "release-early"
    # reserve_address is a load balancer in front of every master (ApiLoadBalancingDriver)
    API_LOAD_BALANCER = "api-load-balancer"


class PlacementPolicy(enum.StrEnum):
    """How the machines of one placement group are spread over hosts."""

    ANTI_AFFINITY = "anti-affinity"  # never two on one host (masters)
    SOFT_ANTI_AFFINITY = "soft-anti-affinity"  # apart when possible (workers)
    AFFINITY = "affinity"
    SOFT_AFFINITY = "soft-affinity"


@dataclass(frozen=True)
class PlacementGroup:
    """A set of machines placed together or apart (a Nova server group); shoal makes
    one per node group, named after it."""

    name: str
    policy: PlacementPolicy


@dataclass(frozen=True)
class VirtHost:
    """A ready host of a cluster's virt groups, as a hosted driver reaches it: its name
    (the zone its VMs are in), its machine in its own provider, its address."""

    name: str
    machine_id: str
    provider: str
    address: str | None = None


@dataclass(frozen=True)
class VmShape:
    """A VM on a virt host (a hosted driver's machine): its size and its template
    variables come from the slot it takes (`domain/virt.py`), not from a flavor."""

    slot: str  # the slot's key
    vcpus: int
    ram_mib: int
    disk_gb: int = 0
    variables: Mapping[str, Any] = field(default_factory=dict)  # the vms entry
    template: str | None = None  # its virt group's domain template (None: the driver's)
    host: VirtHost | None = None  # the virt host it goes on (its zone), as a value


@dataclass(frozen=True)
class MachineSpec:
    """What the conductor asks a driver to make. `machine_id` is shoal's node uuid.

    `user_data` is the bootstrap data shoal rendered for this node (cloud-init);
    `options` are provider-specific settings of the node group, which the driver
    checks in `validate` (an unknown option is a problem to report)."""

    machine_id: str
    name: str
    project_id: str
    cluster_id: str
    nodegroup_id: str
    role: str
    flavor_id: str
    image_id: str
    availability_zone: str | None = None
    docker_volume_size: int | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    user_data: str | None = None
    keypair: str | None = None
    networks: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    placement_group: PlacementGroup | None = None
    boot_volume_size: int | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    vm: VmShape | None = None  # a hosted driver's machine: the VM slot it takes

    @property
    def tags(self) -> dict[str, str]:
        return {
            TAG_PROJECT: self.project_id,
            TAG_CLUSTER: self.cluster_id,
            TAG_NODEGROUP: self.nodegroup_id,
            TAG_NODE: self.machine_id,
            TAG_ROLE: self.role,
        }


@dataclass(frozen=True)
class Machine:
    """What a driver reports about one machine it holds."""

    machine_id: str
    name: str
    state: MachineState
    tags: Mapping[str, str]
    availability_zone: str | None = None
    address: str | None = None
    provider_id: str | None = None
    fault: str | None = None  # why it is in ERROR, as the cloud said it
    image_id: str | None = None
    flavor_id: str | None = None
    # Why it failed, when the cloud failed it for a reason that blocks (no valid
    # host in its zone, a quota): the conductor then treats it as a refusal of its
    # create (another zone, or waiting), not as a broken machine to replace.
    fault_kind: BlockedKind | None = None
    # Its index in its provider's group, for a driver that realises whole groups (a
    # Heat member index: its name in the group's `kube_minions`, its key in `refs_map`).
    provider_index: str | None = None
    # When it became ready, as its provider says (Nova's launched_at; None: it does not
    # say): the conductor times its boot from its create to then, not to the listing
    # that first saw it ready (a look's lag would add to every boot it learns).
    ready_at: datetime | None = None


@dataclass(frozen=True)
class FlavorSize:
    """What a flavor gives a machine, as its provider says (a virt host's capacity)."""

    vcpus: int
    ram_mb: int
    disk_gb: int = 0


@dataclass(frozen=True)
class Capabilities:
    """What a driver can do, so the conductor and `validate` need no guessing.

    `zones_are_targets`: each availability zone is one target (a libvirt host),
    so the conductor limits concurrent calls per zone as well as per provider.
    `restart_seconds`: the longest a reboot or rebuild takes, in real seconds, when
    the driver knows it (the sim, from its time scale); a machine ready again that
    long after the call counts as restarted even if no listing saw it down. None:
    the conductor's default (a minute).
    `pace_seconds`: the driver's typical pace, in real seconds: how often, at most,
    the conductor looks at a group whose machines are booting or being deleted
    before it has learned how long they take there (conductor/pacing.py: a floor
    under what it learns). None: the conductor's default.
    `option_choices`: the provider options whose value must be one of a closed set,
    with that set (the heat driver's `template`: the operator's templates by name);
    the API refuses another value once a conductor has recorded them.
    `option_labels`: labels the driver reads as provider options (label -> option): a
    group's label sets the option when its own `provider_options` do not, so a
    cluster template's label chooses it for its clusters' groups
    (domain/provider_options.py)."""

    availability_zones: Sequence[str] = ()
    flavors: Sequence[str] = ()
    # The sizes of the flavors the driver knows them of (name -> size); a flavor left
    # out has an unknown size.
    flavor_sizes: Mapping[str, FlavorSize] = field(default_factory=dict)
    images: Sequence[str] = ()
    features: frozenset[Feature] = frozenset()
    zones_are_targets: bool = False
    restart_seconds: float | None = None
    pace_seconds: float | None = None
    option_choices: Mapping[str, Sequence[str]] = field(default_factory=dict)
    option_labels: Mapping[str, str] = field(default_factory=dict)

    def has(self, feature: Feature) -> bool:
        return feature in self.features


@dataclass(frozen=True)
class GroupRequest:
    """What a per-group driver is asked to realise: a node group with exactly these
    members (each with its machine id and spec), and the group's provider options
    (its members' `options`, given even when it has no member)."""

    nodegroup_id: str
    project_id: str
    cluster_id: str
    members: tuple[MachineSpec, ...]
    options: Mapping[str, str] = field(default_factory=dict)


class GroupState(enum.StrEnum):
    """How a per-group driver's group itself stands (a Heat stack's status)."""

    ABSENT = "absent"  # not made yet, or gone
    IN_PROGRESS = "in_progress"  # being made or changed
    COMPLETE = "complete"
    FAILED = "failed"  # its last change failed: `GroupReport.reason` says why
    DELETING = "deleting"


@dataclass(frozen=True)
class GroupReport:
    """What a per-group driver says of a group beside its members: the provider's id of
    it (`ref`: a Heat stack's id, what Magnum's API calls the node group's stack_id), its
    state, and why it failed, in the provider's words."""

    ref: str | None
    state: GroupState
    reason: str | None = None


@dataclass(frozen=True)
class Delegation:
    """What a cluster's machines are made with instead of the provider's own identity:
    a Keystone trust from the user who created the cluster, in that user's project
    (`kind` "keystone-trust"; `values`: trust_id, project_id, trustor_user_id)."""

    kind: str
    values: Mapping[str, str]


class Delegations(Protocol):
    """The conductor's store of clusters' delegations, handed to drivers that act in
    their users' projects (the OpenStack driver with Keystone authentication)."""

    def of(self, cluster_id: str) -> Delegation | None:
        """The cluster's delegation, or None (the provider's own identity serves it)."""
        ...


@runtime_checkable
class Driver(Protocol):
    """A cloud (or host) that runs machines for shoal."""

    name: str

    def capabilities(self) -> Capabilities:
        """Static facts about the provider. No remote I/O beyond a cached lookup."""
        ...

    def check(self) -> Capabilities:
        """Look at the provider now (remote I/O): refresh what `capabilities` and
        `validate` use, and return it. Raises TransientError, with the reason, when
        the provider cannot be reached or refuses shoal's credentials."""
        ...

    def validate(self, spec: MachineSpec) -> list[str]:
        """Problems with `spec` a person can fix (unknown flavor, AZ …); [] if fine.

        Cheap: no remote I/O, never raises DriverError.
        """
        ...

    def ensure_machine(self, spec: MachineSpec) -> Machine:
        """Make sure a machine with `spec.machine_id` exists; return it.

        Idempotent: a second call with the same machine_id returns the existing
        machine and creates nothing. The machine is tagged with `spec.tags`.
        Raises TransientError, BlockedError or PermanentError.
        """
        ...

    def delete_machine(self, machine_id: str) -> None:
        """Make sure the machine is gone or going. Idempotent: unknown id = done.

        Raises TransientError (retry) only; never BlockedError.
        """
        ...

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        """Every machine whose tags include all of `tags`, in one provider call.

        Used once per node group per pass to observe state in bulk. Machines
        being deleted are reported with state DELETING until they are gone.
        Raises TransientError.
        """
        ...

    def reboot_machine(self, machine_id: str) -> None:
        """Reboot in place (feature REBOOT). Idempotent. Raises TransientError or
        PermanentError (PermanentError when the machine does not exist, or the
        driver does not declare the feature)."""
        ...

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Reinstall with `image_id`, keeping id, name and address (feature REBUILD).
        Idempotent. Raises TransientError or PermanentError."""
        ...


@runtime_checkable
class GroupDriver(Driver, Protocol):
    """A driver that realises a whole node group at once (feature PER_GROUP: one Heat
    stack per node group). The conductor never fans out per-machine creates or
    deletes to it: it sends the group's desired members and watches the listing."""

    def apply_group(self, request: GroupRequest) -> None:
        """Make the provider's group hold exactly `request.members` (by machine id):
        create the missing, delete the others. Idempotent; returns once the change
        is accepted (progress shows in `list_machines`). Raises TransientError,
        BlockedError or PermanentError for the group as a whole."""
        ...

    def delete_group(self, nodegroup_id: str) -> None:
        """Delete the provider's group and every machine in it. Idempotent: an unknown
        group is done. Raises TransientError only."""
        ...


@runtime_checkable
class GroupReportingDriver(GroupDriver, Protocol):
    """A per-group driver that also reports each group itself (one Heat stack per node
    group): the conductor lists such a group with `list_group` instead of
    `list_machines`, records the group's `ref` (the node group's stack_id) and says the
    group's failure in the node group's status."""

    def list_group(
        self, nodegroup_id: str, tags: Mapping[str, str]
    ) -> tuple[list[Machine], GroupReport]:
        """The group's machines whose tags include all of `tags` (as `list_machines`)
        and the group's report, in as few provider calls as `list_machines` makes.
        Raises TransientError."""
        ...


@runtime_checkable
class ReleasingDriver(Driver, Protocol):
    """A driver that makes things for a cluster besides its machines, in the cluster's
    own project (Nova server groups, with a trust in its creator's project), and
    removes them when the cluster goes (feature RELEASE): the conductor calls it once
    every machine of the cluster is gone, before the cluster's credential goes, on
    the providers the cluster's node groups were made in (domain/release.py)."""

    def release_cluster(self, project_id: str, cluster_id: str) -> None:
        """Remove what the driver made for the cluster besides machines (what is in
        use by a machine stays). Idempotent. Raises TransientError only."""
        ...


@runtime_checkable
class EarlyReleasingDriver(ReleasingDriver, Protocol):
    """A releasing driver whose cluster-wide things nothing needs while the cluster's
    groups are deleted (Nova server groups: their members may outlive them), so their
    deletion may start beside the groups' (feature RELEASE_EARLY): the conductor calls
    `begin_release` on each pass over a cluster being deleted that still has groups;
    `release_cluster` still follows once every machine is gone, and confirms."""

    def begin_release(self, project_id: str, cluster_id: str) -> None:
        """Start removing what the driver made for the cluster; never waits for it.
        Idempotent and cheap when asked again. Raises TransientError only."""
        ...


@runtime_checkable
class AddressReservingDriver(Driver, Protocol):
    """A driver that can say a cluster's API address before any master exists (the
    Kubernetes bootstrap needs it in every node's configuration): the cluster's first
    master machine then gets that address, unless the driver is also an
    `ApiLoadBalancingDriver`, whose address is its load balancer's."""

    def reserve_address(self, cluster_id: str) -> str:
        """The cluster's API address, held for it from now on. Idempotent; no slow I/O.
        Raises BlockedError when no address is free."""
        ...


@runtime_checkable
class ApiLoadBalancingDriver(AddressReservingDriver, Protocol):
    """A driver whose reserved API address (`reserve_address`) is a load balancer of
    its own in front of every master of the cluster (feature API_LOAD_BALANCER: a
    forwarder, a virtual IP, a cloud load balancer). It sends connections on the API
    port to the cluster's masters that answer, found by their tags, so the address
    outlives any one master. Its masters get addresses of their own, known before
    they are made, since several masters need each other's at render. A provider
    without it runs clusters of one master (the API address is that master's)."""

    def reserve_machine_address(self, machine_id: str) -> str:
        """The address machine `machine_id` will have once made, held for it from now
        on (its `delete_machine` frees it). Idempotent; no slow I/O. Raises
        BlockedError when no address is free."""
        ...


class VirtHosts(Protocol):
    """The ready virt hosts of every cluster, handed at open to the drivers whose
    machines are VMs on them (feature HOSTED). Read from shoal's database each time
    it is asked, so every process (its sweeper too) sees every host; a machine's spec
    also carries its own host (`VmShape.host`)."""

    def ready(self, cluster_id: str | None = None) -> Sequence[VirtHost]:
        """The ready hosts of cluster `cluster_id` (of every cluster when None), by
        name. TransientError when they cannot be read now."""
        ...


class NoVirtHosts:
    """`VirtHosts` of a process that has none to give (tools, tests): no host."""

    def ready(self, cluster_id: str | None = None) -> Sequence[VirtHost]:
        return ()


def vm_host(spec: MachineSpec, hosts: VirtHosts) -> VirtHost:
    """The virt host a hosted driver puts `spec`'s VM on: the one its spec carries,
    else the ready host named by its zone. PermanentError for a spec without a VM
    shape; BlockedError (no valid host) while that host is not ready."""
    if spec.vm is None:
        raise PermanentError(
            "a machine of this provider is a VM of a virt host: the node group needs a "
            "VM slot (vms of a role=virt group of its cluster)"
        )
    host = spec.vm.host
    if host is None or host.name != spec.availability_zone:
        ready = hosts.ready(spec.cluster_id)
        host = next((h for h in ready if h.name == spec.availability_zone), None)
    if host is None:
        raise BlockedError(
            f"No valid host was found: virt host {spec.availability_zone} is not ready",
            BlockedKind.NO_VALID_HOST,
            az=spec.availability_zone,
        )
    return host
