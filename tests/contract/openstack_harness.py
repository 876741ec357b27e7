"""The contract suite's harness for the openstack driver, on the real test cloud
(tests/harness/openstack): a project of its own, a deployment tag per test, real
time. Each error class is provoked the way Nova makes it:

- quota: a flavor of more cores than the project's quota (Nova's synchronous 403);
- no valid host, asynchronous: flavor `huge`, which fits no host (the server goes
  to ERROR with "No valid host was found");
- no valid host, synchronous: Nova has no such answer to a create (it accepts it,
  202, and fails the server later), so that check is skipped, saying so;
- a transient refusal with Retry-After: Nova has no rate limit of its own; a real
  rate-limiting proxy in front of Nova's API (what clouds put there) answers 429.
"""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from shoal.drivers.contract import DriverError, MachineSpec
from shoal.drivers.harness import DriverHarness, Provocation, Unsupported

if TYPE_CHECKING:
    from tests.harness.openstack.cloud import OpenStackCloud
    from tests.support.openstack_project import ShoalProject

CORES_QUOTA = 20_000  # above `huge` (8,192 vCPUs, no host has them), below OVER_QUOTA
OVER_QUOTA = "contract-overquota"
OTHER_IMAGE = "tiny-raw-2"
_projects: dict[int, ShoalProject] = {}


def project(cloud: OpenStackCloud) -> ShoalProject:
    """The contract suite's project on this cloud (made once per session)."""
    from tests.support import openstack_project as op

    if id(cloud) not in _projects:
        p = op.shoal_project(cloud, "contract")
        p.quota(cores=CORES_QUOTA)
        op.ensure_flavor(cloud, OVER_QUOTA, vcpus=CORES_QUOTA + 10_000)
        op.ensure_image(cloud, OTHER_IMAGE)
        _projects[id(cloud)] = p
    return _projects[id(cloud)]


def openstack_factory(tmp_path: Path, cloud: OpenStackCloud) -> DriverHarness:
    from shoal.drivers.openstack.opener import connect
    from tests.contract.conftest import real_time
    from tests.harness.openstack.ratelimit import RateLimitProxy
    from tests.support.openstack_project import route_compute

    p = project(cloud)
    deployment = f"contract-{uuid.uuid4().hex[:8]}"
    settings = p.settings(tmp_path / "clouds.yaml", deployment, server_group_grace_seconds=5)
    proxy = RateLimitProxy(cloud.endpoints["compute"]).__enter__()
    assert settings.clouds_yaml is not None
    route_compute(Path(settings.clouds_yaml), p.entry, proxy.url)
    driver, close = connect(settings, pool_size=10)
    driver.check()  # as a conductor does when it starts: the catalog validate reads

    def provoke(kind: Provocation, spec: MachineSpec) -> MachineSpec:
        if kind is Provocation.QUOTA:
            return dataclasses.replace(spec, flavor_id=OVER_QUOTA)
        if kind is Provocation.NO_VALID_HOST_ASYNC:
            return dataclasses.replace(spec, flavor_id=cloud.flavor_huge.name)
        if kind is Provocation.NO_VALID_HOST:
            raise Unsupported(
                "Nova accepts every create (202) and reports no valid host only as the "
                "server's fault: test_asynchronous_no_valid_host_is_a_classified_fault"
            )
        proxy.refuse(1, retry_after=2)  # TRANSIENT
        return spec

    def close_all() -> None:
        try:
            for m in driver.list_machines({}):
                driver.delete_machine(m.machine_id)
        except DriverError:
            pass  # the project is the suite's own; what is left does no harm
        close()
        proxy.__exit__(None, None, None)

    return DriverHarness(
        driver=driver,
        flavor=cloud.flavor_small.name,
        image=cloud.image_name,
        other_image=OTHER_IMAGE,
        zone="az1",
        advance=real_time,
        boot_timeout=120.0,
        close=close_all,
        provoke=provoke,
    )
