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


# Kubernetes' version skew policy for the kubelet: never newer than the API servers,
# at most this many minor releases older.
KUBELET_MINORS_BEHIND = 2


def parse(tag: str) -> tuple[int, int, int]:
    """`v1.20.2` as (1, 20, 2); Invalid for anything else."""
    parts = normalize(tag).removeprefix("v").split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise Invalid(f"{tag!r} is not a Kubernetes version (vMAJOR.MINOR.PATCH)", "coe_version")
    return int(parts[0]), int(parts[1]), int(parts[2])


def parses(tag: str) -> bool:
    """Whether `tag` is a version `parse` reads (labels of older clusters may not be)."""
    try:
        parse(tag)
    except Invalid:
        return False
    return True


def skew_problem(masters: list[str], worker: str) -> str | None:
    """Why workers at version `worker` cannot run beside masters at `masters` (their
    API servers), or None: a kubelet never newer than the oldest master, and at most
    KUBELET_MINORS_BEHIND minor releases older than the newest. Upgrades go masters
    first."""
    if not masters:
        return None
    have = sorted(parse(t) for t in masters)
    want = parse(worker)
    oldest, newest = have[0], have[-1]
    shown = "v%d.%d.%d"
    if want > oldest:
        return (
            f"workers at {worker} would be newer than the masters ({shown % oldest}): "
            "upgrade the master group(s) first"
        )
    if want[0] != newest[0] or newest[1] - want[1] > KUBELET_MINORS_BEHIND:
        return (
            f"workers at {worker} would be more than {KUBELET_MINORS_BEHIND} minor releases "
            f"older than the masters ({shown % newest}): upgrade the workers in steps"
        )
    return None
