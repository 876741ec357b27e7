"""The heat driver's cluster stack on plain values (drivers/heat/cluster_stack.py): its
template and what it holds, the server group each new member joins, and a failed
stack as the contract's error."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    MachineSpec,
    PermanentError,
    PlacementGroup,
    PlacementPolicy,
)
from shoal.drivers.heat import cluster_stack as cs
from shoal.drivers.heat import members as mb
from shoal.drivers.heat import templates

MASTERS = PlacementGroup("shoal-m", PlacementPolicy.ANTI_AFFINITY)
WORKERS = PlacementGroup("shoal-w", PlacementPolicy.SOFT_ANTI_AFFINITY)


def spec(n: int, pg: PlacementGroup | None) -> MachineSpec:
    return MachineSpec(
        machine_id=f"m{n}",
        name=f"node-{n}",
        project_id="p",
        cluster_id="c",
        nodegroup_id="g",
        role="worker",
        flavor_id="m1.small",
        image_id="img",
        placement_group=pg,
    )


def test_names_tell_a_cluster_stack_from_a_group_stack() -> None:
    assert cs.stack_name("dep", "c1") == "shoal-dep-cluster-c1"
    rows = [
        ("shoal-dep-cluster-c1", True),
        (mb.stack_name("dep", "0b6e4b0e-4f7a-4c55-9f0e-8d9a3c2b1a00"), False),
        ("shoal-other-cluster-c1", False),  # another deployment's
    ]
    for name, want in rows:
        assert cs.is_cluster_stack("dep", name) is want, name


def test_resource_names_are_the_placement_groups_own_or_a_stable_digest() -> None:
    rows = [
        ("shoal-0b6e4b0e", "shoal-0b6e4b0e"),
        ("a/b", cs.resource_name("a/b")),
    ]
    for group, want in rows:
        assert cs.resource_name(group) == want
    assert cs.resource_name("a/b").startswith("sg-") and cs.resource_name("a b") != "a b"


def test_the_template_has_one_server_group_per_placement_group_and_maps_them() -> None:
    body = cs.template({"shoal-w": WORKERS, "shoal-m": MASTERS}, "dep")
    assert body["resources"] == {
        "shoal-m": {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": "shoal-m@dep", "policies": ["anti-affinity"]},
        },
        "shoal-w": {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": "shoal-w@dep", "policies": ["soft-anti-affinity"]},
        },
    }
    assert body["outputs"]["server_groups"]["value"] == {
        "shoal-m": {"get_resource": "shoal-m"},
        "shoal-w": {"get_resource": "shoal-w"},
    }
    assert yaml.safe_load(yaml.safe_dump(body)) == body  # sent as JSON: plain values only


def test_what_a_stack_holds_is_read_back_from_its_parameters() -> None:
    sent = cs.parameters({"shoal-m": MASTERS, "shoal-w": WORKERS})
    rows: list[tuple[Any, dict[str, str]]] = [
        (sent, {"shoal-m": "anti-affinity", "shoal-w": "soft-anti-affinity"}),
        (None, {}),
        ({}, {}),
        ({"placement_groups": ""}, {}),
        ({"placement_groups": "not json"}, {}),
        ({"placement_groups": {"shoal-m": "affinity"}}, {"shoal-m": "affinity"}),
    ]
    for params, want in rows:
        assert cs.held_of(params) == want, params
    held = cs.held_of(sent)
    assert cs.held_groups(held) == {"shoal-m": MASTERS, "shoal-w": WORKERS}
    assert cs.held_groups({"x": "some-policy"}) == {}


def test_missing_is_what_is_asked_and_not_held_whatever_its_policy() -> None:
    rows = [
        ({}, {"shoal-m": MASTERS}, ["shoal-m"]),
        ({"shoal-m": "anti-affinity"}, {"shoal-m": MASTERS}, []),
        ({"shoal-m": "affinity"}, {"shoal-m": MASTERS}, []),  # a policy cannot change
        ({"shoal-m": "anti-affinity"}, {"shoal-m": MASTERS, "shoal-w": WORKERS}, ["shoal-w"]),
    ]
    for held, asked, want in rows:
        assert cs.missing(held, asked) == want


def test_a_failed_stack_is_blocked_on_quota_else_permanent_in_heats_words() -> None:
    reason = "Resource CREATE failed: Forbidden: Quota exceeded, too many server groups."
    quota = cs.failure_of("st", "CREATE_FAILED", reason)
    assert isinstance(quota, BlockedError) and quota.kind is BlockedKind.QUOTA
    assert reason in quota.reason and "st is CREATE_FAILED" in quota.reason
    other = cs.failure_of("st", "UPDATE_FAILED", "")
    assert isinstance(other, PermanentError) and "no reason given" in other.reason


def test_new_members_join_their_server_group_and_kept_ones_are_left_alone() -> None:
    specs = [spec(0, MASTERS), spec(1, MASTERS), spec(2, None)]
    first = mb.plan(mb.Group.of(None), [mb.entry(s, "dep", ()) for s in specs[:1]])
    assert first is not None
    assert cs.asked_by(first.added, specs) == {"shoal-m": MASTERS}
    first = cs.hinted(first, specs, {"shoal-m": "sg-1"})
    assert first.members["0"]["server_group"] == "sg-1"
    group = mb.Group.of(first.parameters())
    # The server group made anew (another id): the kept member's entry is as it was.
    second = mb.plan(group, [mb.entry(s, "dep", ()) for s in specs])
    assert second is not None
    assert cs.asked_by(second.added, specs) == {"shoal-m": MASTERS}
    second = cs.hinted(second, specs, {"shoal-m": "sg-2"})
    by_id = {e["id"]: e for e in second.members.values()}
    assert by_id["m0"].get("server_group") == "sg-1"
    assert by_id["m1"]["server_group"] == "sg-2"
    assert "server_group" not in by_id["m2"]  # asks for no placement group
    assert [e["id"] for e in second.added] == ["m1", "m2"]
    assert cs.hinted(second, specs, {}) is second


def test_the_members_template_gives_a_member_its_server_group_hint() -> None:
    members = {
        "0": {**mb.entry(spec(0, MASTERS), "dep", ()), "server_group": "sg-1"},
        "1": mb.entry(spec(1, None), "dep", ()),
    }
    body = yaml.safe_load(templates.members_file(members))
    assert body["resources"]["0"]["properties"]["scheduler_hints"] == {"group": "sg-1"}
    assert "scheduler_hints" not in body["resources"]["1"]["properties"]


def test_the_group_parameter_is_sent_only_to_a_template_that_declares_it() -> None:
    joined = [{"id": "a", "server_group": "sg-1"}, {"id": "b", "server_group": "sg-1"}]
    rows: list[tuple[Any, list[dict[str, Any]], dict[str, str]]] = [
        (templates.GROUP["parameters"], joined, {"server_group": "sg-1"}),
        ({"count": {}, "members": {}}, joined, {}),  # an operator's template without it
        (templates.GROUP["parameters"], [{"id": "a"}], {}),  # no server group: its default
        (templates.GROUP["parameters"], [], {}),
    ]
    for declared, added, want in rows:
        assert cs.group_parameter(declared, added) == want
    with pytest.raises(PermanentError, match="different placement groups"):
        cs.group_parameter(["server_group"], [*joined, {"id": "c", "server_group": "sg-2"}])


def test_the_built_in_group_template_declares_the_optional_parameter() -> None:
    for name in templates.OPTIONAL_PARAMETERS:
        assert templates.GROUP["parameters"][name]["default"] == ""
    assert templates.check(templates.GROUP) is templates.GROUP
