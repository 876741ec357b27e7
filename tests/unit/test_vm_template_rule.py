"""Who may upload a VM domain template, on plain values: what counts as an upload."""

from __future__ import annotations

import pytest

from shoal.domain import model as m
from shoal.domain.errors import Forbidden
from shoal.domain.policy import ADMIN, MEMBER, Principal
from shoal.services import vm_templates

MEMBER_P = Principal("p", roles=frozenset({MEMBER}))
ADMIN_P = Principal("p", roles=frozenset({ADMIN}))
KEPT = "<domain type='kvm'>kept</domain>"

CASES = [
    # (node group attributes as sent, what the object holds now, an upload?)
    ({}, (), False),
    ({"vm_template": None}, (), False),  # removed: the provider's template
    ({"vm_template": ""}, (), False),
    ({"vm_template": KEPT}, (KEPT,), False),  # sent back as it is
    ({"vms": [{"cpu": 2}]}, (KEPT,), False),  # another field of a group that has one
    ({"vm_template": "<domain/>"}, (), True),
    ({"vm_template": "<domain/>"}, (KEPT,), True),  # a different text
    ({"vm_template": {"not": "text"}}, (KEPT,), True),  # garbage: not a member's to send
    ({"vm_template": ["<domain/>"]}, (), True),
]


@pytest.mark.parametrize(("attrs", "kept", "upload"), CASES)
def test_what_is_an_upload_and_who_may_make_one(
    attrs: dict[str, object], kept: tuple[str, ...], upload: bool
) -> None:
    vm_templates.enforce(ADMIN_P, [attrs], kept)  # an admin always may
    if upload:
        with pytest.raises(Forbidden, match="nodegroup:vm_template .* admin role"):
            vm_templates.enforce(MEMBER_P, [{"name": "a"}, attrs], set(kept))
    else:
        vm_templates.enforce(MEMBER_P, [attrs], set(kept))


def test_a_cluster_templates_entries_keep_their_templates() -> None:
    spec = m.NodeGroupSpec(role=m.ROLE_VIRT, vm_template=KEPT)
    embedded = m.NodeGroupTemplate(1, "u1", "p", "e", spec)
    plain = m.NodeGroupTemplate(2, "u2", "p", "f", m.NodeGroupSpec())
    ref = m.NodeGroupTemplateRef(3, "u3", "p", "r", "u9", {"vm_template": "<x/>"})
    assert vm_templates.kept_by([embedded, plain, ref]) == {KEPT, "<x/>"}
