"""Real clients' request sequences replayed through the real HTTP server.

The bodies and the status lists are those of Terraform's containerinfra resources
(over gophercloud), of magnum-ui in Horizon (over python-magnumclient at 1.13) and of
gophercloud itself, written down in tests/integration/client_requests.py from their
sources. Each test asserts what those clients read: the status strings they wait on
(any other fails `terraform apply`), the fields they copy into their state, and the
kubeconfig they build through /v1/certificates.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from magnumclient.common import utils as client_utils
from magnumclient.exceptions import BadRequest
from magnumclient.v1 import client as magnum

from tests.integration import client_requests as req
from tests.integration.api_support import Api
from tests.integration.conductor_http_support import conductor_server, wait
from tests.support.server import LiveServer

TF_DEADLINE = 60.0  # seconds for one Terraform wait on the fast sim


def _gopher(server: LiveServer, token: str, version: str | None = None) -> httpx.Client:
    """An HTTP client sending what gophercloud sends: the token, JSON, and a
    microversion header only when the resource sets one."""
    headers = {"X-Auth-Token": token, "Accept": "application/json"}
    if version is not None:
        headers["OpenStack-API-Version"] = f"container-infra {version}"
    return httpx.Client(base_url=server.v1, headers=headers, timeout=30)


def _terraform_wait(get: Any, step: str, deadline: float = TF_DEADLINE) -> list[str]:
    """Terraform's StateChangeConf: poll until a target status, failing on any status
    outside the step's pending/target lists or in the error list; a 404 reads as
    DELETE_COMPLETE. The statuses seen, in order."""
    pending, target = req.TERRAFORM_WAITS[step]
    seen: list[str] = []
    end = time.monotonic() + deadline
    while True:
        r = get()
        status = "DELETE_COMPLETE" if r.status_code == 404 else r.json()["status"]
        assert r.status_code in (200, 404), (r.status_code, r.text)
        if not seen or seen[-1] != status:
            seen.append(status)
        reason = r.json().get("status_reason") if r.status_code == 200 else None
        assert status not in req.TERRAFORM_ERRORS, (step, seen, reason)
        assert status in pending + target, f"terraform {step}: unexpected state {status} {seen}"
        if status in target:
            return seen
        assert time.monotonic() < end, f"terraform {step}: still {status} after {deadline}s"
        time.sleep(0.1)


def _kubeconfig_certs(http: httpx.Client, cluster: str) -> tuple[x509.Certificate, str]:
    """Terraform's kubeconfig: the CA from GET /certificates/{uuid}, then a client
    certificate for an RSA key's CSR (CN admin, O system:masters, OU terraform) from
    POST /certificates. The CA and the signed certificate's PEM."""
    ca = http.get(f"/certificates/{cluster}")
    assert ca.status_code == 200, ca.text
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "terraform"),
        ]
    )
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA512())
    pem_csr = csr.public_bytes(serialization.Encoding.PEM).decode()
    signed = http.post("/certificates", json={"cluster_uuid": cluster, "csr": pem_csr})
    assert signed.status_code == 201, signed.text
    ca_cert = x509.load_pem_x509_certificate(ca.json()["pem"].encode())
    return ca_cert, str(signed.json()["pem"])


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """`shoal serve` with the conductor and a fast sim (zones az-1..az-3)."""
    with conductor_server(tmp_path_factory.mktemp("replay")) as srv:
        yield srv


def _providers_checked(server: LiveServer, token: str) -> None:
    """Wait until a conductor has recorded the sim's zones (the API validates against them)."""
    http = _gopher(server, token, "latest")

    def checked() -> bool:
        items = http.get("/providers").json()["providers"]
        return all(p["checked_at"] for p in items)

    wait(checked, 30, "the conductor's first provider check")


# --- Terraform: template, cluster, node group, kubeconfig, delete ---------------------


def test_terraform_lifecycle(cloud: LiveServer) -> None:
    token = cloud.token("default", "admin")
    tf = _gopher(cloud, token)  # the provider's client: no microversion header
    tf_ng = _gopher(cloud, token, req.NODEGROUP_MICROVERSION)

    # openstack_containerinfra_clustertemplate_v1: create, read, update, read.
    r = tf.post("/clustertemplates", json=req.terraform_template_create("tf-ct"))
    assert r.status_code == 201, r.text
    ct = r.json()["uuid"]
    got = tf.get(f"/clustertemplates/{ct}").json()
    assert got["cluster_distro"] == "fedora-coreos"  # from the image name
    assert got["labels"]["kube_tag"] == req.KUBE_TAG
    r = tf.patch(
        f"/clustertemplates/{ct}",
        json=req.terraform_template_update(f"kube_tag={req.KUBE_TAG},region=eu-1"),
    )
    assert r.status_code == 200, r.text
    got = tf.get(f"/clustertemplates/{ct}").json()
    assert got["labels"] == {"kube_tag": req.KUBE_TAG, "region": "eu-1"}
    assert got["master_lb_enabled"] is True and got["tls_disabled"] is False
    assert got["docker_volume_size"] == 20 and got["dns_nameserver"] is None

    # openstack_containerinfra_cluster_v1: create (create_timeout null), wait, read.
    r = tf.post("/clusters", json=req.gophercloud_cluster_create("tf-cluster", ct, 1))
    assert r.status_code == 202, r.text
    cid = r.json()["uuid"]
    seen = _terraform_wait(lambda: tf.get(f"/clusters/{cid}"), "create")
    assert seen[-1] == "CREATE_COMPLETE"
    c = tf.get(f"/clusters/{cid}").json()
    assert c["create_timeout"] == 60  # Magnum's default for a null
    assert c["coe_version"] == req.KUBE_TAG and c["cluster_distro"] == "fedora-coreos"
    assert c["cluster_template_id"] == ct and c["api_address"]
    assert (c["master_count"], c["node_count"]) == (1, 1)
    assert len(c["master_addresses"]) == 1 and len(c["node_addresses"]) == 1
    assert c["floating_ip_enabled"] is False and c["stack_id"] == cid

    # The kubeconfig the resource's read builds: a client certificate signed by the CA.
    ca, pem = _kubeconfig_certs(tf, cid)
    cert = x509.load_pem_x509_certificate(pem.encode())
    cert.verify_directly_issued_by(ca)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "admin"

    # Cluster update: node_count as a string, then the update wait.
    patch = [{"op": "replace", "path": "/node_count", "value": "2"}]
    r = tf.patch(f"/clusters/{cid}", json=patch)
    assert r.status_code == 202, r.text
    assert tf.get(f"/clusters/{cid}").json()["status"] == "UPDATE_IN_PROGRESS"
    _terraform_wait(lambda: tf.get(f"/clusters/{cid}"), "update")
    assert tf.get(f"/clusters/{cid}").json()["node_count"] == 2

    # openstack_containerinfra_nodegroup_v1: create, wait, PATCH max, resize, delete.
    r = tf_ng.post(f"/clusters/{cid}/nodegroups", json=req.gophercloud_nodegroup_create("gpu"))
    assert r.status_code == 202, r.text
    ng = r.json()["uuid"]
    ng_get = lambda: tf_ng.get(f"/clusters/{cid}/nodegroups/{ng}")  # noqa: E731
    _terraform_wait(ng_get, "create")
    r = tf_ng.patch(
        f"/clusters/{cid}/nodegroups/{ng}",
        json=[{"op": "replace", "path": "/max_node_count", "value": 4}],
    )
    assert r.status_code == 202, r.text
    assert r.json()["max_node_count"] == 4
    r = tf_ng.post(f"/clusters/{cid}/actions/resize", json={"node_count": 2, "nodegroup": ng})
    assert r.status_code == 202, r.text
    assert ng_get().json()["status"] == "UPDATE_IN_PROGRESS"
    _terraform_wait(ng_get, "update")
    assert ng_get().json()["node_count"] == 2
    assert tf_ng.delete(f"/clusters/{cid}/nodegroups/{ng}").status_code == 204
    _terraform_wait(ng_get, "delete")

    # Cluster delete: DELETE_IN_PROGRESS until the 404 Terraform reads as done.
    assert tf.delete(f"/clusters/{cid}").status_code == 204
    seen = _terraform_wait(lambda: tf.get(f"/clusters/{cid}"), "delete")
    assert seen[-1] == "DELETE_COMPLETE"
    assert tf.delete(f"/clustertemplates/{ct}").status_code == 204


def test_terraform_template_labels_as_python_literal(server: LiveServer) -> None:
    """A Python client's `str(dict)` labels and Terraform's booleans as strings."""
    api = Api(server, version="1.1")
    ct = api.template("lit")["uuid"]
    patch = [
        {"op": "replace", "path": "/labels", "value": "{'kube_tag': 'v1.20.2', 'a': 'b'}"},
        {"op": "replace", "path": "/public", "value": "false"},
        {"op": "replace", "path": "/floating_ip_enabled", "value": "False"},
    ]
    got = api.ok("PATCH", f"/clustertemplates/{ct}", json=patch)
    assert got["labels"] == {"kube_tag": "v1.20.2", "a": "b"}
    assert got["public"] is False and got["floating_ip_enabled"] is False


# --- Statuses right after a change, before any conductor pass -------------------------


def test_resize_and_patch_read_update_in_progress_at_once(server: LiveServer) -> None:
    """The API's answer and the very next GET read UPDATE_IN_PROGRESS (no conductor
    runs on this server): Terraform's update wait accepts nothing else."""
    api = Api(server)
    ct = api.template("now")["uuid"]
    body = req.gophercloud_cluster_create("now", ct, 1)
    cid = api.ok("POST", "/clusters", 202, json=body)["uuid"]
    assert api.ok("GET", f"/clusters/{cid}")["status"] == "CREATE_IN_PROGRESS"
    ng = api.groups(cid)["default-worker"]["uuid"]
    r = api.ok(
        "POST", f"/clusters/{cid}/actions/resize", 202, json={"node_count": 3, "nodegroup": ng}
    )
    assert r == {"uuid": cid}
    group = api.ok("GET", f"/clusters/{cid}/nodegroups/{ng}")
    assert (group["status"], group["node_count"]) == ("UPDATE_IN_PROGRESS", 3)
    assert api.ok("GET", f"/clusters/{cid}")["status"] == "UPDATE_IN_PROGRESS"
    patch = [{"op": "replace", "path": "/node_count", "value": "2"}]
    api.ok("PATCH", f"/clusters/{cid}", 202, json=patch)
    c = api.ok("GET", f"/clusters/{cid}")
    assert (c["status"], c["node_count"]) == ("UPDATE_IN_PROGRESS", 2)
    api.ok("DELETE", f"/clusters/{cid}", 204)
    assert api.ok("GET", f"/clusters/{cid}")["status"] == "DELETE_IN_PROGRESS"


# --- gophercloud's bodies: null and string scalars, and garbage ---------------------


@pytest.mark.parametrize(
    ("extra", "expect"),
    [
        ({}, {"create_timeout": 60, "node_count": 1, "master_count": 1}),
        ({"create_timeout": 15}, {"create_timeout": 15}),
        ({"create_timeout": "30", "node_count": "2"}, {"create_timeout": 30, "node_count": 2}),
        ({"master_count": None, "node_count": None}, {"master_count": 1, "node_count": 1}),
        ({"docker_volume_size": "", "keypair": ""}, {"docker_volume_size": None}),
    ],
)
def test_gophercloud_cluster_bodies(
    server: LiveServer, extra: dict[str, Any], expect: dict[str, Any]
) -> None:
    api = Api(server, version="1.1")
    ct = api.template("g")["uuid"]
    c = api.cluster(**{**req.gophercloud_cluster_create("g", ct, 1), **extra})
    assert {k: c[k] for k in expect} == expect


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("create_timeout", "three", "create_timeout must be an integer"),
        ("create_timeout", -1, "create_timeout must be >= 0"),
        ("node_count", "2.5", "node_count must be an integer"),
        ("floating_ip_enabled", "maybe", "floating_ip_enabled must be a boolean"),
        ("master_lb_enabled", 2, "master_lb_enabled must be a boolean"),
        ("labels", "no pairs here", "labels must be an object"),
    ],
)
def test_garbage_is_a_clear_400(server: LiveServer, field: str, value: Any, says: str) -> None:
    api = Api(server, version="1.13")
    ct = api.template("bad")["uuid"]
    before = len(api.ok("GET", "/clusters")["clusters"])
    r = api.post("/clusters", json={**req.gophercloud_cluster_create("bad", ct, 1), field: value})
    assert r.status_code == 400, r.text
    assert says in r.json()["errors"][0]["detail"]
    assert len(api.ok("GET", "/clusters")["clusters"]) == before


# --- magnum-ui (Horizon) through python-magnumclient at 1.13 ---------------------------


def _horizon(server: LiveServer, token: str) -> Any:
    """magnum-ui's client: python-magnumclient at the deployment's microversion."""
    return magnum.Client(auth_token=token, magnum_url=server.v1, api_version="1.13")


def test_magnum_ui_panel(cloud: LiveServer) -> None:
    token = cloud.token("default", "admin")
    mc = _horizon(cloud, token)
    http = _gopher(cloud, token, "1.13")
    _providers_checked(cloud, token)

    ct = mc.cluster_templates.create(**req.magnum_ui_template_create("ui-ct"))
    assert ct.docker_volume_size == 10 and ct.tls_disabled is False and ct.public is False
    assert ct.floating_ip_enabled is True and ct.cluster_distro == "fedora-coreos"
    assert ct.network_driver == "flannel"  # "" took the default

    # An unknown zone is refused at create; nothing is made.
    bad = req.magnum_ui_cluster_create("ui-bad", ct.uuid, "az-9")
    with pytest.raises(BadRequest) as refused:
        mc.clusters.create(**bad)
    assert "az-9" in str(refused.value) and "az-1" in str(refused.value)
    assert [c.name for c in mc.clusters.list()] == []

    created = mc.clusters.create(**req.magnum_ui_cluster_create("ui", ct.uuid, "az-2"))
    cid = created.uuid
    wait(lambda: mc.clusters.get(cid).status == "CREATE_COMPLETE", TF_DEADLINE, "ui create")
    c = mc.clusters.get(cid)
    assert c.coe_version == req.KUBE_TAG and c.create_timeout == 60
    assert (c.master_count, c.node_count) == (1, 2) and c.cluster_id == cid
    nodes = http.get(f"/clusters/{cid}/nodes").json()["nodes"]
    assert len(nodes) == 3 and {n["availability_zone"] for n in nodes} == {"az-2"}
    groups = {g.name: g for g in mc.nodegroups.list(cid, detail=True)}
    assert groups["default-worker"].availability_zones == ["az-2"]

    # The list page (detail), then Resize (default-worker) and its wait.
    listed = {x.uuid: x for x in mc.clusters.list(detail=True)}
    assert listed[cid].status == "CREATE_COMPLETE"
    mc.clusters.resize(cid, 3, nodes_to_remove=[], nodegroup="default-worker")
    assert mc.clusters.get(cid).status == "UPDATE_IN_PROGRESS"
    wait(lambda: mc.clusters.get(cid).status == "UPDATE_COMPLETE", TF_DEADLINE, "ui resize")
    assert mc.clusters.get(cid).node_count == 3

    # The template goes (allowed: the cluster keeps its copy); the panel still works.
    mc.cluster_templates.delete(ct.uuid)
    assert ct.uuid not in {t.uuid for t in mc.cluster_templates.list()}
    kept = mc.cluster_templates.get(c.cluster_template_id)
    assert kept.uuid == ct.uuid and kept.name == "ui-ct" and kept.coe == "kubernetes"
    assert kept.tls_disabled is False and kept.kept_by_cluster == cid
    assert kept.labels["kube_tag"] == req.KUBE_TAG

    # Get Cluster Config, as magnum-ui's cluster_config does it.
    tls = client_utils.generate_csr_and_key()
    tls["ca"] = mc.certificates.get(cluster_uuid=cid).pem
    tls["cert"] = mc.certificates.create(cluster_uuid=cid, csr=tls.pop("csr")).pem
    config = client_utils.config_cluster(c, kept, cfg_dir="", direct_output=True, certs=tls)
    assert f"server: {c.api_address}" in config
    assert base64.b64encode(tls["ca"].encode()).decode() in config

    # The kept copy is read-only.
    r = http.patch(
        f"/clustertemplates/{ct.uuid}", json=[{"op": "replace", "path": "/name", "value": "x"}]
    )
    assert r.status_code == 400 and "read-only copy" in r.json()["errors"][0]["detail"]
    r = http.delete(f"/clustertemplates/{ct.uuid}")
    assert r.status_code == 400 and "from_cluster" in r.json()["errors"][0]["detail"]

    # Rotate Cluster Credentials: refused in Magnum's shape, saying what to do instead.
    with pytest.raises(BadRequest) as rotate:
        mc.credentials.update(cid)
    assert "not implemented" in str(rotate.value)
    assert f"/v1/certificates/{cid}" in str(rotate.value)
    r = http.patch(f"/credentials/{cid}")
    assert r.status_code == 400 and r.json()["errors"][0]["status"] == 400
    assert http.patch("/credentials/no-such-cluster").status_code == 404

    mc.clusters.delete(cid)
    wait(lambda: http.get(f"/clusters/{cid}").status_code == 404, TF_DEADLINE, "ui delete")
    assert http.get(f"/clustertemplates/{ct.uuid}").status_code == 404  # no cluster keeps it


def test_kept_template_only_for_who_sees_the_cluster(server: LiveServer) -> None:
    """Another project's caller gets a 404 for the deleted template's id."""
    owner, other = Api(server), Api(server)
    ct = owner.template("mine")["uuid"]
    owner.cluster(**req.gophercloud_cluster_create("mine", ct, 1))
    owner.ok("DELETE", f"/clustertemplates/{ct}", 204)
    assert owner.ok("GET", f"/clustertemplates/{ct}")["uuid"] == ct
    assert other.get(f"/clustertemplates/{ct}").status_code == 404
    assert other.delete(f"/clustertemplates/{ct}").status_code == 404


def test_zone_label_of_an_unchecked_provider_is_accepted_and_pins(server: LiveServer) -> None:
    """No conductor has checked the provider yet: the zone is taken as given (the
    group fails later with the provider's reason if the zone does not exist)."""
    api = Api(server, version="1.13")
    ct = api.template("z")["uuid"]
    body = req.magnum_ui_cluster_create("z", ct, "somewhere")
    c = api.cluster(**body)
    groups = api.groups(c["uuid"])
    assert groups["default-worker"]["availability_zones"] == ["somewhere"]
    assert groups["default-master"]["availability_zones"] == ["somewhere"]
    # A group added later takes the cluster's labels, so the zone too; its own zones win.
    added = api.ok("POST", f"/clusters/{c['uuid']}/nodegroups", 202, json={"name": "more"})
    assert added["availability_zones"] == ["somewhere"]
    own = {"name": "own", "availability_zones": ["elsewhere"]}
    added = api.ok("POST", f"/clusters/{c['uuid']}/nodegroups", 202, json=own)
    assert added["availability_zones"] == ["elsewhere"]


def test_template_path_unchanged_for_missing_ids(server: LiveServer) -> None:
    """A template id no cluster was made from stays a plain 404."""
    api = Api(server)
    missing = "00000000-0000-4000-8000-000000000000"
    r = api.get(f"/clustertemplates/{missing}")
    assert r.status_code == 404 and r.json()["errors"][0]["status"] == 404
