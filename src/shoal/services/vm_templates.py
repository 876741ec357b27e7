"""Who may upload a domain template (`vm_template`): an admin, by default (policy rule
`nodegroup:vm_template`), wherever one arrives: a cluster create's `node_groups`, a
node group create or PATCH, a node group template, a cluster template's embedded
groups. A template becomes a VM on a virt host; a member who could write one could
ask that host for its files and devices (the allow-list of `domain.xmlallow` refuses
those for everyone, admins included: this rule is the second fence, not the only one).

Only an upload needs the rule: a value the changed object already holds (a member
PATCHing another field of the group, or sending a template's embedded list back as
it was) is not one, and neither is a copy made from a source (a node group template,
another group, a cluster) that someone allowed to upload it wrote.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from shoal.domain import model as m
from shoal.domain import policy

RULE = "nodegroup:vm_template"
KEY = "vm_template"


def enforce(
    caller: policy.Principal, given: Iterable[Mapping[str, Any]], kept: Collection[Any] = ()
) -> None:
    """Forbidden (naming the rule) when any of `given` (node group attributes as sent)
    uploads a template that is not one of `kept`, and the caller may not upload."""
    for attrs in given:
        value = attrs.get(KEY)
        if value is None or value == "" or (isinstance(value, str) and value in kept):
            continue
        policy.enforce(caller, RULE)  # anything else sent there is an upload (or garbage)


def kept_by(entries: Iterable[m.TemplateEntry]) -> set[Any]:
    """The templates a cluster template's entries hold now (embedded or as overrides)."""
    out: set[Any] = set()
    for e in entries:
        value = e.spec.vm_template if isinstance(e, m.NodeGroupTemplate) else e.overrides.get(KEY)
        if isinstance(value, str) and value:
            out.add(value)
    return out
