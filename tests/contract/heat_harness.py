"""The contract suite's harness for the heat driver, on the real test cloud with Heat
(tests/harness/openstack, `start_heat`): a project of its own, a deployment tag per
test, real time. Each error class is provoked the way the cloud makes it:

- quota: a flavor of more cores than the project's quota; the driver refuses it
  before it updates the stack (Heat itself would accept the update and fail it
  later, after making part of it);
- no valid host, asynchronous: flavor `huge` (fits no host): the member's server
  goes to ERROR with Nova's "No valid host was found";
- no valid host, synchronous: neither Heat nor Nova answers a create with it, so
  that check is skipped, saying so;
- a transient refusal with Retry-After: a rate-limiting proxy in front of Heat's API
  answers 429 (what clouds put there).
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from shoal.drivers.contract import DriverError, MachineSpec
from shoal.drivers.harness import DriverHarness, Provocation, Unsupported

if TYPE_CHECKING:
    from tests.harness.openstack.cloud import OpenStackCloud

OVER_QUOTA = "contract-overquota"


def _stack_change(method: str, path: str) -> bool:
    """A stack create or update: what a 429 of Heat's API refuses in the contract suite."""
    return method in ("POST", "PATCH") and "/stacks" in path


def heat_factory(tmp_path: Path, cloud: OpenStackCloud) -> DriverHarness:
    from shoal.drivers.heat.cloud import Cloud, load
    from shoal.drivers.heat.driver import HeatDriver
    from shoal.drivers.heat.settings import HeatSettings
    from tests.contract.conftest import real_time
    from tests.contract.openstack_harness import OTHER_IMAGE, project
    from tests.harness.openstack.ratelimit import RateLimitProxy

    cloud.start_heat()
    p = project(cloud)  # the openstack driver's contract project: same quotas, flavors
    deployment = f"contract-{uuid.uuid4().hex[:8]}"
    clouds_yaml = p.clouds_yaml(tmp_path / "clouds.yaml")
    proxy = RateLimitProxy(cloud.endpoints["orchestration"], _stack_change).__enter__()
    data = yaml.safe_load(clouds_yaml.read_text())
    data["clouds"][p.entry]["orchestration_endpoint_override"] = f"{proxy.url}/v1/{p.project_id}"
    clouds_yaml.write_text(yaml.safe_dump(data))
    settings = HeatSettings(cloud=p.entry, clouds_yaml=str(clouds_yaml), deployment=deployment)
    the_cloud = Cloud(load(settings))
    driver = HeatDriver(settings, the_cloud)
    driver.check()

    def provoke(kind: Provocation, spec: MachineSpec) -> MachineSpec:
        if kind is Provocation.QUOTA:
            return dataclasses.replace(spec, flavor_id=OVER_QUOTA)
        if kind is Provocation.NO_VALID_HOST_ASYNC:
            return dataclasses.replace(spec, flavor_id=cloud.flavor_huge.name)
        if kind is Provocation.NO_VALID_HOST:
            raise Unsupported(
                "Heat accepts every update and reports no valid host only as its "
                "member's fault: test_asynchronous_no_valid_host_is_a_classified_fault"
            )
        proxy.refuse(1, retry_after=2)  # TRANSIENT
        return spec

    def close_all() -> None:
        try:
            for stack in the_cloud.stacks([f"shoal-deployment={deployment}"]):
                the_cloud.delete_stack(stack["stack_name"], stack["id"])
        except DriverError:
            pass  # the project is the suite's own; what is left does no harm
        the_cloud.close()
        proxy.__exit__(None, None, None)

    return DriverHarness(
        driver=driver,
        flavor=cloud.flavor_small.name,
        image=cloud.image_name,
        other_image=OTHER_IMAGE,
        zone="az1",
        advance=real_time,
        boot_timeout=180.0,
        close=close_all,
        provoke=provoke,
    )
