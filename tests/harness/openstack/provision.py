"""What the test cloud sets up through the APIs once its services answer, as admin:
projects, users and catalog in Keystone, an image in Glance, zones, flavors and
quotas in Nova."""

from __future__ import annotations

from dataclasses import dataclass

from openstack.connection import Connection

from tests.harness.openstack import configs
from tests.harness.openstack.processes import CloudStartError

SERVICE_USERS = ("glance", "placement", "nova", "heat", "shoal")  # each admin of project `service`
INTERFACES = ("public", "internal", "admin")


@dataclass(frozen=True)
class Flavor:
    name: str
    id: str
    vcpus: int
    ram: int
    disk: int


FLAVORS = (
    ("m1.small", 1, 512, 1),
    ("m1.medium", 2, 2048, 10),
    ("huge", 8192, 1024, 1),  # more vCPUs than any fake host offers, even overcommitted
)


def register(
    conn: Connection,
    name: str,
    service_type: str,
    url: str,
    interfaces: tuple[str, ...] = INTERFACES,
) -> str:
    """A catalog service with one endpoint per interface; its id."""
    svc = conn.identity.create_service(name=name, type=service_type)
    for interface in interfaces:
        conn.identity.create_endpoint(
            service_id=svc.id, interface=interface, url=url, region_id=configs.REGION
        )
    return str(svc.id)


def unregister(conn: Connection, service_type: str) -> int:
    """Remove every catalog service of a type, endpoints first; how many went."""
    gone = 0
    for svc in list(conn.identity.services(type=service_type)):
        for endpoint in list(conn.identity.endpoints(service_id=svc.id)):
            conn.identity.delete_endpoint(endpoint, ignore_missing=True)
        conn.identity.delete_service(svc, ignore_missing=True)
        gone += 1
    return gone


def identity(conn: Connection, layout: configs.Layout) -> dict[str, str]:
    """Roles, projects `service` and `demo`, their users, the catalog; the project ids."""
    ident = conn.identity
    roles = {r.name: r for r in ident.roles()}
    for role in ("reader", "member", "admin"):
        if role not in roles:
            roles[role] = ident.create_role(name=role)
    project_ids = {"admin": str(ident.find_project("admin", ignore_missing=False).id)}

    def project_with_users(project: str, users: tuple[str, ...], role: str) -> None:
        proj = ident.create_project(name=project, domain_id="default")
        project_ids[project] = str(proj.id)
        for name in users:
            user = ident.create_user(
                name=name,
                password=layout.passwords[name],
                domain_id="default",
                default_project_id=proj.id,
            )
            ident.assign_project_role_to_user(proj, user, roles[role])

    project_with_users(configs.SERVICE_PROJECT, SERVICE_USERS, "admin")
    project_with_users("demo", ("demo",), "member")
    register(conn, "glance", "image", layout.glance_url)
    register(conn, "placement", "placement", layout.placement_url)
    register(conn, "nova", "compute", layout.nova_url)
    return project_ids


def image(conn: Connection, name: str) -> str:
    """A tiny public raw image, uploaded and active; its id."""
    created = conn.image.create_image(
        name=name,
        data=b"\0" * 65536,
        disk_format="raw",
        container_format="bare",
        visibility="public",
        wait=True,
        timeout=120,
    )
    found = conn.image.get_image(created.id)
    if found.status != "active":
        raise CloudStartError(f"image {found.id} is {found.status}, not active")
    return str(found.id)


def compute_hosts_ready(conn: Connection, hosts: set[str]) -> bool:
    """Every host's nova-compute is up and enabled, and has its Placement provider."""
    up = {
        s.host
        for s in conn.compute.services(binary="nova-compute")
        if s.state == "up" and s.status == "enabled"
    }
    providers = {p.name for p in conn.placement.resource_providers()}
    return hosts <= up and hosts <= providers


def compute(
    conn: Connection, zones: dict[str, list[str]], unlimited: list[str]
) -> dict[str, Flavor]:
    """A host aggregate per zone, the flavors, no quota for the `unlimited` project ids."""
    for zone, hosts in zones.items():
        agg = conn.compute.create_aggregate(name=f"agg-{zone}", availability_zone=zone)
        for host in hosts:
            conn.compute.add_host_to_aggregate(agg, host)
    flavors = {}
    for name, vcpus, ram, disk in FLAVORS:
        f = conn.compute.create_flavor(name=name, vcpus=vcpus, ram=ram, disk=disk, is_public=True)
        flavors[name] = Flavor(name, str(f.id), vcpus, ram, disk)
    for project_id in unlimited:
        conn.compute.update_quota_set(project_id, instances=-1, cores=-1, ram=-1)
    return flavors
