"""Node group entries and the template algebra, as pure rules: how an entry is read,
how entries combine with a template's groups, and how a cluster template's
references to standalone node group templates are written and copied at use."""

from __future__ import annotations

import pytest

from shoal.domain import entries, merge
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid

GPU = m.NodeGroupSpec(role="gpu", flavor_id="g1.large", node_count=2, node_labels={"a": "1"})


def _ngt(uuid: str = "n-1", spec: m.NodeGroupSpec = GPU) -> m.NodeGroupTemplate:
    return m.NodeGroupTemplate(id=1, uuid=uuid, project_id="p", name="gpu", spec=spec)


def test_an_entry_names_at_most_one_source_and_a_name_unless_it_names_one() -> None:
    plain = entries.parse({"name": "w", "node_count": 2}, "node_groups")
    assert (plain.name, plain.attrs, plain.ref) == ("w", {"node_count": 2}, None)
    ref = entries.parse({"nodegroup_template_id": "gpu", "flavor_id": "x"}, "node_groups")
    assert (ref.name, ref.ref_key, ref.ref, ref.attrs) == (
        None,
        entries.NGT_REF,
        "gpu",
        {"flavor_id": "x"},
    )
    assert entries.parse({"from_nodegroup": 7}, "node_groups").ref == "7"  # an integer id
    with pytest.raises(Invalid, match="not both") as exc:
        entries.parse({"name": "w", "nodegroup_template_id": "a", "from_nodegroup": "b"}, "ng")
    assert exc.value.field == "from_nodegroup"
    with pytest.raises(Invalid, match=r"node_groups\.name"):
        entries.parse({"node_count": 1}, "node_groups")
    with pytest.raises(Invalid, match="from_nodegroup"):  # not a template entry's key
        entries.parse({"from_nodegroup": "x"}, "node_group_templates", (entries.NGT_REF,))
    with pytest.raises(Invalid, match="must be objects"):
        entries.parse(["w"], "node_groups")


def test_entry_lists_are_bounded_and_non_empty_where_asked() -> None:
    assert entries.parse_list(None, "node_groups") == []
    assert entries.parse_list([], "node_group_templates", non_empty=False) == []
    with pytest.raises(Invalid, match="non-empty"):
        entries.parse_list([], "node_groups")
    with pytest.raises(Invalid):
        entries.parse_list([{"name": f"g{i}"} for i in range(v.NODE_GROUPS_MAX + 1)], "x")


def _plans() -> list[merge.GroupPlan]:
    master = m.NodeGroupSpec(role="master", node_count=3, flavor_id="m1.medium")
    worker = m.NodeGroupSpec(node_count=2, flavor_id="m1.small", node_labels={"tier": "web"})
    return [
        merge.GroupPlan("masters", master, is_default=True, source_id="t-1"),
        merge.GroupPlan("workers", worker, is_default=True, source_id="t-2"),
    ]


def test_entries_add_to_the_template_groups_and_a_same_name_entry_overrides_in_place() -> None:
    gpu = entries.Source("gpu-ngt", GPU, "n-1")
    resolved = [
        (entries.parse({"name": "extra", "node_count": 1}, "node_groups"), None),
        (entries.parse({"name": "workers", "flavor_id": "m1.xlarge"}, "node_groups"), None),
        (entries.parse({"nodegroup_template_id": "gpu-ngt", "node_count": 4}, "ng"), gpu),
    ]
    out = entries.combine(_plans(), resolved)
    assert [p.name for p in out] == ["masters", "workers", "extra", "gpu-ngt"]
    workers = out[1]
    # The entry's attributes win; the rest of the template group is kept, with its place.
    assert workers.spec.flavor_id == "m1.xlarge" and workers.spec.node_count == 2
    assert workers.spec.node_labels == {"tier": "web"}
    assert workers.is_default and workers.source_id == "t-2"
    assert out[3].spec.flavor_id == "g1.large" and out[3].spec.node_count == 4
    assert out[3].source_id == "n-1" and out[2].source_id is None


def test_a_same_name_entry_with_a_source_of_its_own_replaces_the_group() -> None:
    gpu = entries.Source("gpu", GPU, "n-1")
    entry = entries.parse({"name": "workers", "nodegroup_template_id": "gpu"}, "node_groups")
    out = entries.combine(_plans(), [(entry, gpu)])
    assert [p.name for p in out] == ["masters", "workers"]
    assert out[1].spec == GPU and out[1].source_id == "n-1" and out[1].is_default


def test_two_entries_of_one_name_conflict() -> None:
    twice = [(entries.parse({"name": "x"}, "node_groups"), None)] * 2
    with pytest.raises(Conflict, match="already exists"):
        entries.combine(_plans(), twice)
    with pytest.raises(Conflict, match="already exists"):
        entries.cluster_groups({}, None, twice)


def test_without_a_template_the_entries_are_the_whole_set() -> None:
    one = [(entries.parse({"name": "cp", "role": "master"}, "node_groups"), None)]
    assert [p.name for p in entries.cluster_groups({}, None, one)] == ["cp"]
    assert [p.name for p in entries.cluster_groups({}, None, [])] == [
        "default-master",
        "default-worker",
    ]
    # A template without node group templates: Magnum's defaults, plus the entries.
    assert [p.name for p in entries.cluster_groups({}, [], one)] == [
        "default-master",
        "default-worker",
        "cp",
    ]


def test_counts_and_master_rules_apply_to_the_combined_set() -> None:
    added = [(entries.parse({"name": "more", "role": "master", "node_count": 1}, "ng"), None)]
    groups = entries.cluster_groups({}, _plans(), added)
    with pytest.raises(Invalid, match="odd"):
        merge.plan_groups({"image_id": "i"}, {}, groups)
    groups = entries.cluster_groups({}, _plans(), [])
    plans = merge.plan_groups({"image_id": "i"}, {"node_count": 5}, groups)
    assert {p.name: p.spec.node_count for p in plans} == {"masters": 3, "workers": 5}


def test_a_template_reference_keeps_only_its_overrides_in_canonical_form() -> None:
    entry = entries.parse(
        {"nodegroup_template_id": "gpu", "labels": "{'x': 1}", "node_taints": ["k=v:NoSchedule"]},
        "node_group_templates",
        (entries.NGT_REF,),
    )
    written = entries.template_entry(entry, entries.Source("gpu", GPU, "n-1"))
    assert written.name == "gpu" and written.reference == "n-1" and written.source_id is None
    assert written.overrides == {
        "labels": {"x": "1"},
        "node_taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}],
    }
    assert written.spec.flavor_id == "g1.large"  # checked over the NGT's spec
    with pytest.raises(Conflict, match="max_node_count"):  # 2 nodes > max 1, caught at write
        entries.template_entry(
            entries.parse({"nodegroup_template_id": "gpu", "max_node_count": 1}, "x"),
            entries.Source("gpu", GPU, "n-1"),
        )
    embedded = entries.template_entry(entries.parse({"name": "e", "node_count": 1}, "x"), None)
    assert embedded.reference is None and embedded.spec.node_count == 1
    with pytest.raises(Invalid, match="unique"):
        entries.check_template_entries([embedded, embedded])


def test_a_reference_is_copied_at_use_from_the_ngt_as_it_is_then() -> None:
    ref = m.NodeGroupTemplateRef(
        id=2, uuid="e-2", project_id="p", name="accel", nodegroup_template_id="n-1",
        overrides={"node_count": 5},
    )  # fmt: skip
    emb = _ngt("e-1", m.NodeGroupSpec(role="master"))
    changed = _ngt(spec=m.NodeGroupSpec(role="gpu", flavor_id="g2.huge", node_count=1))
    plans = entries.template_groups([emb, ref], {"n-1": changed})
    assert [(p.name, p.source_id) for p in plans] == [("gpu", "e-1"), ("accel", "n-1")]
    assert plans[1].spec.flavor_id == "g2.huge" and plans[1].spec.node_count == 5
    with pytest.raises(Conflict, match="no longer exists"):
        entries.template_groups([ref], {})


def test_a_template_copy_keeps_references_or_embeds_them() -> None:
    ref = m.NodeGroupTemplateRef(
        id=2, uuid="e-2", project_id="p", name="accel", nodegroup_template_id="n-1",
        overrides={"node_count": 5},
    )  # fmt: skip
    emb = m.NodeGroupTemplate(
        id=1, uuid="e-1", project_id="p", name="cp", spec=m.NodeGroupSpec(role="master"),
        source_id="ng-0",
    )  # fmt: skip
    kept = entries.as_written([emb, ref], {"n-1": _ngt()}, copy=True)
    assert (kept[0].source_id, kept[0].reference) == ("e-1", None)
    assert (kept[1].reference, kept[1].overrides) == ("n-1", {"node_count": 5})
    assert entries.as_written([emb], {})[0].source_id == "ng-0"  # a rewrite, not a copy
    embedded = entries.as_written([ref], {"n-1": _ngt()}, copy=True, keep_references=False)
    assert embedded[0].reference is None and embedded[0].source_id == "n-1"
    assert embedded[0].spec.node_count == 5 and embedded[0].spec.flavor_id == "g1.large"
