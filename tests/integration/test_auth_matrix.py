"""Who may do what, route by route: every operation of the API, called with no token,
as a reader, a member and an admin of the project that owns the resources, and as a
member and an admin of another project (auth mode local, the embedded default).

The table names the least role each operation needs and what another project's
caller gets: 404 for what belongs to a project (never a 403 that would confirm it
exists), a 403 for another project's quota. A caller below the role gets 403 and
nothing is stored; a caller with it gets an answer that is neither 401 nor 403. A
test checks that the table covers every operation the OpenAPI document declares.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.integration.api_support import Api, row_counts, seed_nodes
from tests.support.server import LiveServer

IMAGE = "fedora-coreos-40"
ROLES = ("reader", "member", "admin")
NOT_SCOPED = None  # the operation names nothing of a project's


def _csr() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "matrix")])
    csr = x509.CertificateSigningRequestBuilder().subject_name(name).sign(key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM).decode()


CSR = _csr()


@dataclass(frozen=True)
class World:
    """One project's resources, by uuid, made by its admin."""

    project: str
    template: str
    ngt: str
    cluster: str
    group: str
    operation: str
    token: str
    fault: int


def make_world(server: LiveServer) -> World:
    admin = Api(server, project=f"own-{uuid.uuid4().hex[:8]}", role="admin")
    t = admin.template(name="t")["uuid"]
    n = admin.ok("POST", "/nodegrouptemplates", 201, json={"name": "n"})["uuid"]
    c = admin.cluster(name="c", image_id=IMAGE)["uuid"]
    g = admin.ok("POST", f"/clusters/{c}/nodegroups", 202, json={"name": "extra"})["uuid"]
    seed_nodes(server, g, 1)
    ops = admin.ok("POST", f"/clusters/{c}/operations", 202, json={
        "kind": "reboot", "nodegroup": g})["operations"]  # fmt: skip
    tok = admin.ok("POST", "/tokens", 201, json={"project_id": admin.project})["uuid"]
    fault = admin.ok("POST", "/sim/faults", 201, json={"kind": "transient", "count": 0})["id"]
    return World(admin.project, t, n, c, g, ops[0], tok, int(fault))


@dataclass(frozen=True)
class Op:
    method: str
    path: str  # {t} {n} {c} {g} {op} {tok} {p} {fault}: the world's
    role: str  # the least role that may
    other: int | None  # what a member of another project gets; None: names nothing
    body: Callable[[World], Any] | None = None

    def url(self, w: World) -> str:
        return self.path.format(
            t=w.template, n=w.ngt, c=w.cluster, g=w.group, op=w.operation, tok=w.token,
            p=w.project, fault=w.fault,
        )  # fmt: skip

    @property
    def template(self) -> str:
        """The OpenAPI path this operation is."""
        out = self.path
        for mine, theirs in (
            ("{t}", "{ident}"), ("{n}", "{ident}"), ("{op}", "{uuid}"), ("{tok}", "{uuid}"),
            ("{fault}", "{fault_id}"), ("{p}", "{project_id}"),
        ):  # fmt: skip
            out = out.replace(mine, theirs)
        if out.startswith("/clusters/{c}/nodegroups"):
            out = out.replace("{c}", "{cluster}").replace("{g}", "{ident}")
        elif out.startswith(("/certificates/", "/credentials/")):
            out = out.replace("{c}", "{cluster_ident}")
        else:
            out = out.replace("{c}", "{ident}")
        if out.startswith("/quotas/"):
            out = "/quotas/{project_id}/{resource}"
        if out.startswith("/sim/servers/"):
            out = "/sim/servers/{machine_id}"
        if out.startswith("/providers/"):
            out = "/providers/{name}"
        if out.startswith("/orphans/{"):
            out = "/orphans/{machine_id}"
        return f"{self.method.lower()} /v1{out}"


def patch(path: str, value: Any) -> Callable[[World], Any]:
    return lambda w: [{"op": "replace", "path": path, "value": value}]


OPS = [
    Op("GET", "/auth/caller", "reader", NOT_SCOPED),
    Op("GET", "/stats", "reader", NOT_SCOPED),
    Op("GET", "/mservices", "admin", NOT_SCOPED),
    Op("GET", "/quotas", "reader", NOT_SCOPED),
    Op("POST", "/quotas", "admin", NOT_SCOPED,
       lambda w: {"project_id": w.project, "resource": "Cluster", "hard_limit": 5}),
    Op("GET", "/quotas/{p}/Cluster", "reader", 403),
    Op("PATCH", "/quotas/{p}/Cluster", "admin", 403, lambda w: {"hard_limit": 7}),
    Op("DELETE", "/quotas/{p}/Cluster", "admin", 403),
    Op("GET", "/clustertemplates", "reader", NOT_SCOPED),
    Op("POST", "/clustertemplates", "member", NOT_SCOPED,
       lambda w: {"name": "t2", "coe": "kubernetes", "image_id": IMAGE}),
    Op("GET", "/clustertemplates/detail", "reader", NOT_SCOPED),
    Op("GET", "/clustertemplates/{t}", "reader", 404),
    Op("PATCH", "/clustertemplates/{t}", "member", 404, patch("/labels", {"a": "b"})),
    Op("DELETE", "/clustertemplates/{t}", "member", 404),
    Op("GET", "/nodegrouptemplates", "reader", NOT_SCOPED),
    Op("POST", "/nodegrouptemplates", "member", NOT_SCOPED, lambda w: {"name": "n2"}),
    Op("GET", "/nodegrouptemplates/detail", "reader", NOT_SCOPED),
    Op("GET", "/nodegrouptemplates/{n}", "reader", 404),
    Op("PATCH", "/nodegrouptemplates/{n}", "member", 404, patch("/node_count", 2)),
    Op("DELETE", "/nodegrouptemplates/{n}", "member", 404),
    Op("GET", "/clusters/{c}/nodegroups", "reader", 404),
    Op("POST", "/clusters/{c}/nodegroups", "member", 404, lambda w: {"name": "ng2"}),
    Op("GET", "/clusters/{c}/nodegroups/detail", "reader", 404),
    Op("GET", "/clusters/{c}/nodegroups/{g}", "reader", 404),
    Op("PATCH", "/clusters/{c}/nodegroups/{g}", "member", 404, patch("/max_node_count", 5)),
    Op("DELETE", "/clusters/{c}/nodegroups/{g}", "member", 404),
    Op("GET", "/clusters", "reader", NOT_SCOPED),
    Op("POST", "/clusters", "member", NOT_SCOPED, lambda w: {"name": "c2", "image_id": IMAGE}),
    Op("GET", "/clusters/detail", "reader", NOT_SCOPED),
    Op("GET", "/clusters/{c}", "reader", 404),
    Op("PATCH", "/clusters/{c}", "member", 404, patch("/node_count", 2)),
    Op("DELETE", "/clusters/{c}", "member", 404),
    Op("POST", "/clusters/{c}/actions/resize", "member", 404,
       lambda w: {"node_count": 2, "nodegroup": w.group}),
    Op("POST", "/clusters/{c}/actions/upgrade", "member", 404,
       lambda w: {"cluster_template": w.template}),
    Op("POST", "/clusters/{c}/actions/pause", "member", 404, lambda w: {}),
    Op("POST", "/clusters/{c}/actions/resume", "member", 404, lambda w: {}),
    Op("POST", "/clusters/{c}/actions/abort", "member", 404, lambda w: {}),
    Op("GET", "/clusters/{c}/nodes", "reader", 404),
    Op("GET", "/clusters/{c}/events", "reader", 404),
    Op("GET", "/certificates/{c}", "reader", 404),
    Op("PATCH", "/certificates/{c}", "member", 404),
    # Magnum: a signing request naming a cluster the caller cannot see is a 400.
    Op("POST", "/certificates", "member", 400, lambda w: {"cluster_uuid": w.cluster, "csr": CSR}),
    Op("PATCH", "/credentials/{c}", "member", 404),  # not implemented: 400 to a member
    Op("GET", "/providers", "reader", NOT_SCOPED),
    Op("GET", "/providers/sim", "reader", NOT_SCOPED),
    Op("POST", "/clusters/{c}/operations", "member", 404,
       lambda w: {"kind": "reboot", "nodegroup": w.group}),
    Op("GET", "/clusters/{c}/operations", "reader", 404),
    Op("GET", "/clusters/{c}/operations/{op}", "reader", 404),
    Op("POST", "/tokens", "admin", NOT_SCOPED, lambda w: {"project_id": w.project}),
    Op("GET", "/tokens", "admin", NOT_SCOPED),
    Op("DELETE", "/tokens/{tok}", "admin", NOT_SCOPED),
    Op("GET", "/sim/servers", "admin", NOT_SCOPED),
    Op("GET", "/sim/servers/{c}", "admin", NOT_SCOPED),
    Op("DELETE", "/sim/servers/{c}", "admin", NOT_SCOPED),
    Op("GET", "/sim/config", "admin", NOT_SCOPED),
    Op("PATCH", "/sim/config", "admin", NOT_SCOPED, lambda w: {"jitter": 0.2}),
    Op("GET", "/sim/quotas/{p}", "admin", NOT_SCOPED),
    Op("PUT", "/sim/quotas/{p}", "admin", NOT_SCOPED, lambda w: {"cores": 100}),
    Op("GET", "/sim/faults", "admin", NOT_SCOPED),
    Op("POST", "/sim/faults", "admin", NOT_SCOPED, lambda w: {"kind": "transient", "count": 0}),
    Op("DELETE", "/sim/faults/{fault}", "admin", NOT_SCOPED),
    Op("DELETE", "/sim/faults", "admin", NOT_SCOPED),
    Op("POST", "/sim/reset", "admin", NOT_SCOPED),
    Op("GET", "/orphans", "admin", NOT_SCOPED),
    Op("DELETE", "/orphans/{c}", "admin", NOT_SCOPED),  # an admin's: 404, nothing held
    Op("POST", "/orphans/adopt", "admin", NOT_SCOPED, lambda w: {"cluster_id": w.cluster}),
]  # fmt: skip
PUBLIC = {"get /", "get /v1", "post /v1/agent/heartbeat", "post /v1/agent/tasks/{uuid}"}


def call(server: LiveServer, op: Op, w: World, token: str | None) -> httpx.Response:
    headers = {"OpenStack-API-Version": "container-infra latest"}
    if token is not None:
        headers["X-Auth-Token"] = token
    body = op.body(w) if op.body is not None else None
    with httpx.Client(base_url=server.v1, headers=headers, timeout=30) as c:
        return c.request(op.method, op.url(w), json=body)


def _id(op: Op) -> str:
    return f"{op.method} {op.path}"


def test_the_table_covers_every_operation(server: LiveServer) -> None:
    doc = httpx.get(server.url + "/openapi.json").json()
    methods = {"get", "put", "post", "delete", "patch"}
    declared = {f"{m} {p}" for p, item in doc["paths"].items() for m in item if m in methods}
    tested = {op.template for op in OPS}
    assert declared - PUBLIC == tested, (declared - PUBLIC - tested, tested - declared)
    secured = {f"{m} {p}" for p, item in doc["paths"].items() for m, o in item.items()
               if m in methods and o.get("security")}  # fmt: skip
    assert secured == tested  # the document says which operations need a token


@pytest.mark.parametrize("op", OPS, ids=_id)
def test_each_operation_by_role_in_its_own_project(server: LiveServer, op: Op) -> None:
    w = make_world(server)
    before = row_counts(server)
    r = call(server, op, w, None)
    assert r.status_code == 401, r.text
    assert call(server, op, w, "shoal_" + "x" * 43).status_code == 401
    assert row_counts(server) == before
    for role in ROLES:
        w = make_world(server) if role != "reader" else w  # allowed calls change things
        token = server.token(w.project, role)
        allowed = ROLES.index(role) >= ROLES.index(op.role)
        before = row_counts(server)
        r = call(server, op, w, token)
        if allowed:
            assert r.status_code not in (401, 403) and r.status_code < 500, (role, r.text)
        else:
            assert r.status_code == 403, (role, r.text)
            err = r.json()["errors"][0]
            assert op.role in err["detail"] and err["status"] == 403
            assert row_counts(server) == before, role


@pytest.mark.parametrize("op", [o for o in OPS if o.other is not None], ids=_id)
def test_another_projects_resources_are_not_there_for_a_member(server: LiveServer, op: Op) -> None:
    w = make_world(server)
    before = row_counts(server)
    r = call(server, op, w, server.token(f"other-{uuid.uuid4().hex[:8]}", "member"))
    assert r.status_code == op.other, r.text
    assert row_counts(server) == before


@pytest.mark.parametrize("op", [o for o in OPS if o.other == 404 and o.method == "GET"], ids=_id)
def test_an_admin_of_another_project_reaches_them_by_uuid(server: LiveServer, op: Op) -> None:
    w = make_world(server)
    r = call(server, op, w, server.token(f"ops-{uuid.uuid4().hex[:8]}", "admin"))
    assert r.status_code == 200, r.text


def test_lists_hold_only_the_callers_project_unless_an_admin_asks_for_all(
    server: LiveServer,
) -> None:
    w = make_world(server)
    member = Api(server)
    admin = Api(server, role="admin")
    for path, key in (("/clusters", "clusters"), ("/clustertemplates", "clustertemplates"),
                      ("/nodegrouptemplates", "nodegrouptemplates")):  # fmt: skip
        assert member.ok("GET", path)[key] == []
        assert admin.ok("GET", path)[key] == []
        everyone = {x["uuid"] for x in admin.ok("GET", path, params={"all_tenants": 1})[key]}
        assert {w.cluster, w.template, w.ngt} & everyone
        r = member.get(path, params={"all_tenants": "true"})
        assert r.status_code == 403 and "all_projects" in r.json()["errors"][0]["title"]
    assert member.ok("GET", "/stats") == {"clusters": 0, "nodes": 0}
    assert admin.ok("GET", "/stats", params={"all_tenants": 1})["clusters"] >= 1
    quotas = admin.ok("GET", "/quotas", params={"all_tenants": 1})["quotas"]
    assert isinstance(quotas, list)
    assert member.get("/quotas", params={"all_tenants": 1}).status_code == 403


def test_a_member_cannot_publish_a_template_an_admin_can(server: LiveServer) -> None:
    member, admin = Api(server), Api(server, role="admin")
    before = row_counts(server)
    body = {"name": "pub", "coe": "kubernetes", "image_id": IMAGE, "public": True}
    r = member.post("/clustertemplates", json=body)
    assert r.status_code == 403 and "clustertemplate:publish" in r.json()["errors"][0]["title"]
    assert row_counts(server) == before
    made = admin.ok("POST", "/clustertemplates", 201, json=body)
    # Every project sees a public template, and may make clusters from it.
    assert made["uuid"] in {t["uuid"] for t in member.ok("GET", "/clustertemplates")[
        "clustertemplates"]}  # fmt: skip
    member.cluster(name="from-public", cluster_template_id=made["uuid"])
    r = member.patch(f"/clustertemplates/{made['uuid']}", json=[
        {"op": "replace", "path": "/labels", "value": {"a": "b"}}])  # fmt: skip
    assert r.status_code == 400  # another project's template: readable, not writable


def test_provider_details_are_an_admins(server: LiveServer) -> None:
    member, admin = Api(server), Api(server, role="admin")
    seen = member.ok("GET", "/providers")["providers"][0]
    assert {"name", "driver", "reachable", "availability_zones", "flavors"} <= set(seen)
    assert not {"reason", "checked_by", "nodegroups", "sweeper"} & set(seen)
    full = admin.ok("GET", "/providers/sim")
    assert {"reason", "checked_by", "nodegroups", "sweeper"} <= set(full)
