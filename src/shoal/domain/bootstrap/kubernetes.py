"""A node's Kubernetes, rendered from the cluster's own CA: the files (certificates,
kubeconfigs, configs) and the services the node agent supervises. Pure.

- A master runs etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
  containerd and a kubelet (with its own client certificate, registered with the
  master taint; a one-shot step labels it `node-role.kubernetes.io/master`,
  which a kubelet may not set on itself). The first master also creates, once
  its API server is ready, the bootstrap token's Secret and the RBAC that lets
  workers join, so the cluster forms without shoal calling in.
- A worker runs containerd and a kubelet that joins by TLS bootstrap with the
  cluster's bootstrap token; the controller-manager approves its CSR.
- Several masters: each runs an etcd member (peers and remote clients over TLS on
  the masters' own addresses). The first master of a cluster whose etcd does not
  exist yet starts it alone; every other master joins it at start (`shoal-agent
  etcd-join`: member add through a live member, stale members removed), so a
  master added or replaced later joins the same way. Each API server talks to every
  member; controller-manager and scheduler elect a leader.

Everything is on fixed paths under /etc/kubernetes, /var/lib/kubelet and
/etc/containerd; the binaries are found on the node's PATH.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from shoal.domain import pki
from shoal.domain.bootstrap import certs, documents
from shoal.domain.bootstrap import services as svc
from shoal.domain.bootstrap.cloudconfig import File, NodeIdentity
from shoal.domain.bootstrap.versions import KubeVersion
from shoal.domain.model import ROLE_MASTER, Taint

ETC = "/etc/kubernetes"
PKI = f"{ETC}/pki"
CA_CERT = f"{PKI}/ca.crt"
ADMIN_CONF = f"{ETC}/admin.conf"
KUBELET_CONF = f"{ETC}/kubelet.conf"
BOOTSTRAP_KUBELET_CONF = f"{ETC}/bootstrap-kubelet.conf"
KUBELET_CONFIG = "/var/lib/kubelet/config.yaml"
CONTAINERD_CONFIG = "/etc/containerd/config.toml"
CNI_CONFLIST = f"{documents.CNI_CONF_DIR}/10-shoal-bridge.conflist"
CLUSTER_BOOTSTRAP = f"{ETC}/shoal/cluster-bootstrap.yaml"
ETCD_CLIENT_PORT, ETCD_PEER_PORT, ETCD_METRICS_PORT = 2379, 2380, 2381
KUBELET_HEALTHZ_PORT = 10248
MASTER_ROLE_LABEL = "node-role.kubernetes.io/master"
MASTER_TAINT = Taint(MASTER_ROLE_LABEL, "", "NoSchedule")
BOOTSTRAP_TOKEN_RE = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")
# Labels under these domains a kubelet may set on its own Node (NodeRestriction; the
# kubelet refuses to start with any other kubernetes.io / k8s.io label).
_KUBELET_LABEL_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")
_KUBELET_LABELS = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    }
)


class NotRenderable(ValueError):
    """What the node needs is not known yet (the message says what)."""


@dataclass(frozen=True)
class Master:
    """A master of the cluster: its node name and, when known, its address."""

    name: str
    address: str | None = None


@dataclass(frozen=True)
class ClusterPlan:
    """What every node of one cluster shares."""

    uuid: str
    api_address: str  # the address clients and kubelets reach the API server at
    masters: tuple[Master, ...]  # the first one runs the cluster's one-shot steps
    api_port: int = 6443
    # The cluster's etcd has formed already (a master of it was made before): every
    # master rendered now joins it; else the first master starts it and the others join.
    etcd_exists: bool = False
    service_cidr: str = "10.96.0.0/12"
    pod_cidr: str = "10.244.0.0/16"

    @property
    def server(self) -> str:
        host = self.api_address
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        return f"https://{host}:{self.api_port}"

    @property
    def service_ip(self) -> str:
        """The `kubernetes` Service's cluster IP: the first of the service range."""
        return str(next(ipaddress.ip_network(self.service_cidr).hosts()))

    @property
    def dns_ip(self) -> str:
        """Where cluster DNS is expected (the tenth address of the service range)."""
        return str(ipaddress.ip_network(self.service_cidr)[10])


@dataclass(frozen=True)
class ClusterSecrets:
    """The cluster's own keys: its CA (as `openstack coe ca show` returns it), its
    service-account signing key and its bootstrap token (`Sealer.bootstrap_token`)."""

    ca: pki.CA
    service_account_key_pem: str = field(repr=False)
    bootstrap_token: str = field(repr=False)


@dataclass(frozen=True)
class KubeNode:
    """One node as Kubernetes sees it."""

    identity: NodeIdentity
    pod_subnet_index: int  # which /24 of the cluster's pod range this node's pods get
    address: str | None = None  # None: the agent finds it at start (${node_ip})
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()

    @property
    def is_master(self) -> bool:
        return self.identity.role == ROLE_MASTER


@dataclass(frozen=True)
class Bundle:
    """What a node gets: files to write and the services manifest's entries."""

    files: tuple[File, ...]
    services: tuple[svc.Service, ...]
    node_ip_route_to: str | None = None

    def manifest(self) -> File:
        return File(svc.PATH, svc.manifest(self.services, self.node_ip_route_to), "0644")


def kubelet_may_set(key: str) -> bool:
    """Whether a kubelet may put label `key` on its own Node (`--node-labels`): any
    key outside the kubernetes.io and k8s.io domains, and a few within."""
    domain = key.split("/", 1)[0] if "/" in key else ""
    if not domain:
        return True
    reserved = any(domain == d or domain.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))
    if not reserved:
        return True
    if key in _KUBELET_LABELS:
        return True
    return any(domain == d or domain.endswith("." + d) for d in _KUBELET_LABEL_DOMAINS)


def taint_flag(t: Taint) -> str:
    """A taint as `--register-with-taints` takes it: key=value:Effect."""
    return f"{t.key}={t.value}:{t.effect}"


def pod_subnet(pod_cidr: str, index: int) -> tuple[str, str]:
    """(subnet, gateway) of the `index`th /24 of `pod_cidr`."""
    network = ipaddress.ip_network(pod_cidr)
    if network.prefixlen > 24:
        raise NotRenderable(f"the pod range {pod_cidr} is smaller than one /24")
    count = 2 ** (24 - network.prefixlen)
    if not 0 <= index < count:
        raise NotRenderable(f"pod subnet index {index} is outside 0..{count - 1} of {pod_cidr}")
    subnet = ipaddress.ip_network((int(network.network_address) + index * 256, 24))
    return str(subnet), str(subnet.network_address + 1)


def check_token(token: str) -> str:
    if not BOOTSTRAP_TOKEN_RE.match(token):
        raise ValueError("a bootstrap token is six and sixteen of [a-z0-9] joined by a dot")
    return token


def bundle(
    node: KubeNode,
    cluster: ClusterPlan,
    secrets: ClusterSecrets,
    version: KubeVersion,
    now: datetime,
) -> Bundle:
    """Everything `node` needs to run its part of the cluster."""
    check_token(secrets.bootstrap_token)
    name = node.identity.name
    ca = secrets.ca
    files: list[File] = [File(CA_CERT, ca.cert_pem)]
    services: list[svc.Service] = []
    node_ip = node.address or svc.NODE_IP
    if node.is_master:
        masters = [m.name for m in cluster.masters]
        if name not in masters:
            raise NotRenderable(f"master {name} is not among the cluster's masters {masters}")
        files += _control_plane_files(node, cluster, secrets, version, now)
        services += _control_plane(node, cluster, node_ip)
        kubelet_pair = certs.issue(ca, f"system:node:{name}", now, organizations=["system:nodes"])
        files.append(
            File(
                KUBELET_CONF,
                documents.kubeconfig(
                    version,
                    f"https://127.0.0.1:{cluster.api_port}",
                    ca.cert_pem,
                    f"system:node:{name}",
                    cert_pem=kubelet_pair.cert_pem,
                    key_pem=kubelet_pair.key_pem,
                ),
                "0600",
            )
        )
    else:
        files.append(
            File(
                BOOTSTRAP_KUBELET_CONF,
                documents.kubeconfig(
                    version,
                    cluster.server,
                    ca.cert_pem,
                    "kubelet-bootstrap",
                    token=secrets.bootstrap_token,
                ),
                "0600",
            )
        )
    subnet, gateway = pod_subnet(cluster.pod_cidr, node.pod_subnet_index)
    files += [
        File(CONTAINERD_CONFIG, documents.containerd_config(version)),
        File(CNI_CONFLIST, documents.cni_conflist(subnet, gateway)),
        File(
            KUBELET_CONFIG,
            documents.kubelet_config(
                version, CA_CERT, cluster.dns_ip, rotate_certificates=not node.is_master
            ),
        ),
    ]
    services += _node_services(node, node_ip)
    if node.is_master:
        services += _master_steps(node, cluster)
    route_to = None if node.address else cluster.api_address
    return Bundle(tuple(files), tuple(services), route_to)


def _control_plane_files(
    node: KubeNode,
    cluster: ClusterPlan,
    secrets: ClusterSecrets,
    version: KubeVersion,
    now: datetime,
) -> list[File]:
    ca, name = secrets.ca, node.identity.name
    local = f"https://127.0.0.1:{cluster.api_port}"
    sans = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        f"kubernetes.default.svc.{documents.CLUSTER_DOMAIN}",
        "localhost",
        name,
        "127.0.0.1",
        cluster.service_ip,
        cluster.api_address,
        *(m.address for m in cluster.masters if m.address),
        *([node.address] if node.address else []),
    ]
    serving = certs.issue(ca, "kube-apiserver", now, usage=certs.SERVER, sans=sans)
    kubelet_client = certs.issue(
        ca, "kube-apiserver-kubelet-client", now, organizations=["system:masters"]
    )
    files = [
        File(f"{PKI}/ca.key", ca.key_pem, "0600"),  # the controller-manager signs kubelet CSRs
        File(f"{PKI}/apiserver.crt", serving.cert_pem),
        File(f"{PKI}/apiserver.key", serving.key_pem, "0600"),
        File(f"{PKI}/apiserver-kubelet-client.crt", kubelet_client.cert_pem),
        File(f"{PKI}/apiserver-kubelet-client.key", kubelet_client.key_pem, "0600"),
        File(f"{PKI}/sa.key", secrets.service_account_key_pem, "0600"),
        File(f"{PKI}/sa.pub", certs.public_pem(secrets.service_account_key_pem)),
    ]
    users: tuple[tuple[str, str, list[str]], ...] = (
        (ADMIN_CONF, "kubernetes-admin", ["system:masters"]),
        (f"{ETC}/controller-manager.conf", "system:kube-controller-manager", []),
        (f"{ETC}/scheduler.conf", "system:kube-scheduler", []),
    )
    for path, user, groups in users:
        pair = certs.issue(ca, user, now, organizations=groups)
        text = documents.kubeconfig(
            version, local, ca.cert_pem, user, cert_pem=pair.cert_pem, key_pem=pair.key_pem
        )
        files.append(File(path, text, "0600"))
    if etcd_mode(node, cluster) != ETCD_LOOPBACK:
        assert node.address is not None
        # One certificate serves the member to peers and clients and is its client
        # certificate when it joins; the API server has its own client certificate.
        # etcd checks a peer's source address against its certificate's: 127.0.0.1 for
        # what the member itself reaches over loopback.
        sans = [name, node.address, "localhost", "127.0.0.1"]
        peer = certs.issue(ca, name, now, usage=certs.PEER, sans=sans)
        etcd_client = certs.issue(ca, "kube-apiserver-etcd-client", now)
        files += [
            File(ETCD_CERT, peer.cert_pem),
            File(ETCD_KEY, peer.key_pem, "0600"),
            File(APISERVER_ETCD_CERT, etcd_client.cert_pem),
            File(APISERVER_ETCD_KEY, etcd_client.key_pem, "0600"),
        ]
    if cluster.masters[0].name == name:
        info = documents.cluster_info(cluster.server, ca.cert_pem)
        files.append(
            File(
                CLUSTER_BOOTSTRAP,
                documents.cluster_bootstrap(secrets.bootstrap_token, info),
                "0600",
            )
        )
    return files


ETCD_LOOPBACK, ETCD_NEW, ETCD_JOIN = "loopback", "new", "join"
ETCD_CERT, ETCD_KEY = f"{PKI}/etcd/peer.crt", f"{PKI}/etcd/peer.key"
APISERVER_ETCD_CERT = f"{PKI}/apiserver-etcd-client.crt"
APISERVER_ETCD_KEY = f"{PKI}/apiserver-etcd-client.key"
ETCD_DATA_DIR = "/var/lib/etcd"


def etcd_mode(node: KubeNode, cluster: ClusterPlan) -> str:
    """How `node`'s etcd member comes to be:

    - `loopback`: the one master, its address unknown at render: peers and clients on
      loopback (no other master can ever join it);
    - `new`: the first master of a cluster whose etcd does not exist yet
      (`ClusterPlan.etcd_exists`): it starts a cluster of one, on its own address;
    - `join`: every other master: added to the running cluster through a live member
      when it starts (`shoal-agent etcd-join`), so masters made at the cluster's
      creation, added later or replacing a lost one all join the same way.

    Several masters need every master's address at render (peers, the API servers'
    etcd servers); otherwise NotRenderable names the ones missing."""
    name = node.identity.name
    if len(cluster.masters) > 1:
        unknown = [m.name for m in cluster.masters if not m.address]
        if unknown:
            raise NotRenderable(
                "a multi-master etcd needs every master's address at render time; "
                f"not known yet: {', '.join(unknown)}"
            )
    if node.address is None:
        if len(cluster.masters) == 1:
            return ETCD_LOOPBACK
        raise NotRenderable(f"master {name}'s address is needed for its etcd member")
    if cluster.masters[0].name == name and not cluster.etcd_exists:
        return ETCD_NEW
    return ETCD_JOIN


def _host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def etcd_peer_url(address: str) -> str:
    return f"https://{_host(address)}:{ETCD_PEER_PORT}"


def etcd_client_url(address: str) -> str:
    return f"https://{_host(address)}:{ETCD_CLIENT_PORT}"


def etcd_servers(node: KubeNode, cluster: ClusterPlan) -> list[str]:
    """What an API server's `--etcd-servers` lists: its own member first, then every
    other master's (over TLS), so it keeps working while its own member is down; the
    local member over loopback when there is one master without an address."""
    if etcd_mode(node, cluster) == ETCD_LOOPBACK:
        return [f"http://127.0.0.1:{ETCD_CLIENT_PORT}"]
    own = [node.address] if node.address else []
    others = [m.address for m in cluster.masters if m.address and m.address not in own]
    return [etcd_client_url(a) for a in [*own, *others]]


def etcd_argv(node: KubeNode, cluster: ClusterPlan) -> list[str]:
    """etcd's command line. `loopback`: one member, plain HTTP on loopback. Otherwise
    peers over TLS on the master's address (certificates from the cluster CA, client
    certificates required), clients on loopback (plain: this node's own probes) and on
    the address (TLS, client certificates required: the API servers and joining
    masters). A `new` member names itself as the whole initial cluster; a joining
    one gets `--initial-cluster` and `--initial-cluster-state=existing` from
    `shoal-agent etcd-join` at start."""
    name = node.identity.name
    mode = etcd_mode(node, cluster)
    argv = [
        "etcd",
        f"--name={name}",
        f"--data-dir={ETCD_DATA_DIR}",
        f"--listen-metrics-urls=http://127.0.0.1:{ETCD_METRICS_PORT}",
        f"--initial-cluster-token=shoal-{cluster.uuid}",
    ]
    loopback = f"http://127.0.0.1:{ETCD_CLIENT_PORT}"
    if mode == ETCD_LOOPBACK:
        peer = f"http://127.0.0.1:{ETCD_PEER_PORT}"
        return [
            *argv,
            f"--listen-client-urls={loopback}",
            f"--advertise-client-urls={loopback}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            "--initial-cluster-state=new",
            f"--initial-cluster={name}={peer}",
        ]
    assert node.address is not None  # etcd_mode refuses a master without one otherwise
    own_peer, own_client = etcd_peer_url(node.address), etcd_client_url(node.address)
    argv += [
        f"--listen-client-urls={loopback},{own_client}",
        f"--advertise-client-urls={own_client}",
        f"--cert-file={ETCD_CERT}",
        f"--key-file={ETCD_KEY}",
        f"--trusted-ca-file={CA_CERT}",
        "--client-cert-auth=true",
        f"--listen-peer-urls={own_peer}",
        f"--initial-advertise-peer-urls={own_peer}",
        f"--peer-cert-file={ETCD_CERT}",
        f"--peer-key-file={ETCD_KEY}",
        f"--peer-trusted-ca-file={CA_CERT}",
        "--peer-client-cert-auth=true",
    ]
    if mode == ETCD_NEW:
        argv += ["--initial-cluster-state=new", f"--initial-cluster={name}={own_peer}"]
    return argv


def etcd_join_argv(node: KubeNode, cluster: ClusterPlan) -> list[str]:
    """A joining master's etcd service: `shoal-agent etcd-join` finds a live member
    among the other masters, removes members no master of the plan owns that no
    longer answer, adds this one (unless it is listed already), and then runs
    `etcd_argv` with the cluster's members as its initial cluster. With a data dir
    from an earlier start, it runs etcd at once."""
    assert node.address is not None
    others = [m for m in cluster.masters if m.name != node.identity.name and m.address]
    return [
        "shoal-agent",
        "etcd-join",
        f"--name={node.identity.name}",
        f"--data-dir={ETCD_DATA_DIR}",
        f"--peer-url={etcd_peer_url(node.address)}",
        f"--endpoints={','.join(etcd_client_url(m.address) for m in others if m.address)}",
        "--masters="
        + ",".join(f"{m.name}={etcd_peer_url(m.address)}" for m in cluster.masters if m.address),
        f"--cert={ETCD_CERT}",
        f"--key={ETCD_KEY}",
        f"--ca={CA_CERT}",
        "--",
        *etcd_argv(node, cluster),
    ]


def apiserver_argv(node: KubeNode, cluster: ClusterPlan, node_ip: str) -> list[str]:
    servers = etcd_servers(node, cluster)
    tls = servers[0].startswith("https://")
    etcd_tls = (
        [
            f"--etcd-cafile={CA_CERT}",
            f"--etcd-certfile={APISERVER_ETCD_CERT}",
            f"--etcd-keyfile={APISERVER_ETCD_KEY}",
        ]
        if tls
        else []
    )
    return [
        "kube-apiserver",
        f"--advertise-address={node_ip}",
        "--bind-address=0.0.0.0",
        f"--secure-port={cluster.api_port}",
        "--insecure-port=0",
        f"--etcd-servers={','.join(servers)}",
        *etcd_tls,
        f"--client-ca-file={CA_CERT}",
        f"--tls-cert-file={PKI}/apiserver.crt",
        f"--tls-private-key-file={PKI}/apiserver.key",
        f"--kubelet-client-certificate={PKI}/apiserver-kubelet-client.crt",
        f"--kubelet-client-key={PKI}/apiserver-kubelet-client.key",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        f"--service-account-issuer=https://kubernetes.default.svc.{documents.CLUSTER_DOMAIN}",
        f"--service-account-key-file={PKI}/sa.pub",
        f"--service-account-signing-key-file={PKI}/sa.key",
        f"--service-cluster-ip-range={cluster.service_cidr}",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        "--allow-privileged=true",
        "--enable-bootstrap-token-auth=true",
        "--profiling=false",
    ]


def _control_plane(node: KubeNode, cluster: ClusterPlan, node_ip: str) -> list[svc.Service]:
    elect = f"--leader-elect={'true' if len(cluster.masters) > 1 else 'false'}"
    joins = etcd_mode(node, cluster) == ETCD_JOIN
    etcd = etcd_join_argv(node, cluster) if joins else etcd_argv(node, cluster)
    cm_conf, sched_conf = f"{ETC}/controller-manager.conf", f"{ETC}/scheduler.conf"
    readyz = svc.command("kubectl", f"--kubeconfig={ADMIN_CONF}", "get", "--raw", "/readyz")
    return [
        svc.Service("etcd", tuple(etcd), ready=svc.tcp("127.0.0.1", ETCD_CLIENT_PORT)),
        svc.Service(
            "kube-apiserver",
            tuple(apiserver_argv(node, cluster, node_ip)),
            depends_on=("etcd",),
            ready=readyz,
        ),
        svc.Service(
            "kube-controller-manager",
            (
                "kube-controller-manager",
                f"--kubeconfig={cm_conf}",
                f"--authentication-kubeconfig={cm_conf}",
                f"--authorization-kubeconfig={cm_conf}",
                "--bind-address=127.0.0.1",
                "--port=0",  # 1.20 still opens an insecure port on every interface
                elect,
                f"--service-account-private-key-file={PKI}/sa.key",
                f"--root-ca-file={CA_CERT}",
                f"--cluster-signing-cert-file={CA_CERT}",
                f"--cluster-signing-key-file={PKI}/ca.key",
                "--use-service-account-credentials=true",
                "--controllers=*,bootstrapsigner,tokencleaner",
                "--profiling=false",
            ),
            depends_on=("kube-apiserver",),
        ),
        svc.Service(
            "kube-scheduler",
            (
                "kube-scheduler",
                f"--kubeconfig={sched_conf}",
                f"--authentication-kubeconfig={sched_conf}",
                f"--authorization-kubeconfig={sched_conf}",
                "--bind-address=127.0.0.1",
                "--port=0",
                elect,
                "--profiling=false",
            ),
            depends_on=("kube-apiserver",),
        ),
    ]


def kubelet_argv(node: KubeNode, node_ip: str) -> list[str]:
    argv = [
        "kubelet",
        f"--config={KUBELET_CONFIG}",
        f"--kubeconfig={KUBELET_CONF}",
    ]
    if not node.is_master:
        argv.append(f"--bootstrap-kubeconfig={BOOTSTRAP_KUBELET_CONF}")
    argv += [
        "--cert-dir=/var/lib/kubelet/pki",
        f"--hostname-override={node.identity.name}",
        f"--node-ip={node_ip}",
        "--container-runtime=remote",
        f"--container-runtime-endpoint=unix://{documents.CONTAINERD_SOCKET}",
        f"--containerd={documents.CONTAINERD_SOCKET}",  # cAdvisor's view of containerd
        "--runtime-request-timeout=5m",
    ]
    labels = sorted(f"{k}={v}" for k, v in node.labels.items() if kubelet_may_set(k))
    if labels:
        argv.append(f"--node-labels={documents.flag_list(labels)}")
    taints = ((MASTER_TAINT,) if node.is_master else ()) + node.taints
    if taints:
        argv.append(
            f"--register-with-taints={documents.flag_list([taint_flag(t) for t in taints])}"
        )
    return argv


def _node_services(node: KubeNode, node_ip: str) -> list[svc.Service]:
    containerd = svc.Service(
        "containerd",
        ("containerd", f"--config={CONTAINERD_CONFIG}"),
        ready=svc.file(documents.CONTAINERD_SOCKET),
    )
    deps = ("containerd", "kube-apiserver") if node.is_master else ("containerd",)
    kubelet = svc.Service(
        "kubelet",
        tuple(kubelet_argv(node, node_ip)),
        depends_on=deps,
        ready=svc.tcp("127.0.0.1", KUBELET_HEALTHZ_PORT),
    )
    return [containerd, kubelet]


def _master_steps(node: KubeNode, cluster: ClusterPlan) -> list[svc.Service]:
    """One-shot steps run with the admin kubeconfig once the API server is ready."""
    kubectl = ("kubectl", f"--kubeconfig={ADMIN_CONF}")
    steps: list[svc.Service] = []
    if cluster.masters[0].name == node.identity.name:
        steps.append(
            svc.Service(
                "cluster-bootstrap",
                (*kubectl, "apply", "-f", CLUSTER_BOOTSTRAP),
                depends_on=("kube-apiserver",),
                oneshot=True,
            )
        )
    labels = [f"{MASTER_ROLE_LABEL}="]
    labels += sorted(f"{k}={v}" for k, v in node.labels.items() if not kubelet_may_set(k))
    steps.append(
        svc.Service(
            "mark-master",
            (*kubectl, "label", "node", node.identity.name, *labels, "--overwrite"),
            depends_on=("kube-apiserver", "kubelet"),
            oneshot=True,
        )
    )
    return steps


def files(bundle: Bundle) -> list[File]:
    """The bundle's files and its services manifest."""
    return [*bundle.files, bundle.manifest()]
