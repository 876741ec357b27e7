"""The openstack driver under the contract suite, on a real cloud the suite made ready
(`harness.ReadyCloud`: a project of its own, Nova's API behind a rate-limiting proxy;
tests/contract/clouds.py makes one from the OpenStack test cloud), a deployment tag
per test, real time. Each error class is provoked the way Nova makes it:

- quota: a flavor of more cores than the project's quota (Nova's synchronous 403);
- no valid host, asynchronous: a flavor that fits no host (the server goes to ERROR
  with "No valid host was found");
- no valid host, synchronous: Nova has no such answer to a create (it accepts it,
  202, and fails the server later), so that check is skipped, saying so;
- a transient refusal with Retry-After: Nova has no rate limit of its own; the proxy
  in front of Nova's API (what clouds put there) answers 429.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from shoal.drivers.contract import DriverError
from shoal.drivers.harness import (
    CloudHarness,
    DriverHarness,
    Provocation,
    ReadyCloud,
)
from shoal.drivers.openstack.settings import OpenStackSettings


def openstack_harness(tmp_path: Path, ready: ReadyCloud) -> DriverHarness:
    """The driver on `ready`'s project (`tmp_path` unused: the cloud keeps no files here)."""
    from shoal.drivers.openstack.opener import connect

    settings = OpenStackSettings(
        cloud=ready.entry,
        clouds_yaml=str(ready.clouds_yaml),
        deployment=f"contract-{uuid.uuid4().hex[:8]}",
        server_group_grace_seconds=5,
    )
    driver, close = connect(settings, pool_size=10)
    driver.check()  # as a conductor does when it starts: the catalog validate reads

    def close_all() -> None:
        try:
            for m in driver.list_machines({}):
                driver.delete_machine(m.machine_id)
        except DriverError:
            pass  # the project is the suite's own; what is left does no harm
        close()

    return ready.harness(
        driver,
        120.0,
        close_all,
    )


CANNOT = {
    Provocation.NO_VALID_HOST: "Nova accepts every create (202) and reports no valid host "
    "only as the server's fault: test_asynchronous_no_valid_host_is_a_classified_fault",
}
HARNESSES = {"openstack": CloudHarness(openstack_harness, cloud="openstack", cannot=CANNOT)}
