"""Fixtures of the end-to-end layer: the real libvirt host and the real OpenStack
cloud (tests/support/)."""

from tests.support.kubernetes import kubernetes_bin
from tests.support.libvirt_host import libvirt_conn, libvirt_host
from tests.support.openstack_cloud import openstack_cloud, openstack_heat

__all__ = ["kubernetes_bin", "libvirt_conn", "libvirt_host", "openstack_cloud", "openstack_heat"]
