"""The local driver under the contract suite: real namespace machines on this host,
booted by the real cloud-init, on a bridge and subnet of their own (a slot per test
run, so parallel runs do not meet). Root only: elsewhere the harness is Unavailable
(the suite skips, or fails under CI, where it runs as root). The local driver's own
tests (tests/contract/test_local_driver.py) and the Kubernetes e2e test use the same
slots."""

from __future__ import annotations

import fcntl
import time
from pathlib import Path
from typing import IO

from shoal.drivers.harness import ContractHarness, DriverHarness, Provocation, Unavailable
from shoal.drivers.local import hostops
from shoal.drivers.local.settings import LocalSettings

SLOT_DIR = Path("/tmp/shoal-local-slots")
SLOTS = 32


def local_settings(tmp_path: Path) -> tuple[LocalSettings, IO[str]]:
    """Settings on a free slot's bridge and subnet (10.218.<slot>.0/24), and the slot's
    lock (held while the provider is in use: close it to free the slot)."""
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
    """Unavailable unless this host can run namespace machines."""
    why = hostops.missing_prerequisites()
    if why:
        raise Unavailable(f"the local driver cannot run here: {why}")


def cleanup(settings: LocalSettings) -> None:
    """Delete every machine and balancer of the provider, and its bridge."""
    from shoal.drivers.local import balancer
    from shoal.drivers.local.driver import LocalDriver

    driver = LocalDriver(settings)
    for m in driver.list_machines({}):
        driver.delete_machine(m.machine_id)
    for r in balancer.every(Path(settings.state_dir)):
        balancer.stop(Path(settings.state_dir), r.cluster_id, settings.bridge)
    if hostops.link_exists(settings.bridge):
        hostops.ip("link", "del", settings.bridge)


def local_harness(tmp_path: Path) -> DriverHarness:
    """The driver on a free slot of this host (Unavailable without root and its tools)."""
    from shoal.drivers.local.driver import LocalDriver

    require_local()
    settings, lock = local_settings(tmp_path)
    driver = LocalDriver(settings)
    why = driver.cannot_run()
    if why:
        lock.close()
        raise Unavailable(f"the local driver cannot run here: {why}")

    def close() -> None:
        try:
            cleanup(settings)
        finally:
            lock.close()

    return DriverHarness(
        driver=driver,
        flavor="local",
        image="host",
        other_image="host",
        zone="local",
        advance=time.sleep,  # real machines: time passes by waiting
        boot_timeout=60.0,
        close=close,
    )


CANNOT = {
    kind: "the local harness provokes no cloud errors: its machines are namespaces on this "
    "host, with no quota, scheduler or rate limit in front of them"
    for kind in Provocation
}
HARNESSES = {"local": ContractHarness(local_harness, marks=("kubernetes",), cannot=CANNOT)}
