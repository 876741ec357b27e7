"""Bounds on what one request may ask, through real HTTP: node counts per group and
per cluster (settings), body size (413 before the body is read whole), list and
string sizes, JSON-patch length, headers, and the microversion header. Every
refusal is a 4xx in Magnum's error shape that stores nothing."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from shoal.domain import validation as v
from tests.integration.api_support import Api, row_counts, seed_nodes
from tests.support.server import LiveServer

HUGE = 2_147_483_647
IMAGE = "fedora-coreos-40"


def _refused(r: httpx.Response, status: int, *words: str, code: str = "client") -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["errors"][0]
    assert err["status"] == status and err["code"] == code and err["request_id"]
    for w in words:
        assert w in err["detail"], (w, err["detail"])
    return err


def test_huge_node_counts_are_refused_on_every_path_and_store_nothing(
    server: LiveServer,
) -> None:
    api = Api(server)
    master = {"name": "m", "role": "master", "node_count": 1}
    api.template("ct-small", node_group_templates=[master, {"name": "w", "node_count": 2}])
    api.cluster(name="base", image_id=IMAGE, node_count=2)
    api.ok("POST", "/nodegrouptemplates", 201, json={"name": "ngt", "node_count": 1})
    before = row_counts(server)
    per_group = ("1000 nodes per node group", "SHOAL_MAX_NODES_PER_GROUP")
    cases: list[tuple[str, str, Any]] = [
        # The four creation paths of a cluster, and node_groups entries.
        ("POST", "/clusters", {"name": "c", "image_id": IMAGE, "node_count": HUGE}),
        ("POST", "/clusters", {"name": "c", "cluster_template_id": "ct-small",
                               "master_count": HUGE}),
        ("POST", "/clusters", {"name": "c", "from_cluster": "base", "node_count": HUGE}),
        ("POST", "/clusters", {"name": "c", "image_id": IMAGE,
                               "node_groups": [{"name": "m", "role": "master", "node_count": 1},
                                               {"name": "w", "node_count": HUGE}]}),
        ("POST", "/clusters", {"name": "c", "image_id": IMAGE,
                               "node_groups": [{"name": "m", "role": "master", "node_count": 1},
                                               {"name": "w", "max_node_count": 1001}]}),
        ("PATCH", "/clusters/base", [{"op": "replace", "path": "/node_count", "value": HUGE}]),
        ("PATCH", "/clusters/base", [{"op": "replace", "path": "/master_count", "value": 1001}]),
        ("POST", "/clusters/base/actions/resize", {"node_count": HUGE}),
        ("POST", "/clusters/base/actions/resize", {"node_count": 1001}),
        ("POST", "/clusters/base/nodegroups", {"name": "big", "node_count": HUGE}),
        ("POST", "/clusters/base/nodegroups", {"name": "big", "max_node_count": HUGE}),
        ("PATCH", "/clusters/base/nodegroups/default-worker",
         [{"op": "replace", "path": "/max_node_count", "value": HUGE}]),
        ("POST", "/nodegrouptemplates", {"name": "big", "node_count": HUGE}),
        ("PATCH", "/nodegrouptemplates/ngt",
         [{"op": "replace", "path": "/max_node_count", "value": 1001}]),
        ("POST", "/clustertemplates",
         {"name": "big", "image_id": IMAGE,
          "node_group_templates": [{"name": "w", "node_count": HUGE}]}),
    ]  # fmt: skip
    for method, path, body in cases:
        r = api.request(method, path, json=body)
        _refused(r, 400, *per_group)
    assert row_counts(server) == before
    assert api.ok("GET", "/clusters/base")["node_count"] == 2


def test_the_cluster_limit_counts_every_group_and_lets_a_cluster_shrink(
    server: LiveServer,
) -> None:
    api = Api(server)
    per_cluster = ("5000 nodes per cluster", "SHOAL_MAX_NODES_PER_CLUSTER")
    six = [{"name": "m", "role": "master", "node_count": 1}] + [
        {"name": f"w{i}", "node_count": 1000} for i in range(5)
    ]
    before = row_counts(server)
    _refused(api.post("/clusters", json={"name": "c", "image_id": IMAGE, "node_groups": six}),
             400, "5001 nodes", *per_cluster)  # fmt: skip
    _refused(api.post("/clustertemplates", json={"name": "t", "image_id": IMAGE,
                                                 "node_group_templates": six}),
             400, *per_cluster)  # fmt: skip
    assert row_counts(server) == before

    # At the limit: accepted. One more node anywhere: refused.
    api.cluster(name="full", image_id=IMAGE, node_groups=[six[0], *six[1:5],
                {"name": "w4", "node_count": 999}])  # fmt: skip
    before = row_counts(server)
    for method, path, body in [
        ("POST", "/clusters/full/nodegroups", {"name": "more", "node_count": 1}),
        ("POST", "/clusters/full/actions/resize", {"node_count": 1000, "nodegroup": "w4"}),
        ("POST", "/clusters/full/actions/resize", {"node_count": 3, "nodegroup": "m"}),
    ]:
        _refused(api.request(method, path, json=body), 400, *per_cluster)
    assert row_counts(server) == before
    # Shrinking is always allowed, and frees room for another group.
    api.ok("POST", "/clusters/full/actions/resize", 202, json={"node_count": 10, "nodegroup": "w4"})
    api.ok("POST", "/clusters/full/nodegroups", 202, json={"name": "more", "node_count": 1})


def _str_dict(n: int) -> dict[str, str]:
    return {f"k{i}": "v" for i in range(n)}


def test_lists_strings_and_patches_are_bounded(server: LiveServer) -> None:
    api = Api(server)
    api.cluster(name="b", image_id=IMAGE, node_count=2)
    worker = api.groups("b")["default-worker"]
    seed_nodes(server, worker["uuid"], 2)
    ok_cluster = {"name": "c", "image_id": IMAGE}
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    before = row_counts(server)
    cases: list[tuple[str, str, Any, str]] = [
        ("POST", "/clusters", {**ok_cluster, "labels": _str_dict(v.LABELS_MAX + 1)}, "labels"),
        ("POST", "/clusters", {**ok_cluster, "labels": {"a": "x" * (v.LABEL_VALUE_MAX + 1)}},
         "labels[a]"),
        ("POST", "/clusters", {**ok_cluster, "labels": {"k" * 254: "v"}}, "labels keys"),
        ("POST", "/clusters", {**ok_cluster, "name": "c" * 243}, "name"),
        ("POST", "/clusters", {**ok_cluster, "discovery_url": "h" * (v.TEXT_MAX + 1)},
         "discovery_url"),
        ("POST", "/clusters", {**ok_cluster, "node_groups": [
            {"name": f"g{i}", "role": "master", "node_count": 1}
            for i in range(v.NODE_GROUPS_MAX + 1)]}, "node_groups"),
        ("POST", "/clusters/b/actions/resize",
         {"node_count": 1, "nodes_to_remove": ["x"] * 1001}, "nodes_to_remove"),
        ("POST", "/clusters/b/actions/resize",
         {"node_count": 1, "nodes_to_remove": ["x" * 256]}, "nodes_to_remove"),
        ("PATCH", "/clusters/b",
         [{"op": "add", "path": f"/labels/k{i}", "value": "v"} for i in range(257)], "patch"),
        ("POST", "/clusters/b/nodegroups",
         {"name": "t", "node_taints": [taint] * (v.TAINTS_MAX + 1)}, "node_taints"),
        ("POST", "/clusters/b/nodegroups",
         {"name": "t", "node_taints": [{**taint, "value": "v" * 256}]}, "node_taints"),
        ("POST", "/clusters/b/nodegroups",
         {"name": "t", "availability_zones": [f"az-{i}" for i in range(v.AZS_MAX + 1)]},
         "availability_zones"),
        ("POST", "/clusters/b/nodegroups",
         {"name": "t", "vms": [{"id": i} for i in range(v.VMS_MAX + 1)]}, "vms"),
        ("POST", "/clusters/b/nodegroups",
         {"name": "t", "vms": [{"id": 0, "xml": "x" * v.VM_ENTRY_MAX}]}, "vms[0]"),
        ("POST", "/clusters/b/nodegroups", {"name": "n" * 256}, "name"),
        ("POST", "/clusters/b/nodegroups", {"name": "t", "node_labels": _str_dict(257)},
         "node_labels"),
    ]  # fmt: skip
    for method, path, body, word in cases:
        _refused(api.request(method, path, json=body), 400, word)
    assert row_counts(server) == before
    # At the bounds: accepted.
    api.cluster(name="c", image_id=IMAGE, labels=_str_dict(v.LABELS_MAX))
    most = [{"op": "add", "path": f"/labels/k{i}", "value": "v"} for i in range(v.PATCH_OPS_MAX)]
    api.ok("PATCH", "/clusters/b", 202, json=most)


def test_a_body_past_the_limit_is_refused_with_413_declared_or_streamed(
    server: LiveServer,
) -> None:
    api = Api(server)
    limit = server.runtime.settings.max_body_bytes
    big = b'{"name": "x", "labels": {"a": "' + b"x" * (2 * 1024 * 1024) + b'"}}'
    before = row_counts(server)
    r = api.post("/clusters", content=big, headers={"Content-Type": "application/json"})
    err = _refused(r, 413, f"larger than {limit} bytes", "SHOAL_MAX_BODY_BYTES")
    assert r.headers["X-OpenStack-Request-Id"] == err["request_id"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        for i in range(0, len(big), 64 * 1024):
            yield big[i : i + 64 * 1024]

    r = api.post("/clusters", content=chunks(), headers={"Content-Type": "application/json"})
    assert "content-length" not in r.request.headers
    _refused(r, 413, "SHOAL_MAX_BODY_BYTES")
    # The pydantic-typed sim routes are bounded alike.
    r = api.patch("/sim/config", content=chunks(), headers={"Content-Type": "application/json"})
    _refused(r, 413)
    assert row_counts(server) == before
    # The same connection keeps working, and a body under the limit is read.
    api.ok("GET", "/clusters")
    r = api.post("/clusters", json={"name": "x", "labels": {"a": "x" * 5000}})
    _refused(r, 400, "labels[a]")


def test_a_huge_microversion_is_406_and_a_huge_header_block_is_refused(
    server: LiveServer,
) -> None:
    for value in ("1." + "9" * 4300, "9" * 4300 + ".1", "1.0000001"):
        r = httpx.get(f"{server.v1}/clusters",
                      headers={"OpenStack-API-Version": f"container-infra {value}"})  # fmt: skip
        err = _refused(r, 406, code="magnum.microversion-unsupported")
        assert err["max_version"] == "1.14" and len(err["detail"]) < 300
    # A header block within the bound is served; past it, h11 refuses it before the
    # app and the server goes on.
    limit = server.runtime.settings.max_header_bytes
    token = {"X-Auth-Token": server.token()}
    r = httpx.get(f"{server.v1}/clusters", headers={**token, "X-Pad": "p" * (limit // 2)})
    assert r.status_code == 200
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /v1/clusters HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"p" * (limit + 1))
        answer = sock.recv(1024)
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert httpx.get(f"{server.v1}/clusters", headers=token).status_code == 200


@pytest.mark.parametrize("value", ["1001", 1001.0, "2147483648", 10**30])
def test_count_values_past_the_limit_in_other_spellings_are_400(
    server: LiveServer, value: Any
) -> None:
    api = Api(server)
    before = row_counts(server)
    r = api.post("/clusters", json={"name": "c", "image_id": IMAGE, "node_count": value})
    assert r.status_code == 400, r.text
    assert "node_count" in r.json()["errors"][0]["detail"]
    assert row_counts(server) == before
