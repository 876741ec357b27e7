"""What real clients send, as tables: scalars as strings, null and "" for "not given",
labels as `k=v` strings, and the attributes a cluster derives at create."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.domain import derived, specs, status
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Invalid
from shoal.domain.merge import GroupPlan


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (True, True),
        (False, False),
        ("True", True),
        ("False", False),
        ("true", True),
        ("FALSE", False),
        ("1", True),
        ("0", False),
        ("yes", True),
        ("off", False),
        (" t ", True),
    ],
)
def test_boolean_takes_magnums_strings(raw: Any, want: bool) -> None:
    assert v.boolean("f", raw) is want


@pytest.mark.parametrize("raw", ["maybe", "", "2", 1, 0, None, [], {}])
def test_boolean_refuses_the_rest(raw: Any) -> None:
    with pytest.raises(Invalid, match="f must be a boolean"):
        v.boolean("f", raw)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("a=b", {"a": "b"}),
        ("kube_tag=v1.30.4,region=eu-1", {"kube_tag": "v1.30.4", "region": "eu-1"}),
        ("a=b=c", {"a": "b=c"}),
        ("a=", {"a": ""}),
        ("", {}),
        ("{'a': 'b'}", {"a": "b"}),
        ('{"a": "b"}', {"a": "b"}),
        ({"a": 1, "b": True}, {"a": "1", "b": "true"}),
        (None, {}),
    ],
)
def test_labels_forms(raw: Any, want: dict[str, str]) -> None:
    assert v.str_dict("labels", raw) == want


@pytest.mark.parametrize("raw", ["no pairs", "=b", "a=b,,c=d", "[1, 2]", 3])
def test_labels_garbage(raw: Any) -> None:
    with pytest.raises(Invalid, match="labels"):
        v.str_dict("labels", raw)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({"create_timeout": None}, {"create_timeout": None}),
        ({"create_timeout": ""}, {"create_timeout": None}),
        ({"create_timeout": "45"}, {"create_timeout": 45}),
        ({"node_count": "3", "master_count": "1"}, {"node_count": 3, "master_count": 1}),
        ({"node_count": None}, {"node_count": None}),
        ({"docker_volume_size": ""}, {"docker_volume_size": None}),
        ({"floating_ip_enabled": "True"}, {"floating_ip_enabled": True}),
        ({"master_lb_enabled": ""}, {"master_lb_enabled": None}),
        ({"merge_labels": "False"}, {"merge_labels": False}),
    ],
)
def test_cluster_attrs_as_clients_send_them(body: dict[str, Any], want: dict[str, Any]) -> None:
    assert specs.check_attrs("cluster", body, specs.CLUSTER_ATTRS) == want


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"create_timeout": "three"}, "create_timeout must be an integer"),
        ({"create_timeout": -5}, "create_timeout must be >= 0"),
        ({"node_count": "1.5"}, "node_count must be an integer"),
        ({"master_count": "0"}, "master_count must be >= 1"),
        ({"floating_ip_enabled": "sure"}, "floating_ip_enabled must be a boolean"),
    ],
)
def test_cluster_attr_garbage(body: dict[str, Any], says: str) -> None:
    with pytest.raises(Invalid, match=says):
        specs.check_attrs("cluster", body, specs.CLUSTER_ATTRS)


@pytest.mark.parametrize(
    ("body", "want"),
    [
        ({"network_driver": ""}, {"network_driver": None}),
        ({"server_type": ""}, {"server_type": None}),
        ({"apiserver_port": "6443"}, {"apiserver_port": 6443}),
        ({"tls_disabled": "False", "public": "false"}, {"tls_disabled": False, "public": False}),
    ],
)
def test_template_attrs_as_magnum_ui_sends_them(body: dict[str, Any], want: dict[str, Any]) -> None:
    assert specs.check_attrs("clustertemplate", body, specs.TEMPLATE_ATTRS) == want


@pytest.mark.parametrize(
    ("attrs", "want"),
    [
        ({"labels": {"kube_tag": "v1.30.4"}}, "v1.30.4"),
        ({"coe_version": "v1.29.0", "labels": {"kube_tag": "v1.30.4"}}, "v1.29.0"),
        ({"labels": {}}, None),
        ({}, None),
        ({"labels": {"kube_tag": ""}}, None),
    ],
)
def test_coe_version(attrs: dict[str, Any], want: str | None) -> None:
    assert derived.coe_version(attrs) == want


@pytest.mark.parametrize(
    ("attrs", "want"),
    [
        ({"image_id": "fedora-coreos-40"}, "fedora-coreos"),
        ({"image_id": "fedora-coreos-40.20240416.3.1"}, "fedora-coreos"),
        ({"image_id": "ubuntu-24.04"}, "ubuntu"),
        ({"image_id": "Fedora-CoreOS-38"}, "fedora-coreos"),
        ({"image_id": "flatcar_3815.2.0"}, "flatcar"),
        ({"image_id": "debian12"}, "debian"),
        ({"image_id": "custom-image"}, "custom-image"),
        ({"image_id": "40"}, None),
        ({"image_id": "0d9a3c8e-6c8b-4b0e-9a39-8b1c4d2e7f10"}, None),
        ({}, None),
        ({"image_id": "ubuntu-24.04", "cluster_distro": "ubuntu-core"}, "ubuntu-core"),
    ],
)
def test_cluster_distro(attrs: dict[str, Any], want: str | None) -> None:
    assert derived.cluster_distro(attrs) == want


def _plan(name: str, zones: tuple[str, ...] = (), provider: str = "sim") -> GroupPlan:
    spec = m.NodeGroupSpec(role="worker", availability_zones=zones, provider=provider)
    return GroupPlan(name, spec)


@pytest.mark.parametrize(
    ("zone", "plans", "known", "want"),
    [
        (None, [_plan("a")], {"sim": ["az-1"]}, [()]),
        (
            "az-2",
            [_plan("a"), _plan("b", ("az-1",))],
            {"sim": ["az-1", "az-2"]},
            [("az-2",), ("az-1",)],
        ),
        ("anywhere", [_plan("a", provider="new")], {"sim": ["az-1"]}, [("anywhere",)]),
        ("az-9", [_plan("a", ("az-1",))], {"sim": ["az-1"]}, [("az-1",)]),
    ],
)
def test_pin_zone(
    zone: str | None,
    plans: list[GroupPlan],
    known: dict[str, list[str]],
    want: list[tuple[str, ...]],
) -> None:
    out = derived.pin_zone(plans, zone, known)
    assert [p.spec.availability_zones for p in out] == want


def test_pin_zone_unknown_zone_names_the_known_ones() -> None:
    with pytest.raises(
        Invalid, match=r"'az-9' does not exist in provider sim \(its zones: az-1, az-2\)"
    ):
        derived.pin_zone([_plan("a")], "az-9", {"sim": ["az-1", "az-2"]})


@pytest.mark.parametrize(
    ("labels", "want"),
    [({"availability_zone": "az-1"}, "az-1"), ({"availability_zone": " "}, None), ({}, None)],
)
def test_label_zone(labels: dict[str, str], want: str | None) -> None:
    assert derived.label_zone({"labels": labels}) == want


# Terraform's StateChangeConf lists per step (resource_openstack_containerinfra_*_v1.go)
# and the statuses its refresh function fails on at once.
TF_LISTS = {
    "CREATE": {"CREATE_IN_PROGRESS", "CREATE_COMPLETE"},
    "UPDATE": {"UPDATE_IN_PROGRESS", "UPDATE_COMPLETE"},
    "DELETE": {"DELETE_IN_PROGRESS", "DELETE_COMPLETE"},
}
TF_ERRORS = {"CREATE_FAILED", "UPDATE_FAILED", "DELETE_FAILED", "RESUME_FAILED", "ROLLBACK_FAILED"}


@pytest.mark.parametrize(
    "current", ["CREATE_IN_PROGRESS", "UPDATE_IN_PROGRESS", "DELETE_IN_PROGRESS"]
)
@pytest.mark.parametrize("outcome", list(status.Outcome))
def test_every_derived_status_is_in_terraforms_lists(current: str, outcome: status.Outcome) -> None:
    """What the conductor derives during a step is pending or target for that step, or
    one of the failures Terraform reports with the status_reason."""
    step = current.split("_", 1)[0]
    shown = status.derive(current, outcome, deleting=step == "DELETE")
    assert shown in TF_LISTS[step] or shown in TF_ERRORS
    assert (shown in TF_ERRORS) == (outcome is status.Outcome.FAILED)
