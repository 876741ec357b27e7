"""Nova servers (their JSON, as `GET /servers/detail` gives it) as the contract's
machines: their tags, their metadata, their state.

Every server shoal makes carries shoal's tags twice: as Nova **tags** (`key=value`
strings, which `GET /servers/detail?tags=a,b` matches all of, in one request) and
as **metadata** (the exact values, which the listing returns). A Nova tag holds at
most 60 characters and no ',' or '/': a value that does not fit is tagged by a
digest of it, and the metadata keeps the value itself, which a listing checks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from shoal.drivers import contract
from shoal.drivers.contract import Machine, MachineSpec, MachineState
from shoal.drivers.openstack import errors

Server = Mapping[str, Any]  # one server's JSON

TAG_DEPLOYMENT = "shoal-deployment"
META_IMAGE = "shoal-image"  # the image and flavor as shoal named them
META_FLAVOR = "shoal-flavor"
TAG_KEYS = (
    TAG_DEPLOYMENT,
    contract.TAG_PROJECT,
    contract.TAG_CLUSTER,
    contract.TAG_NODEGROUP,
    contract.TAG_NODE,
    contract.TAG_ROLE,
)
NOVA_TAG_MAX = 60

# Nova statuses of a server on its way (BUILDING in the contract's terms).
BUSY = frozenset(
    {"BUILD", "REBUILD", "REBOOT", "HARD_REBOOT", "RESIZE", "VERIFY_RESIZE", "REVERT_RESIZE"}
    | {"MIGRATING", "PASSWORD"}
)
GONE = frozenset({"DELETED", "SOFT_DELETED"})


def nova_tag(key: str, value: str) -> str:
    """The Nova tag for shoal tag `key` = `value` (a digest when it does not fit)."""
    tag = f"{key}={value}"
    if len(tag) <= NOVA_TAG_MAX and "," not in tag and "/" not in tag:
        return tag
    return f"{key}=#{hashlib.sha256(value.encode()).hexdigest()[:32]}"


def query(deployment: str, tags: Mapping[str, str]) -> str:
    """The `tags` filter of a listing: the deployment's tag and each of `tags`."""
    wanted = [nova_tag(TAG_DEPLOYMENT, deployment)]
    wanted += [nova_tag(k, v) for k, v in sorted(tags.items())]
    return ",".join(wanted)


def labels(deployment: str, spec: MachineSpec) -> tuple[list[str], dict[str, str]]:
    """The Nova tags and the metadata of the server for `spec`."""
    tags = {TAG_DEPLOYMENT: deployment, **spec.tags}
    metadata = {**tags, META_IMAGE: spec.image_id, META_FLAVOR: spec.flavor_id}
    return [nova_tag(k, v) for k, v in tags.items()], metadata


def matches(server: Server, deployment: str, tags: Mapping[str, str]) -> bool:
    """Whether the server's metadata holds exactly the deployment and `tags` (a digest
    tag matched, the values must too)."""
    meta = server.get("metadata") or {}
    if meta.get(TAG_DEPLOYMENT) != deployment:
        return False
    return all(meta.get(k) == v for k, v in tags.items())


def machine_id_of(server: Server) -> str | None:
    node = (server.get("metadata") or {}).get(contract.TAG_NODE)
    return str(node) if node else None


def machine(server: Server) -> Machine:
    """The contract's view of a server shoal made."""
    meta: Mapping[str, str] = server.get("metadata") or {}
    state, fault = state_of(server)
    kind = None
    if state is MachineState.ERROR and server.get("fault"):
        kind = errors.fault_kind(server["fault"].get("code"), fault)
    image = server.get("image") or {}  # "" when it boots from a volume
    flavor = server.get("flavor") or {}
    return Machine(
        machine_id=meta[contract.TAG_NODE],
        name=str(server.get("name", "")),
        state=state,
        tags={k: meta[k] for k in TAG_KEYS if k in meta},
        availability_zone=server.get("OS-EXT-AZ:availability_zone") or None,
        address=address(server.get("addresses")),
        provider_id=str(server["id"]),
        fault=fault,
        image_id=meta.get(META_IMAGE) or (image.get("id") if isinstance(image, dict) else None),
        flavor_id=meta.get(META_FLAVOR) or flavor.get("original_name") or flavor.get("id"),
        fault_kind=kind,
    )


def state_of(server: Server) -> tuple[MachineState, str | None]:
    """The contract's state of a server, and why it is in ERROR (Nova's fault)."""
    status = str(server.get("status") or "BUILD").upper()
    if server.get("OS-EXT-STS:task_state") == "deleting" or status in GONE:
        return MachineState.DELETING, None
    if status == "ACTIVE":
        return MachineState.ACTIVE, None
    if status in BUSY:
        return MachineState.BUILDING, None
    if status == "ERROR":
        fault = server.get("fault") or {}
        message = str(fault.get("message") or fault.get("details") or "")
        return MachineState.ERROR, (message or "Nova reports the server in ERROR")
    # SHUTOFF, SUSPENDED, PAUSED, SHELVED, RESCUE, UNKNOWN (its host does not answer):
    # the server exists but does not run; the conductor judges it as a failed machine.
    return MachineState.ERROR, f"Nova reports the server {status}"


def address(addresses: Mapping[str, Iterable[Mapping[str, Any]]] | None) -> str | None:
    """The server's address: its first fixed IPv4, else its first IPv4, else any."""
    entries = [a for net in (addresses or {}).values() for a in net]
    for wanted in (
        lambda a: a.get("version") == 4 and a.get("OS-EXT-IPS:type", "fixed") == "fixed",
        lambda a: a.get("version") == 4,
        lambda a: True,
    ):
        for a in entries:
            if wanted(a) and a.get("addr"):
                return str(a["addr"])
    return None


def canonical(servers: Iterable[Server]) -> tuple[Server, list[Server]]:
    """Of the servers that carry one node's tag (more than one only after a create
    whose answer was lost raced its retry), the one kept and the others: the oldest
    not being deleted (ids break ties, so every process keeps the same one)."""

    def order(s: Server) -> tuple[bool, str, str]:
        deleting = state_of(s)[0] is MachineState.DELETING
        return (deleting, str(s.get("created") or "~"), str(s["id"]))

    ordered = sorted(servers, key=order)
    return ordered[0], ordered[1:]
