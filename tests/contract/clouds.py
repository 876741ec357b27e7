"""The real clouds the contract suite brings to drivers of real clouds (their
`CloudHarness`, in their packages): the OpenStack test cloud (tests/harness/openstack)
made ready as a `ReadyCloud`. One project per session and cloud, with a quota, a
flavor over it and a second image; per test, a clouds.yaml entry of that project
whose driver-facing API (Nova's for openstack, Heat's for heat) goes through a
rate-limiting proxy (tests/harness/openstack/ratelimit.py), closed after the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from shoal.drivers.harness import ReadyCloud

if TYPE_CHECKING:
    from tests.harness.openstack.cloud import OpenStackCloud
    from tests.harness.openstack.ratelimit import RateLimitProxy
    from tests.support.openstack_project import ShoalProject

CORES_QUOTA = 20_000  # above `huge` (8,192 vCPUs, no host has them), below OVER_QUOTA
OVER_QUOTA = "contract-overquota"
OTHER_IMAGE = "tiny-raw-2"
ZONE = "az1"
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


def _ready(cloud: OpenStackCloud, p: ShoalProject, path: Path, proxy: RateLimitProxy) -> ReadyCloud:
    return ReadyCloud(
        clouds_yaml=path,
        entry=p.entry,
        flavor=cloud.flavor_small.name,
        flavor_huge=cloud.flavor_huge.name,
        flavor_over_quota=OVER_QUOTA,
        image=cloud.image_name,
        other_image=OTHER_IMAGE,
        zone=ZONE,
        refuse=lambda count, retry_after: proxy.refuse(count, retry_after=retry_after),
    )


@contextlib.contextmanager
def nova_ready(cloud: OpenStackCloud, tmp_path: Path) -> Iterator[ReadyCloud]:
    """The contract project, Nova's API behind the proxy (it refuses server creates)."""
    from tests.harness.openstack.ratelimit import RateLimitProxy
    from tests.support.openstack_project import route_compute

    p = project(cloud)
    path = p.clouds_yaml(tmp_path / "clouds.yaml")
    with RateLimitProxy(cloud.endpoints["compute"]) as proxy:
        route_compute(path, p.entry, proxy.url)
        yield _ready(cloud, p, path, proxy)


def _stack_change(method: str, path: str) -> bool:
    """A stack create or update: what a 429 of Heat's API refuses in the contract suite."""
    return method in ("POST", "PATCH") and "/stacks" in path


@contextlib.contextmanager
def heat_ready(cloud: OpenStackCloud, tmp_path: Path) -> Iterator[ReadyCloud]:
    """The contract project (the openstack driver's: same quotas, flavors) on the cloud
    with Heat running, Heat's API behind the proxy (it refuses stack changes)."""
    from tests.harness.openstack.ratelimit import RateLimitProxy

    p = project(cloud)
    path = p.clouds_yaml(tmp_path / "clouds.yaml")
    with RateLimitProxy(cloud.endpoints["orchestration"], _stack_change) as proxy:
        data = yaml.safe_load(path.read_text())
        data["clouds"][p.entry]["orchestration_endpoint_override"] = (
            f"{proxy.url}/v1/{p.project_id}"
        )
        path.write_text(yaml.safe_dump(data))
        yield _ready(cloud, p, path, proxy)
