"""A project of the OpenStack test cloud for shoal's openstack driver: a user, quotas,
a clouds.yaml entry and the provider settings that use it; extra flavors and images;
what Nova holds, seen as admin.

Each test module makes its own project (unique name), so that quotas, listings and
"Nova is empty" checks see only its own servers.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shoal.drivers.openstack.settings import OpenStackSettings

if TYPE_CHECKING:
    from openstack.connection import Connection

    from tests.harness.openstack.cloud import Credentials, OpenStackCloud


@dataclass(frozen=True)
class ShoalProject:
    """A project with a member user, as one clouds.yaml entry (`entry`)."""

    cloud: OpenStackCloud
    name: str
    project_id: str
    creds: Credentials
    entry: str = "shoal-test"

    def clouds_yaml(self, path: Path) -> Path:
        """clouds.yaml with this project's entry (and the cloud's own logins)."""
        return self.cloud.write_clouds_yaml(path, extra={self.entry: self.creds})

    def settings(self, path: Path, deployment: str, **over: Any) -> OpenStackSettings:
        """Provider settings for this project (clouds.yaml written at `path`)."""
        base = OpenStackSettings(
            cloud=self.entry, clouds_yaml=str(self.clouds_yaml(path)), deployment=deployment
        )
        return replace(base, **over)

    def servers(self) -> list[Any]:
        """Every server of the project, as admin sees it (deleted ones excluded)."""
        with admin(self.cloud) as conn:
            return list(
                conn.compute.servers(details=True, all_projects=True, project_id=self.project_id)
            )

    def server_groups(self) -> list[Any]:
        with admin(self.cloud) as conn:
            return [
                g
                for g in conn.compute.server_groups(all_projects=True)
                if g.project_id == self.project_id
            ]

    def quota(self, **limits: int) -> None:
        self.cloud.set_compute_quota(self.project_id, **limits)

    def purge(self) -> None:
        """Delete, as admin, every server the project still has (a failed test's
        leftovers would otherwise take the zones' capacity from the next tests)."""
        with admin(self.cloud) as conn:
            for server in self.servers():
                conn.compute.delete_server(server, ignore_missing=True)

    def wait_empty(self, timeout: float = 120.0) -> list[Any]:
        """Wait until the project has no server (or `timeout`); what is left."""
        deadline = time.monotonic() + timeout
        while (left := self.servers()) and time.monotonic() < deadline:
            time.sleep(1)
        return left


def shoal_project(cloud: OpenStackCloud, prefix: str) -> ShoalProject:
    """A new project `<prefix>-<hex>` with a member user; instances, cores, RAM and
    server groups unlimited (tests set limits with `quota`)."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    creds = cloud.create_project_user(name)
    project = ShoalProject(cloud, name, cloud.project_ids[name], creds)
    project.quota(instances=-1, cores=-1, ram=-1, server_groups=-1, server_group_members=-1)
    return project


@contextlib.contextmanager
def admin(cloud: OpenStackCloud) -> Iterator[Connection]:
    conn = cloud.connection("admin")
    try:
        yield conn
    finally:
        conn.close()


def ensure_flavor(cloud: OpenStackCloud, name: str, vcpus: int, ram: int = 512) -> str:
    """A public flavor `name` (made once per cloud); its id."""
    with admin(cloud) as conn:
        found = conn.compute.find_flavor(name, ignore_missing=True)
        if found is None:
            found = conn.compute.create_flavor(
                name=name, vcpus=vcpus, ram=ram, disk=1, is_public=True
            )
        return str(found.id)


def ensure_image(cloud: OpenStackCloud, name: str) -> str:
    """A tiny public image `name` (uploaded once per cloud); its id."""
    from tests.harness.openstack import provision

    with admin(cloud) as conn:
        found = conn.image.find_image(name, ignore_missing=True)
        if found is not None:
            return str(found.id)
        return provision.image(conn, name)


def route_compute(clouds_yaml: Path, entry: str, url: str) -> None:
    """Make clouds.yaml entry `entry` reach Nova at `url` (a proxy) instead of the
    catalog's endpoint (openstacksdk's `compute_endpoint_override`)."""
    import yaml

    data = yaml.safe_load(clouds_yaml.read_text())
    data["clouds"][entry]["compute_endpoint_override"] = url
    clouds_yaml.write_text(yaml.safe_dump(data, sort_keys=True))
