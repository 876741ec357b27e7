"""Attributes a new cluster derives from Magnum's conventions, as pure functions:
`coe_version` from the label `kube_tag`, `cluster_distro` from the template or the
image name, and the label `availability_zone` pinning the node groups that name no
zone (magnum-ui sends the zone only as that label)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from shoal.domain.errors import Invalid
from shoal.domain.merge import GroupPlan

AZ_LABEL = "availability_zone"
# A version at the end of an image name: "-40", "_24.04", "-v1.2", "40" after a letter.
_VERSION_TAIL = re.compile(r"[-_.]?v?[0-9][0-9.]*(-[0-9][0-9.]*)*$")


def coe_version(attrs: Mapping[str, Any]) -> str | None:
    """The cluster's `coe_version`: its own, else its label `kube_tag` (what Magnum's
    drivers install and report), else None."""
    own = attrs.get("coe_version")
    if own:
        return str(own)
    tag = (attrs.get("labels") or {}).get("kube_tag")
    return str(tag) if tag else None


def distro_of_image(image: str | None) -> str | None:
    """The distro an image name says, without its version: "fedora-coreos-40" ->
    "fedora-coreos", "ubuntu-24.04" -> "ubuntu"; None for no name or a name that is
    only a version (a bare uuid says nothing either: None)."""
    if not image or _looks_like_uuid(image):
        return None
    name = _VERSION_TAIL.sub("", image.strip()).strip("-_. ")
    return name.lower() or None


def cluster_distro(attrs: Mapping[str, Any]) -> str | None:
    """The cluster's `cluster_distro`: the template's (or the request's) when given,
    else what its image's name says (`distro_of_image`)."""
    own = attrs.get("cluster_distro")
    if own:
        return str(own)
    return distro_of_image(attrs.get("image_id"))


def _looks_like_uuid(text: str) -> bool:
    return bool(re.fullmatch(r"[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}", text))


def label_zone(attrs: Mapping[str, Any]) -> str | None:
    """The zone the cluster's label `availability_zone` names, if any ("" is none)."""
    zone = str((attrs.get("labels") or {}).get(AZ_LABEL) or "").strip()
    return zone or None


def pin_zone(
    plans: Sequence[GroupPlan], zone: str | None, known: Mapping[str, Sequence[str]]
) -> list[GroupPlan]:
    """`plans` with the groups that name no zone pinned to `zone` (groups that list
    their own zones keep them). `known` holds the zones each provider was last seen
    to have: a zone a provider does not have is Invalid naming the zones it has; a
    provider not in `known` (not checked yet) is trusted, and its group fails later
    with the provider's own reason if the zone does not exist."""
    if zone is None:
        return list(plans)
    out = []
    for p in plans:
        if p.spec.availability_zones:
            out.append(p)
            continue
        zones = known.get(str(p.spec.provider))
        if zones is not None and zone not in zones:
            have = ", ".join(zones) or "none"
            raise Invalid(
                f"labels[{AZ_LABEL}]: availability zone {zone!r} does not exist in provider "
                f"{p.spec.provider} (its zones: {have})",
                "labels",
            )
        spec = dataclasses.replace(p.spec, availability_zones=(zone,))
        out.append(dataclasses.replace(p, spec=spec))
    return out
