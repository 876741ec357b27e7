"""The local driver under the contract suite: real namespace machines on this host,
booted by the real cloud-init, on a bridge and subnet of their own (a slot per test
run, so parallel runs do not meet). Root only: the factory skips elsewhere, and fails
under CI, where the suite runs as root."""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

import pytest

from shoal.drivers.local import LocalDriver, LocalSettings, hostops
from tests.contract.harness import DriverHarness

SLOT_DIR = Path("/tmp/shoal-local-slots")
SLOTS = 32


def local_settings(tmp_path: Path) -> tuple[LocalSettings, object]:
    """Settings on a free slot's bridge and subnet (10.218.<slot>.0/24), and the slot's
    lock (held while the provider is in use)."""
    SLOT_DIR.mkdir(parents=True, exist_ok=True)
    for slot in range(SLOTS):
        lock = (SLOT_DIR / f"{slot}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        settings = LocalSettings(
            state_dir=str(tmp_path / "local"),
            bridge=f"shoal-ct{slot}",
            subnet=f"10.218.{slot}.0/24",
        )
        return settings, lock
    raise RuntimeError(f"all {SLOTS} local-provider slots in {SLOT_DIR} are taken")


def require_local() -> None:
    why = hostops.missing_prerequisites()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the local driver cannot run under CI: {why}")
        pytest.skip(why)


def local_factory(tmp_path: Path) -> DriverHarness:
    require_local()
    settings, lock = local_settings(tmp_path)
    driver = LocalDriver(settings)
    why = driver.cannot_run()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"the local driver cannot run under CI: {why}")
        pytest.skip(why)

    def close() -> None:
        for m in driver.list_machines({}):
            driver.delete_machine(m.machine_id)
        if hostops.link_exists(settings.bridge):
            hostops.ip("link", "del", settings.bridge)
        lock.close()  # type: ignore[attr-defined]

    return DriverHarness(
        driver=driver,
        flavor="local",
        image="host",
        other_image="host",
        zone="local",
        advance=time.sleep,
        boot_timeout=60.0,
        close=close,
    )
