"""One libvirt connection per host, opened when first needed and opened again after
it broke; every call to a host goes through `Hosts.call`, the driver's edge."""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from shoal.drivers.contract import TransientError
from shoal.drivers.libvirt import errors
from shoal.drivers.libvirt.settings import LibvirtHostSettings

T = TypeVar("T")


def load_libvirt() -> Any:
    """The libvirt module (libvirt-python), with its error printing to stderr off (errors
    raise anyway). TransientError when it is not installed: the operator installs the
    `libvirt` extra and shoal carries on."""
    try:
        import libvirt
    except ImportError as exc:
        raise TransientError(
            f"libvirt-python is not installed ({exc}): install shoal's `libvirt` extra"
        ) from exc
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    return libvirt


class Hosts:
    """The provider's hosts by name, each with a lazily opened, shared connection
    (a libvirt connection may be used by several threads at once)."""

    def __init__(self, hosts: Sequence[LibvirtHostSettings]) -> None:
        self.settings = {h.name: h for h in hosts}
        self.names = tuple(h.name for h in hosts)
        self._conns: dict[str, Any] = {}
        self._locks = {h.name: threading.Lock() for h in hosts}
        self.libvirt: Any = None

    def add(self, host: LibvirtHostSettings) -> None:
        """A host learned at run time (a cluster's virt host); the same name and URI
        again changes nothing, another URI replaces it (its connection reopens)."""
        known = self.settings.get(host.name)
        if known is not None and known.uri == host.uri:
            return
        self._locks.setdefault(host.name, threading.Lock())
        self.settings[host.name] = host
        self.names = tuple(self.settings)
        old = self._conns.pop(host.name, None)
        if old is not None:
            with contextlib.suppress(Exception):
                old.close()

    def measure(self, host: str, cpu_ratio: float = 1.0) -> LibvirtHostSettings:
        """The host's settings, its cores (its CPUs times `cpu_ratio`) and memory read
        from the host itself (getInfo) when they were not given. Transient or Permanent
        as `call`."""
        h = self.settings[host]
        if h.cores and h.ram_mb:
            return h
        info = self.call(host, lambda c: c.getInfo())  # [model, MiB, cpus, ...]
        cores = int(int(info[2]) * cpu_ratio)
        measured = dataclasses.replace(h, cores=cores, ram_mb=int(info[1]))
        self.settings[host] = measured
        return measured

    def connection(self, host: str) -> Any:
        """The open connection to `host` (opens it). Raises libvirtError."""
        conn = self._conns.get(host)
        if conn is not None:
            return conn
        if self.libvirt is None:
            self.libvirt = load_libvirt()
        with self._locks[host]:
            conn = self._conns.get(host)
            if conn is None:
                conn = self.libvirt.open(self.settings[host].uri)
                self._conns[host] = conn
            return conn

    def call(self, host: str, fn: Callable[[Any], T], *, keep: tuple[int, ...] = ()) -> T:
        """`fn(connection)` mapped at the edge: a libvirtError becomes Transient or
        Permanent (a broken connection is dropped first); error codes in `keep` are
        raised as they are, for the caller to decide ("not found")."""
        conn = self.connection_or_transient(host)
        try:
            return fn(conn)
        except Exception as exc:
            if not errors.code(exc) or errors.code(exc) in keep:
                raise
            if errors.is_connection_error(exc):
                self.drop(host, conn)
            raise errors.classify(exc, host) from exc

    def connection_or_transient(self, host: str) -> Any:
        try:
            return self.connection(host)
        except TransientError:
            raise
        except Exception as exc:
            if not errors.code(exc):
                raise
            raise errors.classify(exc, host) from exc

    def drop(self, host: str, conn: Any) -> None:
        """Forget `conn` (the next call opens a new connection) and close it."""
        with self._locks[host]:
            if self._conns.get(host) is conn:
                del self._conns[host]
        with contextlib.suppress(Exception):  # it is broken already; closing is a courtesy
            conn.close()

    def close(self) -> None:
        for host, conn in list(self._conns.items()):
            self.drop(host, conn)
