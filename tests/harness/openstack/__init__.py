"""A real OpenStack (Keystone, Glance, Placement, Nova with the fake driver) for tests.

`cloud.OpenStackCloud` starts it; docs/testing-openstack.md says how to use it.
"""
