"""Authentication mode `keystone` against the real Keystone of the OpenStack test cloud:
a real `shoal serve` validates users' tokens with its service user, registers itself
in the catalog as `container-infra`, and `openstack coe` with plain password
authentication finds it there; each project sees only its own clusters; with an
OpenStack provider, a cluster's servers are made in its creator's project through a
Keystone trust, which goes with the cluster."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.harness.openstack.cloud import Credentials, OpenStackCloud
from tests.support.openstack_cli import OPENSTACK, coe_env
from tests.support.openstack_cloud import OPENSTACK_MARKS
from tests.support.openstack_project import ShoalProject, admin, shoal_project
from tests.support.process import SHOAL, serving, shoal_env
from tests.support.server import free_port
from tests.support.waiting import until

pytestmark = OPENSTACK_MARKS
LATEST = {"OpenStack-API-Version": "container-infra latest"}


@dataclass
class Deployment:
    url: str
    env: dict[str, str]
    log: Path


@contextmanager
def keystone_shoal(
    cloud: OpenStackCloud, work: Path, provider: dict[str, Any] | None = None
) -> Iterator[Deployment]:
    """`shoal serve` with SHOAL_AUTH=keystone, shoal's service user being the cloud's
    `shoal` (admin of project `service`); optionally one provider of the config file."""
    clouds = cloud.write_clouds_yaml(work / "clouds.yaml")
    extra = {
        "SHOAL_AUTH": "keystone",
        "SHOAL_KEYSTONE_CLOUD": "shoal",
        "SHOAL_KEYSTONE_CLOUDS_YAML": str(clouds),
        "SHOAL_KEYSTONE_CACHE_SECONDS": "5",
        "SHOAL_CONDUCTOR_PROVIDER_CHECK_SECONDS": "1",
    }
    if provider is not None:
        config = work / "shoal.yaml"
        config.write_text(yaml.safe_dump({"providers": [provider]}))
        extra["SHOAL_CONFIG"] = str(config)
    env = shoal_env(work / "data", **extra)
    port, log = free_port(), work / "serve.log"
    cloud.unregister_services("container-infra")  # the cloud is shared: shoal's own entry
    try:
        with serving(env, port, log):
            yield Deployment(f"http://127.0.0.1:{port}", env, log)
    finally:
        cloud.unregister_services("container-infra")


def os_env(creds: Credentials) -> dict[str, str]:
    """A user's ordinary password login, as an `openrc` sets it."""
    return {
        **coe_env(),
        "OS_AUTH_URL": creds.auth_url,
        "OS_USERNAME": creds.username,
        "OS_PASSWORD": creds.password,
        "OS_PROJECT_NAME": creds.project_name,
        "OS_USER_DOMAIN_NAME": creds.user_domain_name,
        "OS_PROJECT_DOMAIN_NAME": creds.project_domain_name,
        "OS_REGION_NAME": creds.region_name,
        "OS_IDENTITY_API_VERSION": "3",
        "OS_INTERFACE": "public",
    }


def openstack(creds: Credentials, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [OPENSTACK, *args], env=os_env(creds), capture_output=True, text=True, timeout=120
    )


def ok(creds: Credentials, *args: str) -> Any:
    done = openstack(creds, *args, "-f", "json")
    assert done.returncode == 0, done.stderr
    # magnumclient prints "Request to create ... accepted" before the JSON of a create.
    text = done.stdout[min((i for i in (done.stdout.find("{"), done.stdout.find("[")) if i >= 0),
                           default=len(done.stdout)):]  # fmt: skip
    return json.loads(text) if text.strip() else None


def token_of(creds: Credentials) -> str:
    got = ok(creds, "token", "issue")
    return str(got["id"])


@contextmanager
def _purged(project: ShoalProject) -> Iterator[None]:
    """On the way out (after shoal stopped), whatever servers the project has left are
    deleted: a failed test must not take the zones' capacity from the next tests."""
    try:
        yield
    finally:
        project.purge()


def wait_status(creds: Credentials, cluster: str, want: str, idle: float = 180) -> None:
    """Wait for `want` while the cluster's status or reason keeps changing (each group's
    progress is in the reason): a loaded machine is slow, not stuck."""
    seen: dict[str, str] = {}

    def show() -> tuple[str, str]:
        done = openstack(creds, "coe", "cluster", "show", cluster, "-f", "json")
        got = json.loads(done.stdout) if done.returncode == 0 else {"status": "GONE"}
        seen.update(status=got["status"], reason=got.get("status_reason") or "")
        assert not seen["status"].endswith("FAILED"), done.stdout
        return seen["status"], seen["reason"]

    until(
        lambda: show()[0] == want,
        progress=lambda: (seen.get("status"), seen.get("reason")),
        what=f"{cluster} to be {want}",
        idle=idle,
        interval=1.0,
    )


def test_openstack_coe_with_password_authentication_through_the_catalog(
    openstack_cloud: OpenStackCloud, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:6]
    alice = openstack_cloud.create_project_user(f"ks-a-{tag}")
    bob = openstack_cloud.create_project_user(f"ks-b-{tag}")
    watcher = openstack_cloud.create_project_user(f"ks-a-{tag}", f"ks-reader-{tag}", role="reader")
    with keystone_shoal(openstack_cloud, tmp_path) as dep:
        # shoal put itself in the catalog: clients find it by its service type.
        assert "catalog: container-infra at " + dep.url + "/v1" in dep.log.read_text()
        ok(alice, "coe", "cluster", "template", "create", "k8s", "--coe", "kubernetes",
           "--image", "fedora-coreos-40", "--external-network", "public",
           "--flavor", "m1.small", "--master-flavor", "m1.small")  # fmt: skip
        made = openstack(alice, "coe", "cluster", "create", "c1", "--cluster-template", "k8s",
                         "--master-count", "1", "--node-count", "1")  # fmt: skip
        assert made.returncode == 0, made.stderr
        wait_status(alice, "c1", "CREATE_COMPLETE")
        shown = ok(alice, "coe", "cluster", "show", "c1")
        assert shown["project_id"] == openstack_cloud.project_ids[alice.project_name]
        assert [c["name"] for c in ok(alice, "coe", "cluster", "list")] == ["c1"]

        # Another project: not there at all (404, and absent from its list).
        assert ok(bob, "coe", "cluster", "list") == []
        other = openstack(bob, "coe", "cluster", "show", shown["uuid"])
        assert other.returncode != 0 and "could not be found" in other.stderr, other.stderr
        # A reader of the same project looks but does not change.
        assert [c["name"] for c in ok(watcher, "coe", "cluster", "list")] == ["c1"]
        denied = openstack(watcher, "coe", "cluster", "create", "c2", "--cluster-template", "k8s")
        assert denied.returncode != 0 and "403" in denied.stderr + denied.stdout, denied.stderr

        # The same tokens work with shoal's own CLI and plain HTTP.
        token = token_of(bob)
        r = httpx.get(f"{dep.url}/v1/clusters/{shown['uuid']}", headers={"X-Auth-Token": token})
        assert r.status_code == 404
        listed = subprocess.run(
            [SHOAL, "--url", dep.url, "--token", token_of(alice), "cluster", "list",
             "-f", "value", "-c", "name"],
            capture_output=True, text=True, timeout=60, env=shoal_env(tmp_path / "cli"),
        )  # fmt: skip
        assert listed.returncode == 0 and listed.stdout.split() == ["c1"], listed.stderr
        # No token, or a bad one: 401 in Magnum's shape, saying where to get one.
        r = httpx.get(f"{dep.url}/v1/clusters")
        assert r.status_code == 401 and r.json()["errors"][0]["status"] == 401
        assert r.headers["WWW-Authenticate"] == f'Keystone uri="{openstack_cloud.auth_url}"'
        r = httpx.get(f"{dep.url}/v1/clusters", headers={"X-Auth-Token": "not-a-token"})
        assert r.status_code == 401

        assert openstack(alice, "coe", "cluster", "delete", "c1").returncode == 0
        wait_status(alice, "c1", "GONE")


def _trusts_of(cloud: OpenStackCloud, user_id: str) -> list[Any]:
    with admin(cloud) as conn:
        got = conn.session.get(
            "/OS-TRUST/trusts",
            endpoint_filter={"service_type": "identity", "interface": "public"},
            params={"trustor_user_id": user_id},
        )
        return list(got.json()["trusts"])


def test_a_clusters_servers_are_made_in_its_creators_project_through_a_trust(
    openstack_cloud: OpenStackCloud, tmp_path: Path
) -> None:
    """An OpenStack provider whose own entry is a project of shoal's; a user of another
    project creates a heterogeneous cluster with `openstack coe` (3 masters over two
    zones, two worker groups of different flavors, from a template of node group
    templates made with the user's Keystone token): its servers, each in its zone and
    its group's server group, are in the user's project, none in the provider's;
    deleting it leaves both projects empty and removes the trust."""
    cloud = openstack_cloud
    provider_project = shoal_project(cloud, "ks-prov")
    deployment = f"ks-{uuid.uuid4().hex[:8]}"
    settings = provider_project.settings(tmp_path / "prov-clouds.yaml", deployment)
    provider = {"name": "nova", "driver": "openstack", "settings": {
        "cloud": settings.cloud, "clouds_yaml": settings.clouds_yaml,
        "deployment": deployment, "server_group_grace_seconds": 1}}  # fmt: skip
    user_project = shoal_project(cloud, "ks-user")
    user = user_project.creds
    with _purged(user_project), keystone_shoal(cloud, tmp_path, provider) as dep:
        het = {
            "name": "nova-het", "coe": "kubernetes", "image_id": cloud.image_name,
            "external_network_id": "public", "fixed_network": cloud.network_id,
            "flavor_id": "m1.small", "master_flavor_id": "m1.small",
            "node_group_templates": [
                {"name": "masters", "role": "master", "availability_zones": ["az1", "az2"]},
                {"name": "small", "flavor_id": "m1.small", "availability_zones": ["az1"]},
                {"name": "medium", "flavor_id": "m1.medium", "node_count": 1,
                 "availability_zones": ["az2"]},
            ],
        }  # fmt: skip
        headers = {"X-Auth-Token": token_of(user), **LATEST}
        r = httpx.post(f"{dep.url}/v1/clustertemplates", json=het, headers=headers, timeout=30)
        assert r.status_code == 201, r.text
        made = openstack(user, "coe", "cluster", "create", "mine", "--cluster-template",
                         "nova-het", "--master-count", "3", "--node-count", "2")  # fmt: skip
        assert made.returncode == 0, made.stderr
        wait_status(user, "mine", "CREATE_COMPLETE")
        servers = user_project.servers()
        assert len(servers) == 6, [s.name for s in servers]
        assert {s.metadata["shoal-deployment"] for s in servers} == {deployment}
        assert provider_project.servers() == []
        nodes = {
            n["uuid"]: n
            for n in httpx.get(
                f"{dep.url}/v1/clusters/mine/nodes", headers=headers, timeout=30
            ).json()["nodes"]
        }
        ngs = {
            g["uuid"]: g["name"]
            for g in httpx.get(
                f"{dep.url}/v1/clusters/mine/nodegroups", headers=headers, timeout=30
            ).json()["nodegroups"]
        }
        groups = {g.name.split("@")[0]: g for g in user_project.server_groups()}
        assert provider_project.server_groups() == []
        for server in servers:  # in its zone, of its flavor, in its group's server group
            node = nodes[server.metadata["shoal-node"]]
            assert server.availability_zone == node["availability_zone"]
            assert server.flavor.original_name == node["flavor_id"]
            ng = server.metadata["shoal-nodegroup"]
            assert str(server.id) in groups[f"shoal-{ng}"].member_ids, server.name
        by_group: dict[str, list[Any]] = {}
        for n in nodes.values():
            by_group.setdefault(n["nodegroup_name"], []).append(n)
        assert {g: len(ns) for g, ns in by_group.items()} == {"masters": 3, "small": 2, "medium": 1}
        assert {n["availability_zone"] for n in by_group["masters"]} == {"az1", "az2"}
        assert {n["flavor_id"] for n in by_group["medium"]} == {"m1.medium"}
        policies = {ngs[name.removeprefix("shoal-")]: g.policy for name, g in groups.items()}
        assert policies == {
            "masters": "anti-affinity", "small": "soft-anti-affinity",
            "medium": "soft-anti-affinity",
        }  # fmt: skip
        user_id = str(servers[0].user_id)  # the trust impersonates its creator
        trusts = _trusts_of(cloud, user_id)
        assert [t["trustor_user_id"] for t in trusts] == [user_id]
        assert trusts[0]["id"] not in dep.log.read_text()  # sealed in the database, not logged

        assert openstack(user, "coe", "cluster", "delete", "mine").returncode == 0
        wait_status(user, "mine", "GONE")
        assert user_project.wait_empty() == []
        assert user_project.server_groups() == []  # released before the trust went
        assert _trusts_of(cloud, user_id) == []


@pytest.mark.parametrize("missing", ["SHOAL_KEYSTONE_CLOUD", "entry"])
def test_a_keystone_mode_that_cannot_work_is_one_line_and_exit_2(
    openstack_cloud: OpenStackCloud, tmp_path: Path, missing: str
) -> None:
    clouds = openstack_cloud.write_clouds_yaml(tmp_path / "clouds.yaml")
    extra = {"SHOAL_AUTH": "keystone", "SHOAL_KEYSTONE_CLOUDS_YAML": str(clouds)}
    if missing == "entry":
        extra["SHOAL_KEYSTONE_CLOUD"] = "no-such-entry"
    done = subprocess.run(
        [SHOAL, "serve", "--port", str(free_port())],
        env=shoal_env(tmp_path / "data", **extra), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    errors = [x for x in done.stderr.strip().splitlines() if not x.startswith("20")]  # no logs
    assert len(errors) == 1 and errors[0].startswith("error: SHOAL_KEYSTONE_CLOUD"), done.stderr
    assert "Traceback" not in done.stderr
