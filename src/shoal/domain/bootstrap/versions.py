"""The Kubernetes versions shoal can install on a node, and what each needs.

A version is supported when shoal renders its configuration and the project's
harness builds and tests its binaries (tests/harness/kubernetes: Debian 12's own
`kubernetes` source package, v1.20.2). A template or cluster asking for another
version is refused with the list of supported ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shoal.domain.errors import Invalid


@dataclass(frozen=True)
class KubeVersion:
    """One supported Kubernetes release and the pieces that go with it."""

    tag: str  # as a template writes it (coe_version or label kube_tag): v1.20.2
    # The pause image containerd's CRI starts every pod sandbox with: the node image
    # must carry it under this exact name (`ctr -n k8s.io images import`), since a
    # node may have no registry to pull from.
    pause_image: str
    kubelet_config_api: str = "kubelet.config.k8s.io/v1beta1"
    kubeconfig_api: str = "v1"


SUPPORTED: dict[str, KubeVersion] = {
    "v1.20.2": KubeVersion("v1.20.2", pause_image="k8s.gcr.io/pause:3.4"),
}
DEFAULT = "v1.20.2"


def supported_list() -> str:
    return ", ".join(sorted(SUPPORTED))


def normalize(value: str) -> str:
    """`1.20.2` and `v1.20.2` name the same release; surrounding blanks are ignored."""
    text = value.strip()
    return text if text.startswith("v") else "v" + text


def resolve(value: str | None, field: str = "coe_version") -> KubeVersion:
    """The release `value` names (None or empty: the default); Invalid (naming
    `field` and the supported versions) for any other."""
    if value is None or not str(value).strip():
        return SUPPORTED[DEFAULT]
    found = SUPPORTED.get(normalize(str(value)))
    if found is None:
        raise Invalid(
            f"{field} {value!r} is not a Kubernetes version shoal can install; "
            f"supported: {supported_list()}",
            field,
        )
    return found


def check_attrs(attrs: dict[str, Any]) -> None:
    """Refuse (Invalid) a template's or cluster's unsupported version: its
    `coe_version`, else its label `kube_tag` (the order the upgrade reads them in)."""
    labels = attrs.get("labels") or {}
    if attrs.get("coe_version"):
        resolve(str(attrs["coe_version"]), "coe_version")
    elif isinstance(labels, dict) and labels.get("kube_tag"):
        resolve(str(labels["kube_tag"]), "kube_tag")
