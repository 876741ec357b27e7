"""How a cluster the database lost is rebuilt from its machines (`shoal orphan adopt`):
each node group from its machines' tags (its uuid, the role) and from what the
provider lists of them (flavor, image); the names from the machines' names, which
shoal made `<cluster>-<node group>-<suffix>` (domain/naming.py). Pure rules."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from shoal.domain import naming
from shoal.domain.model import ROLE_WORKER

SUFFIX_SEP = "-"


@dataclass(frozen=True)
class Found:
    """One held machine of the cluster to adopt, as the sweeper recorded it."""

    name: str
    nodegroup_uuid: str
    role: str | None  # its role tag (None: made before shoal tagged roles)
    flavor_id: str | None
    image_id: str | None
    provider: str
    project_id: str


@dataclass(frozen=True)
class Group:
    """A node group to recreate: its uuid, name, role, machines' flavor and image,
    provider and count (the machines found: none is made or deleted)."""

    uuid: str
    name: str
    role: str
    flavor_id: str | None
    image_id: str | None
    provider: str
    node_count: int


def most_common(values: Sequence[str | None]) -> str | None:
    """The most frequent of `values` that is set (the first seen on a tie), or None."""
    counts = Counter(v for v in values if v)
    return max(counts, key=lambda v: (counts[v], -values.index(v))) if counts else None


def prefix_of(name: str) -> str:
    """A node name without its random suffix (`c-w-ab12c` -> `c-w`)."""
    head, sep, _ = name.rpartition(SUFFIX_SEP)
    return head if sep and head else name


DEFAULT_GROUPS = ("default-master", "default-worker")  # Magnum's names


def split_names(
    prefixes: Mapping[str, str], cluster: str | None = None
) -> tuple[str, dict[str, str]]:
    """The cluster's name and each group's from the groups' name prefixes (uuid ->
    `<cluster>-<group>`). `cluster` given (the admin knows it): each group's name is
    its prefix without it. Else: the part before a Magnum default group name
    (`default-master`, `default-worker`) when one is there; else the longest common
    part at a dash that leaves every group a name; one group: its last dash-separated
    part is its name. Names cleaned for DNS (lowercase, dashes) stay so; duplicate
    group names get `-2`, `-3`..."""
    values = list(prefixes.values())
    if cluster is not None:
        cleaned = naming.clean(cluster)
        cut = len(cleaned) + 1
        return cluster, _unique(
            {u: p[cut:] if p.startswith(cleaned + SUFFIX_SEP) else p for u, p in prefixes.items()}
        )
    cluster = next(
        (v[: -len(d) - 1] for v in values for d in DEFAULT_GROUPS if v.endswith(SUFFIX_SEP + d)),
        "",
    )
    if not cluster and len(values) > 1:
        parts = [v.split(SUFFIX_SEP) for v in values]
        common = 0
        while all(len(p) > common + 1 for p in parts) and len({p[common] for p in parts}) == 1:
            common += 1
        cluster = SUFFIX_SEP.join(parts[0][:common])
    elif not cluster and values and SUFFIX_SEP in values[0]:
        cluster = values[0].rpartition(SUFFIX_SEP)[0]
    head = cluster + SUFFIX_SEP if cluster else ""
    return cluster, _unique(
        {u: p[len(head) :] if head and p.startswith(head) else p for u, p in prefixes.items()}
    )


def _unique(names: Mapping[str, str]) -> dict[str, str]:
    """`names` with empty ones called `group` and repeats suffixed `-2`, `-3`..."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for uuid, base in names.items():
        base = base or "group"
        name, n = base, 1
        while name in taken:
            n += 1
            name = f"{base}-{n}"
        taken.add(name)
        out[uuid] = name
    return out


def groups_of(found: Sequence[Found], cluster: str | None = None) -> tuple[str, list[Group]]:
    """The cluster's name (`cluster`, else derived: "" when the names say nothing) and
    its node groups, from the held machines that claim it."""
    by_group: dict[str, list[Found]] = {}
    for f in found:
        by_group.setdefault(f.nodegroup_uuid, []).append(f)
    prefixes = {
        uuid: most_common([prefix_of(f.name) for f in fs]) or uuid[:8]
        for uuid, fs in by_group.items()
    }
    cluster, names = split_names(prefixes, cluster)
    groups = [
        Group(
            uuid=uuid,
            name=names[uuid],
            role=most_common([f.role for f in fs]) or ROLE_WORKER,
            flavor_id=most_common([f.flavor_id for f in fs]),
            image_id=most_common([f.image_id for f in fs]),
            provider=fs[0].provider,
            node_count=len(fs),
        )
        for uuid, fs in by_group.items()
    ]
    return cluster, groups
