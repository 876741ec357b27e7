"""The real `openstack coe` CLI (python-openstackclient + magnumclient plugin),
as a subprocess against the real server: templates, clusters, node groups,
resize with --nodes-to-remove, upgrade. Kept to a modest number of calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.api_support import api_server, marked, seed_nodes
from tests.support.openstack_cli import run_coe
from tests.support.server import LiveServer


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LiveServer]:
    with api_server(request.param, tmp_path) as srv:
        yield srv


def coe(server: LiveServer, *args: str, json_out: bool = True) -> Any:
    """One `openstack coe ...` call; its JSON output (or stdout)."""
    done = run_coe(server, *args, *(["-f", "json"] if json_out else []))
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    if not json_out:
        return done.stdout
    # Some create commands print "Request to create ... accepted" before the JSON.
    starts = [i for i in (done.stdout.find("{"), done.stdout.find("[")) if i >= 0]
    return json.loads(done.stdout[min(starts) :])


def test_openstack_coe_lifecycle(server: LiveServer) -> None:
    ct = coe(
        server, "cluster", "template", "create", "k8s", "--coe", "kubernetes",
        "--image", "fedora-coreos-40", "--external-network", "public", "--flavor", "m1.medium",
        "--labels", "kube_tag=v1.20.2,foo=bar", "--network-driver", "calico",
    )  # fmt: skip
    assert ct["name"] == "k8s" and ct["labels"] == {"kube_tag": "v1.20.2", "foo": "bar"}
    coe(server, "cluster", "template", "create", "k8s-new", "--coe", "kubernetes",
        "--image", "fedora-coreos-41", "--external-network", "public", json_out=False)  # fmt: skip
    listed = coe(server, "cluster", "template", "list")
    assert {t["name"] for t in listed} == {"k8s", "k8s-new"}
    upd = coe(server, "cluster", "template", "update", "k8s", "--flavor", "m1.large")
    assert upd["flavor_id"] == "m1.large"

    out = coe(
        server, "cluster", "create", "c1", "--cluster-template", "k8s", "--node-count", "3",
        "--master-count", "1", "--labels", "extra=1", "--merge-labels", json_out=False,
    )  # fmt: skip
    assert "accepted" in out.lower()
    shown = coe(server, "cluster", "show", "c1")
    assert shown["node_count"] == 3 and shown["master_count"] == 1
    assert shown["flavor_id"] == "m1.large" and shown["status"] == "CREATE_IN_PROGRESS"
    assert shown["labels"] == {"kube_tag": "v1.20.2", "foo": "bar", "extra": "1"}
    coe(server, "cluster", "update", "c1", "--node-count", "4", "--master-count", "3",
        "--label", "extra=2", "--no-label", "foo", json_out=False)  # fmt: skip
    assert [(c["node_count"], c["master_count"]) for c in coe(server, "cluster", "list")] == [
        (4, 3)
    ]

    out = coe(
        server, "nodegroup", "create", "c1", "gpu", "--flavor", "g1.large", "--node-count", "2",
        "--role", "gpu", "--max-nodes", "5", json_out=False,
    )  # fmt: skip
    assert "accepted" in out.lower()
    coe(server, "nodegroup", "update", "c1", "gpu", "--min-nodes", "1",
        "--node-labels", "accel=nvidia", "--node-taints", "gpu=true:NoSchedule",
        json_out=False)  # fmt: skip
    groups = {g["name"]: g for g in coe(server, "nodegroup", "list", "c1")}
    assert set(groups) == {"default-master", "default-worker", "gpu"}
    gpu = coe(server, "nodegroup", "show", "c1", "gpu")
    assert gpu["min_node_count"] == 1 and gpu["max_node_count"] == 5 and gpu["node_count"] == 2
    assert gpu["role"] == "gpu" and gpu["flavor_id"] == "g1.large"
    assert gpu["node_labels"] == {"accel": "nvidia"}
    assert gpu["node_taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]

    nodes = seed_nodes(server, gpu["uuid"], 2)
    coe(server, "cluster", "resize", "c1", "1", "--nodegroup", "gpu",
        "--nodes-to-remove", nodes[1]["uuid"], json_out=False)  # fmt: skip
    assert marked(server, gpu["uuid"]) == {nodes[1]["uuid"]}
    coe(server, "cluster", "upgrade", "c1", "k8s-new", json_out=False)
    after = coe(server, "nodegroup", "show", "c1", "gpu")
    assert after["node_count"] == 1 and after["image_id"] == "fedora-coreos-41"

    coe(server, "nodegroup", "delete", "c1", "gpu", json_out=False)
    coe(server, "cluster", "delete", "c1", json_out=False)
    coe(server, "cluster", "template", "delete", "k8s", json_out=False)
    final = coe(server, "cluster", "show", "c1")
    assert final["status"] == "DELETE_IN_PROGRESS"
    assert final["labels"] == {"kube_tag": "v1.20.2", "extra": "2"}
