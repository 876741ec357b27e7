"""Reduced footprint as pure rules: vms entries checked, slots made from them, the
slot a new node takes, the template check at upload, what taking hosts down hits."""

from __future__ import annotations

import pytest

from shoal.domain import virt, vmtemplate, xmlrender
from shoal.domain.errors import Invalid
from shoal.domain.model import ROLE_VIRT, ROLE_WORKER, NodeGroupSpec

H = [virt.Host("n0", "h0", "g", 0), virt.Host("n1", "h1", "g", 1), virt.Host("n2", "h2", "g", 2)]


def slots(entries: list[dict[str, object]]) -> list[virt.Slot]:
    virt.check_entries("vms", entries)
    return virt.slots("g", entries)


def test_entries_become_slots_with_defaults_and_their_attributes() -> None:
    (a, b) = slots([{"cpu": 2, "ram": 0.5, "new_value": "x"}, {"id": "big", "host": 1}])
    assert (a.id, a.cpu, a.ram_mib, a.key) == ("0", 2, 512, "g:0")
    assert a.attributes == {"cpu": 2, "ram": 0.5, "new_value": "x"}
    assert (b.id, b.cpu, b.ram_mib, b.host) == ("big", 1, 1024, 1)


@pytest.mark.parametrize(
    ("entries", "says"),
    [
        ([{"id": 1}, {"id": 1}], "used twice"),
        ([{"cpu": 0}], r"vms\[0\]\.cpu must be a whole number"),
        ([{"cpu": 1.5}], "whole number"),
        ([{"ram": -1}], r"vms\[0\]\.ram"),
        ([{"ram": True}], r"vms\[0\]\.ram"),
        ([{"host": -1}], "host number"),
        ([{"nodegroup": ""}], "node group's name"),
    ],
)
def test_bad_entries_are_refused_naming_the_entry(
    entries: list[dict[str, object]], says: str
) -> None:
    with pytest.raises(Invalid, match=says):
        virt.check_entries("vms", entries)


def test_reserved_slots_first_then_the_host_with_fewest_of_the_group() -> None:
    free = slots(
        [{"id": "open"}, {"id": "mine", "nodegroup": "m"}, {"id": "theirs", "nodegroup": "w"}]
    )
    first = virt.choose("m", free, H, {})
    assert isinstance(first, virt.Choice) and first.slot.id == "mine" and first.host.name == "h0"
    spread = virt.choose("w", free[:1], H, {"h0": 2, "h1": 1})
    assert isinstance(spread, virt.Choice) and spread.host.name == "h2"
    assert isinstance(virt.choose("w", free[:1], H, {}, zones=["h1"]), virt.Choice)


def test_a_pinned_slot_goes_only_on_its_host() -> None:
    pinned = slots([{"id": "p", "host": 2}, {"id": "q", "host": "h1"}])
    choice = virt.choose("m", pinned[:1], H, {"h2": 5})
    assert isinstance(choice, virt.Choice) and choice.host.name == "h2"
    choice = virt.choose("m", pinned[1:], H, {})
    assert isinstance(choice, virt.Choice) and choice.host.name == "h1"
    why = virt.choose("m", pinned[:1], H[:2], {})
    assert isinstance(why, str) and "pinned to hosts that are not ready" in why


def test_why_no_slot_can_be_taken() -> None:
    assert "no virt host is ready yet" in str(virt.choose("m", slots([{}]), [], {}))
    taken_by_others = slots([{"nodegroup": "w"}])
    assert "add entries to vms" in str(virt.choose("m", taken_by_others, H, {}))


def test_vms_and_a_template_belong_to_role_virt_and_the_template_must_render() -> None:
    with pytest.raises(Invalid, match="role virt"):
        virt.check_spec(NodeGroupSpec(role=ROLE_WORKER, vms=({"cpu": 1},)))
    virt.check_spec(
        NodeGroupSpec(role=ROLE_VIRT, vms=({"cpu": 2},), vm_template=vmtemplate.DEFAULT)
    )
    broken = vmtemplate.DEFAULT.replace(
        "<memory unit='MiB'>{memory_mib}</memory>", "<memory>{ram}</memory>"
    )
    with pytest.raises(Invalid, match="line 5"):
        virt.check_spec(NodeGroupSpec(role=ROLE_VIRT, vms=({"ram": 0.5},), vm_template=broken))
    with pytest.raises(xmlrender.TemplateError, match="metadata"):
        vmtemplate.check("<domain type='qemu'><name>x</name></domain>")


def test_an_entrys_keys_render_under_shoals_own_variables() -> None:
    out = vmtemplate.variables({"name": "node-1", "vcpus": 2}, {"name": "evil", "new_value": "v"})
    assert out == {"name": "node-1", "vcpus": 2, "new_value": "v"}


def test_taking_hosts_down_names_the_vm_nodes_on_them() -> None:
    on = {"vm-a": "h0", "vm-b": "h1", "vm-c": "h0"}
    assert virt.on_hosts(["h0"], on) == ["vm-a", "vm-c"]
    assert virt.on_hosts(["h2"], on) == []
