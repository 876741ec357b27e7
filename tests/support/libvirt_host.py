"""pytest side of the libvirt harness: one real libvirtd per test session, and when to skip.

Tests that boot VMs take the session-scoped ``libvirt_host`` fixture and carry
``@pytest.mark.libvirt`` and ``@pytest.mark.xdist_group("libvirt")``, so that under
``pytest -n 2 --dist loadgroup`` one worker runs them all against one host. The fixture is
registered in tests/e2e/conftest.py; a conftest elsewhere imports it the same way.

Same convention as ``databases.require_postgres``: a machine without root skips; a machine
that could install libvirt (root, apt) but has not skips too, except under ``CI=true``, where
that is a failure (``./run test`` installs it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.harness.libvirt import LibvirtHost, missing_prerequisites


def _could_install() -> bool:
    """Root on Debian with apt: `./run test` would have installed what is missing."""
    return (
        os.geteuid() == 0 and bool(shutil.which("apt-get")) and Path("/etc/debian_version").exists()
    )


def skip_or_fail(reason: str) -> None:
    """Skip; fail instead under CI on a machine where ./run test installs libvirt."""
    if os.environ.get("CI", "").lower() == "true" and _could_install():
        pytest.fail(f"CI needs libvirt (./run test installs it): {reason}")
    pytest.skip(reason)


def require_libvirt_host() -> None:
    """Skip (or fail under CI) unless this machine can run a LibvirtHost."""
    missing = missing_prerequisites()
    if missing:
        skip_or_fail("no real libvirtd + QEMU here: " + "; ".join(missing))


def require_libvirt_python() -> ModuleType:
    """The ``libvirt`` module (libvirt-python, the ``libvirt`` extra), or skip / fail under CI."""
    try:
        import libvirt
    except ImportError as exc:
        skip_or_fail(
            f"libvirt-python is not importable ({exc}): ./run test installs the libvirt extra"
            " once libvirt-dev and pkg-config are installed"
        )
        raise  # unreachable: skip and fail raise
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors raise; no stderr noise
    return libvirt


@pytest.fixture(scope="session")
def libvirt_host() -> Iterator[LibvirtHost]:
    """A running libvirtd + isolated network for the whole session (see LibvirtHost)."""
    require_libvirt_host()
    with LibvirtHost() as host:
        yield host


@pytest.fixture
def libvirt_conn(libvirt_host: LibvirtHost) -> Iterator[Any]:
    """A libvirt-python connection to the session's host, closed after the test."""
    libvirt = require_libvirt_python()
    conn = libvirt.open(libvirt_host.uri)
    try:
        yield conn
    finally:
        conn.close()
