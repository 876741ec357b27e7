"""Real infrastructure that tests start for themselves (see docs/testing-openstack.md)."""
