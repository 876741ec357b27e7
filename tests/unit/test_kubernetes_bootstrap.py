"""A node's Kubernetes as shoal renders it: rules as tables on plain values, and the
rendered documents read back (certificates verified against the cluster CA,
kubeconfigs, containerd's TOML, the CNI network, the services manifest as the
agent parses it)."""

from __future__ import annotations

import base64
import json
import tomllib
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from shoal.agent import services as agent_services
from shoal.domain import bootstrap, pki, sealing
from shoal.domain.bootstrap import certs, kubernetes, versions
from shoal.domain.bootstrap import services as svc
from shoal.domain.errors import Invalid
from shoal.domain.model import Taint

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
CA = pki.new_ca("c-1", NOW)
SEALER = sealing.Sealer("k" * 40)
SECRETS = kubernetes.ClusterSecrets(
    CA, certs.new_service_account_key(), SEALER.bootstrap_token("c-1")
)
V = versions.resolve("v1.20.2")
ONE = kubernetes.ClusterPlan("c-1", "203.0.113.5", (kubernetes.Master("demo-master-0"),))
THREE = kubernetes.ClusterPlan(
    "c-1",
    "203.0.113.5",
    tuple(kubernetes.Master(f"demo-master-{i}", f"10.0.0.{10 + i}") for i in range(3)),
)


def node(
    name: str, role: str, index: int = 0, address: str | None = None, **kw: Any
) -> kubernetes.KubeNode:
    who = bootstrap.NodeIdentity(f"u-{name}", name, "c-1", "g-1", "p-1", role)
    return kubernetes.KubeNode(who, index, address, **kw)


def files_of(b: kubernetes.Bundle) -> dict[str, bootstrap.File]:
    return {f.path: f for f in kubernetes.files(b)}


def cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def signed_by_ca(c: x509.Certificate) -> bool:
    ca = cert(CA.cert_pem)
    key = ca.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    c.verify_directly_issued_by(ca)
    return c.issuer == ca.subject


def kubeconfig_user(text: str) -> tuple[str, dict[str, Any]]:
    doc = yaml.safe_load(text)
    assert doc["kind"] == "Config" and doc["current-context"] == doc["contexts"][0]["name"]
    return doc["clusters"][0]["cluster"]["server"], doc["users"][0]["user"]


# -- rules as tables -----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tag"),
    [(None, "v1.20.2"), ("", "v1.20.2"), ("v1.20.2", "v1.20.2"), (" 1.20.2 ", "v1.20.2")],
)
def test_supported_versions_resolve(value: str | None, tag: str) -> None:
    assert versions.resolve(value).tag == tag


@pytest.mark.parametrize("value", ["v1.30", "1.20", "v1.20.3", "latest", "v1.20.2-rc1"])
def test_an_unsupported_version_is_refused_naming_the_supported_ones(value: str) -> None:
    with pytest.raises(Invalid) as err:
        versions.resolve(value, "kube_tag")
    assert err.value.field == "kube_tag"
    assert str(err.value) == (
        f"kube_tag {value!r} is not a Kubernetes version shoal can install; supported: v1.20.2"
    )


@pytest.mark.parametrize(
    ("attrs", "field"),
    [
        ({"coe_version": "v1.30"}, "coe_version"),
        ({"labels": {"kube_tag": "v1.31"}}, "kube_tag"),
        ({"coe_version": "v1.31", "labels": {"kube_tag": "v1.20.2"}}, "coe_version"),
        ({"coe_version": "v1.20.2", "labels": {"kube_tag": "v9"}}, None),  # coe_version wins
        ({"labels": {"kube_tag": "1.20.2"}}, None),
        ({}, None),
    ],
)
def test_check_attrs_reads_coe_version_then_kube_tag(
    attrs: dict[str, Any], field: str | None
) -> None:
    if field is None:
        versions.check_attrs(attrs)
        return
    with pytest.raises(Invalid) as err:
        versions.check_attrs(attrs)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("gpu", True),
        ("example.com/tier", True),
        ("kubernetes.io/hostname", True),
        ("topology.kubernetes.io/zone", True),
        ("node.kubernetes.io/instance-type", True),
        ("node.kubernetes.io/anything", True),
        ("kubelet.kubernetes.io/x", True),
        ("node-role.kubernetes.io/master", False),
        ("kubernetes.io/role", False),
        ("k8s.io/x", False),
        ("foo.k8s.io/x", False),
        ("notkubernetes.io/x", True),
    ],
)
def test_which_labels_a_kubelet_may_set_on_itself(key: str, allowed: bool) -> None:
    assert kubernetes.kubelet_may_set(key) is allowed


@pytest.mark.parametrize(
    ("cidr", "index", "expected"),
    [
        ("10.244.0.0/16", 0, ("10.244.0.0/24", "10.244.0.1")),
        ("10.244.0.0/16", 5, ("10.244.5.0/24", "10.244.5.1")),
        ("10.244.0.0/16", 255, ("10.244.255.0/24", "10.244.255.1")),
        ("10.0.0.0/8", 300, ("10.1.44.0/24", "10.1.44.1")),
        ("192.168.7.0/24", 0, ("192.168.7.0/24", "192.168.7.1")),
    ],
)
def test_pod_subnets(cidr: str, index: int, expected: tuple[str, str]) -> None:
    assert kubernetes.pod_subnet(cidr, index) == expected


@pytest.mark.parametrize(
    ("cidr", "index", "message"),
    [
        ("10.244.0.0/16", 256, r"outside 0\.\.255"),
        ("10.244.0.0/16", -1, "outside"),
        ("10.0.0.0/25", 0, "smaller than one /24"),
    ],
)
def test_pod_subnet_out_of_range(cidr: str, index: int, message: str) -> None:
    with pytest.raises(kubernetes.NotRenderable, match=message):
        kubernetes.pod_subnet(cidr, index)


@pytest.mark.parametrize(
    ("taint", "flag"),
    [
        (Taint("dedicated", "gpu", "NoSchedule"), "dedicated=gpu:NoSchedule"),
        (kubernetes.MASTER_TAINT, "node-role.kubernetes.io/master=:NoSchedule"),
    ],
)
def test_taint_flags(taint: Taint, flag: str) -> None:
    assert kubernetes.taint_flag(taint) == flag


def test_the_bootstrap_token_is_derived_per_cluster_and_key() -> None:
    token = SEALER.bootstrap_token("c-1")
    assert kubernetes.BOOTSTRAP_TOKEN_RE.match(token)
    assert token == sealing.Sealer("k" * 40).bootstrap_token("c-1")  # a re-render: same
    assert token != SEALER.bootstrap_token("c-2")
    assert token != sealing.Sealer("j" * 40).bootstrap_token("c-1")
    assert token.split(".")[1] not in SEALER.node_token("c-1")


@pytest.mark.parametrize("token", ["abc.0123456789abcdef", "ABCDEF.0123456789abcdef", "x"])
def test_a_malformed_bootstrap_token_is_refused(token: str) -> None:
    with pytest.raises(ValueError, match="six and sixteen"):
        kubernetes.check_token(token)


# -- a master -------------------------------------------------------------------


def test_a_single_master_runs_the_control_plane_in_order() -> None:
    b = kubernetes.bundle(node("demo-master-0", "master"), ONE, SECRETS, V, NOW)
    names = [s.name for s in b.services]
    assert names == [
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "containerd",
        "kubelet",
        "cluster-bootstrap",
        "mark-master",
    ]
    parsed = agent_services.parse(json.loads(b.manifest().content))  # what the agent reads
    assert [p.name for p in parsed.services] == names
    assert parsed.node_ip_route_to == "203.0.113.5"  # its address is found at start
    by = {s.name: s for s in b.services}
    assert "--advertise-address=${node_ip}" in by["kube-apiserver"].argv
    assert (
        "--port=0" in by["kube-controller-manager"].argv and "--port=0" in by["kube-scheduler"].argv
    )
    assert "--leader-elect=false" in by["kube-scheduler"].argv
    assert "--controllers=*,bootstrapsigner,tokencleaner" in by["kube-controller-manager"].argv
    assert by["cluster-bootstrap"].oneshot and by["cluster-bootstrap"].depends_on == (
        "kube-apiserver",
    )
    etcd = by["etcd"].argv
    assert "--initial-cluster=demo-master-0=http://127.0.0.1:2380" in etcd
    assert "--listen-client-urls=http://127.0.0.1:2379" in etcd


def test_the_api_server_certificate_names_every_way_it_is_reached() -> None:
    b = kubernetes.bundle(
        node("demo-master-1", "master", address="10.0.0.11"), THREE, SECRETS, V, NOW
    )
    f = files_of(b)
    serving = cert(f["/etc/kubernetes/pki/apiserver.crt"].content)
    assert signed_by_ca(serving)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert ips == {"127.0.0.1", "10.96.0.1", "203.0.113.5", "10.0.0.10", "10.0.0.11", "10.0.0.12"}
    assert set(sans.get_values_for_type(x509.DNSName)) == {
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
        "demo-master-1",
    }
    eku = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert serving.not_valid_after_utc <= cert(CA.cert_pem).not_valid_after_utc


@pytest.mark.parametrize(
    ("path", "user", "groups"),
    [
        ("/etc/kubernetes/admin.conf", "kubernetes-admin", ["system:masters"]),
        ("/etc/kubernetes/controller-manager.conf", "system:kube-controller-manager", []),
        ("/etc/kubernetes/scheduler.conf", "system:kube-scheduler", []),
        ("/etc/kubernetes/kubelet.conf", "system:node:demo-master-0", ["system:nodes"]),
    ],
)
def test_master_kubeconfigs_carry_client_certificates_from_the_cluster_ca(
    path: str, user: str, groups: list[str]
) -> None:
    b = kubernetes.bundle(node("demo-master-0", "master"), ONE, SECRETS, V, NOW)
    f = files_of(b)[path]
    assert f.permissions == "0600"
    server, creds = kubeconfig_user(f.content)
    assert server == "https://127.0.0.1:6443"
    c = cert(base64.b64decode(creds["client-certificate-data"]).decode())
    assert signed_by_ca(c)
    assert c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user
    assert [a.value for a in c.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == groups
    doc = yaml.safe_load(f.content)
    ca_data = doc["clusters"][0]["cluster"]["certificate-authority-data"]
    assert base64.b64decode(ca_data).decode() == CA.cert_pem


def test_the_service_account_key_pair_matches() -> None:
    f = files_of(kubernetes.bundle(node("demo-master-0", "master"), ONE, SECRETS, V, NOW))
    assert f["/etc/kubernetes/pki/sa.key"].content == SECRETS.service_account_key_pem
    assert f["/etc/kubernetes/pki/sa.pub"].content == certs.public_pem(
        SECRETS.service_account_key_pem
    )


def test_the_first_master_creates_what_lets_workers_join() -> None:
    f = files_of(kubernetes.bundle(node("demo-master-0", "master"), ONE, SECRETS, V, NOW))
    listed = yaml.safe_load(f[kubernetes.CLUSTER_BOOTSTRAP].content)
    assert (listed["apiVersion"], listed["kind"]) == ("v1", "List")
    docs = listed["items"]
    token_id, _, secret = SECRETS.bootstrap_token.partition(".")
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("Secret", f"bootstrap-token-{token_id}") in kinds
    assert ("ConfigMap", "cluster-info") in kinds
    token_secret = next(d for d in docs if d["kind"] == "Secret")
    assert token_secret["type"] == "bootstrap.kubernetes.io/token"
    assert token_secret["stringData"]["token-secret"] == secret
    assert "expiration" not in token_secret["stringData"]
    roles = {
        d["roleRef"]["name"]: d["subjects"][0]["name"]
        for d in docs
        if d["kind"] == "ClusterRoleBinding"
    }
    assert roles == {
        "system:node-bootstrapper": "system:bootstrappers",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient": "system:bootstrappers",
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient": "system:nodes",
    }


def test_only_the_first_master_runs_the_cluster_bootstrap() -> None:
    b = kubernetes.bundle(
        node("demo-master-2", "master", address="10.0.0.12"), THREE, SECRETS, V, NOW
    )
    assert "cluster-bootstrap" not in [s.name for s in b.services]
    assert kubernetes.CLUSTER_BOOTSTRAP not in files_of(b)


def plan_of(*masters: tuple[str, str | None], exists: bool = False) -> kubernetes.ClusterPlan:
    return kubernetes.ClusterPlan(
        "c-1",
        "203.0.113.5",
        tuple(kubernetes.Master(n, a) for n, a in masters),
        etcd_exists=exists,
    )


M0, M1, M2 = ("m0", "10.0.0.10"), ("m1", "10.0.0.11"), ("m2", "10.0.0.12")


@pytest.mark.parametrize(
    ("who", "plan", "mode", "why"),
    [
        (("m0", None), plan_of(("m0", None)), "loopback", "one master, address unknown"),
        (M0, plan_of(M0), "new", "one master with its own address: others may join later"),
        (M0, plan_of(M0, M1, M2), "new", "the first master of a new cluster starts etcd"),
        (M1, plan_of(M0, M1, M2), "join", "the others join it"),
        (M2, plan_of(M0, M1, M2), "join", "the others join it"),
        (M0, plan_of(M0, M1, M2, exists=True), "join", "etcd exists: even the first joins"),
        (M1, plan_of(M1, exists=True), "join", "a lone replacement joins what is left"),
    ],
)
def test_how_each_master_gets_its_etcd_member(
    who: tuple[str, str | None], plan: kubernetes.ClusterPlan, mode: str, why: str
) -> None:
    assert kubernetes.etcd_mode(node(who[0], "master", address=who[1]), plan) == mode, why


def test_the_first_master_starts_a_cluster_of_one_over_tls() -> None:
    etcd = kubernetes.etcd_argv(node("m0", "master", address="10.0.0.10"), plan_of(M0, M1, M2))
    assert "--initial-cluster-state=new" in etcd
    assert "--initial-cluster=m0=https://10.0.0.10:2380" in etcd
    assert "--listen-client-urls=http://127.0.0.1:2379,https://10.0.0.10:2379" in etcd
    assert "--advertise-client-urls=https://10.0.0.10:2379" in etcd
    assert "--listen-peer-urls=https://10.0.0.10:2380" in etcd
    assert "--client-cert-auth=true" in etcd and "--peer-client-cert-auth=true" in etcd


def test_the_other_masters_join_through_the_agent_then_run_etcd() -> None:
    b = kubernetes.bundle(
        node("m1", "master", address="10.0.0.11"), plan_of(M0, M1, M2), SECRETS, V, NOW
    )
    argv = next(s for s in b.services if s.name == "etcd").argv
    cut = argv.index("--")
    assert argv[:cut] == (
        "shoal-agent",
        "etcd-join",
        "--name=m1",
        "--data-dir=/var/lib/etcd",
        "--peer-url=https://10.0.0.11:2380",
        "--endpoints=https://10.0.0.10:2379,https://10.0.0.12:2379",
        "--masters=m0=https://10.0.0.10:2380,m1=https://10.0.0.11:2380,m2=https://10.0.0.12:2380",
        "--cert=/etc/kubernetes/pki/etcd/peer.crt",
        "--key=/etc/kubernetes/pki/etcd/peer.key",
        "--ca=/etc/kubernetes/pki/ca.crt",
    )
    etcd = argv[cut + 1 :]
    assert etcd[0] == "etcd" and "--name=m1" in etcd
    # the join step names the initial cluster: the rendered argv has none
    assert not [a for a in etcd if a.startswith("--initial-cluster=")]
    assert not [a for a in etcd if a.startswith("--initial-cluster-state")]
    assert "--initial-cluster-token=shoal-c-1" in etcd


@pytest.mark.parametrize(
    ("who", "plan", "servers"),
    [
        (("m0", None), plan_of(("m0", None)), "http://127.0.0.1:2379"),
        (M0, plan_of(M0), "https://10.0.0.10:2379"),
        (
            M1,
            plan_of(M0, M1, M2),
            "https://10.0.0.11:2379,https://10.0.0.10:2379,https://10.0.0.12:2379",
        ),
    ],
)
def test_each_api_server_talks_to_every_etcd_member_its_own_first(
    who: tuple[str, str | None], plan: kubernetes.ClusterPlan, servers: str
) -> None:
    argv = kubernetes.apiserver_argv(node(who[0], "master", address=who[1]), plan, "10.0.0.99")
    assert f"--etcd-servers={servers}" in argv
    tls = [a for a in argv if a.startswith("--etcd-c") or a.startswith("--etcd-k")]
    if servers.startswith("https"):
        assert tls == [
            "--etcd-cafile=/etc/kubernetes/pki/ca.crt",
            "--etcd-certfile=/etc/kubernetes/pki/apiserver-etcd-client.crt",
            "--etcd-keyfile=/etc/kubernetes/pki/apiserver-etcd-client.key",
        ]
    else:
        assert tls == []


def test_multi_master_etcd_certificates_and_leader_election() -> None:
    b = kubernetes.bundle(
        node("demo-master-1", "master", address="10.0.0.11"), THREE, SECRETS, V, NOW
    )
    f = files_of(b)
    peer = cert(f["/etc/kubernetes/pki/etcd/peer.crt"].content)
    assert signed_by_ca(peer)
    sans = peer.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert ips == {"10.0.0.11", "127.0.0.1"}
    eku = list(peer.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    client = cert(f["/etc/kubernetes/pki/apiserver-etcd-client.crt"].content)
    assert signed_by_ca(client)
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        "kube-apiserver-etcd-client"
    )
    assert f["/etc/kubernetes/pki/apiserver-etcd-client.key"].permissions == "0600"
    by = {s.name: s.argv for s in b.services}
    assert "--leader-elect=true" in by["kube-scheduler"]
    assert "--leader-elect=true" in by["kube-controller-manager"]


def test_every_master_gets_its_own_documents_and_only_the_first_the_cluster_steps() -> None:
    got = {
        name: kubernetes.bundle(
            node(name, "master", address=a), plan_of(M0, M1, M2), SECRETS, V, NOW
        )  # fmt: skip
        for name, a in (M0, M1, M2)
    }
    for name, b in got.items():
        kubelet = next(s for s in b.services if s.name == "kubelet").argv
        assert f"--hostname-override={name}" in kubelet
        peer = cert(files_of(b)["/etc/kubernetes/pki/etcd/peer.crt"].content)
        assert peer.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        has_steps = "cluster-bootstrap" in [s.name for s in b.services]
        assert has_steps == (name == "m0")


def test_multi_master_without_every_address_is_not_renderable_yet() -> None:
    plan = kubernetes.ClusterPlan(
        "c-1",
        "203.0.113.5",
        (kubernetes.Master("m0", "10.0.0.10"), kubernetes.Master("m1"), kubernetes.Master("m2")),
    )
    with pytest.raises(kubernetes.NotRenderable, match="not known yet: m1, m2"):
        kubernetes.bundle(node("m0", "master", address="10.0.0.10"), plan, SECRETS, V, NOW)
    with pytest.raises(kubernetes.NotRenderable, match="master m9 is not among"):
        kubernetes.bundle(node("m9", "master"), plan, SECRETS, V, NOW)


def test_a_master_kubelet_is_tainted_and_labelled_by_its_one_shot_step() -> None:
    labels = {"gpu": "yes", "node-role.kubernetes.io/infra": ""}
    b = kubernetes.bundle(node("demo-master-0", "master", labels=labels), ONE, SECRETS, V, NOW)
    by = {s.name: s for s in b.services}
    kubelet = by["kubelet"].argv
    assert "--register-with-taints=node-role.kubernetes.io/master=:NoSchedule" in kubelet
    assert "--node-labels=gpu=yes" in kubelet
    assert not any(a.startswith("--bootstrap-kubeconfig") for a in kubelet)
    assert by["kubelet"].depends_on == ("containerd", "kube-apiserver")
    assert by["mark-master"].argv[-4:] == (
        "demo-master-0",
        "node-role.kubernetes.io/master=",
        "node-role.kubernetes.io/infra=",
        "--overwrite",
    )


# -- a worker -------------------------------------------------------------------


def test_a_worker_joins_by_tls_bootstrap_and_holds_no_cluster_secret() -> None:
    taints = (Taint("dedicated", "gpu", "NoSchedule"),)
    w = node("demo-worker-0", "worker", index=3, address="10.0.1.5", taints=taints)
    b = kubernetes.bundle(w, ONE, SECRETS, V, NOW)
    f = files_of(b)
    assert set(f) == {
        "/etc/kubernetes/pki/ca.crt",
        "/etc/kubernetes/bootstrap-kubelet.conf",
        "/etc/containerd/config.toml",
        "/etc/cni/net.d/10-shoal-bridge.conflist",
        "/var/lib/kubelet/config.yaml",
        "/etc/shoal/services.json",
    }
    server, creds = kubeconfig_user(f["/etc/kubernetes/bootstrap-kubelet.conf"].content)
    assert server == "https://203.0.113.5:6443" and creds == {"token": SECRETS.bootstrap_token}
    assert [s.name for s in b.services] == ["containerd", "kubelet"]
    kubelet = b.services[1].argv
    assert "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf" in kubelet
    assert "--node-ip=10.0.1.5" in kubelet and "--hostname-override=demo-worker-0" in kubelet
    assert "--register-with-taints=dedicated=gpu:NoSchedule" in kubelet
    assert b.node_ip_route_to is None  # the address was known: nothing to find
    cni = json.loads(f["/etc/cni/net.d/10-shoal-bridge.conflist"].content)
    assert cni["plugins"][0]["ipam"]["ranges"] == [
        [{"subnet": "10.244.3.0/24", "gateway": "10.244.3.1"}]
    ]
    kubelet_config = yaml.safe_load(f["/var/lib/kubelet/config.yaml"].content)
    assert kubelet_config["kind"] == "KubeletConfiguration"
    assert kubelet_config["rotateCertificates"] is True
    assert kubelet_config["clusterDNS"] == ["10.96.0.10"]
    assert kubelet_config["authentication"]["anonymous"] == {"enabled": False}


def test_containerd_config_is_toml_with_the_pause_image_and_no_negative_oom_scores() -> None:
    f = files_of(kubernetes.bundle(node("w", "worker"), ONE, SECRETS, V, NOW))
    doc = tomllib.loads(f["/etc/containerd/config.toml"].content)
    cri = doc["plugins"]["io.containerd.grpc.v1.cri"]
    assert doc["version"] == 2 and doc["grpc"]["address"] == "/run/containerd/containerd.sock"
    assert cri["sandbox_image"] == "k8s.gcr.io/pause:3.4"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["cni"] == {
        "bin_dir": "/usr/lib/cni",
        "conf_dir": "/etc/cni/net.d",
        "max_conf_num": 1,
    }
    assert cri["containerd"]["runtimes"]["runc"]["options"] == {"SystemdCgroup": False}


# -- the whole user data -----------------------------------------------------------


def test_render_is_a_cloud_config_with_identity_agent_and_kubernetes() -> None:
    m = node("demo-master-0", "master")
    text = bootstrap.render(
        m, ONE, SECRETS, V, shoal_url="https://s:9511", agent_token="t", now=NOW
    )
    doc = yaml.safe_load(text)
    paths = [w["path"] for w in doc["write_files"]]
    assert paths[:2] == [bootstrap.IDENTITY_PATH, "/etc/systemd/system/shoal-agent.service"]
    assert paths[-1] == svc.PATH and len(paths) == len(set(paths))
    assert doc["runcmd"] == [["sh", "-c", bootstrap.START_AGENT]]
    secret = [w["path"] for w in doc["write_files"] if w["path"].endswith((".key", ".conf"))]
    assert all(w["permissions"] == "0600" for w in doc["write_files"] if w["path"] in secret)
    # OpenStack's Nova takes at most 65535 bytes of base64 user data
    assert len(base64.b64encode(text.encode())) < 65535


def test_the_agent_only_user_data_is_unchanged_by_the_package() -> None:
    who = bootstrap.NodeIdentity("u", "n", "c", "g", "p", "worker")
    assert bootstrap.user_data(who, "http://s", "t") == bootstrap.cloud_config(
        "n",
        [
            bootstrap.identity_file(who, "http://s", "t"),
            bootstrap.File(bootstrap.AGENT_UNIT_PATH, bootstrap.AGENT_UNIT),
        ],
    )


def test_a_path_written_twice_is_a_renderer_bug() -> None:
    with pytest.raises(ValueError, match="written twice"):
        bootstrap.cloud_config("n", [bootstrap.File("/a", "1"), bootstrap.File("/a", "2")])


@pytest.mark.parametrize(
    ("services", "message"),
    [
        ([svc.Service("a", ("x",)), svc.Service("a", ("y",))], "listed twice"),
        ([svc.Service("a", ("x",), depends_on=("b",))], "not listed before it"),
        ([svc.Service("a", ())], "has no command"),
    ],
)
def test_the_manifest_refuses_what_the_agent_would(
    services: list[svc.Service], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        svc.manifest(services)
