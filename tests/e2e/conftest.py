"""Fixtures for end-to-end tests: the real libvirt host (tests/support/libvirt_host.py)."""

from tests.support.libvirt_host import libvirt_conn, libvirt_host

__all__ = ["libvirt_conn", "libvirt_host"]
