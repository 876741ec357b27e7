"""Addresses of a local provider's machines: one lease file per address under the state
dir (`addresses/<ip>`, holding the machine id), taken with O_EXCL, so two processes never
hold one address; the lowest free address first (deterministic), and an address is free
again only once its machine is deleted. The host has the first address of the subnet."""

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
        """The address `machine_id` holds (its own, or its cluster's API address)."""
        return next((a for a, h in self.held().items() if h.split()[-1] == machine_id), None)

    def take(self, machine_id: str, cluster_api: str | None = None) -> str:
        """The address `machine_id` holds; else, given `cluster_api` (a master's cluster
        id), that cluster's reserved API address while no machine holds it; else the
        lowest free one. Held by the machine from now on."""
        self.dir.mkdir(parents=True, exist_ok=True)
        mine = self.of(machine_id)
        if mine:
            return mine
        if cluster_api is not None:
            for address, holder in self.held().items():
                if holder == f"cluster:{cluster_api}":
                    (self.dir / address).write_text(f"{holder} {machine_id}\n")
                    return address
        return self._new(machine_id)

    def reserve(self, cluster_id: str) -> str:
        """Cluster `cluster_id`'s API address: held for the cluster from now on (the
        first master made takes it, and the next master once that one is deleted)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        for address, holder in self.held().items():
            if holder.split()[0] == f"cluster:{cluster_id}":
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
        """Free the machine's address; a cluster's API address goes back to its cluster."""
        for address, holder in self.held().items():
            words = holder.split()
            if words[-1] != machine_id:
                continue
            if len(words) == 2:
                (self.dir / address).write_text(words[0] + "\n")
            else:
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / address).unlink()

    def release_cluster(self, cluster_id: str) -> None:
        for address, holder in self.held().items():
            if holder.split()[0] == f"cluster:{cluster_id}":
                with contextlib.suppress(FileNotFoundError):
                    (self.dir / address).unlink()
