"""A node's revision: a short hash of what forces a machine to be replaced (its
image, flavor and volume sizes, and the version of its bootstrap data). A node
records the revision it was made from; a node group is up to date when all its
nodes carry the group's revision. Labels, taints, counts and policies are not in
it: they never force a replacement."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from shoal.domain import bootstrap, merge
from shoal.domain.model import Node, NodeGroupSpec

LENGTH = 12


def of(image: str | None, flavor: str | None, volume: int | None, boot_volume: int | None) -> str:
    """The revision of a machine with these properties (and today's bootstrap)."""
    parts = {
        "image": image or "",
        "flavor": flavor or "",
        "volume": volume or 0,
        "boot_volume": boot_volume or 0,
        "bootstrap": bootstrap.VERSION,
    }
    text = json.dumps(parts, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:LENGTH]


def of_group(spec: NodeGroupSpec, cluster_attrs: Mapping[str, Any]) -> str:
    """The revision new machines of a group are made from."""
    image, flavor = merge.image_and_flavor(spec, cluster_attrs)
    return of(image, flavor, *merge.volumes(spec, cluster_attrs))


def of_node(node: Node, spec: NodeGroupSpec, cluster_attrs: Mapping[str, Any]) -> str:
    """The revision a node was made from: recorded, or (nodes made before revisions
    were recorded) its image and flavor with the group's volumes."""
    if node.revision:
        return node.revision
    return of(node.image_id, node.flavor_id, *merge.volumes(spec, cluster_attrs))
