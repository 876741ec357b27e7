"""The configuration documents of a Kubernetes node, as text (JSON, which is YAML
to every Kubernetes loader): kubeconfigs, the
kubelet's KubeletConfiguration, containerd's config.toml, the CNI bridge
network, and the objects the first master creates for TLS bootstrap. Pure.

What each says follows what runs offline on Kubernetes 1.20 built from Debian's
source with Debian's containerd 1.6 (shared/labs/kubernetes): cgroupfs (no
systemd), the pause image named in containerd's `sandbox_image`,
`restrict_oom_score_adj` (a sandbox may deny negative OOM scores), Debian's CNI
plugin directory.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from shoal.domain.bootstrap.versions import KubeVersion

CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
CNI_CONF_DIR = "/etc/cni/net.d"
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = "shoal0"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _doc(doc: Mapping[str, Any]) -> str:
    """A document as JSON, which is YAML: every Kubernetes loader reads it, and it
    renders in microseconds where PyYAML's emitter takes milliseconds."""
    return json.dumps(doc, indent=1) + "\n"


def kubeconfig(
    version: KubeVersion,
    server: str,
    ca_pem: str,
    user: str,
    *,
    cert_pem: str | None = None,
    key_pem: str | None = None,
    token: str | None = None,
    cluster_name: str = "kubernetes",
) -> str:
    """A kubeconfig for `server`, trusting `ca_pem`, as `user` with a client certificate
    (embedded) or a token (a bootstrap token)."""
    credentials: dict[str, str] = {}
    if cert_pem is not None and key_pem is not None:
        credentials["client-certificate-data"] = _b64(cert_pem)
        credentials["client-key-data"] = _b64(key_pem)
    if token is not None:
        credentials["token"] = token
    if not credentials:
        raise ValueError(f"kubeconfig for {user}: needs a client certificate and key, or a token")
    context = f"{user}@{cluster_name}"
    return _doc(
        {
            "apiVersion": version.kubeconfig_api,
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster_name,
                    "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": context, "context": {"cluster": cluster_name, "user": user}}],
            "current-context": context,
            "preferences": {},
        }
    )


def kubelet_config(
    version: KubeVersion,
    ca_path: str,
    cluster_dns: str,
    *,
    rotate_certificates: bool,
) -> str:
    """The kubelet's KubeletConfiguration: webhook authentication and authorization
    (the API server's credentials, not anonymous), cgroupfs, no iptables chains of its
    own, client certificates rotated when it joined by TLS bootstrap."""
    return _doc(
        {
            "apiVersion": version.kubelet_config_api,
            "kind": "KubeletConfiguration",
            "address": "0.0.0.0",
            "port": 10250,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": 10248,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": ca_path},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": True,
            "enforceNodeAllocatable": ["pods"],
            "failSwapOn": False,
            "makeIPTablesUtilChains": False,
            "kernelMemcgNotification": False,
            "clusterDNS": [cluster_dns],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": "/etc/resolv.conf",
            "rotateCertificates": rotate_certificates,
            "serializeImagePulls": False,
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "5%",
                "imagefs.available": "5%",
            },
        }
    )


def _toml_str(value: str) -> str:
    """A TOML basic string (JSON's escaping is TOML's for these characters)."""
    return json.dumps(value)


def containerd_config(version: KubeVersion) -> str:
    """containerd 1.6's config.toml (format 2): its CRI plugin with runc (cgroupfs),
    overlayfs, the CNI directories and the version's pause image as the sandbox."""
    q = _toml_str
    cri = '[plugins."io.containerd.grpc.v1.cri"]'
    runc = '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]'
    return "\n".join(
        [
            "version = 2",
            f"root = {q('/var/lib/containerd')}",
            f"state = {q('/run/containerd')}",
            "oom_score = 0",
            "",
            "[grpc]",
            f"  address = {q(CONTAINERD_SOCKET)}",
            "",
            cri,
            f"  sandbox_image = {q(version.pause_image)}",
            "  restrict_oom_score_adj = true",
            "  enable_selinux = false",
            "  disable_apparmor = true",
            "",
            '[plugins."io.containerd.grpc.v1.cri".containerd]',
            f"  snapshotter = {q('overlayfs')}",
            f"  default_runtime_name = {q('runc')}",
            "",
            runc,
            f"  runtime_type = {q('io.containerd.runc.v2')}",
            "",
            '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]',
            "  SystemdCgroup = false",
            "",
            '[plugins."io.containerd.grpc.v1.cri".cni]',
            f"  bin_dir = {q(CNI_BIN_DIR)}",
            f"  conf_dir = {q(CNI_CONF_DIR)}",
            "  max_conf_num = 1",
            "",
        ]
    )


def cni_conflist(pod_subnet: str, gateway: str) -> str:
    """A bridge network for this node's pods (host-local addresses from `pod_subnet`,
    no masquerading rules): pods on one node reach each other; routes between nodes'
    pod subnets are not set up here."""
    return (
        json.dumps(
            {
                "cniVersion": "0.4.0",
                "name": "shoal-pods",
                "plugins": [
                    {
                        "type": "bridge",
                        "bridge": BRIDGE,
                        "isGateway": True,
                        "ipMasq": False,
                        "hairpinMode": True,
                        "ipam": {
                            "type": "host-local",
                            "ranges": [[{"subnet": pod_subnet, "gateway": gateway}]],
                            "routes": [{"dst": "0.0.0.0/0"}],
                        },
                    }
                ],
            },
            indent=1,
        )
        + "\n"
    )


def _binding(name: str, role: str, group: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
    }


BOOTSTRAPPERS = "system:bootstrappers"


def cluster_bootstrap(token: str, cluster_info_kubeconfig: str) -> str:
    """What lets a kubelet join by TLS bootstrap, as kubeadm sets it up: the bootstrap
    token's Secret (no expiry: nodes of a group may join at any time), RBAC letting
    `system:bootstrappers` create CSRs that the controller-manager then approves,
    nodes renew their own certificates, and the `cluster-info` ConfigMap in
    kube-public (signed by the bootstrap signer) for CA-pinned discovery.
    One `v1 List` for `kubectl apply -f`."""
    token_id, _, secret = token.partition(".")
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "bootstrap.kubernetes.io/token",
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "stringData": {
                "description": "shoal: kubelets of this cluster join with it",
                "token-id": token_id,
                "token-secret": secret,
                "usage-bootstrap-authentication": "true",
                "usage-bootstrap-signing": "true",
            },
        },
        _binding("shoal:kubelet-bootstrap", "system:node-bootstrapper", BOOTSTRAPPERS),
        _binding(
            "shoal:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            BOOTSTRAPPERS,
        ),
        _binding(
            "shoal:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": cluster_info_kubeconfig},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "shoal:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["cluster-info"],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "shoal:bootstrap-signer-clusterinfo", "namespace": "kube-public"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "shoal:bootstrap-signer-clusterinfo",
            },
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "User",
                    "name": "system:anonymous",
                }
            ],
        },
    ]
    return _doc({"apiVersion": "v1", "kind": "List", "items": docs})


def cluster_info(server: str, ca_pem: str) -> str:
    """The kubeconfig `cluster-info` holds: the server and its CA, no credentials."""
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "",
                    "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
                }
            ],
            "users": [],
            "contexts": [],
            "current-context": "",
            "preferences": {},
        }
    )


def flag_list(items: Sequence[str]) -> str:
    return ",".join(items)
