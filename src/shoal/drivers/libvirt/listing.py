"""One look at a host: its domains (one `listAllDomains`), their facts, and the
addresses of shoal's running machines (one `DHCPLeases` of the network), kept by MAC.

A running domain's XML is read once per boot and kept: its id changes when it is
started again (a rebuild), so a cached read is never stale; a domain that is not
running is read at every look that lists machines (there are few, and a fault may have
been written to it). A look for capacity alone reads only domains it never saw: sizes
and MACs do not change, and reading a domain that is being started waits for its start.
Addresses come from the DHCP leases of the provider's network, matched by MAC:
the network's dnsmasq is the one that handed them out, so they are known as soon as a
guest asks, with no agent in the guest and one call per host. A host whose driver
keeps no leases (the test driver) is asked per domain instead.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from shoal.drivers.libvirt import errors, facts
from shoal.drivers.libvirt.hosts import Hosts


@dataclass(frozen=True)
class Seen:
    """A domain as one look at its host saw it."""

    dom: Any  # the virDomain handle
    facts: facts.Facts
    running: bool

    @property
    def key(self) -> tuple[str, int]:
        return (self.facts.uuid, int(self.dom.ID()))


class Looker:
    """Looks at hosts, keeping per host the facts of running domains and the addresses
    of shoal's machines from the previous look."""

    def __init__(self, hosts: Hosts, network: str) -> None:
        self.hosts = hosts
        self.network = network
        self._facts: dict[str, dict[tuple[str, int], facts.Facts]] = {}
        self._by_uuid: dict[str, dict[str, facts.Facts]] = {}  # what each domain was seen as
        self._addresses: dict[str, dict[str, str]] = {}  # host -> MAC -> address
        self._lock = threading.Lock()

    def remember(self, host: str, domain: facts.Facts) -> None:
        """A domain shoal just defined, as its XML says (no need to read it back)."""
        with self._lock:
            self._by_uuid.setdefault(host, {})[domain.uuid] = domain

    def macs(self, host: str) -> set[str]:
        """The MACs of the domains on `host` as last seen (or remembered)."""
        with self._lock:
            return {m for f in self._by_uuid.get(host, {}).values() for m in f.macs}

    def look(self, host: str, *, exact: bool = True) -> list[Seen]:
        """Every domain on `host` (shoal's or not), for listing machines (`exact`: with
        their current faults, and addresses), or for capacity only. TransientError or
        PermanentError."""
        known = self._facts.get(host, {})
        by_uuid = self._by_uuid.get(host, {})

        def go(conn: Any) -> list[Seen]:
            out: list[Seen] = []
            for dom in conn.listAllDomains(0):
                did = int(dom.ID())
                running = did != -1
                key = (str(dom.UUIDString()).lower(), did)
                got = known.get(key) if running else None
                if got is None and not exact:
                    got = by_uuid.get(key[0])
                if got is None:
                    try:
                        got = facts.parse(dom.XMLDesc(0))
                    except Exception as exc:
                        if errors.code(exc) == errors.NO_DOMAIN:
                            continue  # undefined while we looked
                        raise
                out.append(Seen(dom, got, running))
            return out

        seen = self.hosts.call(host, go)
        with self._lock:
            self._facts[host] = {s.key: s.facts for s in seen if s.running}
            self._by_uuid[host] = {s.facts.uuid: s.facts for s in seen}
            old = self._addresses.get(host, {})
            macs = {m for s in seen for m in s.facts.macs}
            self._addresses[host] = {m: a for m, a in old.items() if m in macs}
        if exact:
            self._learn_addresses(host, seen)
        return seen

    def address(self, host: str, seen: Seen) -> str | None:
        """The address of a running domain, once its network has leased it one."""
        if not seen.running:
            return None
        known = self._addresses.get(host, {})
        return next((known[m] for m in seen.facts.macs if m in known), None)

    def _learn_addresses(self, host: str, seen: list[Seen]) -> None:
        need = [s for s in seen if s.running and s.facts.meta and not self.address(host, s)]
        if not need:
            return

        def leases(conn: Any) -> dict[str, str] | None:
            try:
                got = conn.networkLookupByName(self.network).DHCPLeases()
            except Exception as exc:
                if errors.code(exc) not in (errors.NO_SUPPORT, 43):  # 43: no such network
                    raise
                return None
            return {str(x.get("mac", "")).lower(): str(x.get("ipaddr", "")) for x in got}

        by_mac = self.hosts.call(host, leases)
        found: dict[str, str] = {}
        for s in need:
            if by_mac is not None:
                found.update({m: by_mac[m] for m in s.facts.macs if by_mac.get(m)})
            elif s.facts.macs and (addr := self._ask_domain(host, s)):
                found[s.facts.macs[0]] = addr
        with self._lock:
            self._addresses.setdefault(host, {}).update(found)

    def _ask_domain(self, host: str, s: Seen) -> str | None:
        """The domain's leased IPv4 address, asked of the domain (hosts without leases)."""

        def go(conn: Any) -> str | None:
            try:
                ifaces = s.dom.interfaceAddresses(0)  # VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE
            except Exception as exc:
                if errors.code(exc) in (errors.NO_DOMAIN, 55, errors.NO_SUPPORT):
                    return None
                raise
            for iface in ifaces.values():
                for a in iface.get("addrs") or []:
                    if a.get("type") == 0 and a.get("addr"):  # IPv4
                        return str(a["addr"])
            return None

        return self.hosts.call(host, go)
