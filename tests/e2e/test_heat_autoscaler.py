"""The Kubernetes cluster-autoscaler's "magnum" provider, replayed against shoal on real
Heat and Nova (issue 25): the requests it makes (cloudprovider/magnum,
magnum_manager_impl.go), as plain HTTP, with the fields it reads asserted.

Its sequence: the cluster by name (`GET clusters/{name}`: its uuid); node group
discovery (`GET clusters/{uuid}/nodegroups`, then each non-master group's detail:
max_node_count set, role, stack_id); the four Heat reads of a group (`GET
stacks/{stack_id}` for its name, its `kube_minions` resource for the nested stack's id,
`GET stacks/{nested id}` for that stack's name, then the nested stack's resources and
the nested stack itself for its `refs_map` output: member index -> server id); resize
up (`POST clusters/{uuid}/actions/resize` with node_count and nodegroup); resize down
with `nodes_to_remove`: a registered node by its Nova server id (its systemUUID), one
that never registered by its member index.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness.openstack.cloud import OpenStackCloud
from tests.support.openstack_cloud import OPENSTACK_MARKS
from tests.support.process import admin_headers
from tests.support.shoal_on_nova import ShoalOnNova, shoal_on_nova

pytestmark = [
    *OPENSTACK_MARKS,
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack"),
]

LATEST = {"OpenStack-API-Version": "container-infra latest"}  # the autoscaler's microversion


@contextlib.contextmanager
def magnum_client(s: ShoalOnNova) -> Iterator[httpx.Client]:
    headers = {**admin_headers(s.env()), **LATEST}
    with httpx.Client(base_url=s.url + "/v1", headers=headers, timeout=30) as c:
        yield c


@contextlib.contextmanager
def heat_client(s: ShoalOnNova) -> Iterator[httpx.Client]:
    """Heat as the project's user, found in the catalog by type and name as the
    autoscaler does (`orchestration`/`heat`)."""
    conn = s.cloud.connection(s.project.creds)
    try:
        url = conn.session.get_endpoint(
            service_type="orchestration", service_name="heat", interface="public"
        )
        token = conn.session.get_token()
    finally:
        conn.close()
    assert url
    headers = {"X-Auth-Token": str(token), "Accept": "application/json"}
    with httpx.Client(base_url=url, headers=headers, timeout=30, follow_redirects=True) as c:
        yield c


def ok(resp: httpx.Response, *codes: int) -> Any:
    assert resp.status_code in (codes or (200,)), f"{resp.request.url}: {resp.text}"
    return resp.json() if resp.content else None


def discover(magnum: httpx.Client, cluster: str) -> tuple[str, list[dict[str, Any]]]:
    """checkClusterUUID and autoDiscoverNodeGroups: the cluster's uuid and the details of
    its non-master groups with a max_node_count."""
    uuid = ok(magnum.get(f"/clusters/{cluster}"))["uuid"]
    listed = ok(magnum.get(f"/clusters/{uuid}/nodegroups"))["nodegroups"]
    found = []
    for g in listed:
        if g["role"] == "master":
            continue
        detail = ok(magnum.get(f"/clusters/{uuid}/nodegroups/{g['uuid']}"))
        # The fields the provider's node group struct reads, with the types it parses.
        assert isinstance(detail["id"], int) and isinstance(detail["node_count"], int)
        assert isinstance(detail["min_node_count"], int)
        datetime.fromisoformat(detail["created_at"])  # RFC 3339, as Go's time.Time reads
        if detail["max_node_count"] is not None:
            found.append(detail)
    return uuid, found


def stacks_of(heat: httpx.Client, stack_id: str) -> tuple[str, str, str]:
    """fetchNodeGroupStackIDs: the group stack's name, the kube_minions stack's id and name."""
    stack = ok(heat.get(f"/stacks/{stack_id}"))["stack"]  # Find: redirected to name/id
    assert stack["id"] == stack_id
    name = stack["stack_name"]
    minions = ok(heat.get(f"/stacks/{name}/{stack_id}/resources/kube_minions"))["resource"]
    nested_id = minions["physical_resource_id"]
    nested = ok(heat.get(f"/stacks/{nested_id}"))["stack"]
    return name, nested_id, nested["stack_name"]


def members(heat: httpx.Client, nested_name: str, nested_id: str) -> dict[str, tuple[str, str]]:
    """getNodes: member index -> (its resource status, its server id from refs_map)."""
    resources = ok(heat.get(f"/stacks/{nested_name}/{nested_id}/resources"))["resources"]
    stack = ok(heat.get(f"/stacks/{nested_name}/{nested_id}"))["stack"]
    outputs = {o["output_key"]: o["output_value"] for o in stack["outputs"]}
    refs = outputs["refs_map"]
    got = {}
    for r in resources:
        if r["resource_status"] == "DELETE_COMPLETE":
            continue
        got[r["resource_name"]] = (r["resource_status"], refs.get(r["resource_name"]))
    return got


def test_the_cluster_autoscalers_requests_work_on_the_heat_provider(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    cloud = openstack_heat
    with shoal_on_nova(cloud, tmp_path, driver="heat") as s, magnum_client(s) as magnum:
        ok(magnum.post("/clustertemplates", json={
            "name": "as-t", "coe": "kubernetes", "image_id": cloud.image_name,
            "external_network_id": "public", "flavor_id": "m1.small",
            "master_flavor_id": "m1.small"}), 201)  # fmt: skip
        ok(magnum.post("/clusters", json={"name": "as", "cluster_template_id": "as-t",
                                          "master_count": 1, "node_count": 1}), 202)  # fmt: skip
        s.wait_status("as", "CREATE_COMPLETE", timeout=300)
        ok(magnum.post("/clusters/as/nodegroups", json={
            "name": "auto", "node_count": 2, "min_node_count": 1, "max_node_count": 5,
            "flavor_id": "m1.small"}), 202)  # fmt: skip
        s.wait_status("as", "UPDATE_COMPLETE", timeout=300)

        # Discovery: the group with a max_node_count, and its real stack.
        uuid, groups = discover(magnum, "as")
        assert [g["name"] for g in groups] == ["auto"]
        group = groups[0]
        assert (group["node_count"], group["min_node_count"], group["max_node_count"]) == (2, 1, 5)

        with heat_client(s) as heat:
            name, nested_id, nested_name = stacks_of(heat, group["stack_id"])
            assert name.startswith(f"shoal-{s.deployment}-")

            def settled(count: int) -> dict[str, str]:
                """What the autoscaler sees once the group is done: its node_count, and a
                member per node, each complete with its server: index -> server id."""

                def done() -> dict[str, str] | None:
                    g = ok(magnum.get(f"/clusters/{uuid}/nodegroups/{group['uuid']}"))
                    if g["status"] not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
                        return None
                    got = members(heat, nested_name, nested_id)
                    if len(got) != count or any(
                        st not in ("CREATE_COMPLETE", "UPDATE_COMPLETE") or not ref
                        for st, ref in got.values()
                    ):
                        return None
                    assert g["node_count"] == count
                    return {i: ref for i, (_, ref) in got.items()}

                return dict(s.wait(done, f"{count} members complete", timeout=300))

            first = settled(2)
            by_server = {n["provider_id"]: n for n in s.nodes("as", "auto")}
            assert set(first.values()) == set(by_server)

            # Scale up: the resize the provider sends (node_count, nodegroup).
            body = {"node_count": 4, "nodegroup": group["uuid"]}
            assert ok(magnum.post(f"/clusters/{uuid}/actions/resize", json=body), 202)["uuid"]
            grown = settled(4)
            assert {i: grown[i] for i in first} == first  # the members it had, untouched

            # Scale down, a registered node: by its systemUUID (its Nova server id).
            index, server = sorted(grown.items(), key=lambda kv: int(kv[0]))[1]
            body = {"node_count": 3, "nodegroup": group["uuid"], "nodes_to_remove": [server]}
            ok(magnum.post(f"/clusters/{uuid}/actions/resize", json=body), 202)
            after_id = settled(3)
            assert after_id == {i: v for i, v in grown.items() if i != index}  # exactly it

            # Scale down by member index (the form it sends for a node that never registered).
            index = sorted(after_id, key=int)[-1]
            body = {"node_count": 2, "nodegroup": group["uuid"], "nodes_to_remove": [index]}
            ok(magnum.post(f"/clusters/{uuid}/actions/resize", json=body), 202)
            after_index = settled(2)
            assert after_index == {i: v for i, v in after_id.items() if i != index}
            servers = {sv.id for sv in s.servers()}
            assert grown[index] not in servers and server not in servers

            # A member index the group does not have: refused, naming it.
            body = {"node_count": 1, "nodegroup": group["uuid"], "nodes_to_remove": ["99"]}
            refused = magnum.post(f"/clusters/{uuid}/actions/resize", json=body)
            assert refused.status_code == 400, refused.text
            assert "'99' is not a node of this node group" in refused.text

        ok(magnum.delete(f"/clusters/{uuid}"), 204)
        s.wait_status("as", "GONE", timeout=300)
        assert s.project.wait_empty() == []
