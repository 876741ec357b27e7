"""`shoal template` and `shoal nodegroup-template` against the real server:
every command, each output format parsed back, API errors as one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.cli_support import Shoal, fast_settings
from tests.support.server import live_server

pytestmark = pytest.mark.xdist_group("cli-templates")


@pytest.fixture(scope="module")
def shoal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shoal]:
    data: Path = tmp_path_factory.mktemp("cli-templates")
    with live_server(fast_settings(data, conductor=False)) as server:
        yield Shoal(server)


def test_cluster_template_lifecycle_in_every_format(shoal: Shoal) -> None:
    ct = shoal.json(
        "template", "create", "k8s", "--image", "fedora-coreos-40", "--flavor", "m1.medium",
        "--master-flavor", "m1.medium", "--external-network", "public", "--label", "a=1,b=two",
        "-n", "name=masters,role=master,flavor=m1.medium,count=3,az=az-1+az-2+az-3",
        "-n", "name=gpu,flavor=g1.large,count=2,az=az-1,label.accelerator=nvidia",
    )  # fmt: skip
    assert ct["name"] == "k8s" and ct["coe"] == "kubernetes"
    assert ct["labels"] == {"a": "1", "b": "two"}
    ngts = {n["name"]: n for n in ct["node_group_templates"]}
    assert ngts["masters"]["availability_zones"] == ["az-1", "az-2", "az-3"]
    assert ngts["masters"]["node_count"] == 3 and ngts["masters"]["role"] == "master"
    assert ngts["gpu"]["flavor_id"] == "g1.large"
    assert ngts["gpu"]["node_labels"] == {"accelerator": "nvidia"}

    assert ["k8s"] in shoal.values("template", "list", "-c", "name")
    listed = shoal.json("template", "list")
    assert any(t["uuid"] == ct["uuid"] for t in listed)
    shown = shoal.yaml("template", "show", "k8s")
    assert shown["uuid"] == ct["uuid"] and shown["image_id"] == "fedora-coreos-40"
    assert shoal.values("template", "show", ct["uuid"], "-c", "image_id") == [["fedora-coreos-40"]]
    table = shoal.ok("template", "show", "k8s").stdout
    assert "image_id" in table and "fedora-coreos-40" in table

    updated = shoal.json(
        "template", "update", "k8s", "--set", "image_id=fedora-coreos-41", "--set", "labels.c=3"
    )
    assert updated["image_id"] == "fedora-coreos-41"
    assert updated["labels"]["c"] == "3"

    assert "deleted cluster template k8s" in shoal.ok("template", "delete", "k8s").stdout
    gone = shoal.run("template", "show", "k8s")
    assert gone.exit_code == 1
    assert gone.stderr.startswith("error: HTTP 404: ")
    assert len(gone.stderr.strip().splitlines()) == 1
    assert "Traceback" not in gone.output


def test_nodegroup_template_lifecycle(shoal: Shoal) -> None:
    ngt = shoal.yaml(
        "nodegroup-template", "create", "ssd", "--role", "worker", "--flavor", "s1.large",
        "--count", "2", "--min", "1", "--max", "5", "--az", "az-1", "--az", "az-2",
        "--node-label", "disk=ssd", "--taint", "dedicated=ssd:NoSchedule",
        "--deletion-policy", "oldest",
    )  # fmt: skip
    assert ngt["name"] == "ssd" and ngt["flavor_id"] == "s1.large"
    assert ngt["availability_zones"] == ["az-1", "az-2"]
    assert (ngt["min_node_count"], ngt["max_node_count"]) == (1, 5)
    assert ngt["node_taints"] == [{"key": "dedicated", "value": "ssd", "effect": "NoSchedule"}]
    assert ngt["deletion_policy"] == "oldest"

    rows = shoal.values("nodegroup-template", "list", "-c", "name", "-c", "flavor_id")
    assert ["ssd", "s1.large"] in rows
    assert shoal.values("nodegroup-template", "show", "ssd", "-c", "node_count") == [["2"]]
    updated = shoal.json("nodegroup-template", "update", "ssd", "--set", "node_count=3")
    assert updated["node_count"] == 3
    shoal.ok("nodegroup-template", "delete", "ssd")
    assert shoal.run("nodegroup-template", "show", "ssd").exit_code == 1


def test_api_errors_are_one_line_with_status_and_title(shoal: Shoal) -> None:
    dup = ["template", "create", "dup", "--image", "fedora-coreos-40"]
    shoal.ok(*dup)
    bad = shoal.run("template", "create", "bad", "--image", "fedora-coreos-40",
                    "--attr", "no_such_attribute=1")  # fmt: skip
    assert bad.exit_code == 1
    assert bad.stderr.startswith("error: HTTP 400: ")
    assert "no_such_attribute" in bad.stderr
    missing = shoal.run("template", "update", "nope", "--set", "image_id=x")
    assert missing.exit_code == 1 and "HTTP 404" in missing.stderr
    unknown_column = shoal.run("template", "show", "dup", "-c", "nonsense")
    assert unknown_column.exit_code == 2 and "unknown column nonsense" in unknown_column.stderr
    assert ["bad"] not in shoal.values("template", "list", "-c", "name")  # nothing stored


def test_templates_from_templates_and_references(shoal: Shoal) -> None:
    shoal.ok("nodegroup-template", "create", "fast", "--role", "gpu", "--flavor", "g1.large",
             "--count", "2")  # fmt: skip
    copy = shoal.json("nodegroup-template", "create", "fast4", "--from", "fast", "--count", "4")
    assert (copy["flavor_id"], copy["node_count"], copy["role"]) == ("g1.large", 4, "gpu")
    assert copy["source_id"] == shoal.json("nodegroup-template", "show", "fast")["uuid"]
    ct = shoal.json(
        "template", "create", "refs", "--image", "fedora-coreos-40",
        "-n", "name=cp,role=master", "-n", "ngt=fast,count=3", "-n", "ngt=fast4,name=big",
    )  # fmt: skip
    refs = {n["name"]: n for n in ct["node_group_templates"]}
    assert refs["cp"]["nodegroup_template_id"] is None
    assert refs["fast"]["nodegroup_template_id"] == copy["source_id"]
    assert refs["fast"]["node_count"] == 3 and refs["big"]["nodegroup_template_id"] == copy["uuid"]
    twin = shoal.json("template", "create", "twin", "--from-template", "refs", "--flavor", "m1.xl")
    assert twin["source_id"] == ct["uuid"] and twin["flavor_id"] == "m1.xl"
    assert [n["name"] for n in twin["node_group_templates"]] == ["cp", "fast", "big"]
    held = shoal.run("nodegroup-template", "delete", "fast")
    assert held.exit_code == 1 and "HTTP 409" in held.stderr and "refs, twin" in held.stderr
    nameless = shoal.run("template", "create", "x", "--image", "i", "-n", "count=1")
    assert nameless.exit_code == 2 and "ngt=" in nameless.stderr
