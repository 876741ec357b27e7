"""Real infrastructure that tests start for themselves: OpenStack services and libvirt +
QEMU (docs/testing-openstack.md, docs/testing-libvirt.md)."""
