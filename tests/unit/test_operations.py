"""Operations as pure rules: which kinds and parameters are accepted, which nodes
go next, when an operation has ended; and what each agent task runs on a node."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoal.agent import protocol as p
from shoal.agent import tasks
from shoal.domain import operations as ops
from shoal.domain.errors import Invalid


def test_kinds_and_their_parameters_are_checked() -> None:
    assert ops.check("restart-services", None) == ("restart-services", {"services": ["kubelet"]})
    assert ops.check("upgrade-packages", {"packages": ["kubelet", "cri-o"]})[1] == {
        "packages": ["kubelet", "cri-o"]
    }
    assert ops.check("rebase", {"ref": "fedora:fedora/x86_64/coreos/stable"})[1]["ref"]
    assert ops.check("reboot", {}) == ("reboot", {})
    assert ops.check("restart-services", {"services": "kubelet,crio"})[1] == {
        "services": ["kubelet", "crio"]
    }
    labels = ops.check("set-labels", {"labels": {"gpu": "a100"}, "taints": ["gpu=true:NoSchedule"]})
    assert labels[1]["labels"] == {"gpu": "a100"}
    assert labels[1]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]


@pytest.mark.parametrize(
    ("kind", "params", "field", "words"),
    [
        ("format-disk", {}, "kind", "kind must be one of"),
        ("reboot", {"force": True}, "params", "params.force is not a parameter of reboot"),
        ("upgrade-packages", {}, "params", "params.packages is required"),
        ("upgrade-images", {"images": []}, "params", "params.images is required"),
        ("rebase", {}, "params.ref", "params.ref"),
        ("restart-services", [1], "params", "params must be an object"),
        ("restart-services", {"services": [""]}, "params.services", "list"),
        ("restart-services", {"services": ["--all"]}, "params.services", "not starting"),
        ("upgrade-images", {"images": ["a b"]}, "params.images", "without blanks"),
        ("rebase", {"ref": "x\nsystemctl poweroff"}, "params.ref", "without blanks"),
    ],
)
def test_bad_operations_are_refused_naming_the_field(
    kind: str, params: object, field: str, words: str
) -> None:
    with pytest.raises(Invalid) as caught:
        ops.check(kind, params)
    assert words in str(caught.value)
    assert caught.value.field == field


def test_next_nodes_keep_at_most_batch_size_under_way_in_order() -> None:
    nodes = ["a", "b", "c", "d", "e"]
    assert ops.next_nodes(nodes, {}, 2) == ["a", "b"]
    assert ops.next_nodes(nodes, {"a": ops.RUNNING, "b": ops.PENDING}, 2) == []
    assert ops.next_nodes(nodes, {"a": ops.SUCCEEDED, "b": ops.RUNNING}, 2) == ["c"]
    assert ops.next_nodes(nodes, {n: ops.SUCCEEDED for n in nodes}, 2) == []


def test_an_operation_ends_at_the_first_failed_or_cancelled_node() -> None:
    nodes = ["a", "b", "c"]
    assert ops.outcome(nodes, {}) == ops.RUNNING
    assert ops.outcome(nodes, {"a": ops.SUCCEEDED, "b": ops.RUNNING}) == ops.RUNNING
    assert ops.outcome(nodes, {"a": ops.SUCCEEDED, "b": ops.FAILED}) == ops.FAILED
    assert ops.outcome(nodes, {"a": p.CANCELLED}) == ops.FAILED
    assert ops.outcome(nodes, dict.fromkeys(nodes, ops.SUCCEEDED)) == ops.SUCCEEDED


def test_who_runs_what() -> None:
    assert all(ops.by_agent(k) for k in p.AGENT_KINDS)
    assert not any(ops.by_agent(k) for k in ops.DRIVER_KINDS)


def test_each_agent_task_is_the_commands_a_node_runs(tmp_path: Path) -> None:
    restart = p.Task("t1", p.RESTART_SERVICES, {"services": ["kubelet", "crio"]})
    assert tasks.commands(restart, {}, tmp_path) == [
        ["systemctl", "restart", "kubelet"],
        ["systemctl", "restart", "crio"],
    ]
    rebase = p.Task("t2", p.REBASE, {"ref": "ostree:stable"})
    assert tasks.commands(rebase, {}, tmp_path) == [
        ["rpm-ostree", "rebase", "ostree:stable"],
        ["systemctl", "reboot"],
    ]
    pull = p.Task("t3", p.UPGRADE_IMAGES, {"images": ["pause:3.10"]})
    assert tasks.commands(pull, {}, tmp_path) == [["crictl", "pull", "pause:3.10"]]


def test_a_config_replaces_a_kinds_commands_with_placeholders_filled(tmp_path: Path) -> None:
    overrides = {p.RESTART_SERVICES: [["echo", "restart {services}"], ["true", "{missing}"]]}
    task = p.Task("t1", p.RESTART_SERVICES, {"services": ["kubelet", "crio"]})
    assert tasks.commands(task, overrides, tmp_path) == [
        ["echo", "restart kubelet crio"],
        ["true", ""],
    ]


def test_an_unknown_kind_is_refused_by_the_agent(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown task kind"):
        tasks.commands(p.Task("t", "format-disk"), {}, tmp_path)


def test_output_is_kept_bounded_by_its_tail() -> None:
    long = "x" * (p.OUTPUT_MAX * 2) + "END"
    kept = p.tail(long)
    assert len(kept) == p.OUTPUT_MAX and kept.endswith("END") and kept.startswith("...")
    assert p.tail("short") == "short"
