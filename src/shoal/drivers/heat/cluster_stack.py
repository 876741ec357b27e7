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
stack needs it. Its delete is asked as soon as the cluster is being deleted
(`begin_release`, beside the group stacks': a server group may go before its
members), and `release_cluster` confirms it once the group stacks are gone (asking
again what failed).
Placement groups asked by several groups at once are sent in one create or update
(`pending`). The plain-value parts (template, what is missing, the hinted update) are
functions below the class.

A server group deleted in Nova behind shoal's back stays in the stack (Heat does not
look), and its output still gives the dead id: a new member asking it fails in Nova
(`POST /servers` is HTTP 400 "Instance group <id> could not be found.", which Heat
repeats as the group stack's failure). The group stack's reason is the evidence, kept
by Heat until that stack is updated again: the next apply passes its ids (`gone_of`),
and a placement group whose output is one of them has its resource marked unhealthy
and the stack updated (Heat replaces a resource in CHECK_FAILED), then the new id is
sent. A crash between the two leaves the mark and the evidence: done again. Once the
output gives a new id the evidence names none of it: nothing more is done.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
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
BEGUN_KEPT = 10_000  # cluster stacks whose early delete one process remembers
REPAIRS = 1  # updates of a failed cluster stack one call makes before it reports it
ANCHORS = ("shoal.first", "shoal.last")  # the template's do-nothing resources (`template`)


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
        # stack name -> (its `output_version`, its output): read again once it changed
        self._outputs: dict[str, tuple[tuple[str, str, str], dict[str, str]]] = {}
        # the cluster stacks `begin_release` asked Heat to delete (insertion-ordered)
        self._begun: dict[str, None] = {}

    # ------------------------------------------------------------ server groups
    def server_groups(
        self,
        cluster_id: str,
        asked: Mapping[str, PlacementGroup],
        gone: Collection[str] = (),
    ) -> dict[str, str]:
        """The server group id of each placement group in `asked` (by name), the cluster
        stack created or updated first when it lacks one, or when its output gives an id
        in `gone` (server groups Nova said it does not have: replaced). Waits at most
        WAIT_S for the stack to settle, then TransientError; its failure is BlockedError
        (quota) or PermanentError with Heat's reason, after one update that tried to
        repair it (so is a gone server group one update did not replace)."""
        if not asked and not gone:  # gone and none asked: replaced all the same, so
            return {}  # an update that only removes the refused members loses nothing
        name = stack_name(self.deployment, cluster_id)
        with self._pending_lock:
            self._pending.setdefault(name, {}).update(asked)
        with self._lock(name):
            ids = self._settle(name, cluster_id, asked, frozenset(gone))
        with self._pending_lock:
            left = {k: v for k, v in self._pending.get(name, {}).items() if k not in ids}
            if left:
                self._pending[name] = left
            else:
                self._pending.pop(name, None)
        return {k: ids[k] for k in asked}

    def _settle(
        self,
        name: str,
        cluster_id: str,
        asked: Mapping[str, PlacementGroup],
        gone: frozenset[str],
    ) -> dict[str, str]:
        deadline = self._clock() + WAIT_S
        repairs = 0
        replaced_at: tuple[str, str] | None = None  # the version whose update replaces
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
                if stack is None and not asked:  # only a repair was asked: none to do
                    return {}
                if stack is None:
                    self.cloud.create_stack(self._create_body(name, cluster_id, wanted))
                elif missing(held, asked) or failed:
                    if failed and repairs >= REPAIRS:
                        raise failure_of(name, status, str(stack.get("stack_status_reason")))
                    repairs += int(failed)
                    self._patch(name, str(stack["id"]), {**wanted, **held_groups(held)})
                else:
                    ids = self._output(name, stack)
                    dead = stale(ids, gone)
                    version = (str(stack["id"]), str(stack.get("updated_time") or ""))
                    if dead and version != replaced_at:  # else: Heat has not begun it yet
                        if replaced_at is not None:
                            raise PermanentError(
                                f"the cluster stack {name} still gives the server group "
                                + ", ".join(f"{ids[n]} ({n})" for n in dead)
                                + " that Nova does not have, after an update that marked "
                                "it unhealthy; replace it by hand (openstack stack resource "
                                "mark unhealthy, then stack update --existing)"
                            )
                        replaced_at = version
                        self._replace(name, version[0], dead, ids, {**wanted, **held_groups(held)})
                    elif not dead and all(ids.get(k) for k in asked):
                        return ids
                    elif not dead:
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
        version = output_version(stack)
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

    def _replace(
        self,
        name: str,
        stack_id: str,
        dead: Sequence[str],
        ids: Mapping[str, str],
        groups: Mapping[str, PlacementGroup],
    ) -> None:
        """Each placement group in `dead` has its server group resource marked unhealthy
        (the reason says why, in Heat's events), then the stack is updated: Heat makes a
        new server group for each. Both steps may be repeated after a crash."""
        for n in dead:
            path = f"/stacks/{name}/{stack_id}/resources/{resource_name(n)}"
            body = {"mark_unhealthy": True, "resource_status_reason": unhealthy_reason(n, ids[n])}
            if self.cloud.call("orchestration", "PATCH", path, ok=(200, 204), json=body) is None:
                raise TransientError(f"the cluster stack {name} has no resource for {n}; retrying")
        self._patch(name, stack_id, groups)

    # ------------------------------------------------------------ release
    def begin_release(self, cluster_id: str) -> None:
        """The cluster is being deleted: delete its stack now, beside its group stacks
        (Nova lets a server group go before its members). Asks Heat once per cluster
        and process; `release` confirms. TransientError only."""
        name = stack_name(self.deployment, cluster_id)
        if name in self._begun:
            return
        try:
            with self._lock(name):
                self._forget(name)
                stack = self.cloud.stack(name)
                if stack is not None and stack.get("stack_status") != "DELETE_IN_PROGRESS":
                    self.cloud.delete_stack(name, str(stack["id"]))
        except TransientError:
            raise
        except DriverError as exc:
            raise TransientError(f"cannot delete the cluster stack {name}: {exc.reason}") from exc
        with self._pending_lock:
            self._begun[name] = None
            while len(self._begun) > BEGUN_KEPT:  # bounded: the oldest asks are forgotten
                self._begun.pop(next(iter(self._begun)))

    def _forget(self, name: str) -> None:
        self._outputs.pop(name, None)
        with self._pending_lock:
            self._pending.pop(name, None)

    def release(self, cluster_id: str) -> None:
        """Delete the cluster's stack once its group stacks are gone (a group stack of
        the cluster no node group holds any more is deleted first). Waits at most
        WAIT_S, then TransientError (the conductor asks again). TransientError only."""
        name = stack_name(self.deployment, cluster_id)
        try:
            with self._lock(name):
                self._forget(name)
                self._release(name, cluster_id)
            with self._pending_lock:
                self._begun.pop(name, None)
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
def output_version(stack: Mapping[str, Any]) -> tuple[str, str, str]:
    """What tells one version of a cluster stack's output from another: its id, its
    `updated_time` and the placement groups it holds. Heat gives `updated_time` to the
    second: two updates begun in the same second (the groups of a new cluster asking
    for their server groups at once) share it, and the output of the first, cached
    under it, lacked the second's server group for good."""
    held = json.dumps(held_of(stack.get("parameters")), sort_keys=True)
    return str(stack["id"]), str(stack.get("updated_time") or ""), held


def resource_name(group: str) -> str:
    """A placement group's resource in the cluster stack: its name when Heat takes it as
    one (and it is not an anchor's), else a digest of it (stable: a held server group is
    never renamed)."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}", group) and group not in ANCHORS:
        return group
    return "sg-" + hashlib.sha256(group.encode()).hexdigest()[:24]


def template(groups: Mapping[str, PlacementGroup], deployment: str) -> dict[str, Any]:
    """The cluster stack's template: one server group per placement group, named
    `<placement group>@<deployment>` in Nova (as the openstack driver names them),
    between two anchors that do nothing: every server group depends on the first and
    the last depends on every server group. Heat triggers the leaves of a traversal
    one second apart; the anchors make one leaf of each traversal (the first when
    the stack is made or updated, the last when it is deleted), so that adding a
    group's server group costs one second, not one per server group the stack holds."""
    first, last = ANCHORS
    resources: dict[str, Any] = {first: {"type": "OS::Heat::None"}}
    resources |= {
        resource_name(n): {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": f"{n}@{deployment}", "policies": [g.policy.value]},
            "depends_on": [first],
        }
        for n, g in sorted(groups.items())
    }
    held = sorted(r for r in resources if r != first)
    resources[last] = {"type": "OS::Heat::None", "depends_on": [first, *held]}
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


# Nova's answer to a server that asks for a server group it does not have
# (nova.exception.InstanceGroupNotFound: HTTP 400 to POST /servers), as Heat repeats it.
_GONE = re.compile(r"Instance group ([0-9A-Za-z-]+) could not be found")


def gone_of(reason: str) -> frozenset[str]:
    """The server group ids a stack's failure reason says Nova does not have."""
    return frozenset(_GONE.findall(reason or ""))


def stale(ids: Mapping[str, str], gone: Collection[str]) -> list[str]:
    """The placement groups whose server group (the `server_groups` output) is gone."""
    return sorted(n for n, i in ids.items() if i in gone)


def unhealthy_reason(group: str, server_group: str) -> str:
    """The reason shoal gives Heat when it marks a gone server group's resource."""
    return (
        f"shoal: Nova has no server group {server_group} (placement group {group}): it was "
        "deleted outside shoal; a member asking for it failed. Replaced by the next update"
    )


def explained(reason: str) -> str:
    """A failed group stack's reason, said for the operator when it is a gone server group
    (Heat's own words kept after it)."""
    gone = gone_of(reason)
    if not gone:
        return reason
    return (
        f"the Nova server group {', '.join(sorted(gone))} of this node group's placement "
        "group no longer exists (deleted outside shoal); shoal replaces it in the cluster "
        "stack and sends the failed members again with the new one when it next applies "
        f"the node group. Heat said: {reason}"
    )


def retried(
    members: Mapping[str, Mapping[str, Any]], gone: Collection[str], with_server: Collection[str]
) -> list[str]:
    """The members (machine ids) sent again with a new server group: those whose entry
    asks for a gone one and that have no server (Nova refused them). A member with a
    server keeps its entry: a changed hint would make Heat replace its server."""
    return sorted(
        str(e["id"])
        for e in members.values()
        if e.get("server_group") in gone and e.get("id") not in with_server
    )


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


def hinted(
    update: mb.Update,
    specs: Sequence[MachineSpec],
    ids: Mapping[str, str],
    retry: Collection[str] = (),
) -> mb.Update:
    """`update` with each added member's entry carrying its server group's id (which the
    members' template makes its `scheduler_hints`), and each member in `retry` (machine
    ids, `retried`) too; other kept members are left as they are."""
    if not ids:
        return update
    by_id = {s.machine_id: s for s in specs}

    def hint(e: dict[str, Any]) -> dict[str, Any]:
        spec = by_id.get(str(e.get("id")))
        pg = spec.placement_group if spec is not None else None
        if pg is None or pg.name not in ids:
            return e
        return {**e, "server_group": ids[pg.name]}

    added_ids = {e.get("id") for e in update.added} | set(retry)
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
