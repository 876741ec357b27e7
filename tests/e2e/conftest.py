"""Fixtures of the end-to-end layer."""

from tests.support.openstack_cloud import openstack_cloud

__all__ = ["openstack_cloud"]
