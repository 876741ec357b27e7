"""Groups a provider realises whole (a `GroupReportingDriver`: one Heat stack per node
group): the listing that also reports the group, and what the pass keeps of the report.

The rest of the conductor's guarantees hold unchanged for such a group: act.py sends its
whole membership (`apply_group`), so a removed node is exactly the member that goes; the
driver names the group from its uuid, so a restarted conductor finds it instead of making
a second; its members are listed and folded like any machines. Here: the group's id in
the provider becomes the node group's stack_id. Its failure reaches the status through
its members: a member without a server in a failed group is in ERROR with the group's
reason, in the provider's words.

While its provider works on the group (from the pass that sends its membership until the
report says it is done) the group is looked at every `pacing.GROUP_POLL_S` at most
apart: when its members come up is the provider's doing (Heat triggers one member a
second, the new ones among the unchanged), not the boot time the conductor learned from
the group's first machines, which would leave a grown group unobserved that long. While
the provider deletes the group whole, every `pacing.GROUP_DELETE_POLL_S` (each look
reads its stack: a read Heat's engine pays for). Its listing is the same two calls
whatever the group's size. While the provider works on it, the group is not complete,
whatever its members show (outcome rule `provider-working`): an action after it (a
delete) would otherwise cancel the provider's work in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from shoal.conductor import pacing
from shoal.conductor.nodegroup.state import Pass
from shoal.drivers.contract import (
    Driver,
    GroupReport,
    GroupReportingDriver,
    GroupState,
    Machine,
)

WORKING = frozenset({GroupState.IN_PROGRESS, GroupState.DELETING})  # its provider at work


def reports(driver: Driver) -> bool:
    return isinstance(driver, GroupReportingDriver)


def listing(
    driver: Driver, nodegroup_id: str, tags: Mapping[str, str], into: dict[str, GroupReport]
) -> list[Machine]:
    """The group's machines, its report kept in `into` (by node group uuid)."""
    assert isinstance(driver, GroupReportingDriver)
    machines, report = driver.list_group(nodegroup_id, tags)
    into[nodegroup_id] = report
    return machines


def record(p: Pass, report: GroupReport | None, period: float) -> None:
    """What the pass keeps of the group's report: its ref, written when new (a group made
    again after it was deleted outside shoal gets a new one); while the provider works
    on the group, a look again within `period` (at most `pacing.GROUP_POLL_S`; while it
    deletes the group whole, in `pacing.GROUP_DELETE_POLL_S`)."""
    if report is not None and report.state is GroupState.DELETING:
        p.look_again(p.now + timedelta(seconds=pacing.GROUP_DELETE_POLL_S))
    elif report is not None and report.state in WORKING:
        working(p, period)
        # Not complete before its provider is: its members may be there while the stack
        # still works (a removed member's server gone, Heat's update not ended).
        p.provider_working = report.ref or "the group"
    if report is None or report.state in (GroupState.ABSENT, GroupState.DELETING):
        return
    g = p.snap.group
    if report.ref and report.ref != g.provider_ref:
        p.w.provider_ref = report.ref
        p.event("GroupMade", f"node group {g.name} is {report.ref} in its provider")


def working(p: Pass, period: float) -> None:
    """The provider works on the group (it was just sent its membership, or reports
    itself in progress): look again within `period`, at most `pacing.GROUP_POLL_S`."""
    p.look_again(p.now + timedelta(seconds=min(period, pacing.GROUP_POLL_S)))
