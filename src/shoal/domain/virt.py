"""Reduced footprint, as pure rules: a node group with role `virt` whose machines are
hosts, its `vms` (one VM slot per entry: a shape, a place and any template
variables), and which slot a node of a group on those hosts takes.

A `vms` entry is a JSON object. Keys shoal reads: `id` (unique in the group;
default its index), `cpu` (vCPUs, default 1), `ram` (GiB, default 1), `disk` (GiB,
0: the image's size), `host` (the host it must go on: the group's host number, 0
being its oldest host, or a host's name; default: any), `nodegroup` (the only
node group that may take it; default: any). Every key, these included, is also
a variable of the domain XML template (`<vcpu>{cpu}</vcpu>`): a key the template
does not use changes nothing, and a variable no key sets renders empty.

A slot becomes a VM when a node takes it: the VM's identity (uuid, name, user
data) is the node's from its first boot, and a slot nobody takes costs nothing
on its host. A node's slot is written with the node's intent row and is unique
in the database, so two conductors cannot give one slot to two nodes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.domain import vmtemplate, xmlrender
from shoal.domain.errors import Invalid
from shoal.domain.model import ROLE_VIRT, NodeGroupSpec

CPU_MAX, RAM_GIB_MAX, DISK_GIB_MAX = 1024, 16384, 1_000_000
TEMPLATE_MAX = 65536  # characters of an uploaded domain template


@dataclass(frozen=True)
class Slot:
    """One VM a virt group offers."""

    group_uuid: str  # the virt group's
    id: str
    cpu: int = 1
    ram_gib: float = 1.0
    disk_gib: int = 0
    host: int | str | None = None  # the group's host number, or a host name
    nodegroup: str | None = None  # the only group that may take it
    attributes: Mapping[str, Any] = field(default_factory=dict)  # the entry as given

    @property
    def key(self) -> str:
        """What a node row records (unique: one node per slot)."""
        return f"{self.group_uuid}:{self.id}"

    @property
    def ram_mib(self) -> int:
        return max(16, math.ceil(self.ram_gib * 1024))


@dataclass(frozen=True)
class Host:
    """A ready host of a virt group: its node, in the group's creation order."""

    node_uuid: str
    name: str
    group_uuid: str
    index: int  # 0 = the group's oldest host
    address: str | None = None


def _number(field_: str, value: Any, lo: float, hi: float, whole: bool) -> Any:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or (whole and not float(value).is_integer()) or not lo <= value <= hi:
        kind = "a whole number" if whole else "a number"
        raise Invalid(f"{field_} must be {kind} from {lo:g} to {hi:g}, not {value!r}", field_)
    return int(value) if whole else float(value)


def check_entries(field_: str, entries: Sequence[Mapping[str, Any]]) -> None:
    """Invalid (naming the entry and key) unless every entry's shoal keys are right and
    ids are unique."""
    seen: set[str] = set()
    for i, e in enumerate(entries):
        where = f"{field_}[{i}]"
        sid = str(e.get("id", i))
        if not sid or len(sid) > 64:
            raise Invalid(f"{where}.id must be 1 to 64 characters", field_)
        if sid in seen:
            raise Invalid(f"{where}.id {sid!r} is used twice: each VM needs its own id", field_)
        seen.add(sid)
        if "cpu" in e:
            _number(f"{where}.cpu", e["cpu"], 1, CPU_MAX, True)
        if "ram" in e:
            _number(f"{where}.ram", e["ram"], 0.015625, RAM_GIB_MAX, False)
        if "disk" in e:
            _number(f"{where}.disk", e["disk"], 0, DISK_GIB_MAX, True)
        host = e.get("host")
        if host is not None and not (
            (isinstance(host, int) and not isinstance(host, bool) and host >= 0)
            or (isinstance(host, str) and host)
        ):
            raise Invalid(f"{where}.host must be a host number (0, 1, ...) or a host name", field_)
        group = e.get("nodegroup")
        if group is not None and not (isinstance(group, str) and group):
            raise Invalid(f"{where}.nodegroup must be a node group's name", field_)


def template_text(field_: str, value: Any) -> str | None:
    """An uploaded domain template: text of at most TEMPLATE_MAX characters (None or
    "": the provider's)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise Invalid(f"{field_} must be the template's text (domain XML)", field_)
    if len(value) > TEMPLATE_MAX:
        raise Invalid(f"{field_} must be at most {TEMPLATE_MAX} characters", field_)
    return value


def check_spec(spec: NodeGroupSpec) -> None:
    """`vms` and `vm_template` belong to role virt; a template must render into a
    domain for every VM of the group, within the allow-list of `xmlallow` (Invalid
    naming the line that failed and why)."""
    if spec.role != ROLE_VIRT:
        if spec.vms:
            raise Invalid("vms is for node groups with role virt (hosts that carry VMs)", "vms")
        if spec.vm_template:
            raise Invalid("vm_template is for node groups with role virt", "vm_template")
        return
    if spec.vm_template is not None:
        try:
            vmtemplate.check(spec.vm_template, spec.vms)
        except xmlrender.TemplateError as exc:
            raise Invalid(
                f"vm_template is not a domain template shoal will define: {exc}", "vm_template"
            ) from exc


def slots(group_uuid: str, entries: Sequence[Mapping[str, Any]]) -> list[Slot]:
    """The slots of a virt group from its (checked) `vms`."""
    out = []
    for i, e in enumerate(entries):
        out.append(
            Slot(
                group_uuid=group_uuid,
                id=str(e.get("id", i)),
                cpu=int(e.get("cpu", 1)),
                ram_gib=float(e.get("ram", 1)),
                disk_gib=int(e.get("disk", 0)),
                host=e.get("host"),
                nodegroup=e.get("nodegroup"),
                attributes=dict(e),
            )
        )
    return out


def host_of(slot: Slot, hosts: Sequence[Host]) -> Host | None | bool:
    """The host a pinned slot must go on (None: not pinned; False: its host is not
    there, or not ready, yet)."""
    if slot.host is None:
        return None
    mine = [h for h in hosts if h.group_uuid == slot.group_uuid]
    for h in mine:
        if h.index == slot.host or h.name == slot.host:
            return h
    return False


@dataclass(frozen=True)
class Choice:
    """A slot and the host its VM goes on."""

    slot: Slot
    host: Host


def choose(
    group_name: str,
    free: Sequence[Slot],
    hosts: Sequence[Host],
    members_on: Mapping[str, int],
    zones: Sequence[str] = (),
) -> Choice | str:
    """The slot a new node of `group_name` takes, or why none can be taken.

    Slots reserved for the group come before open ones; among those, the host holding
    the fewest of the group's nodes (`members_on`: host name -> count), so that a
    group spreads over the hosts (masters one per host once there are three); then
    the slot order. `zones` (the group's availability zones, here host names) limit
    the hosts when given. A pinned slot goes only on its host."""
    if not hosts:
        return "no virt host is ready yet: the group's nodes wait for their hosts"
    usable = [s for s in free if s.nodegroup in (None, group_name)]
    if not usable:
        return (
            f"no free VM for node group {group_name}: every VM of the virt hosts' vms is "
            "taken (or reserved for another group); add entries to vms"
        )
    options = []
    for order, s in enumerate(usable):
        pinned = host_of(s, hosts)
        candidates = [pinned] if isinstance(pinned, Host) else hosts if pinned is None else []
        for h in candidates:
            if zones and h.name not in zones:
                continue
            reserved = 0 if s.nodegroup == group_name else 1
            options.append((reserved, members_on.get(h.name, 0), h.index, order, s, h))
    if not options:
        return (
            f"no free VM for node group {group_name} on a ready host"
            + (f" in {', '.join(zones)}" if zones else "")
            + ": the free ones are pinned to hosts that are not ready"
        )
    best = min(options, key=lambda o: o[:4])
    return Choice(best[4], best[5])


def on_hosts(host_names: Sequence[str], vm_nodes: Mapping[str, str]) -> list[str]:
    """The VM nodes (node name -> its host's name) on any of `host_names`, sorted: what
    deleting those hosts would take down."""
    gone = set(host_names)
    return sorted(n for n, h in vm_nodes.items() if h in gone)
