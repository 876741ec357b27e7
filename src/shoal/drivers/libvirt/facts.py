"""What shoal knows about one domain, read from its XML, and the metadata it writes.

shoal's metadata is one element in its own namespace inside `<metadata>`: the
machine's tags (project, cluster, node group, node), its flavor, image, host,
placement group, when it was made, and the fault that stopped it, if any. A domain
without that element is not shoal's: it is listed by no one, but it still takes room
on its host while it runs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from shoal.drivers.contract import BlockedKind

XMLNS = "https://shoal.dev/xmlns/1"
PREFIX = "shoal"
_NS = {"s": XMLNS}


@dataclass(frozen=True)
class Meta:
    """shoal's metadata on a domain."""

    tags: dict[str, str]
    flavor: str
    image: str
    host: str
    created: float
    placement_group: str = ""
    fault: str = ""
    fault_kind: BlockedKind | None = None
    role: str = ""
    user_data: str = ""  # kept for a rebuild, which renders the domain again
    scope: str = ""  # the deployment's scope (LibvirtSettings.scope)

    def xml(self, *, namespaced: bool = True) -> str:
        """The metadata element: prefixed and with its namespace for a domain's XML, or
        bare for `setMetadata` (libvirt puts it in the namespace itself)."""
        p = f"{PREFIX}:" if namespaced else ""
        ns = f" xmlns:{PREFIX}={quoteattr(XMLNS)}" if namespaced else ""
        parts = [f"<{p}machine{ns} version='1'>"]
        for key, value in sorted(self.tags.items()):
            parts.append(f"<{p}tag key={quoteattr(key)}>{escape(value)}</{p}tag>")
        for tag, value in (
            ("flavor", self.flavor),
            ("image", self.image),
            ("host", self.host),
            ("created", repr(self.created)),
            ("placement-group", self.placement_group),
            ("role", self.role),
            ("user-data", self.user_data),
            ("scope", self.scope),
        ):
            parts.append(f"<{p}{tag}>{escape(value)}</{p}{tag}>")
        if self.fault:
            kind = quoteattr(self.fault_kind.value if self.fault_kind else "")
            parts.append(f"<{p}fault kind={kind}>{escape(self.fault)}</{p}fault>")
        parts.append(f"</{p}machine>")
        return "".join(parts)


@dataclass(frozen=True)
class Facts:
    """One domain as its XML describes it (its state comes from the listing)."""

    uuid: str
    name: str
    vcpus: int
    memory_mib: int
    macs: tuple[str, ...] = ()
    meta: Meta | None = None  # None: not shoal's
    disks: tuple[str, ...] = field(default=())


def parse(xml: str) -> Facts:
    """The facts of a domain from its XML (`XMLDesc`)."""
    root = ET.fromstring(xml)
    memory = root.find("memory")
    kib = int(memory.text or 0) if memory is not None else 0
    unit = (memory.get("unit") if memory is not None else None) or "KiB"
    mib = _to_mib(kib, unit)
    vcpu = root.findtext("vcpu") or "1"
    macs = tuple((m.get("address") or "").lower() for m in root.findall("devices/interface/mac"))
    disks = tuple(s.get("file") or "" for s in root.findall("devices/disk/source") if s.get("file"))
    return Facts(
        uuid=(root.findtext("uuid") or "").lower(),
        name=root.findtext("name") or "",
        vcpus=int(vcpu.strip() or 1),
        memory_mib=mib,
        macs=macs,
        meta=_meta(root.find(f"metadata/{{{XMLNS}}}machine")),
        disks=disks,
    )


_UNITS = {"b": 1 / 2**20, "bytes": 1 / 2**20, "k": 1 / 1024, "kib": 1 / 1024, "m": 1,
          "mib": 1, "g": 1024, "gib": 1024, "kb": 1000 / 2**20, "mb": 1e6 / 2**20,
          "gb": 1e9 / 2**20}  # fmt: skip


def _to_mib(value: int, unit: str) -> int:
    return int(value * _UNITS.get(unit.lower(), 1 / 1024))


def _meta(el: ET.Element | None) -> Meta | None:
    if el is None:
        return None
    tags = {t.get("key", ""): t.text or "" for t in el.findall("s:tag", _NS)}
    fault = el.find("s:fault", _NS)
    kind = fault.get("kind") if fault is not None else None
    try:
        created = float(el.findtext("s:created", "0", _NS) or 0)
    except ValueError:
        created = 0.0
    return Meta(
        tags=tags,
        flavor=el.findtext("s:flavor", "", _NS),
        image=el.findtext("s:image", "", _NS),
        host=el.findtext("s:host", "", _NS),
        created=created,
        placement_group=el.findtext("s:placement-group", "", _NS),
        fault=(fault.text or "") if fault is not None else "",
        fault_kind=BlockedKind(kind) if kind in {k.value for k in BlockedKind} else None,
        role=el.findtext("s:role", "", _NS),
        user_data=el.findtext("s:user-data", "", _NS),
        scope=el.findtext("s:scope", "", _NS),
    )
