"""Test harnesses for real infrastructure (libvirt + QEMU, ...)."""
