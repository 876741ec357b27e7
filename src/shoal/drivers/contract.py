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
from typing import Any, Protocol, runtime_checkable

# Tag keys every machine carries, so that the conductor can find (and adopt or
# sweep) machines by tag after a crash.
TAG_CLUSTER = "shoal-cluster"
TAG_NODEGROUP = "shoal-nodegroup"
TAG_NODE = "shoal-node"
TAG_PROJECT = "shoal-project"


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
    QUOTA = "quota"
    NO_VALID_HOST = "no_valid_host"
    RATE_LIMIT = "rate_limit"


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


class MachineState(enum.StrEnum):
    BUILDING = "BUILDING"
    ACTIVE = "ACTIVE"
    ERROR = "ERROR"
    DELETING = "DELETING"


@dataclass(frozen=True)
class MachineSpec:
    """What the conductor asks a driver to make. `machine_id` is shoal's node uuid."""

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

    @property
    def tags(self) -> dict[str, str]:
        return {
            TAG_PROJECT: self.project_id,
            TAG_CLUSTER: self.cluster_id,
            TAG_NODEGROUP: self.nodegroup_id,
            TAG_NODE: self.machine_id,
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
    fault: str | None = None
    image_id: str | None = None
    flavor_id: str | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a driver can do, so the conductor and `validate` need no guessing."""

    availability_zones: Sequence[str] = ()
    flavors: Sequence[str] = ()
    images: Sequence[str] = ()
    max_parallel_creates: int = 16


@runtime_checkable
class Driver(Protocol):
    """A cloud (or host) that runs machines for shoal."""

    name: str

    def capabilities(self) -> Capabilities:
        """Static facts about the provider. No remote I/O beyond a cached lookup."""
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
        """Reboot in place. Idempotent. Raises TransientError or PermanentError
        (PermanentError when the machine does not exist)."""
        ...

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        """Reinstall with `image_id`, keeping id, name and address. Idempotent.
        Raises TransientError or PermanentError."""
        ...
