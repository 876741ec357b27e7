"""What shoal renders for a node, run by the real Kubernetes v1.20.2 binaries: etcd and
kube-apiserver start with the rendered flags and certificates and answer the
rendered admin kubeconfig; a kubeconfig whose certificate shoal signed from a CSR
(what `openstack coe cluster config` gets) is a cluster admin there; the first
master's one-shot step creates the bootstrap token and RBAC; and a worker's
kubelet, with only its rendered bootstrap kubeconfig and KubeletConfiguration,
completes TLS bootstrap: the controller-manager approves its CSR and it writes its
own kubeconfig. containerd's own `config dump` holds the rendered config's values.

The binaries are the Kubernetes harness's cache (tests/harness/kubernetes builds
them into ~/.cache/shoal/kubernetes-*/bin); without it this test skips. Everything
listens on 127.0.0.1, on ports chosen free; the rendered paths are moved under a
temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from shoal.agent import services as agent_services
from shoal.domain import bootstrap, pki, sealing
from shoal.domain.bootstrap import certs, kubernetes, versions

NEEDED = ("kube-apiserver", "kube-controller-manager", "kubelet", "kubectl")
ROOTS = (
    "/etc/kubernetes",
    "/var/lib/kubelet",
    "/var/lib/etcd",
    "/etc/containerd",
    "/etc/cni",
    "/etc/shoal",
)  # every file a node gets lands under the test's root, none on the host
READY_S = 60.0


def kubernetes_bin() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shoal"
    for bin_dir in sorted(base.glob("kubernetes-*/bin"), reverse=True):
        if all((bin_dir / b).exists() for b in NEEDED):
            return bin_dir
    pytest.skip("no Kubernetes binaries in ~/.cache/shoal/kubernetes-*/bin (the harness's cache)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    """A rendered node laid out under `root`, its services started by PID."""

    def __init__(self, root: Path, bin_dir: Path, etcd: str, ports: dict[str, str]) -> None:
        self.root, self.bin_dir, self.etcd = root, bin_dir, etcd
        self.ports = ports  # rendered ":port" -> the free one
        self.procs: list[subprocess.Popen[bytes]] = []

    def moved(self, text: str) -> str:
        for prefix in ROOTS:
            text = text.replace(prefix, str(self.root) + prefix)
        for old, new in self.ports.items():
            text = text.replace(old, new)
        return text

    def write(self, files: list[bootstrap.File]) -> None:
        for f in files:
            path = Path(self.moved(f.path))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.moved(f.content))
            path.chmod(int(f.permissions, 8))

    def argv(self, service: agent_services.Spec, *extra: str) -> list[str]:
        argv = [self.moved(a) for a in service.argv]
        argv[0] = self.etcd if argv[0] == "etcd" else str(self.bin_dir / argv[0])
        return [*argv, *extra]

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        with (self.root / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=15)


def kubectl(bin_dir: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "kubectl"), f"--kubeconfig={kubeconfig}", "--request-timeout=5s", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def until(what: str, check: object, log: Path | None = None) -> None:
    deadline = time.monotonic() + READY_S
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.25)
    tail = log.read_text()[-3000:] if log and log.exists() else ""
    raise AssertionError(f"{what}: not within {READY_S:g} s\n{tail}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Node, Node, dict[str, object]]]:
    bin_dir = kubernetes_bin()
    etcd = next((str(p) for p in (bin_dir / "etcd",) if p.exists()), shutil.which("etcd") or "")
    if not etcd:
        pytest.skip("no etcd binary (Debian's etcd-server)")
    now = datetime.now(UTC)
    ca = pki.new_ca("c-real", now)
    token = sealing.Sealer("k" * 40).bootstrap_token("c-real")
    secrets = kubernetes.ClusterSecrets(ca, certs.new_service_account_key(), token)
    api_port = free_port()
    plan = kubernetes.ClusterPlan(
        "c-real", "127.0.0.1", (kubernetes.Master("m0"),), api_port=api_port
    )
    version = versions.resolve("v1.20.2")
    ports = {
        ":2379": f":{free_port()}",
        ":2380": f":{free_port()}",
        ":2381": f":{free_port()}",
    }

    def lay(name: str, role: str, index: int) -> tuple[Node, kubernetes.Bundle]:
        who = bootstrap.NodeIdentity(f"u-{name}", name, "c-real", "g", "p", role)
        b = kubernetes.bundle(kubernetes.KubeNode(who, index), plan, secrets, version, now)
        node = Node(tmp_path / name, bin_dir, etcd, ports)
        node.write(kubernetes.files(b))
        return node, b

    master, mb = lay("m0", "master", 0)
    worker, wb = lay("localhost", "worker", 1)
    info: dict[str, object] = {
        "ca": ca,
        "api_port": api_port,
        "master": mb,
        "worker": wb,
        "token_id": token.split(".")[0],
    }
    try:
        yield master, worker, info
    finally:
        worker.stop()
        master.stop()
        kubelet_root = worker.root / "var/lib/kubelet"
        subprocess.run(["umount", "-l", str(kubelet_root)], capture_output=True, check=False)


def test_the_rendered_control_plane_runs_and_a_worker_completes_tls_bootstrap(
    cluster: tuple[Node, Node, dict[str, object]],
) -> None:
    master, worker, info = cluster
    mb = info["master"]
    wb = info["worker"]
    assert isinstance(mb, kubernetes.Bundle) and isinstance(wb, kubernetes.Bundle)
    manifest = agent_services.parse(json.loads(mb.manifest().content))
    spec = {s.name: s for s in manifest.services}
    ip = agent_services.node_ip("192.0.2.1")  # the default route's source (kubelet: no loopback)

    def filled(s: agent_services.Spec) -> agent_services.Spec:
        argv = tuple(a.replace(agent_services.NODE_IP, ip) for a in s.argv)
        return agent_services.Spec(s.name, argv)

    etcd = master.start("etcd", master.argv(spec["etcd"]))
    until("etcd", lambda: _connects(int(master.ports[":2379"][1:])), master.root / "etcd.log")
    api = master.start(
        "kube-apiserver",
        [
            a.replace("--bind-address=0.0.0.0", "--bind-address=127.0.0.1")
            for a in master.argv(filled(spec["kube-apiserver"]))
        ],
    )
    admin = Path(master.moved(kubernetes.ADMIN_CONF))
    until(
        "kube-apiserver /readyz through the rendered admin kubeconfig",
        lambda: (
            api.poll() is None
            and kubectl(master.bin_dir, admin, "get", "--raw", "/readyz").returncode == 0
        ),
        master.root / "kube-apiserver.log",
    )
    assert etcd.poll() is None
    master.start(
        "kube-controller-manager",
        master.argv(spec["kube-controller-manager"], "--secure-port=0"),
    )

    # A kubeconfig as `openstack coe cluster config` makes it: a CSR signed by shoal.
    ca = info["ca"]
    assert isinstance(ca, pki.CA)
    key = ec.generate_private_key(ec.SECP256R1())
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(
            x509.Name(
                [
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
                    x509.NameAttribute(NameOID.COMMON_NAME, "admin"),
                ]
            )
        )
        .sign(key, hashes.SHA256())
    )
    signed = pki.sign_csr(
        ca, csr.public_bytes(serialization.Encoding.PEM).decode(), datetime.now(UTC)
    )
    user = master.root / "user.conf"
    user.write_text(
        bootstrap.kubernetes.documents.kubeconfig(
            versions.resolve(None),
            f"https://127.0.0.1:{info['api_port']}",
            ca.cert_pem,
            "admin",
            cert_pem=signed,
            key_pem=certs.key_pem(key),
        )
    )
    can = kubectl(master.bin_dir, user, "auth", "can-i", "*", "*")
    assert can.stdout.strip() == "yes", can

    # The first master's one-shot step, as the agent runs it.
    step = master.argv(spec["cluster-bootstrap"])
    applied = subprocess.run(step, capture_output=True, text=True, timeout=60, check=False)
    assert applied.returncode == 0, applied.stderr
    bootstrap_conf = Path(worker.moved(kubernetes.BOOTSTRAP_KUBELET_CONF))
    creds = yaml.safe_load(bootstrap_conf.read_text())["users"][0]["user"]
    assert list(creds) == ["token"]
    can_csr = kubectl(
        worker.bin_dir, bootstrap_conf, "auth", "can-i", "create", "certificatesigningrequests"
    )
    assert can_csr.stdout.strip() == "yes", can_csr

    # The worker's kubelet: TLS bootstrap with the rendered documents. It needs no
    # container runtime for this; it exits later for lack of one.
    wspec = {s.name: s for s in agent_services.parse(json.loads(wb.manifest().content)).services}
    config = Path(worker.moved(kubernetes.KUBELET_CONFIG))
    doc = yaml.safe_load(config.read_text())
    doc.update(address="127.0.0.1", port=free_port(), healthzPort=0)
    config.write_text(yaml.safe_dump(doc))
    worker.start(
        "kubelet",
        worker.argv(
            filled(wspec["kubelet"]),
            f"--root-dir={worker.root}/var/lib/kubelet",
            f"--volume-plugin-dir={worker.root}/volume-plugins",
            f"--seccomp-profile-root={worker.root}/seccomp",
            f"--container-runtime-endpoint=unix://{worker.root}/no-runtime.sock",
        ),
    )
    current = worker.root / "var/lib/kubelet/pki/kubelet-client-current.pem"
    until(
        "the kubelet's client certificate after TLS bootstrap",
        current.exists,
        worker.root / "kubelet.log",
    )
    listed = kubectl(master.bin_dir, admin, "get", "csr", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    (csr_obj,) = json.loads(listed.stdout)["items"]
    token_id = info["token_id"]
    assert csr_obj["spec"]["username"] == f"system:bootstrap:{token_id}"
    assert [c["type"] for c in csr_obj["status"]["conditions"]] == ["Approved"]
    issued = x509.load_pem_x509_certificate(current.read_bytes())
    assert issued.subject.rfc4514_string() == "CN=system:node:localhost,O=system:nodes"
    issued.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem.encode()))
    written = yaml.safe_load(Path(worker.moved(kubernetes.KUBELET_CONF)).read_text())
    assert written["users"][0]["user"]["client-certificate"] == str(current)


def _connects(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def test_containerd_reads_the_rendered_config_as_meant(tmp_path: Path) -> None:
    """containerd's own `config dump` (the typed, merged config: a key it does not know
    is dropped) holds every value shoal set, at the place containerd reads it."""
    containerd = shutil.which("containerd")
    if containerd is None:
        pytest.skip("no containerd (Debian's containerd package)")
    path = tmp_path / "config.toml"
    path.write_text(kubernetes.documents.containerd_config(versions.resolve(None)))
    done = subprocess.run(
        [containerd, "--config", str(path), "config", "dump"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    dumped = tomllib.loads(done.stdout)
    cri = dumped["plugins"]["io.containerd.grpc.v1.cri"]
    assert dumped["grpc"]["address"] == "/run/containerd/containerd.sock"
    assert cri["sandbox_image"] == "k8s.gcr.io/pause:3.4"
    assert cri["restrict_oom_score_adj"] is True
    assert cri["disable_apparmor"] is True
    assert (cri["cni"]["bin_dir"], cri["cni"]["conf_dir"]) == ("/usr/lib/cni", "/etc/cni/net.d")
    assert cri["containerd"]["snapshotter"] == "overlayfs"
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is False
