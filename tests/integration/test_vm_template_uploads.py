"""Uploading a VM's domain template through the real HTTP app, at every place one is
taken: a member gets 403 naming the rule (`nodegroup:vm_template`); an admin's template
that reaches the host (`<filesystem>`, `<hostdev>`, `<qemu:commandline>`, a disk outside
shoal's pool) is a 400 naming the element; neither stores anything. An admin's good
template is taken, and a member may still change the rest of a group that has one."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from shoal.domain import vmtemplate
from tests.integration.api_support import Api, row_counts
from tests.support.server import LiveServer

IMAGE = "fedora-coreos-40"
GOOD = vmtemplate.DEFAULT.replace("<features>", "<description>{rack}</description><features>")
QEMU = "http://libvirt.org/schemas/domain/qemu/1.0"


def _with(devices: str = "", top: str = "") -> str:
    return vmtemplate.DEFAULT.replace("<devices>", "<devices>" + devices).replace(
        "<features>", top + "<features>"
    )


# what each reaches, and the element the 400 must name
EVIL = {
    "<filesystem>": _with("<filesystem type='mount'><source dir='/'/><target dir='h'/>"
                          "</filesystem>"),
    "<hostdev>": _with("<hostdev mode='subsystem' type='pci'><source><address domain='0' "
                       "bus='0x3b' slot='0' function='0'/></source></hostdev>"),
    "<qemu:commandline>": _with(top=f"<qemu:commandline xmlns:qemu='{QEMU}'><qemu:arg "
                                     "value='-chardev'/></qemu:commandline>"),
    "/var/lib/libvirt/images/other.qcow2": _with(
        "<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source "
        "file='/var/lib/libvirt/images/other.qcow2'/><target dev='vdb'/></disk>"),
}  # fmt: skip
VMS = [{"id": "v0", "cpu": 1, "ram": 1, "rack": "r7"}]
MASTER = {"name": "m", "role": "master", "node_count": 1}


def virt_group(template: str | None = None, name: str = "hosts") -> dict[str, Any]:
    g: dict[str, Any] = {"name": name, "role": "virt", "flavor_id": "bm.large",
                         "node_count": 1, "vms": VMS}  # fmt: skip
    if template is not None:
        g["vm_template"] = template
    return g


@dataclass
class Place:
    """Where a template is uploaded: how to send one (as `api`), and the status taken."""

    send: Callable[[Api, dict[str, str], str], Any]
    ok: int


def _cluster_create(api: Api, w: dict[str, str], template: str) -> Any:
    return api.post("/clusters", json={"name": f"c-{uuid.uuid4().hex[:6]}", "image_id": IMAGE,
                                       "node_groups": [MASTER, virt_group(template)]})  # fmt: skip


def _group_create(api: Api, w: dict[str, str], template: str) -> Any:
    body = virt_group(template, name=f"h-{uuid.uuid4().hex[:6]}")
    return api.post(f"/clusters/{w['cluster']}/nodegroups", json=body)


def _replace(template: str, path: str = "/vm_template") -> list[dict[str, Any]]:
    return [{"op": "replace", "path": path, "value": template}]


def _group_patch(api: Api, w: dict[str, str], template: str) -> Any:
    return api.patch(f"/clusters/{w['cluster']}/nodegroups/hosts", json=_replace(template))


def _ngt_create(api: Api, w: dict[str, str], template: str) -> Any:
    return api.post("/nodegrouptemplates", json=virt_group(template, f"n-{uuid.uuid4().hex[:6]}"))


def _ngt_patch(api: Api, w: dict[str, str], template: str) -> Any:
    return api.patch(f"/nodegrouptemplates/{w['ngt']}", json=_replace(template))


def _ct_create(api: Api, w: dict[str, str], template: str) -> Any:
    return api.post("/clustertemplates", json={
        "name": f"t-{uuid.uuid4().hex[:6]}", "coe": "kubernetes", "image_id": IMAGE,
        "node_group_templates": [virt_group(template)]})  # fmt: skip


def _ct_patch(api: Api, w: dict[str, str], template: str) -> Any:
    ops = _replace([virt_group(template)], "/node_group_templates")  # type: ignore[arg-type]
    return api.patch(f"/clustertemplates/{w['template']}", json=ops)


PLACES = {
    "cluster create": Place(_cluster_create, 202),
    "node group create": Place(_group_create, 202),
    "node group PATCH": Place(_group_patch, 202),
    "node group template create": Place(_ngt_create, 201),
    "node group template PATCH": Place(_ngt_patch, 200),
    "cluster template create": Place(_ct_create, 201),
    "cluster template PATCH": Place(_ct_patch, 200),
}


def world(server: LiveServer) -> tuple[Api, Api, dict[str, str]]:
    """A project's admin and member, and a cluster with a virt group, a node group
    template and a cluster template of theirs (made by the admin, with no template)."""
    admin = Api(server, project=f"vt-{uuid.uuid4().hex[:8]}", role="admin")
    member = Api(server, project=admin.project, role="member")
    cluster = admin.cluster(name="edge", image_id=IMAGE, node_groups=[MASTER, virt_group()])["uuid"]
    ngt = admin.ok("POST", "/nodegrouptemplates", 201, json=virt_group(name="vn"))["uuid"]
    template = admin.template(name="t")["uuid"]
    return admin, member, {"cluster": cluster, "ngt": ngt, "template": template}


def _errors(r: Any) -> str:
    body = r.json()
    assert list(body) == ["errors"] and body["errors"][0]["status"] == r.status_code, body
    return str(body["errors"][0]["detail"])


@pytest.mark.parametrize("place", PLACES.values(), ids=PLACES.keys())
def test_a_member_may_not_upload_and_nobody_may_reach_the_host(
    server: LiveServer, place: Place
) -> None:
    admin, member, w = world(server)
    before = row_counts(server)
    for element, template in [*EVIL.items(), ("(a good one)", GOOD)]:
        r = place.send(member, w, template)
        assert r.status_code == 403, (element, r.text)
        assert "nodegroup:vm_template" in _errors(r) and "admin" in _errors(r)
    for element, template in EVIL.items():
        r = place.send(admin, w, template)
        assert r.status_code == 400, (element, r.text)
        detail = _errors(r)
        assert element in detail and "vm_template" in detail and "line" in detail, detail
    assert row_counts(server) == before  # nothing written, by either
    r = place.send(admin, w, GOOD)
    assert r.status_code == place.ok, r.text


def test_an_admins_template_is_kept_and_a_member_still_changes_the_rest(
    server: LiveServer,
) -> None:
    admin, member, w = world(server)
    group = f"/clusters/{w['cluster']}/nodegroups/hosts"
    admin.ok("PATCH", group, 202, json=_replace(GOOD))
    assert admin.ok("GET", group)["vm_template"] == GOOD
    more = [*VMS, {"id": "v1", "cpu": 2, "ram": 2}]
    member.ok("PATCH", group, 202, json=[{"op": "replace", "path": "/vms", "value": more}])
    member.ok("PATCH", group, 202, json=_replace(GOOD))  # the same text again: no upload
    assert member.ok("GET", group)["vm_template"] == GOOD
    member.ok("PATCH", group, 202, json=[{"op": "remove", "path": "/vm_template"}])
    assert member.ok("GET", group)["vm_template"] is None  # back to the provider's
    r = member.post("/clusters", json={"name": "x", "image_id": IMAGE,
                                       "node_groups": [MASTER, virt_group("")]})  # fmt: skip
    assert r.status_code == 202, r.text  # an empty one is no template: the provider's
