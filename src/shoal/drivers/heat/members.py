"""A group stack's members, on plain values: which index each machine has, what the next
update sends, and the contract's view of a group from its stack and its servers.

Heat's ResourceGroup names its members "0", "1", ...: the first `count` names not on
its blacklist, to which every index named in `removal_policies` is added (and kept:
the default `append` mode). shoal sends every index it ever removed in
`removal_policies`, so the members in use are always the first names off that list,
and a new member takes the next free one: the index shoal records for a machine in
`members` is the one Heat gives it. Removing a machine is removing its index: exactly
that server goes, never another.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from shoal.drivers.contract import (
    TAG_CLUSTER,
    TAG_NODE,
    TAG_NODEGROUP,
    TAG_PROJECT,
    TAG_ROLE,
    Machine,
    MachineSpec,
    MachineState,
    fault_kind_of,
)

TAG_DEPLOYMENT = "shoal-deployment"
TAG_KEYS = (TAG_PROJECT, TAG_CLUSTER, TAG_NODEGROUP, TAG_NODE, TAG_ROLE)
META_IMAGE = "shoal-image"
META_FLAVOR = "shoal-flavor"
NOVA_TAG_MAX = 60


def nova_tag(key: str, value: str) -> str:
    """The Nova tag for shoal tag `key` = `value` (a digest when it does not fit)."""
    tag = f"{key}={value}"
    if len(tag) <= NOVA_TAG_MAX and "," not in tag and "/" not in tag:
        return tag
    return f"{key}#{hashlib.sha256(value.encode()).hexdigest()[:32]}"


def stack_name(deployment: str, nodegroup_id: str) -> str:
    """The group's stack: found again by name after a crash, never made twice."""
    return f"shoal-{deployment}-{nodegroup_id}"


def entry(
    spec: MachineSpec,
    deployment: str,
    networks: tuple[str, ...],
    ids: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A machine's entry in its group's `members` parameter: all its server needs.
    `ids`: `image_id` and `flavor_id`, the cloud's ids of what the spec names, which its
    server is given (templates.members_file)."""
    tags = {TAG_DEPLOYMENT: deployment, **spec.tags}
    # Heat checks a named network through Neutron; none named: Nova's 'auto'.
    nets = [{"network": n} for n in spec.networks or networks] or [{"allocate_network": "auto"}]
    return {
        **(ids or {}),
        "id": spec.machine_id,
        "name": spec.name,
        "image": spec.image_id,
        "flavor": spec.flavor_id,
        "zone": spec.availability_zone,
        "key_name": spec.keypair,
        "user_data": spec.user_data or "",
        "networks": nets,
        "metadata": {**tags, META_IMAGE: spec.image_id, META_FLAVOR: spec.flavor_id},
        "tags": [nova_tag(k, v) for k, v in tags.items()],
    }


@dataclass(frozen=True)
class Group:
    """What a group stack holds now, read off its parameters."""

    members: dict[str, dict[str, Any]]  # index -> entry
    removed: tuple[str, ...]  # every index ever removed (Heat's blacklist)

    @classmethod
    def of(cls, parameters: Mapping[str, Any] | None) -> Group:
        params = parameters or {}
        members = _json(params.get("members"), {})
        policies = _json(params.get("removal_policies"), [])
        removed = [
            str(i) for p in policies if isinstance(p, dict) for i in p.get("resource_list", [])
        ]
        return cls(members if isinstance(members, dict) else {}, tuple(dict.fromkeys(removed)))

    def index_of(self, machine_id: str) -> str | None:
        return next((i for i, e in self.members.items() if e.get("id") == machine_id), None)


def _json(value: Any, default: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value else default
        except ValueError:
            return default
    return default if value is None else value


@dataclass(frozen=True)
class Update:
    """The parameters of the stack's next create or update; None when nothing changes."""

    count: int
    members: dict[str, dict[str, Any]]
    removal_policies: list[dict[str, list[str]]]
    added: tuple[dict[str, Any], ...]
    removed: tuple[str, ...]  # indices removed by this update

    def parameters(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "members": json.dumps(self.members, sort_keys=True),
            "removal_policies": json.dumps(self.removal_policies),
        }


def plan(current: Group, wanted: Iterable[dict[str, Any]]) -> Update | None:
    """The update that makes the group hold exactly `wanted` (entries, by machine id). A
    member kept keeps its entry as it is (no change reaches its server); a machine no
    longer wanted, or wanted with another server (zone, flavor, ...), has its index
    removed; a new one takes the next free index."""
    want = {e["id"]: e for e in wanted}
    kept = {
        i: e
        for i, e in current.members.items()
        if e.get("id") in want and _same_server(e, want[e["id"]])
    }
    gone = tuple(i for i in current.members if i not in kept)
    have = {e["id"] for e in kept.values()}
    added = tuple(e for mid, e in want.items() if mid not in have)
    if not gone and not added:
        return None
    blacklist = set(current.removed) | set(gone)
    members = dict(kept)
    free = (str(n) for n in itertools.count() if str(n) not in blacklist and str(n) not in kept)
    for e, index in zip(added, free, strict=False):
        members[index] = e
    removed_all = [*current.removed, *(i for i in gone if i not in current.removed)]
    policies = [{"resource_list": removed_all}] if removed_all else []
    return Update(len(members), members, policies, added, gone)


def unchanged(current: Group) -> Update:
    """An update that sends the group as it is (for members whose entries change)."""
    policies = [{"resource_list": list(current.removed)}] if current.removed else []
    return Update(len(current.members), dict(current.members), policies, (), ())


# What makes a member's server: a change of any (the conductor placed the node in
# another zone after "no valid host") replaces the member under a new index. Its
# bootstrap data is not among them: rendered anew on each pass, it is sent once. Nor
# is its image: a kept node's image changes by a rebuild (driver.rebuild_machine),
# never by a new server.
SERVER_FIELDS = ("name", "flavor", "zone", "key_name", "networks")


def _same_server(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Whether `want` is the server `have` made. A member sent with no zone was placed by
    Nova: the zone the conductor then records for its node is that one, not a move."""
    return all(
        have.get(f) == want.get(f) or (f == "zone" and have.get(f) is None) for f in SERVER_FIELDS
    )


@dataclass(frozen=True)
class StackView:
    """One group stack as a listing sees it."""

    name: str
    status: str  # Heat's stack_status: CREATE_IN_PROGRESS, UPDATE_FAILED, ...
    reason: str
    group: Group


def machines(
    stacks: Iterable[StackView],
    servers: Iterable[Mapping[str, Any]],
    tags: Mapping[str, str],
) -> list[Machine]:
    """The contract's machines of the stacks' members whose tags include `tags`: a member
    with a server is that server; one without is BUILDING while its stack works and in
    ERROR with the stack's reason once it failed; every member of a stack being deleted
    is DELETING until the stack is gone (ERROR if its delete failed, so that it is asked
    again); a server of this deployment that no stack holds is being removed (DELETING:
    by Heat while its group's stack exists, else by the driver, driver.py).
    Each member's machine carries its index in the stack (`provider_index`). A member
    Heat replaced behind shoal's back (marked unhealthy, then the stack updated) is its
    new server (`current_server`), its stopped old one BUILDING while Heat works
    (`_held`)."""
    by_id: dict[str, Mapping[str, Any]] = {}
    for s in servers:
        mid = (s.get("metadata") or {}).get(TAG_NODE)
        if mid and _matches(s.get("metadata") or {}, tags):
            had = by_id.get(str(mid))
            by_id[str(mid)] = s if had is None else current_server(had, s)
    out: list[Machine] = []
    held: set[str] = set()
    for st in stacks:
        for index, e in st.group.members.items():
            if not _matches(e.get("metadata") or {}, tags):
                continue
            held.add(e["id"])
            server = by_id.get(e["id"])
            if st.status == "DELETE_FAILED":  # asked to delete again: not gone, not going
                fault = st.reason or f"the stack {st.name} could not be deleted"
                m = _from_entry(e, MachineState.ERROR, fault)
            elif st.status.startswith("DELETE"):  # going until the stack is gone
                m = _from_entry(e, MachineState.DELETING)
            elif server is not None:
                m = _machine(server)
                if _held(m, server, st.status):
                    m = _with_state(m, MachineState.BUILDING)
            elif st.status.endswith("FAILED"):
                fault = st.reason or f"the stack {st.name} is {st.status}"
                m = _from_entry(e, MachineState.ERROR, fault)
            else:
                m = _from_entry(e, MachineState.BUILDING)
            out.append(replace(m, provider_index=str(index)))  # its Heat member index
    for mid, server in by_id.items():
        if mid not in held:
            out.append(_with_state(_machine(server), MachineState.DELETING))
    return out


def _held(m: Machine, server: Mapping[str, Any], stack_status: str) -> bool:
    """Whether a member's stopped server is Heat's to settle: while its stack is being
    updated, a server stopped (SHUTOFF, or paused, suspended: down, not in ERROR) may be
    the one Heat replaces (the magnum-auto-healer stops a server, marks its resource
    unhealthy, then updates the stack); it is BUILDING until the update ends, so that
    shoal does not replace it a second time. A server in ERROR is a failure still."""
    status = str(server.get("status") or "").upper()
    return (
        m.state is MachineState.ERROR and status != "ERROR" and stack_status.endswith("IN_PROGRESS")
    )


def current_server(a: Mapping[str, Any], b: Mapping[str, Any]) -> Mapping[str, Any]:
    """Which of two servers of one member is its machine. Heat replaces a member's server
    with one just like it (same name, metadata and tags) when the member was marked
    unhealthy and its stack updated (what the magnum-auto-healer does, docs/drivers.md):
    until the old one is gone both carry the node's tag. The machine is the one not on
    its way out, then the newer (Nova's `created`, then its id, so that the choice does
    not depend on the listing's order): the replacement, never the server Heat deletes."""
    return max(a, b, key=lambda s: (not going(s), str(s.get("created") or ""), str(s.get("id"))))


def going(server: Mapping[str, Any]) -> bool:
    status = str(server.get("status") or "").upper()
    return server.get("OS-EXT-STS:task_state") == "deleting" or status in GONE


def _matches(meta: Mapping[str, Any], tags: Mapping[str, str]) -> bool:
    return all(meta.get(k) == v for k, v in tags.items())


def _from_entry(e: Mapping[str, Any], state: MachineState, fault: str | None = None) -> Machine:
    meta = e.get("metadata") or {}
    return Machine(
        machine_id=e["id"],
        name=str(e.get("name", "")),
        state=state,
        tags={k: meta[k] for k in TAG_KEYS if k in meta},
        availability_zone=e.get("zone"),
        fault=fault,
        image_id=e.get("image"),
        flavor_id=e.get("flavor"),
        fault_kind=fault_kind_of(fault) if fault else None,
    )


def _with_state(m: Machine, state: MachineState) -> Machine:
    return replace(m, state=state, fault=None, fault_kind=None)


def reboot_type(status: str) -> str | None:
    """Nova's reboot for a server in `status`: soft when it runs, hard when it does not
    (Nova refuses a soft reboot of a stopped server or one in ERROR); None when one is
    under way already (not restarted)."""
    status = status.upper()
    if status in ("REBOOT", "HARD_REBOOT"):
        return None
    return "SOFT" if status == "ACTIVE" else "HARD"


GONE = ("DELETED", "SOFT_DELETED")
BUSY = ("BUILD", "REBUILD", "REBOOT", "HARD_REBOOT", "RESIZE", "VERIFY_RESIZE", "MIGRATING")


def _machine(server: Mapping[str, Any]) -> Machine:
    meta: Mapping[str, Any] = server.get("metadata") or {}
    status = str(server.get("status") or "BUILD").upper()
    fault = None
    if going(server):
        state = MachineState.DELETING
    elif status == "ACTIVE":
        state = MachineState.ACTIVE
    elif status in BUSY:
        state = MachineState.BUILDING
    else:
        state = MachineState.ERROR
        f = server.get("fault") or {}
        fault = str(f.get("message") or "") or f"Nova reports the server {status}"
    return Machine(
        machine_id=str(meta[TAG_NODE]),
        name=str(server.get("name", "")),
        state=state,
        tags={k: meta[k] for k in TAG_KEYS if k in meta},
        availability_zone=server.get("OS-EXT-AZ:availability_zone") or None,
        address=_address(server.get("addresses")),
        provider_id=str(server.get("id")),
        fault=fault,
        image_id=meta.get(META_IMAGE),
        flavor_id=meta.get(META_FLAVOR),
        fault_kind=fault_kind_of(fault) if fault else None,
    )


def _address(addresses: Mapping[str, Iterable[Mapping[str, Any]]] | None) -> str | None:
    entries = [a for net in (addresses or {}).values() for a in net]
    for a in entries:
        if a.get("version") == 4 and a.get("addr"):
            return str(a["addr"])
    return next((str(a["addr"]) for a in entries if a.get("addr")), None)
