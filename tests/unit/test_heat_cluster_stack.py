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
    for anchor in cs.ANCHORS:  # a placement group never takes an anchor's name
        assert cs.resource_name(anchor).startswith("sg-")


def test_the_template_has_one_server_group_per_placement_group_and_maps_them() -> None:
    body = cs.template({"shoal-w": WORKERS, "shoal-m": MASTERS}, "dep")
    assert body["resources"] == {
        "shoal.first": {"type": "OS::Heat::None"},
        "shoal-m": {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": "shoal-m@dep", "policies": ["anti-affinity"]},
            "depends_on": ["shoal.first"],
        },
        "shoal-w": {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": "shoal-w@dep", "policies": ["soft-anti-affinity"]},
            "depends_on": ["shoal.first"],
        },
        "shoal.last": {
            "type": "OS::Heat::None",
            "depends_on": ["shoal.first", "shoal-m", "shoal-w"],
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


# Nova's 400 to a server asking a group it lacks, as Heat repeats it up the group stack.
NOVA_GONE = (
    "Resource UPDATE failed: BadRequest: resources.kube_minions.resources['3']: Instance "
    "group 5b0c1d2e-aaaa-4bbb-8ccc-0123456789ab could not be found. (HTTP 400) "
    "(Request-ID: req-1)"
)
GONE_ID = "5b0c1d2e-aaaa-4bbb-8ccc-0123456789ab"


def test_a_failure_naming_a_missing_server_group_gives_its_id() -> None:
    rows = [
        (NOVA_GONE, {GONE_ID}),
        ("Instance group a could not be found. Instance group b could not be found.", {"a", "b"}),
        ("Resource CREATE failed: No valid host was found.", set()),
        ("Quota exceeded for server_groups", set()),
        ("", set()),
    ]
    for reason, want in rows:
        assert cs.gone_of(reason) == want, reason


def test_the_placement_groups_whose_output_is_gone_are_stale() -> None:
    ids = {"shoal-m": "sg-1", "shoal-w": GONE_ID}
    rows = [
        ({GONE_ID}, ["shoal-w"]),
        ({GONE_ID, "sg-1"}, ["shoal-m", "shoal-w"]),
        ({"sg-0"}, []),  # already replaced: the output gives a new id
        (set(), []),
    ]
    for gone, want in rows:
        assert cs.stale(ids, gone) == want, gone


def test_a_gone_server_group_is_said_for_the_operator_with_heats_words() -> None:
    said = cs.explained(NOVA_GONE)
    assert said.startswith(f"the Nova server group {GONE_ID} of this node group")
    assert "deleted outside shoal" in said and said.endswith(f"Heat said: {NOVA_GONE}")
    for other in ("Resource CREATE failed: No valid host was found.", ""):
        assert cs.explained(other) == other
    why = cs.unhealthy_reason("shoal-w", GONE_ID)
    assert GONE_ID in why and "shoal-w" in why and "deleted outside shoal" in why


def test_only_members_nova_refused_for_a_gone_group_are_sent_again() -> None:
    members = {
        "0": {"id": "m0", "server_group": GONE_ID},  # made before: has its server
        "1": {"id": "m1", "server_group": GONE_ID},  # refused by Nova
        "2": {"id": "m2", "server_group": "sg-1"},  # another group's, refused elsewise
        "3": {"id": "m3"},  # asks for none
    }
    rows = [
        ({GONE_ID}, {"m0"}, ["m1"]),
        ({GONE_ID}, {"m0", "m1"}, []),
        ({GONE_ID, "sg-1"}, {"m0"}, ["m1", "m2"]),
        (set(), set(), []),
    ]
    for gone, with_server, want in rows:
        assert cs.retried(members, gone, with_server) == want, (gone, with_server)


def test_a_retried_member_takes_the_new_server_group_and_a_kept_one_its_old() -> None:
    specs = [spec(0, WORKERS), spec(1, WORKERS), spec(2, WORKERS)]
    made = mb.plan(mb.Group.of(None), [mb.entry(s, "dep", ()) for s in specs[:2]])
    assert made is not None
    made = cs.hinted(made, specs, {"shoal-w": GONE_ID})
    group = mb.Group.of(made.parameters())
    # The same members asked again: nothing to plan, the group sent as it is.
    assert mb.plan(group, [mb.entry(s, "dep", ()) for s in specs[:2]]) is None
    same = mb.unchanged(group)
    assert same.parameters() == made.parameters() and same.added == same.removed == ()
    # m1 was refused (no server): it is sent again, with a member added, in the new group.
    grown = mb.plan(group, [mb.entry(s, "dep", ()) for s in specs])
    assert grown is not None
    retry = cs.retried(grown.members, {GONE_ID}, {"m0"})
    assert retry == ["m1"]
    grown = cs.hinted(grown, specs, {"shoal-w": "sg-new"}, retry)
    by_id = {e["id"]: e for e in grown.members.values()}
    assert [by_id[m]["server_group"] for m in ("m0", "m1", "m2")] == [GONE_ID, "sg-new", "sg-new"]
    assert {i for i, e in grown.members.items() if e["id"] == "m1"} == {"1"}  # its index kept
    removed = mb.unchanged(mb.Group({"0": {"id": "m0"}}, ("1", "2")))
    assert removed.removal_policies == [{"resource_list": ["1", "2"]}] and removed.count == 1


def test_an_output_is_read_again_when_the_held_groups_change_within_a_second() -> None:
    def stack(held: list[str], updated: str = "2026-11-29T12:30:18Z") -> dict[str, Any]:
        groups = {n: PlacementGroup(n, PlacementPolicy.SOFT_ANTI_AFFINITY) for n in held}
        return {"id": "s-1", "updated_time": updated, "parameters": cs.parameters(groups)}

    one, both = stack(["w0"]), stack(["w0", "w1"])
    assert cs.output_version(one) == cs.output_version(stack(["w0"]))
    # Two updates begun in the same second: the second one's output is read again.
    assert cs.output_version(one) != cs.output_version(both)
    assert cs.output_version(one) != cs.output_version(stack(["w0"], "2026-11-29T12:30:19Z"))
