"""Fixtures of the end-to-end layer: the real libvirt host, the real OpenStack cloud,
the Kubernetes binaries and the local provider's cluster harness (tests/support/)."""

from tests.support.kube_cluster import local_cluster_env
from tests.support.kubernetes import kubernetes_bin
from tests.support.libvirt_host import libvirt_conn, libvirt_host
from tests.support.openstack_cloud import openstack_cloud, openstack_heat

__all__ = [
    "kubernetes_bin",
    "local_cluster_env",
    "libvirt_conn",
    "libvirt_host",
    "openstack_cloud",
    "openstack_heat",
]
