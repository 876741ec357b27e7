"""`shoal cluster`, `nodegroup`, `node` and `events` against the real server with
its conductor and the sim cloud: the four creation paths, resize with a named
node, upgrade, watch, delete, and each output format parsed back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cli_support import Shoal, fast_settings
from tests.support.server import live_server

pytestmark = pytest.mark.xdist_group("cli-clusters")


@pytest.fixture(scope="module")
def shoal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shoal]:
    data: Path = tmp_path_factory.mktemp("cli-clusters")
    with live_server(fast_settings(data)) as server:
        sh = Shoal(server)
        sh.ok(
            "template", "create", "k8s", "--image", "fedora-coreos-40", "--flavor", "m1.small",
            "--master-flavor", "m1.small",
            "-n", "name=masters,role=master,flavor=m1.small,count=1,az=az-1+az-2+az-3",
            "-n", "name=gpu,role=worker,flavor=g1.large,count=2,az=az-1+az-2",
        )  # fmt: skip
        yield sh


@pytest.fixture(scope="module")
def c1(shoal: Shoal) -> dict[str, object]:
    cluster = shoal.json("cluster", "create", "c1", "--template", "k8s", "--wait")
    assert isinstance(cluster, dict)
    return cluster


def test_create_from_template_with_wait_and_inspect(shoal: Shoal, c1: dict[str, object]) -> None:
    assert c1["status"] == "CREATE_COMPLETE"
    assert (c1["master_count"], c1["node_count"]) == (1, 2)
    assert ["c1", "CREATE_COMPLETE"] in shoal.values(
        "cluster", "list", "-c", "name", "-c", "status"
    )
    assert any(c["name"] == "c1" for c in shoal.yaml("cluster", "list"))
    assert "c1" in shoal.ok("cluster", "list").stdout
    shown = shoal.yaml("cluster", "show", "c1")
    assert shown["uuid"] == c1["uuid"]
    assert {g["name"] for g in shown["node_groups"]} == {"masters", "gpu"}

    groups = shoal.json("nodegroup", "list", "c1")
    assert {g["name"]: g["node_count"] for g in groups} == {"masters": 1, "gpu": 2}
    gpu = shoal.yaml("nodegroup", "show", "c1", "gpu")
    assert gpu["flavor_id"] == "g1.large" and gpu["nodes_ready"] == 2
    assert shoal.values("nodegroup", "show", "c1", "gpu", "-c", "status") == [["CREATE_COMPLETE"]]

    nodes = shoal.json("node", "list", "c1")
    assert len(nodes) == 3 and all(n["state"] == "ACTIVE" and n["address"] for n in nodes)
    gpu_nodes = shoal.values(
        "node", "list", "c1", "-g", "gpu", "-c", "name", "-c", "availability_zone"
    )
    assert len(gpu_nodes) == 2 and {z for _, z in gpu_nodes} == {"az-1", "az-2"}

    events = shoal.json("events", "c1")
    assert events and all({"id", "time", "reason", "message"} <= set(e) for e in events)
    followed = shoal.ok("events", "c1", "--follow", "--timeout", "0.3", "--interval", "0.1",
                        "-f", "json").stdout  # fmt: skip
    lines = [json.loads(line) for line in followed.splitlines()]
    assert [e["id"] for e in lines] == [e["id"] for e in events][: len(lines)]
    after = shoal.json("events", "c1", "--after", str(events[0]["id"]))
    assert [e["id"] for e in after] == [e["id"] for e in events[1:]]

    watched = shoal.run("cluster", "watch", "c1", "--interval", "0.1")
    assert watched.exit_code == 0 and "done" in watched.stderr


def test_resize_removes_exactly_the_named_node(shoal: Shoal, c1: dict[str, object]) -> None:
    names = [row[0] for row in shoal.values("node", "list", "c1", "-g", "gpu", "-c", "name")]
    victim, keeper = names[0], names[1]
    result = shoal.ok("cluster", "resize", "c1", "1", "-g", "gpu", "--remove", victim, "--wait")
    assert "desired" in result.stderr and "ready" in result.stderr  # live progress lines
    left = [row[0] for row in shoal.values("node", "list", "c1", "-g", "gpu", "-c", "name")]
    assert left == [keeper]
    shoal.ok("cluster", "resize", "c1", "2", "-g", "gpu", "--wait")
    assert len(shoal.values("node", "list", "c1", "-g", "gpu", "-c", "name")) == 2
    bad = shoal.run("cluster", "resize", "c1", "1", "-g", "gpu", "--remove", "no-such-node")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: HTTP 4")


def test_cluster_update_sets_default_worker_count(shoal: Shoal, c1: dict[str, object]) -> None:
    updated = shoal.json("cluster", "update", "c1", "--set", "node_count=3", "--wait")
    assert updated["node_count"] == 3
    shoal.ok("cluster", "update", "c1", "--set", "node_count=2", "--wait")


def test_create_from_attributes_with_node_groups(shoal: Shoal) -> None:
    made = shoal.json(
        "cluster", "create", "attrs", "--image", "ubuntu-24.04",
        "-n", "name=cp,role=master,flavor=m1.small,count=1",
        "-n", "name=ssd,role=worker,flavor=s1.large,count=2,az=az-1",
        "--wait",
    )  # fmt: skip
    assert made["status"] == "CREATE_COMPLETE"
    groups = {g["name"]: g for g in shoal.json("nodegroup", "list", "attrs")}
    assert set(groups) == {"cp", "ssd"} and groups["ssd"]["flavor_id"] == "s1.large"
    shoal.ok("cluster", "delete", "attrs", "--wait")


def test_create_from_template_plus_overrides_and_from_cluster(
    shoal: Shoal, c1: dict[str, object]
) -> None:
    over = shoal.json("cluster", "create", "over", "--template", "k8s", "--node-count", "1",
                      "--label", "env=test", "--wait")  # fmt: skip
    assert over["node_count"] == 1 and over["labels"].get("env") == "test"
    clone = shoal.json("cluster", "create", "clone", "--from-cluster", "over", "--wait")
    assert clone["source_id"] == over["uuid"]
    assert {g["name"] for g in shoal.json("nodegroup", "list", "clone")} == {"masters", "gpu"}
    assert clone["node_count"] == 1
    shoal.ok("cluster", "delete", "over", "clone", "--wait")
    assert shoal.run("cluster", "show", "clone").exit_code == 1


def test_nodegroup_create_three_ways_update_and_delete(shoal: Shoal, c1: dict[str, object]) -> None:
    shoal.ok("nodegroup-template", "create", "ssd-t", "--flavor", "s1.large", "--count", "1",
             "--az", "az-1")  # fmt: skip
    made = shoal.json("nodegroup", "create", "c1", "ssd", "--from-template", "ssd-t", "--wait")
    assert made["flavor_id"] == "s1.large" and made["status"] == "CREATE_COMPLETE"
    copy = shoal.json("nodegroup", "create", "c1", "ssd2", "--from-nodegroup", "ssd",
                      "--count", "2", "--wait")  # fmt: skip
    assert copy["flavor_id"] == "s1.large" and copy["node_count"] == 2
    # --label and --wait together: the wait's progress label is not the --label option
    made_big = shoal.run("nodegroup", "create", "c1", "big", "--role", "worker", "--flavor",
                         "m1.large", "--count", "1", "--max", "3", "--label", "tier=big",
                         "--wait", "-f", "json")  # fmt: skip
    assert made_big.exit_code == 0, made_big.output
    assert "node group big of c1: done" in made_big.stderr
    plain = json.loads(made_big.stdout)
    assert plain["max_node_count"] == 3 and plain["nodes_ready"] == 1
    assert plain["labels"] == {"tier": "big"}
    updated = shoal.json("nodegroup", "update", "c1", "big", "--set", "max_node_count=5")
    assert updated["max_node_count"] == 5
    master = shoal.run(
        "nodegroup", "create", "c1", "m2", "--role", "master", "--flavor", "m1.small"
    )
    assert master.exit_code == 1 and "HTTP 400" in master.stderr

    ngt = shoal.json("nodegroup-template", "create", "from-ng", "--from-nodegroup", "c1/ssd2")
    assert ngt["flavor_id"] == "s1.large" and ngt["node_count"] == 2
    shoal.ok("nodegroup", "delete", "c1", "ssd", "ssd2", "big", "--wait")
    assert {g["name"] for g in shoal.json("nodegroup", "list", "c1")} == {"masters", "gpu"}


def test_template_from_cluster(shoal: Shoal, c1: dict[str, object]) -> None:
    ct = shoal.json("template", "create", "from-c1", "--from-cluster", "c1")
    assert ct["source_id"] == c1["uuid"]
    assert {n["name"] for n in ct["node_group_templates"]} == {"masters", "gpu"}


def test_upgrade_to_another_template(shoal: Shoal, c1: dict[str, object]) -> None:
    shoal.ok("template", "create", "k8s-v2", "--image", "fedora-coreos-41", "--flavor", "m1.small")
    done = shoal.json("cluster", "upgrade", "c1", "k8s-v2", "--nodegroup", "gpu", "--wait")
    assert done["status"].endswith("_COMPLETE")
    # --wait returned only once the nodes were replaced, not when the request was stored
    gpu = shoal.values("node", "list", "c1", "-g", "gpu", "-c", "image_id")
    assert gpu and {row[0] for row in gpu} == {"fedora-coreos-41"}
    masters = shoal.values("node", "list", "c1", "-g", "masters", "-c", "image_id")
    assert {row[0] for row in masters} == {"fedora-coreos-40"}  # only the group named


def test_delete_with_wait_then_gone(shoal: Shoal) -> None:
    shoal.ok("cluster", "create", "short", "--template", "k8s", "--node-count", "1", "--wait")
    result = shoal.ok("cluster", "delete", "short", "--wait")
    assert "deleted cluster short" in result.stdout
    gone = shoal.run("cluster", "show", "short")
    assert gone.exit_code == 1 and "HTTP 404" in gone.stderr
