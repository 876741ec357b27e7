"""The cluster stack: one Heat stack per cluster per heat provider for the cluster-wide
resources whose outputs feed the group stacks (Magnum's design). On a cloud without
Neutron those are Nova server groups: one `OS::Nova::ServerGroup` per placement group
the cluster's members ask for (`MachineSpec.placement_group`, one per node group), and
the output `server_groups` (placement group name -> server group id).

The stack is named from the deployment and the cluster's id and tagged with both, so a
conductor killed at any moment finds it again by name and never makes a second one (a
second create of the name is Heat's 409, retried). What it holds is its parameter
`placement_groups` (name -> policy), read with the stack (outputs unresolved); its ids
are read from the one output (`outputs/server_groups`). A group's new members are sent
with their server group's id (`scheduler_hints`, written into each member's entry, so
a kept member never changes) and the group stack gets the optional parameter
`server_group` when its template declares it.

It is created, or updated with a PATCH that sends the new template, before a group
stack needs it, and deleted by `release_cluster` once the group stacks are gone.
Placement groups asked by several groups at once are sent in one create or update
(`pending`). The plain-value parts (template, what is missing, the hinted update) are
functions below the class.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from shoal.drivers.contract import (
    TAG_CLUSTER,
    BlockedError,
    BlockedKind,
    DriverError,
    MachineSpec,
    PermanentError,
    PlacementGroup,
    PlacementPolicy,
    TransientError,
)
from shoal.drivers.heat import members as mb
from shoal.drivers.heat import templates
from shoal.drivers.heat.cloud import Cloud

OUTPUT = "server_groups"
PARAMETER = "placement_groups"
GROUP_PARAMETER = "server_group"  # the optional parameter of a group template
TAG_STACK = "shoal-stack"
WAIT_S = 60.0  # how long one call waits for the cluster stack to settle
POLL_S = 0.5
REPAIRS = 1  # updates of a failed cluster stack one call makes before it reports it


def stack_name(deployment: str, cluster_id: str) -> str:
    """The cluster's stack: found again by name after a crash, never made twice."""
    return f"shoal-{deployment}-cluster-{cluster_id}"


def is_cluster_stack(deployment: str, name: str) -> bool:
    return name.startswith(f"shoal-{deployment}-cluster-")


class ClusterStacks:
    """The cluster stacks of one heat provider."""

    def __init__(
        self,
        cloud: Cloud,
        deployment: str,
        lock: Callable[[str], threading.Lock],
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cloud = cloud
        self.deployment = deployment
        self._lock = lock  # the driver's lock per stack name
        self._sleep = sleep
        self._clock = clock
        self._pending: dict[str, dict[str, PlacementGroup]] = {}  # stack name -> asked
        self._pending_lock = threading.Lock()
        # stack name -> ((its id, its updated_time), its output): read again once it changed
        self._outputs: dict[str, tuple[tuple[str, str], dict[str, str]]] = {}

    # ------------------------------------------------------------ server groups
    def server_groups(self, cluster_id: str, asked: Mapping[str, PlacementGroup]) -> dict[str, str]:
        """The server group id of each placement group in `asked` (by name), the cluster
        stack created or updated first when it lacks one. Waits at most WAIT_S for the
        stack to settle, then TransientError; its failure is BlockedError (quota) or
        PermanentError with Heat's reason, after one update that tried to repair it."""
        if not asked:
            return {}
        name = stack_name(self.deployment, cluster_id)
        with self._pending_lock:
            self._pending.setdefault(name, {}).update(asked)
        with self._lock(name):
            ids = self._settle(name, cluster_id, asked)
        with self._pending_lock:
            left = {k: v for k, v in self._pending.get(name, {}).items() if k not in ids}
            if left:
                self._pending[name] = left
            else:
                self._pending.pop(name, None)
        return {k: ids[k] for k in asked}

    def _settle(
        self, name: str, cluster_id: str, asked: Mapping[str, PlacementGroup]
    ) -> dict[str, str]:
        deadline = self._clock() + WAIT_S
        repairs = 0
        while True:
            stack = self.cloud.stack(name)
            status = str((stack or {}).get("stack_status") or "")
            if status.startswith("DELETE"):
                raise TransientError(
                    f"the cluster stack {name} is being deleted; its server groups are "
                    "made anew once it is gone"
                )
            if not status.endswith("IN_PROGRESS"):
                held = held_of((stack or {}).get("parameters"))
                with self._pending_lock:
                    wanted = dict(self._pending.get(name, {}))
                wanted.update(asked)
                failed = status.endswith("FAILED")
                if stack is None:
                    self.cloud.create_stack(self._create_body(name, cluster_id, wanted))
                elif missing(held, asked) or failed:
                    if failed and repairs >= REPAIRS:
                        raise failure_of(name, status, str(stack.get("stack_status_reason")))
                    repairs += int(failed)
                    self._patch(name, str(stack["id"]), {**wanted, **held_groups(held)})
                else:
                    ids = self._output(name, stack)
                    if all(ids.get(k) for k in asked):
                        return ids
                    raise TransientError(  # not yet resolvable: asked again
                        f"the cluster stack {name} has no server group id for "
                        + ", ".join(sorted(k for k in asked if not ids.get(k)))
                    )
            if self._clock() >= deadline:
                raise TransientError(
                    f"the cluster stack {name} is still {status or 'being made'} after "
                    f"{WAIT_S:.0f} s; the node group is applied on a later pass"
                )
            self._sleep(POLL_S)

    def _output(self, name: str, stack: Mapping[str, Any]) -> dict[str, str]:
        """The stack's `server_groups` output, read alone; once per version of it."""
        version = (str(stack["id"]), str(stack.get("updated_time") or ""))
        cached = self._outputs.get(name)
        if cached is not None and cached[0] == version:
            return cached[1]
        raw = self.cloud.output(name, version[0], OUTPUT)
        ids = {str(k): str(v) for k, v in raw.items() if v} if isinstance(raw, dict) else {}
        if isinstance(raw, dict) and len(ids) == len(raw):  # each resolved: kept
            self._outputs[name] = (version, ids)
        return ids

    def _create_body(
        self, name: str, cluster_id: str, groups: Mapping[str, PlacementGroup]
    ) -> dict[str, Any]:
        tags = [
            mb.nova_tag(mb.TAG_DEPLOYMENT, self.deployment),
            mb.nova_tag(TAG_CLUSTER, cluster_id),
            f"{TAG_STACK}=cluster",
        ]
        return {
            "stack_name": name,
            "template": template(groups, self.deployment),
            "parameters": parameters(groups),
            "tags": ",".join(tags),
            "disable_rollback": True,
        }

    def _patch(self, name: str, stack_id: str, groups: Mapping[str, PlacementGroup]) -> None:
        """An update with the new template (its server groups added; those held stay as
        they are, so Heat leaves them alone)."""
        body = {"template": template(groups, self.deployment), "parameters": parameters(groups)}
        path = f"/stacks/{name}/{stack_id}"
        if self.cloud.call("orchestration", "PATCH", path, ok=(202,), json=body) is None:
            raise TransientError(f"the cluster stack {name} went away during its update")

    # ------------------------------------------------------------ release
    def release(self, cluster_id: str) -> None:
        """Delete the cluster's stack once its group stacks are gone (a group stack of
        the cluster no node group holds any more is deleted first). Waits at most
        WAIT_S, then TransientError (the conductor asks again). TransientError only."""
        name = stack_name(self.deployment, cluster_id)
        try:
            with self._lock(name):
                self._outputs.pop(name, None)
                with self._pending_lock:
                    self._pending.pop(name, None)
                self._release(name, cluster_id)
        except TransientError:
            raise
        except DriverError as exc:
            raise TransientError(f"cannot delete the cluster stack {name}: {exc.reason}") from exc

    def _release(self, name: str, cluster_id: str) -> None:
        deadline = self._clock() + WAIT_S
        tags = [
            mb.nova_tag(mb.TAG_DEPLOYMENT, self.deployment),
            mb.nova_tag(TAG_CLUSTER, cluster_id),
        ]
        deletes: dict[str, int] = {}  # stack id -> deletes asked by this call
        while True:
            listed = self.cloud.stacks(tags)
            groups = [
                s
                for s in listed
                if s.get("stack_name") != name and s.get("stack_status") != "DELETE_COMPLETE"
            ]
            mine = self.cloud.stack(name)  # by name too: the listing by tags is not the record
            stacks = [*groups, *([mine] if mine else [])]
            if not stacks:
                return
            waiting = groups or stacks  # the group stacks first, then the cluster stack
            for s in waiting:
                if s.get("stack_status") == "DELETE_IN_PROGRESS":
                    continue
                sid = str(s["id"])
                if deletes.get(sid, 0) > REPAIRS:
                    raise TransientError(
                        f"the stack {s['stack_name']} could not be deleted: "
                        f"{s.get('stack_status_reason') or s.get('stack_status')}; asking again"
                    )
                deletes[sid] = deletes.get(sid, 0) + 1
                self.cloud.delete_stack(str(s["stack_name"]), sid)
            if self._clock() >= deadline:
                what = ", ".join(str(s["stack_name"]) for s in waiting)
                raise TransientError(f"still deleting {what} after {WAIT_S:.0f} s; asking again")
            self._sleep(POLL_S)


# ---------------------------------------------------------------- plain values
def resource_name(group: str) -> str:
    """A placement group's resource in the cluster stack: its name when Heat takes it as
    one, else a digest of it (stable: a held server group is never renamed)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}", group):
        return group
    return "sg-" + hashlib.sha256(group.encode()).hexdigest()[:24]


def template(groups: Mapping[str, PlacementGroup], deployment: str) -> dict[str, Any]:
    """The cluster stack's template: one server group per placement group, named
    `<placement group>@<deployment>` in Nova (as the openstack driver names them)."""
    resources = {
        resource_name(n): {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": f"{n}@{deployment}", "policies": [g.policy.value]},
        }
        for n, g in sorted(groups.items())
    }
    return {
        "heat_template_version": templates.VERSION,
        "description": "a shoal cluster's cluster-wide resources: its Nova server groups",
        "parameters": {
            PARAMETER: {
                "type": "json",
                "default": {},
                "description": "placement group name -> policy: what this stack holds",
            }
        },
        "resources": resources,
        "outputs": {
            OUTPUT: {
                "description": "placement group name -> Nova server group id",
                "value": {n: {"get_resource": resource_name(n)} for n in sorted(groups)},
            }
        },
    }


def parameters(groups: Mapping[str, PlacementGroup]) -> dict[str, Any]:
    return {PARAMETER: json.dumps({n: g.policy.value for n, g in sorted(groups.items())})}


def held_of(params: Mapping[str, Any] | None) -> dict[str, str]:
    """What a cluster stack holds (placement group name -> policy), off its parameters."""
    raw = (params or {}).get(PARAMETER)
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw else raw
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def held_groups(held: Mapping[str, str]) -> dict[str, PlacementGroup]:
    """The held entries as placement groups (a policy shoal no longer knows is kept as
    Heat holds it: its server group is never replaced)."""
    out = {}
    for n, p in held.items():
        try:
            out[n] = PlacementGroup(n, PlacementPolicy(p))
        except ValueError:
            continue
    return out


def missing(held: Mapping[str, str], asked: Mapping[str, PlacementGroup]) -> list[str]:
    """The placement groups asked that the stack does not hold. One held under another
    policy counts as held: a Nova server group's policy cannot change, and its members
    are already placed by it."""
    return sorted(n for n in asked if n not in held)


def failure_of(name: str, status: str, reason: str) -> DriverError:
    """A failed cluster stack as the contract's error, in Heat's words."""
    said = f"the cluster stack {name} is {status}: {reason or 'no reason given'}"
    if "quota" in reason.lower():
        return BlockedError(said, BlockedKind.QUOTA)
    return PermanentError(said)


def asked_by(
    added: Iterable[Mapping[str, Any]], specs: Sequence[MachineSpec]
) -> dict[str, PlacementGroup]:
    """The placement groups of the members an update adds (by name)."""
    by_id = {s.machine_id: s for s in specs}
    out: dict[str, PlacementGroup] = {}
    for e in added:
        spec = by_id.get(str(e.get("id")))
        if spec is not None and spec.placement_group is not None:
            out[spec.placement_group.name] = spec.placement_group
    return out


def hinted(update: mb.Update, specs: Sequence[MachineSpec], ids: Mapping[str, str]) -> mb.Update:
    """`update` with each added member's entry carrying its server group's id (which the
    members' template makes its `scheduler_hints`); kept members are left as they are."""
    if not ids:
        return update
    by_id = {s.machine_id: s for s in specs}

    def hint(e: dict[str, Any]) -> dict[str, Any]:
        spec = by_id.get(str(e.get("id")))
        pg = spec.placement_group if spec is not None else None
        if pg is None or pg.name not in ids:
            return e
        return {**e, "server_group": ids[pg.name]}

    added_ids = {e.get("id") for e in update.added}
    members = {i: hint(e) if e.get("id") in added_ids else e for i, e in update.members.items()}
    return replace(update, members=members, added=tuple(hint(e) for e in update.added))


def group_parameter(declared: Iterable[str], added: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The group stack's optional `server_group` parameter (the server group its new
    members join), when its template declares it and the update adds members that
    join one; PermanentError when they ask different ones (shoal asks one per node
    group)."""
    if GROUP_PARAMETER not in set(declared):
        return {}
    joined = sorted({str(e["server_group"]) for e in added if e.get("server_group")})
    if len(joined) > 1:
        raise PermanentError(
            "the members of one node group ask for different placement groups; a heat "
            "group stack has one server group (its `server_group` parameter)"
        )
    return {GROUP_PARAMETER: joined[0]} if joined else {}
