"""The local driver's typed settings: a provider's `settings:` in the config file
(`driver: local`), and the images each machine's containerd starts with."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from shoal.options import opt

BRIDGE_NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")


@dataclass(frozen=True)
class PreloadImage:
    """An OCI archive imported into each machine's containerd (namespace k8s.io) once
    containerd runs there, and the further names it is tagged with."""

    archive: str = opt("", "path of an OCI image archive on the shoal host")
    names: tuple[str, ...] = opt((), "further references to tag it with (e.g. the pause image)")


@dataclass(frozen=True)
class LocalSettings:
    """Namespace machines on the shoal host itself (driver `local`): each machine is a
    set of Linux namespaces whose root is the host's file system seen through overlays,
    with its own address on a bridge. Root only; see docs/drivers.md."""

    state_dir: str = opt(
        "/var/lib/shoal/local", "where each machine's directory and the address leases live"
    )
    bridge: str = opt("shoal-local0", "the host bridge machines join (made if missing)")
    subnet: str = opt(
        "10.216.0.0/24", "machines' addresses; the host takes the first on the bridge"
    )
    kubernetes_bin: str = opt(
        "", "directory of Kubernetes programs shown at /usr/local/bin in every machine"
    )
    agent: str = opt(
        "", "the shoal-agent program shown at /usr/local/bin (default: next to shoal's Python)"
    )
    preload: tuple[PreloadImage, ...] = opt((), "images each machine's containerd starts with")
    flavors: tuple[str, ...] = opt(("local",), "flavor names (machines are not sized)")
    images: tuple[str, ...] = opt(("host",), "image names (every machine runs the host's)")
    zone: str = opt("local", "the one availability zone")
    agents: bool = opt(
        True, "its machines run shoal-agent (shown at /usr/local/bin): a silent one is unhealthy"
    )

    def problems(self) -> list[str]:
        """What is wrong with these settings, each as `key: message` (key relative)."""
        out: list[str] = []
        if not BRIDGE_NAME.match(self.bridge):
            out.append(f"bridge: {self.bridge!r} is not an interface name (a-z0-9-, 1-15)")
        try:
            net = ipaddress.ip_network(self.subnet)
            if net.version != 4 or net.num_addresses < 4:
                out.append(f"subnet: {self.subnet} must be an IPv4 range of 4 addresses or more")
        except ValueError as exc:
            out.append(f"subnet: {exc}")
        if not self.state_dir.startswith("/"):
            out.append(f"state_dir: {self.state_dir!r} must be an absolute path")
        for i, p in enumerate(self.preload):
            if not p.archive:
                out.append(f"preload[{i}].archive: a path is required")
        if not self.flavors or not self.images or not self.zone:
            out.append("flavors, images, zone: at least one name each")
        return out
