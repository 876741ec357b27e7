"""Addresses of a local provider's machines: one lease file per address under the state
dir (`addresses/<ip>`, holding the machine id), taken with O_EXCL, so two processes never
hold one address; the lowest free address first (deterministic), and an address is free
again only once its machine is deleted. A cluster's API address is held for the cluster
(`cluster:<id>`, its balancer's). The host has the first address of the subnet."""

from __future__ import annotations

import contextlib
import ipaddress
import os
from pathlib import Path

from shoal.drivers.contract import BlockedError, BlockedKind


class Leases:
    def __init__(self, state_dir: Path, subnet: str) -> None:
        self.dir = state_dir / "addresses"
        self.net = ipaddress.ip_network(subnet)
        hosts = list(self.net.hosts())
        self.gateway = str(hosts[0])
        self._pool = [str(a) for a in hosts[1:]]

    @property
    def prefix(self) -> int:
        return self.net.prefixlen

    def held(self) -> dict[str, str]:
        """Address -> machine id, for every lease."""
        out: dict[str, str] = {}
        if self.dir.is_dir():
            for f in self.dir.iterdir():
                with contextlib.suppress(OSError):
                    out[f.name] = f.read_text().strip()
        return out

    def of(self, machine_id: str) -> str | None:
        """The address `machine_id` holds."""
        return next((a for a, h in self.held().items() if h == machine_id), None)

    def take(self, machine_id: str) -> str:
        """The address `machine_id` holds, else the lowest free one, held by it from now
        on (taken before the machine is made when its address is reserved)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        return self.of(machine_id) or self._new(machine_id)

    def reserve(self, cluster_id: str) -> str:
        """Cluster `cluster_id`'s API address (its balancer's): held for the cluster
        until `release_cluster`; no machine takes it."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for address, holder in self.held().items():
            if holder == f"cluster:{cluster_id}":
                return address
        return self._new(f"cluster:{cluster_id}")

    def _new(self, holder: str) -> str:
        for address in self._pool:
            try:
                fd = os.open(self.dir / address, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                continue
            with os.fdopen(fd, "w") as f:
                f.write(holder + "\n")
            return address
        raise BlockedError(
            f"no free address left in {self.net} (every one is held by a machine): delete "
            "machines or give the provider a larger subnet",
            BlockedKind.NO_VALID_HOST,
        )

    def release(self, machine_id: str) -> None:
        """Free the machine's address."""
        for address, holder in self.held().items():
            if holder == machine_id:
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / address).unlink()

    def release_cluster(self, cluster_id: str) -> None:
        for address, holder in self.held().items():
            # (also "cluster:<id> <machine>": a master held it before the balancer)
            if holder.split()[:1] == [f"cluster:{cluster_id}"]:
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / address).unlink()
