"""Condition types and reason constants, and pure helpers that set them.

Conditions are the truth about a resource (Cluster API style); the Magnum
`status` string is derived from them for display (see `status.py`). Setting a
condition keeps its `last_transition` unless its status actually changes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from shoal.domain.model import Condition

TRUE = "True"
FALSE = "False"
UNKNOWN = "Unknown"

# Condition types.
READY = "Ready"  # node group: nodes ready == desired; cluster: every group ready
CONTROL_PLANE_READY = "ControlPlaneReady"  # cluster: every master node is up
API_ADDRESS_KNOWN = "APIAddressKnown"  # cluster: api_address is set
DELETING = "Deleting"  # a delete is under way
UP_TO_DATE = "UpToDate"  # node group: every node runs the spec's image and flavor
HEALTHY = "Healthy"  # node group: no node unhealthy (a silent agent, a failed machine)
RECONCILE_ERROR = "ReconcileError"  # True while passes fail unexpectedly (a bug, not the cloud)
# node group of a cluster shoal runs Kubernetes on: its API server answered the last read
KUBERNETES_API = "KubernetesAPIReachable"

# Reasons (CamelCase, one word, stable: operators and scripts match on them).
PROVISIONING = "Provisioning"  # creating nodes
PROVIDER_WORKING = "ProviderWorking"  # its provider still works on the group whole
SCALING_DOWN = "ScalingDown"  # removing nodes
REPLACING = "Replacing"  # replacing failed machines
BLOCKED = "Blocked"  # the cloud refuses for now (quota, no valid host)
RETRYING = "Retrying"  # a transient error: retrying with backoff
LISTING_FAILED = "ListingFailed"  # the provider's listing of the group fails: retrying
FAILED = "Failed"  # a permanent error, or the deadline passed
TIMED_OUT = "TimedOut"  # create_timeout passed while blocked or in progress
AS_EXPECTED = "AsExpected"  # everything as desired
UNHEALTHY_NODES = "UnhealthyNodes"  # some nodes are unhealthy (repairs under way or stopped)
WAITING_FOR_MASTERS = "WaitingForMasters"
NODE_GROUPS_NOT_READY = "NodeGroupsNotReady"
DELETION_IN_PROGRESS = "DeletionInProgress"
ROLLOUT_PENDING = "RolloutPending"  # nodes run an older image/flavor than the spec
OPERATING = "Operating"  # an operation (restart, upgrade in place, reboot ...) under way
ROLLING_OUT = "RollingOut"  # replacing nodes on an older revision, a few at a time
ROLLOUT_PAUSED = "RolloutPaused"  # held by request (resume continues)
ROLLOUT_ABORTED = "RolloutAborted"  # stopped by request where it was
ROLLOUT_STALLED = "RolloutStalled"  # new nodes did not become ready: stopped itself
UNEXPECTED_ERROR = "UnexpectedError"  # a pass raised what no phase expected
MACHINES_FAILING = "MachinesFailing"  # machines fail to boot: retrying with a growing delay
MAX_UNHEALTHY = "MaxUnhealthyExceeded"  # too many unhealthy nodes: repairs stopped
API_UNREACHABLE = "APIServerUnreachable"  # the cluster's Kubernetes API server did not answer


def get(conds: tuple[Condition, ...], type_: str) -> Condition | None:
    """The condition of `type_`, if present."""
    for c in conds:
        if c.type == type_:
            return c
    return None


def has_reason(conds: tuple[Condition, ...], type_: str, reason: str) -> bool:
    """Whether the condition of `type_` is present with `reason`."""
    c = get(conds, type_)
    return c is not None and c.reason == reason


def is_true(conds: tuple[Condition, ...], type_: str) -> bool:
    """Whether the condition of `type_` is present and True."""
    c = get(conds, type_)
    return c is not None and c.status == TRUE


def set_condition(
    conds: tuple[Condition, ...],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: datetime,
) -> tuple[Condition, ...]:
    """Return `conds` with `type_` set; `last_transition` moves only when status changes."""
    old = get(conds, type_)
    if old is None:
        new = Condition(type_, status, reason, message, now)
        return (*conds, new)
    transition = old.last_transition if old.status == status else now
    new = replace(old, status=status, reason=reason, message=message, last_transition=transition)
    return tuple(new if c.type == type_ else c for c in conds)


def set_true(
    conds: tuple[Condition, ...], type_: str, reason: str, message: str, now: datetime
) -> tuple[Condition, ...]:
    """Set `type_` True."""
    return set_condition(conds, type_, TRUE, reason, message, now)


def set_false(
    conds: tuple[Condition, ...], type_: str, reason: str, message: str, now: datetime
) -> tuple[Condition, ...]:
    """Set `type_` False."""
    return set_condition(conds, type_, FALSE, reason, message, now)


def remove(conds: tuple[Condition, ...], type_: str) -> tuple[Condition, ...]:
    """Return `conds` without `type_`."""
    return tuple(c for c in conds if c.type != type_)


def health_status(conds: tuple[Condition, ...]) -> tuple[str, dict[str, str]]:
    """Magnum's health_status and health_status_reason of a node group, from its
    Healthy condition (UNKNOWN before the conductor has judged it)."""
    h = get(conds, HEALTHY)
    if h is None:
        return "UNKNOWN", {}
    return ("HEALTHY" if h.status == TRUE else "UNHEALTHY"), (
        {"nodes": h.message} if h.message else {}
    )
