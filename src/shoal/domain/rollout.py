"""Rolling replacement, as a pure plan: from a node group's nodes (on the group's
revision or not, ready or not), its desired count and its rollout policy, how
many new nodes to add and how many old ones to retire now.

Planned together with scaling, the way Kubernetes rolls a Deployment: at most
`desired + max_surge` nodes exist, at least `desired - max_unavailable` are
ready; only old nodes are ever retired here, so a resize during a rollout never
deletes the new surge nodes. A plan is re-made every pass from what is
observed, so a restart, a resize or a pause changes nothing but the next step.
Masters go one at a time (surge 1, unavailable 0) whatever their policy says.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from shoal.domain.model import RolloutPolicy


class RolloutState(enum.StrEnum):
    """Where a group's rollout stands after a pass (none: no node is behind).

    PAUSED and ABORTED are also the holds a request puts on the group's spec
    (`NodeGroupSpec.rollout_hold`, stored as these plain strings)."""

    ROLLING = "rolling"  # replacing (or moving in place) old nodes, a few at a time
    WAITING = "waiting"  # for the masters, for other groups, or for a node to move
    PAUSED = "paused"  # held by request: nothing moves (resume continues)
    ABORTED = "aborted"  # stopped by request where it was: plain scaling goes on
    STALLED = "stalled"  # a new node failed or was late: stopped itself

    @property
    def holds_group(self) -> bool:
        """Whether the group counts as rolling out: not done, nor to time out."""
        return self in (RolloutState.ROLLING, RolloutState.WAITING, RolloutState.PAUSED)


ONE_AT_A_TIME = RolloutPolicy(max_surge=1, max_unavailable=0)
# How nodes move to a new revision (label `upgrade_strategy`): new machines; the
# same machines reinstalled (the driver's rebuild); or an rpm-ostree rebase of
# each node through its agent (label `ostree_ref`: the ref).
REPLACE, REBUILD, IN_PLACE = "replace", "rebuild", "in-place"
STRATEGIES = (REPLACE, REBUILD, IN_PLACE)


@dataclass(frozen=True)
class Standing:
    """Where a group's rollout stands after a pass's rollout phase: how many live nodes
    are behind the group's revision, the rollout's state (none: no node is behind)
    and what it does or waits for, for a person."""

    behind: int = 0
    state: RolloutState | None = None
    note: str = ""

    @property
    def holds_scaling(self) -> bool:
        """Whether the rollout decides the group's nodes this pass (plain scaling waits):
        anything but no rollout at all, or one aborted."""
        return self.state is not None and self.state is not RolloutState.ABORTED


@dataclass(frozen=True)
class Census:
    """A group's live nodes, counted: on the group's revision or not, ready or not."""

    current: int  # on the group's revision
    current_ready: int
    old: int  # on another revision
    old_ready: int

    @property
    def total(self) -> int:
        return self.current + self.old


@dataclass(frozen=True)
class Step:
    """What to do now: add `create` nodes on the group's revision, retire `retire`
    old nodes (the caller picks which: failed and not-ready ones first)."""

    create: int
    retire: int


def policy_for(policy: RolloutPolicy, master: bool) -> RolloutPolicy:
    """Masters are replaced one at a time; a policy that could never progress (no
    surge and no unavailability) is read as one at a time too."""
    if master or (policy.max_surge <= 0 and policy.max_unavailable <= 0):
        return ONE_AT_A_TIME
    return policy


def step(census: Census, desired: int, policy: RolloutPolicy) -> Step:
    """The next step of a rollout (or of a resize while old nodes remain)."""
    c = census
    floor = max(0, desired - max(0, policy.max_unavailable))  # ready nodes to keep
    # Old nodes not ready cost no availability (the caller retires them first); ready
    # ones may go while at least `floor` nodes stay ready.
    retire = max(0, min(c.old, c.old + c.current_ready - floor))
    after = c.total - retire
    # Add new nodes up to `desired + max_surge` in all, and no more than are missing.
    create = max(0, min(desired + max(0, policy.max_surge) - after, desired - c.current))
    return Step(create=create, retire=retire)


def done(census: Census, desired: int) -> bool:
    """Every node on the group's revision and ready, as many as desired."""
    return census.old == 0 and census.current_ready == census.current == desired
