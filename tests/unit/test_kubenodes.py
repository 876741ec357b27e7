"""Kubernetes' Nodes as pure rules (domain/kubenodes.py): readiness -> health facts,
the group's labels and taints vs a Node's -> a merge patch, and the steps of a drain.
Tables on plain values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shoal.domain import health, kubenodes
from shoal.domain.kubenodes import ClusterView, Drain, KubeNode, Pod
from shoal.domain.model import Taint

T0 = datetime(2026, 11, 27, 17, 0, tzinfo=UTC)
GROUP = "7d3c2a1e-0000-4000-8000-000000000001"


def node_json(name: str, ready: str = "True", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": "42", **extra.pop("meta", {})}
    return {
        "metadata": meta,
        "spec": extra.pop("spec", {}),
        "status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "NodeStatusUnknown" if ready == "Unknown" else "KubeletReady",
                    "message": "Kubelet stopped posting node status."
                    if ready == "Unknown"
                    else "kubelet is posting ready status",
                    "lastTransitionTime": "2026-11-27T16:59:00Z",
                },
            ]
        },
    }


def test_a_node_object_is_read_as_shoal_needs_it() -> None:
    n = kubenodes.parse_node(
        node_json(
            "c-w-1",
            "Unknown",
            meta={"labels": {"a": "b"}, "annotations": {kubenodes.LABELS_NOTE: "a"}},
            spec={"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        )
    )
    assert n == KubeNode(
        "c-w-1", "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.",
        datetime(2026, 11, 27, 16, 59, tzinfo=UTC), {"a": "b"}, {kubenodes.LABELS_NOTE: "a"},
        (Taint("k", "", "NoSchedule"),), True, "42",
    )  # fmt: skip
    assert kubenodes.parse_node({"metadata": {"name": "x"}}).ready == ""  # no status yet


@pytest.mark.parametrize(
    ("ready", "since_s", "registered", "expect_why", "expect_deadline_s"),
    [
        ("True", 600, True, None, None),  # Ready: healthy
        ("", 600, True, None, None),  # no Ready condition yet: nothing said
        ("False", 10, True, None, 50),  # NotReady, not for long: look again at since + 60
        ("False", 120, True, "NotReady since 16:58:00 UTC (KubeletNotReady: PLEG)", None),
        ("Unknown", 61, True, "Ready=Unknown since 16:58:59 UTC (KubeletNotReady: PLEG)", None),
        (None, 0, False, None, 300),  # not registered, ready 0 s ago: within startup
    ],
)
def test_readiness_to_a_health_fact(
    ready: str | None,
    since_s: int,
    registered: bool,
    expect_why: str | None,
    expect_deadline_s: int | None,
) -> None:
    node = (
        KubeNode("n", ready or "", "KubeletNotReady", "PLEG", T0 - timedelta(seconds=since_s))
        if registered
        else None
    )
    why, deadline = kubenodes.unready(node, True, T0, 60, T0, 300)
    assert why == (f"Kubernetes reports it {expect_why}" if expect_why else None)
    expected = T0 + timedelta(seconds=expect_deadline_s) if expect_deadline_s else None
    assert deadline == expected


def test_never_registered_and_unreachable() -> None:
    why, _ = kubenodes.unready(None, True, T0, 60, T0 - timedelta(seconds=301), 300)
    assert why is not None and "never registered" in why and "300 s" in why
    # An API server that does not answer judges nothing (the agents still do).
    sick = KubeNode("n", "False", since=T0 - timedelta(hours=1))
    assert kubenodes.unready(sick, False, T0, 60, T0, 300) == (None, None)
    # A transition in the future (a skewed clock) counts from now.
    ahead = KubeNode("n", "False", since=T0 + timedelta(hours=1))
    assert kubenodes.unready(ahead, True, T0, 60, T0, 300) == (None, T0 + timedelta(seconds=60))


@pytest.mark.parametrize(
    ("key", "value", "ok"),
    [
        ("disk", "ssd", True),
        ("example.com/gpu", "", True),
        ("node-role.kubernetes.io/worker", "", True),
        ("has space", "x", False),
        ("a/b/c", "x", False),
        ("UPPER.example.com/x", "y", False),  # a prefix is a lowercase DNS subdomain
        ("k", "v" * 64, False),
        ("k", "-v", False),
        ("k" * 64, "v", False),
    ],
)
def test_label_syntax(key: str, value: str, ok: bool) -> None:
    assert kubenodes.valid_label(key, value) is ok


NS = Taint("dedicated", "gpu", "NoSchedule")
NE = Taint("spot", "", "NoExecute")
UNREACH = Taint("node.kubernetes.io/unreachable", "", "NoExecute")  # the node controller's


@pytest.mark.parametrize(
    ("have_labels", "notes", "have_taints", "want_labels", "want_taints", "expect"),
    [
        # Already as wanted: no patch.
        (
            {"disk": "ssd", kubenodes.GROUP_LABEL: GROUP},
            {kubenodes.LABELS_NOTE: f"disk,{kubenodes.GROUP_LABEL}", kubenodes.TAINTS_NOTE: ""},
            (),
            {"disk": "ssd"},
            (),
            None,
        ),
        # First time: the labels, the group label, the notes and the taint.
        (
            {"kubernetes.io/hostname": "n"},
            {},
            (UNREACH,),
            {"disk": "ssd", "bad key": "x"},
            (NS,),
            {
                "metadata": {
                    "labels": {"disk": "ssd", kubenodes.GROUP_LABEL: GROUP},
                    "annotations": {
                        kubenodes.LABELS_NOTE: f"disk,{kubenodes.GROUP_LABEL}",
                        kubenodes.TAINTS_NOTE: "dedicated:NoSchedule",
                    },
                    "resourceVersion": "7",
                },
                "spec": {"taints": [UNREACH.as_dict(), NS.as_dict()]},
            },
        ),
        # Removed from the group: removed from the Node; others' labels and taints stay.
        (
            {"disk": "ssd", "mine": "1", kubenodes.GROUP_LABEL: GROUP},
            {
                kubenodes.LABELS_NOTE: f"disk,{kubenodes.GROUP_LABEL}",
                kubenodes.TAINTS_NOTE: "dedicated:NoSchedule,spot:NoExecute",
            },
            (NS, NE, UNREACH),
            {},
            (NE,),
            {
                "metadata": {
                    "labels": {"disk": None},
                    "annotations": {
                        kubenodes.LABELS_NOTE: kubenodes.GROUP_LABEL,
                        kubenodes.TAINTS_NOTE: "spot:NoExecute",
                    },
                    "resourceVersion": "7",
                },
                "spec": {"taints": [UNREACH.as_dict(), NE.as_dict()]},
            },
        ),
        # A value changed by someone else is set back; a taint's value too.
        (
            {"disk": "hdd", kubenodes.GROUP_LABEL: GROUP},
            {
                kubenodes.LABELS_NOTE: f"disk,{kubenodes.GROUP_LABEL}",
                kubenodes.TAINTS_NOTE: "dedicated:NoSchedule",
            },
            (Taint("dedicated", "cpu", "NoSchedule"),),
            {"disk": "ssd"},
            (NS,),
            {
                "metadata": {"labels": {"disk": "ssd"}, "resourceVersion": "7"},
                "spec": {"taints": [NS.as_dict()]},
            },
        ),
    ],
)
def test_labels_and_taints_to_a_patch(
    have_labels: dict[str, str],
    notes: dict[str, str],
    have_taints: tuple[Taint, ...],
    want_labels: dict[str, str],
    want_taints: tuple[Taint, ...],
    expect: dict[str, Any] | None,
) -> None:
    node = KubeNode("n", "True", labels=have_labels, annotations=notes, taints=have_taints,
                    resource_version="7")  # fmt: skip
    assert kubenodes.wanted_patch(node, want_labels, want_taints, GROUP) == expect


def test_invalid_labels_are_split_out() -> None:
    good, bad = kubenodes.split_labels({"ok": "1", "no way": "2", "k": "x" * 70})
    assert good == {"ok": "1"} and bad == ["k", "no way"]


P_RS = Pod("default", "web", "ReplicaSet", phase="Running")
P_DS = Pod("kube-system", "proxy", "DaemonSet", phase="Running")
P_MIRROR = Pod("kube-system", "etcd", "Node", mirror=True, phase="Running")
P_DONE = Pod("default", "job", "Job", phase="Succeeded")
P_GOING = Pod("default", "old", "", phase="Running", deleting=True)


def test_which_pods_a_drain_evicts_and_waits_for() -> None:
    pods = [P_RS, P_DS, P_MIRROR, P_DONE, P_GOING]
    assert kubenodes.evictable(pods) == [P_RS, P_GOING]
    assert kubenodes.to_evict(pods) == [P_RS]
    assert kubenodes.parse_pod(
        {
            "metadata": {
                "namespace": "kube-system", "name": "p",
                "deletionTimestamp": "2026-11-27T17:00:00Z",
                "ownerReferences": [{"kind": "DaemonSet", "controller": True}],
                "annotations": {"kubernetes.io/config.mirror": "x"},
            },
            "status": {"phase": "Running"},
        }
    ) == Pod("kube-system", "p", "DaemonSet", True, "Running", True)  # fmt: skip


READY = KubeNode("w", "True")
VIEW = ClusterView({"w": READY})


@pytest.mark.parametrize(
    ("view", "started_s_ago", "expect"),
    [
        (None, None, Drain.SKIP),  # Kubernetes not read: nothing to drain
        (ClusterView({}), None, Drain.SKIP),  # no Node object
        (ClusterView({"w": KubeNode("w", "Unknown")}), None, Drain.NO_WAIT),
        (VIEW, None, Drain.START),
        (VIEW, 5, Drain.WAIT),  # pods not read yet
        (ClusterView({"w": READY}, {"w": (P_RS,)}), 5, Drain.WAIT),
        (ClusterView({"w": READY}, {"w": (P_DS, P_DONE)}), 5, Drain.DONE),
        (ClusterView({"w": READY}, {"w": (P_RS,)}), 120, Drain.GIVE_UP),
        (ClusterView(error="API server unreachable: refused"), None, Drain.START),
        (ClusterView(error="API server unreachable: refused"), 30, Drain.WAIT),
        (ClusterView(error="API server unreachable: refused"), 121, Drain.GIVE_UP),
    ],
)
def test_drain_steps(view: ClusterView | None, started_s_ago: int | None, expect: Drain) -> None:
    started = None if started_s_ago is None else T0 - timedelta(seconds=started_s_ago)
    assert kubenodes.drain_step(view, "w", started, T0, 120) is expect


def test_what_a_drain_that_gave_up_says() -> None:
    assert kubenodes.left_over(ClusterView({"w": READY}, {"w": (P_RS, P_DS)}), "w") == (
        "1 pod(s) still there: default/web"
    )
    assert kubenodes.left_over(ClusterView(error="API server unreachable: x"), "w") == (
        "API server unreachable: x"
    )


def test_drains_are_remembered_across_passes() -> None:
    mem = health.drain_started(health.GroupMemory(), "n1", T0)
    again = health.GroupMemory.from_json(mem.to_json())
    assert again.drains == {"n1": T0}
    assert health.drains_kept(again, {"n2"}).drains == {}
    assert health.drains_kept(again, {"n1"}) is again
