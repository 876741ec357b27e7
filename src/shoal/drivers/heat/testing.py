"""The heat driver under the contract suite, on a real cloud with Heat the suite made
ready (`harness.ReadyCloud`: a project of its own, Heat's API behind a rate-limiting
proxy; tests/contract/clouds.py makes one from the OpenStack test cloud), a
deployment tag per test, real time. Each error class is provoked the way the cloud
makes it:

- quota: a flavor of more cores than the project's quota; the driver refuses it
  before it updates the stack (Heat itself would accept the update and fail it
  later, after making part of it);
- no valid host, asynchronous: a flavor that fits no host: the member's server
  goes to ERROR with Nova's "No valid host was found";
- no valid host, synchronous: neither Heat nor Nova answers a create with it, so
  the harness declares it cannot (`CANNOT`) and the suite does not run that check;
- a transient refusal with Retry-After: the proxy in front of Heat's API answers
  429 to a stack create or update (what clouds put there).
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
from shoal.drivers.heat.settings import HeatSettings


def heat_harness(tmp_path: Path, ready: ReadyCloud) -> DriverHarness:
    """The driver on `ready`'s project (`tmp_path` unused: the cloud keeps no files here)."""
    from shoal.drivers.heat.cloud import Cloud, load
    from shoal.drivers.heat.driver import HeatDriver

    deployment = f"contract-{uuid.uuid4().hex[:8]}"
    settings = HeatSettings(
        cloud=ready.entry, clouds_yaml=str(ready.clouds_yaml), deployment=deployment
    )
    the_cloud = Cloud(load(settings))
    driver = HeatDriver(settings, the_cloud)
    driver.check()

    def close_all() -> None:
        try:
            for stack in the_cloud.stacks([f"shoal-deployment={deployment}"]):
                the_cloud.delete_stack(stack["stack_name"], stack["id"])
        except DriverError:
            pass  # the project is the suite's own; what is left does no harm
        the_cloud.close()

    return ready.harness(
        driver,
        180.0,
        close_all,
    )


CANNOT = {
    Provocation.NO_VALID_HOST: "Heat accepts every update and reports no valid host only "
    "as its member's fault: test_asynchronous_no_valid_host_is_a_classified_fault",
}
HARNESSES = {"heat": CloudHarness(heat_harness, cloud="heat", cannot=CANNOT)}
