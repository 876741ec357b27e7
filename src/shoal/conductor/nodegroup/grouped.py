"""Groups a provider realises whole (a `GroupReportingDriver`: one Heat stack per node
group): the listing that also reports the group, and what the pass keeps of the report.

The rest of the conductor's guarantees hold unchanged for such a group: act.py sends its
whole membership (`apply_group`), so a removed node is exactly the member that goes; the
driver names the group from its uuid, so a restarted conductor finds it instead of making
a second; its members are listed and folded like any machines. Here: the group's id in
the provider becomes the node group's stack_id. Its failure reaches the status through
its members: a member without a server in a failed group is in ERROR with the group's
reason, in the provider's words.
"""

from __future__ import annotations

from collections.abc import Mapping

from shoal.conductor.nodegroup.state import Pass
from shoal.drivers.contract import (
    Driver,
    GroupReport,
    GroupReportingDriver,
    GroupState,
    Machine,
)


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


def record(p: Pass, report: GroupReport | None) -> None:
    """What the pass writes of the group's report: its ref, when new (a group made again
    after it was deleted outside shoal gets a new one)."""
    if report is None or report.state in (GroupState.ABSENT, GroupState.DELETING):
        return
    g = p.snap.group
    if report.ref and report.ref != g.provider_ref:
        p.w.provider_ref = report.ref
        p.event("GroupMade", f"node group {g.name} is {report.ref} in its provider")
