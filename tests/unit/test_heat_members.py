"""The heat driver's member bookkeeping (drivers/heat/members.py): the index each machine
gets is the one Heat's ResourceGroup gives it, and a removal names exactly its index."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from shoal.drivers.contract import TAG_NODE, MachineSpec, MachineState
from shoal.drivers.heat import members as mb
from shoal.drivers.heat import templates


def spec(n: int, zone: str | None = "az1") -> MachineSpec:
    return MachineSpec(
        machine_id=f"m{n}",
        name=f"node-{n}",
        project_id="p",
        cluster_id="c",
        nodegroup_id="g",
        role="worker",
        flavor_id="m1.small",
        image_id="img",
        availability_zone=zone,
        user_data=f"#cloud-config\n# node {n}\n",
    )


def heat_names(count: int, blacklist: set[str]) -> list[str]:
    """What Heat's ResourceGroup names its members: the first `count` names off the list."""
    free = (str(n) for n in itertools.count() if str(n) not in blacklist)
    return list(itertools.islice(free, count))


def applied(group: mb.Group, update: mb.Update) -> mb.Group:
    """The stack's parameters after the update, as the next read returns them (JSON text)."""
    return mb.Group.of({k: v for k, v in update.parameters().items()})


def test_indices_follow_heats_own_naming_through_growth_and_removals() -> None:
    group = mb.Group.of(None)
    entries = {n: mb.entry(spec(n), "dep", ()) for n in range(8)}
    steps = [[0, 1, 2], [0, 2], [0, 2, 3, 4], [2, 4], [2, 4, 5, 6, 7], [7]]
    for wanted in steps:
        update = mb.plan(group, [entries[n] for n in wanted])
        assert update is not None
        blacklist = {str(i) for p in update.removal_policies for i in p["resource_list"]}
        assert sorted(update.members, key=int) == heat_names(update.count, blacklist)
        group = applied(group, update)
        assert sorted(e["id"] for e in group.members.values()) == sorted(f"m{n}" for n in wanted)
    assert mb.plan(group, [entries[7]]) is None  # nothing changes: no update


def test_a_removal_names_exactly_the_removed_members_index() -> None:
    entries = [mb.entry(spec(n), "dep", ()) for n in range(3)]
    first = mb.plan(mb.Group.of(None), entries)
    assert first is not None
    group = applied(mb.Group.of(None), first)
    middle = group.index_of("m1")
    update = mb.plan(group, [entries[0], entries[2]])
    assert update is not None and update.removed == (middle,)
    assert update.removal_policies == [{"resource_list": [middle]}]
    assert json.loads(update.parameters()["members"])[group.index_of("m2")]["id"] == "m2"


def test_the_listing_reports_members_servers_and_the_stacks_failure() -> None:
    entries = [mb.entry(spec(n), "dep", ()) for n in range(3)]
    first = mb.plan(mb.Group.of(None), entries)
    assert first is not None
    group = applied(mb.Group.of(None), first)
    server = {
        "id": "srv-0",
        "name": "node-0",
        "status": "ACTIVE",
        "metadata": entries[0]["metadata"],
        "OS-EXT-AZ:availability_zone": "az1",
        "addresses": {"net": [{"version": 4, "addr": "192.168.1.5"}]},
    }
    stray = {**server, "id": "srv-9", "metadata": {**server["metadata"], TAG_NODE: "m9"}}
    failing = mb.StackView("s", "UPDATE_FAILED", "Quota exceeded for instances", group)
    got = {m.machine_id: m for m in mb.machines([failing], [server, stray], {})}
    assert got["m0"].state is MachineState.ACTIVE and got["m0"].address == "192.168.1.5"
    assert got["m1"].state is MachineState.ERROR and got["m1"].fault_kind is not None
    assert got["m9"].state is MachineState.DELETING  # no stack holds it: going
    # Each member carries its Heat member index (a stray server has none).
    assert [got[f"m{i}"].provider_index for i in (0, 1, 2, 9)] == ["0", "1", "2", None]
    building = mb.StackView("s", "UPDATE_IN_PROGRESS", "", group)
    assert mb.machines([building], [], {})[0].state is MachineState.BUILDING
    assert mb.machines([building], [], {TAG_NODE: "m2"})[0].machine_id == "m2"


def _srv(sid: str, status: str = "ACTIVE", created: str = "", task: str | None = None) -> dict:
    return {"id": sid, "status": status, "created": created, "OS-EXT-STS:task_state": task}


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        # Heat replacing a member marked unhealthy: the new server is the machine ...
        (_srv("old", "SHUTOFF", "2026-01-01T00:00:00Z"),
         _srv("new", "BUILD", "2026-01-01T00:05:00Z"), "new"),
        # ... whichever way Nova lists them,
        (_srv("new", "BUILD", "2026-01-01T00:05:00Z"),
         _srv("old", "ACTIVE", "2026-01-01T00:00:00Z"), "new"),
        # ... and never the one Heat deletes, even the newer one.
        (_srv("old", "ACTIVE", "2026-01-01T00:00:00Z"),
         _srv("new", "ACTIVE", "2026-01-01T00:05:00Z", task="deleting"), "old"),
        (_srv("new", "DELETED", "2026-01-01T00:05:00Z"),
         _srv("old", "ERROR", "2026-01-01T00:00:00Z"), "old"),
        # Same creation time: the id decides, so the listing's order does not.
        (_srv("a", created="2026-01-01T00:00:00Z"), _srv("b", created="2026-01-01T00:00:00Z"), "b"),
        (_srv("b", created="2026-01-01T00:00:00Z"), _srv("a", created="2026-01-01T00:00:00Z"), "b"),
    ],
)  # fmt: skip
def test_of_two_servers_of_one_member_the_live_newer_one_is_its_machine(
    a: dict, b: dict, want: str
) -> None:
    assert mb.current_server(a, b)["id"] == want


def test_a_member_heat_replaced_is_listed_as_its_new_server_under_the_same_index() -> None:
    entries = [mb.entry(spec(n), "dep", ()) for n in range(2)]
    first = mb.plan(mb.Group.of(None), entries)
    assert first is not None
    group = applied(mb.Group.of(None), first)
    meta = entries[0]["metadata"]
    old = {**_srv("srv-old", "SHUTOFF", "2026-01-01T00:00:00Z"), "metadata": meta}
    new = {**_srv("srv-new", "BUILD", "2026-01-01T00:05:00Z"), "metadata": meta}
    updating = mb.StackView("s", "UPDATE_IN_PROGRESS", "", group)
    for servers in ([old, new], [new, old]):
        got = [m for m in mb.machines([updating], servers, {}) if m.machine_id == "m0"]
        assert len(got) == 1  # one machine per member, never two
        assert (got[0].provider_id, got[0].state, got[0].provider_index) == (
            "srv-new",
            MachineState.BUILDING,
            "0",
        )
    # Alone while Heat works, the old stopped server is Heat's to settle (it may be
    # replacing it): BUILDING, not a failure shoal would replace a second time ...
    alone = [m for m in mb.machines([updating], [old], {}) if m.machine_id == "m0"]
    assert (alone[0].state, alone[0].fault) == (MachineState.BUILDING, None)
    # ... but once the stack is done it is a failed machine (what shoal repairs), and a
    # server in ERROR is a failure whatever Heat does.
    done = mb.StackView("s", "UPDATE_COMPLETE", "", group)
    alone = [m for m in mb.machines([done], [old], {}) if m.machine_id == "m0"]
    assert alone[0].state is MachineState.ERROR and "SHUTOFF" in (alone[0].fault or "")
    broken = {**old, "status": "ERROR", "fault": {"message": "No valid host was found"}}
    got = [m for m in mb.machines([updating], [broken], {}) if m.machine_id == "m0"]
    assert got[0].state is MachineState.ERROR and got[0].fault_kind is not None


def test_a_template_without_the_contracts_parameters_or_outputs_is_refused(
    tmp_path: Path,
) -> None:
    templates.check(templates.GROUP)
    bad = dict(templates.GROUP, outputs={})
    bad["parameters"] = {k: v for k, v in templates.GROUP["parameters"].items() if k != "members"}
    path = tmp_path / "group.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(templates.TemplateError) as err:
        templates.load_operator(str(path))
    assert "parameter 'members'" in str(err.value) and "output 'refs_map'" in str(err.value)


# A kept node asked again with one field changed -> whether its member is replaced (a new
# server under a new index) or kept as it is (its image changes by a rebuild only).
CHANGED = [
    ("availability_zone", "az2", True),  # the conductor placed it elsewhere (no valid host)
    ("flavor_id", "m1.large", True),
    ("name", "node-0-renamed", True),
    ("keypair", "other-key", True),
    ("image_id", "img-2", False),  # a rebuild (driver.rebuild_machine), not a new server
    ("user_data", "#cloud-config\n# a new token\n", False),  # rendered anew each pass
]


@pytest.mark.parametrize(("field", "value", "replaced"), CHANGED)
def test_which_changes_replace_a_member_under_a_new_index(
    field: str, value: str, replaced: bool
) -> None:
    first = mb.plan(mb.Group.of(None), [mb.entry(spec(0, "az1"), "dep", ())])
    assert first is not None
    group = applied(mb.Group.of(None), first)
    asked = mb.entry(replace(spec(0, "az1"), **{field: value}), "dep", ())
    update = mb.plan(group, [asked])
    if not replaced:
        assert update is None
        return
    assert update is not None and update.removed == ("0",)
    assert update.members == {"1": asked}


def test_a_member_nova_placed_is_kept_when_its_zone_becomes_known() -> None:
    first = mb.plan(mb.Group.of(None), [mb.entry(spec(0, None), "dep", ())])
    assert first is not None
    group = applied(mb.Group.of(None), first)
    assert mb.plan(group, [mb.entry(spec(0, "az1"), "dep", ())]) is None


def test_a_stack_being_deleted_holds_its_members_until_it_is_gone() -> None:
    first = mb.plan(mb.Group.of(None), [mb.entry(spec(0), "dep", ())])
    assert first is not None
    group = applied(mb.Group.of(None), first)
    going = mb.StackView("s", "DELETE_IN_PROGRESS", "", group)
    assert [m.state for m in mb.machines([going], [], {})] == [MachineState.DELETING]
    failed = mb.StackView("s", "DELETE_FAILED", "Resource DELETE failed: boom", group)
    (m,) = mb.machines([failed], [], {})
    assert m.state is MachineState.ERROR and m.fault and "boom" in m.fault


ROOT = Path(__file__).resolve().parents[2]


def test_the_documented_operator_template_keeps_the_contract_as_heat_reads_it() -> None:
    """docs/drivers.md shows docs/examples/heat-group.yaml verbatim; its version stays a
    string (YAML would make 2018-08-31 a date, which Heat refuses)."""
    example = ROOT / "docs" / "examples" / "heat-group.yaml"
    loaded = templates.load_operator(str(example))
    assert loaded["heat_template_version"] == "2018-08-31"
    assert example.read_text() in (ROOT / "docs" / "drivers.md").read_text()


def test_the_members_template_has_one_server_per_member_named_by_its_index() -> None:
    first = mb.plan(mb.Group.of(None), [mb.entry(spec(n), "dep", ()) for n in range(3)])
    assert first is not None
    body = yaml.safe_load(templates.members_file(first.members))
    assert sorted(body["resources"]) == ["0", "1", "2"]
    server = body["resources"]["1"]["properties"]
    assert server["name"] == first.members["1"]["name"]
    assert server["availability_zone"] == "az1" and server["metadata"]["shoal-node"] == "m1"
    assert body["outputs"]["refs_map"]["value"] == {i: {"get_resource": i} for i in "012"}


# (the ids the catalog gave the entry) -> (the server's image, its flavor in the template)
IDS = [
    ({"image_id": "img-id", "flavor_id": "f-id"}, "img-id", "f-id"),
    ({"image_id": "img-id"}, "img-id", "m1.small"),  # a flavor the catalog lacks
    (None, "img", "m1.small"),  # an entry made before entries had ids: as named
]


@pytest.mark.parametrize(("ids", "image", "flavor"), IDS)
def test_a_members_server_is_given_the_clouds_ids_when_its_entry_has_them(
    ids: dict[str, str] | None, image: str, flavor: str
) -> None:
    """Heat checks every member's image and flavor on each update of the group; by id a
    flavor costs it one Nova request, by name three."""
    e = mb.entry(spec(0), "dep", (), ids)
    body = yaml.safe_load(templates.members_file({"0": e}))
    props = body["resources"]["0"]["properties"]
    assert (props["image"], props["flavor"]) == (image, flavor)
    assert (e["image"], e["flavor"]) == ("img", "m1.small")  # the spec's own, kept


def test_a_member_made_by_name_is_kept_when_it_is_asked_again_with_ids() -> None:
    """No change reaches a member's server when the group is next updated: an entry made
    before entries carried ids stays as it is (Heat would rebuild a server whose image
    property changed from a name to an id)."""
    old = mb.entry(spec(0), "dep", ())
    group = mb.Group.of({"members": json.dumps({"0": old}), "removal_policies": "[]"})
    ids = {"image_id": "img-id", "flavor_id": "f-id"}
    update = mb.plan(group, [mb.entry(spec(0), "dep", (), ids), mb.entry(spec(1), "dep", (), ids)])
    assert update is not None and update.removed == ()
    assert update.members["0"] == old
    assert update.members["1"]["flavor_id"] == "f-id"


@pytest.mark.parametrize(
    ("status", "kind"),
    [("ACTIVE", "SOFT"), ("SHUTOFF", "HARD"), ("ERROR", "HARD"), ("PAUSED", "HARD"),
     ("active", "SOFT"), ("REBOOT", None), ("HARD_REBOOT", None)],
)  # fmt: skip
def test_a_running_server_is_rebooted_softly_and_any_other_hard(status: str, kind: str) -> None:
    assert mb.reboot_type(status) == kind
