"""Node group entries: the `node_groups` of a cluster create, the body of a node group
create, and the `node_group_templates` of a cluster template. An entry gives node
group attributes, optionally over a source it names (a standalone node group
template, or an existing node group), and at cluster create it adds to the
template's (or cloned cluster's) groups or overrides the one of the same name.

Pure: the services look the named sources up and hand them in as `Source`s. What
is made from a source is a copy; only its uuid is kept, for display.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from shoal.domain import model as m
from shoal.domain import specs
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid
from shoal.domain.merge import GroupPlan, default_groups, ngt_spec

NGT_REF = "nodegroup_template_id"  # names a standalone node group template
NG_REF = "from_nodegroup"  # names an existing node group of the project
REFS = (NGT_REF, NG_REF)


@dataclass(frozen=True)
class Entry:
    """One entry as given: its name (None: the source's), the node group attributes
    it sets (they win over its base), and the source it names, if any."""

    name: str | None
    attrs: dict[str, Any]
    ref_key: str | None = None  # NGT_REF or NG_REF
    ref: str | None = None  # the source's uuid or name


@dataclass(frozen=True)
class Source:
    """What an entry's base is, copied: a referenced NGT or node group, or the
    template group an entry of the same name overrides."""

    name: str
    spec: m.NodeGroupSpec
    uuid: str | None  # kept on what is made from it, for display only


@dataclass(frozen=True)
class TemplateEntryPlan:
    """One entry of a cluster template to write: embedded (its own spec), or a
    reference to a standalone NGT (`reference`, with `overrides` in wire form over
    it; `spec` is then the NGT's spec with them, for the checks made at write)."""

    name: str
    spec: m.NodeGroupSpec
    source_id: str | None = None
    reference: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)


def _ident(key: str, raw: Any) -> str:
    if key == NG_REF:  # a uuid, name or integer id, as the node group API takes it
        return str(v.literal(raw))
    return v.string(key, raw) or ""


def parse(raw: Any, field_name: str, refs: Sequence[str] = REFS) -> Entry:
    """An entry: `name` + node group attributes, or one of `refs` naming a source
    (then `name` may be left out) + attributes over it. Both refs: Invalid."""
    if not isinstance(raw, Mapping):
        raise Invalid(f"{field_name} entries must be objects", field_name)
    v.reject_unknown(field_name, raw, specs.NODEGROUP_KEYS | {"name", *refs})
    given = [k for k in refs if raw.get(k) is not None]
    if len(given) > 1:
        raise Invalid(f"{field_name}: give {' or '.join(given)}, not both", given[1])
    ref_key = given[0] if given else None
    if ref_key is None or raw.get("name") is not None:
        name: str | None = v.name(f"{field_name}.name", raw.get("name"))
    else:
        name = None
    attrs = {k: x for k, x in raw.items() if k in specs.NODEGROUP_KEYS}
    ref = _ident(ref_key, raw[ref_key]) if ref_key else None
    return Entry(name=name, attrs=attrs, ref_key=ref_key, ref=ref)


def parse_list(
    raw: Any, field_name: str, refs: Sequence[str] = REFS, *, non_empty: bool = True
) -> list[Entry]:
    """A list of entries (None: no entries), at most NODE_GROUPS_MAX of them."""
    items = v.literal(raw)
    if items is None:
        return []
    if not isinstance(items, list) or (non_empty and not items):
        what = "a non-empty list" if non_empty else "a list"
        raise Invalid(f"{field_name} must be {what} of objects", field_name)
    v.bounded_list(field_name, items, v.NODE_GROUPS_MAX)
    return [parse(x, field_name, refs) for x in items]


def source_of(spec: m.NodeGroupSpec, name: str, uuid: str | None) -> Source:
    """A node group's or NGT's spec as a source to copy (a held rollout is not copied)."""
    return Source(name=name, spec=dataclasses.replace(spec, rollout_hold=None), uuid=uuid)


def plan(entry: Entry, base: Source | None) -> GroupPlan:
    """The group an entry makes: its attributes over its base (else over defaults)."""
    spec = specs.apply_ng_attrs(base.spec if base else m.NodeGroupSpec(), entry.attrs)
    name = entry.name or (base.name if base else None)
    if name is None:  # parse() asks for a name when no source is named
        raise Invalid("node_groups.name is required", "node_groups")
    return GroupPlan(name, spec, source_id=base.uuid if base else None)


def combine(
    groups: Sequence[GroupPlan], entries: Sequence[tuple[Entry, Source | None]]
) -> list[GroupPlan]:
    """A template's (or cloned cluster's) groups with the request's entries: an
    entry named like one of the groups overrides it in place (its attributes over
    the group's, or, when it names a source of its own, that source in its place);
    the others are added after the groups, in order. Two entries of one name: Conflict."""
    out = list(groups)
    at = {p.name: i for i, p in enumerate(out)}
    seen: set[str] = set()
    for entry, source in entries:
        name = entry.name or (source.name if source else "")
        if name in seen:
            raise Conflict(f"A node group with name {name} already exists in the cluster")
        seen.add(name)
        i = at.get(name)
        if i is None:
            out.append(plan(entry, source))
            continue
        group = out[i]
        base = source or Source(group.name, group.spec, group.source_id)
        named = dataclasses.replace(entry, name=name)
        out[i] = dataclasses.replace(plan(named, base), is_default=group.is_default)
    return out


def overrides(attrs: Mapping[str, Any], spec: m.NodeGroupSpec) -> dict[str, Any]:
    """The attributes an entry set, in wire form, read back from the spec they made
    (checked and canonical: labels parsed, taints as objects)."""
    wire = specs.spec_as_attrs(spec)
    return {k: wire[k] for k in attrs}


def template_entry(
    entry: Entry, referenced: Source | None, limits: v.Limits | None = None
) -> TemplateEntryPlan:
    """A cluster template entry to write: embedded, or a reference to `referenced`
    (its attributes checked over the NGT's spec as it is now)."""
    if referenced is None:
        name = v.name("node_group_templates.name", entry.name)
        return TemplateEntryPlan(name, ngt_spec(m.NodeGroupSpec(), entry.attrs, limits))
    spec = ngt_spec(referenced.spec, entry.attrs, limits)
    return TemplateEntryPlan(
        name=entry.name or referenced.name,
        spec=spec,
        reference=referenced.uuid,
        overrides=overrides(entry.attrs, spec),
    )


def check_template_entries(
    items: Sequence[TemplateEntryPlan], limits: v.Limits | None = None
) -> None:
    """Together within the per-cluster node limit, and unique names."""
    v.cluster_nodes(sum(x.spec.node_count for x in items), limits or v.Limits())
    names = [x.name for x in items]
    if len(set(names)) != len(names):
        raise Invalid("node_group_templates names must be unique", "node_group_templates")


def _referenced(
    ref: m.NodeGroupTemplateRef, ngts: Mapping[str, m.NodeGroupTemplate]
) -> m.NodeGroupTemplate:
    ngt = ngts.get(ref.nodegroup_template_id)
    if ngt is None:  # deleting a referenced NGT is refused; this is a safety net
        raise Conflict(
            f"node group template {ref.nodegroup_template_id} (entry {ref.name}) no longer "
            "exists; change the cluster template"
        )
    return ngt


def template_groups(
    items: Sequence[m.TemplateEntry], ngts: Mapping[str, m.NodeGroupTemplate]
) -> list[GroupPlan]:
    """A cluster template's entries as the groups of a new cluster: embedded NGTs
    copied; references copy the NGT's spec as it is now (from `ngts`, by uuid), with
    the entry's overrides on top. The NGT's uuid is the group's source, for display."""
    out = []
    for x in items:
        if isinstance(x, m.NodeGroupTemplateRef):
            ngt = _referenced(x, ngts)
            spec = specs.apply_ng_attrs(ngt.spec, x.overrides)
            out.append(GroupPlan(x.name, spec, source_id=ngt.uuid))
        else:
            out.append(GroupPlan(x.name, x.spec, source_id=x.uuid))
    return out


def as_written(
    items: Sequence[m.TemplateEntry],
    ngts: Mapping[str, m.NodeGroupTemplate],
    *,
    copy: bool = False,
    keep_references: bool = True,
) -> list[TemplateEntryPlan]:
    """A cluster template's entries as they would be written again: for the checks
    of a change that keeps them, or (`copy`) for a template made from it, whose
    embedded entries then name theirs as their source. `keep_references` false
    turns references into embedded copies of the NGT as it is now."""
    out = []
    for x in items:
        if isinstance(x, m.NodeGroupTemplateRef):
            ngt = _referenced(x, ngts)
            spec = specs.apply_ng_attrs(ngt.spec, x.overrides)
            if keep_references:
                out.append(
                    TemplateEntryPlan(x.name, spec, reference=ngt.uuid, overrides=dict(x.overrides))
                )
            else:
                out.append(TemplateEntryPlan(x.name, spec, source_id=ngt.uuid))
        else:
            out.append(TemplateEntryPlan(x.name, x.spec, x.uuid if copy else x.source_id))
    return out


def cluster_groups(
    attrs: Mapping[str, Any],
    base: Sequence[GroupPlan] | None,
    resolved: Sequence[tuple[Entry, Source | None]],
) -> list[GroupPlan]:
    """The groups of a new cluster, before counts and checks (merge.plan_groups).
    With a template or a clone (`base` not None): its groups, or Magnum's two
    default groups when it has none, combined with the entries. Without: the
    entries are the whole set (a heterogeneous cluster gets no extra default
    groups), else the two default groups."""
    if base is None:
        return combine([], resolved) or default_groups(attrs)
    return combine(list(base) or default_groups(attrs), resolved)
