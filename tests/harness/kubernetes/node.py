"""Kubernetes nodes in namespace machines: containerd, a control plane, kubelets.

`TestCluster` puts a master (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler as processes, plus containerd and a tainted kubelet) and workers
(containerd and a kubelet that joins by TLS bootstrap with a bootstrap token) into
`NamespaceMachine`s on one `Bridge`. Inside each machine every component uses its
default paths (/etc/kubernetes, /var/lib/kubelet, /run/containerd/containerd.sock,
...), which are private to that machine. The host reaches the API server at
https://<master ip>:6443 through the bridge; `kubectl()` runs the built kubectl with
the admin kubeconfig. etcd speaks plain HTTP on the master's own 127.0.0.1, which
no other machine can reach.
"""

from __future__ import annotations

import base64
import json
import secrets
import shutil
import string
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.harness.kubernetes.build import BUSYBOX_IMAGE, KUBE_VERSION, PAUSE_IMAGE
from tests.harness.kubernetes.machine import Bridge, MachineError, NamespaceMachine

API_PORT = 6443
SERVICE_SUBNET = "10.96.0.0/12"
POD_SUBNET = "10.244.0.0/16"  # machine i gets 10.244.i.0/24 on its own CNI bridge
CNI_BIN_DIR = "/usr/lib/cni"  # Debian's containernetworking-plugins
CONTAINERD_SOCKET = "/run/containerd/containerd.sock"
MASTER_TAINT = "node-role.kubernetes.io/master=:NoSchedule"
READY_TIMEOUT = 120.0

CONTAINERD_CONFIG = """\
version = 2
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.internal.v1.tracing"]
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  disable_hugetlb_controller = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "/etc/cni/net.d"
    max_conf_num = 1
"""

KUBEADM_CONFIG = """\
apiVersion: kubeadm.k8s.io/v1beta2
kind: InitConfiguration
bootstrapTokens:
- token: {token}
  ttl: 2h
  groups: [system:bootstrappers:kubeadm:default-node-token]
  usages: [signing, authentication]
localAPIEndpoint:
  advertiseAddress: {ip}
  bindPort: {port}
nodeRegistration:
  name: {name}
  criSocket: {socket}
  taints:
  - {{key: node-role.kubernetes.io/master, effect: NoSchedule}}
---
apiVersion: kubeadm.k8s.io/v1beta2
kind: ClusterConfiguration
kubernetesVersion: {version}
clusterName: shoal-test
controlPlaneEndpoint: {ip}:{port}
certificatesDir: /etc/kubernetes/pki
networking:
  serviceSubnet: {service_subnet}
  podSubnet: {pod_subnet}
apiServer:
  certSANs: [{ip}, 127.0.0.1]
"""


def kubelet_config(machine: NamespaceMachine) -> str:
    return json.dumps(
        {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": machine.ip,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": "/etc/kubernetes/pki/ca.crt"},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": machine.cgroup_root,
            "cgroupsPerQOS": True,
            "enforceNodeAllocatable": ["pods"],
            "failSwapOn": False,
            "makeIPTablesUtilChains": False,
            "kernelMemcgNotification": False,
            "clusterDNS": ["10.96.0.10"],
            "clusterDomain": "cluster.local",
            "staticPodPath": "/etc/kubernetes/manifests",
            "resolvConf": "/etc/resolv.conf",
            "rotateCertificates": True,
            "serializeImagePulls": False,
            # The first status is NotReady (PLEG not yet run); the next one comes after this,
            # 10s by default. Only a changed status is posted, so 2s costs little.
            "nodeStatusUpdateFrequency": "2s",
            "evictionHard": {
                "memory.available": "100Mi",
                "nodefs.available": "1%",
                "imagefs.available": "1%",
            },
        },
        indent=1,
    )


def cni_config(machine: NamespaceMachine) -> str:
    subnet = f"10.244.{machine.index}"
    return json.dumps(
        {
            "cniVersion": "0.4.0",
            "name": "shoal-pods",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": "cni0",
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": f"{subnet}.0/24", "gateway": f"{subnet}.1"}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                    },
                }
            ],
        },
        indent=1,
    )


def bootstrap_kubeconfig(server: str, ca_pem: bytes, token: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "shoal-test",
                    "cluster": {
                        "server": server,
                        "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                    },
                }
            ],
            "users": [{"name": "tls-bootstrap-token-user", "user": {"token": token}}],
            "contexts": [
                {
                    "name": "bootstrap",
                    "context": {"cluster": "shoal-test", "user": "tls-bootstrap-token-user"},
                }
            ],
            "current-context": "bootstrap",
        },
        indent=1,
    )


def new_bootstrap_token() -> str:
    alphabet = string.ascii_lowercase + string.digits
    first, second = ("".join(secrets.choice(alphabet) for _ in range(n)) for n in (6, 16))
    return f"{first}.{second}"


def _wait(what: str, check: Callable[[], object], timeout: float, interval: float = 0.25) -> float:
    """Poll check() until it is true; return the seconds waited."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise MachineError(f"{what} not reached within {timeout:.0f}s")
        time.sleep(interval)
    return time.monotonic() - started


@dataclass
class TestCluster:
    """A master and workers in namespace machines (see the module doc)."""

    bin_dir: Path
    images: dict[str, Path]
    work_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="shoal-k8s-")))
    keep: bool = False
    bridge: Bridge | None = None
    machines: dict[str, NamespaceMachine] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    token: str = field(default_factory=new_bootstrap_token)
    master: NamespaceMachine | None = None
    _kubelet_started: float = 0.0

    __test__ = False  # not a pytest class

    def bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    @property
    def admin_kubeconfig(self) -> Path:
        assert self.master is not None
        return self.master.data("/etc/kubernetes") / "admin.conf"

    @property
    def server(self) -> str:
        assert self.master is not None
        return f"https://{self.master.ip}:{API_PORT}"

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60.0) -> str:
        argv = [self.bin("kubectl"), "--kubeconfig", str(self.admin_kubeconfig), *args]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise MachineError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def _machine(self, name: str) -> NamespaceMachine:
        if self.bridge is None:
            self.bridge = Bridge()
            self.bridge.create()
        machine = NamespaceMachine(
            self.bridge, name, len(self.machines) + 1, self.work_dir / name, keep=self.keep
        )
        self.machines[name] = machine
        started = time.monotonic()
        machine.start()
        self.timings[f"{name}: machine"] = time.monotonic() - started
        return machine

    def start_containerd(self, machine: NamespaceMachine) -> None:
        started = time.monotonic()
        (machine.data("/etc/containerd") / "config.toml").write_text(
            CONTAINERD_CONFIG.format(pause=PAUSE_IMAGE, cni_bin=CNI_BIN_DIR)
        )
        (machine.data("/etc/cni/net.d") / "10-shoal-pods.conflist").write_text(cni_config(machine))
        machine.spawn("containerd", ["containerd", "--config", "/etc/containerd/config.toml"])
        ctr = ["ctr", "--address", CONTAINERD_SOCKET]
        _wait(
            f"{machine.name}: containerd",
            lambda: machine.run([*ctr, "version"], check=False).returncode == 0,
            30,
            0.1,
        )
        for archive in self.images.values():
            machine.run([*ctr, "-n", "k8s.io", "images", "import", str(archive)])
        self.timings[f"{machine.name}: containerd + images"] = time.monotonic() - started

    def start_master(self, name: str = "master") -> NamespaceMachine:
        machine = self.master = self._machine(name)
        started = time.monotonic()
        etc = machine.data("/etc/kubernetes")
        (etc / "manifests").mkdir(parents=True, exist_ok=True)
        (etc / "kubeadm.yaml").write_text(
            KUBEADM_CONFIG.format(
                token=self.token,
                ip=machine.ip,
                port=API_PORT,
                name=name,
                socket=CONTAINERD_SOCKET,
                version=KUBE_VERSION,
                service_subnet=SERVICE_SUBNET,
                pod_subnet=POD_SUBNET,
            )
        )
        kubeadm = [self.bin("kubeadm"), "init", "phase"]
        config = ["--config", "/etc/kubernetes/kubeadm.yaml"]
        machine.run([*kubeadm, "certs", "all", *config])
        machine.run([*kubeadm, "kubeconfig", "all", *config])
        self.timings[f"{name}: kubeadm certs + kubeconfigs"] = time.monotonic() - started
        started = time.monotonic()
        self._spawn_etcd_and_apiserver(machine)
        _wait(
            "kube-apiserver /readyz",
            lambda: self._alive() and self.kubectl("get", "--raw", "/readyz", check=False) == "ok",
            60,
        )
        self.timings[f"{name}: etcd + apiserver ready"] = time.monotonic() - started
        # Only now: both exit at once when the API server's RBAC policy is not there yet.
        self._spawn_controllers(machine)
        started = time.monotonic()
        machine.run([*kubeadm, "bootstrap-token", *config])
        self.timings[f"{name}: kubeadm bootstrap-token"] = time.monotonic() - started
        self.start_containerd(machine)
        self.start_kubelet(machine, bootstrap=False)
        self.wait_ready(name)
        machine.run([*kubeadm, "mark-control-plane", *config])
        return machine

    def _spawn_etcd_and_apiserver(self, m: NamespaceMachine) -> None:
        pki = "/etc/kubernetes/pki"
        m.spawn(
            "etcd",
            ["etcd", "--name", m.name, "--data-dir", "/var/lib/etcd"]
            + ["--listen-client-urls", "http://127.0.0.1:2379"]
            + ["--advertise-client-urls", "http://127.0.0.1:2379"]
            + ["--listen-peer-urls", "http://127.0.0.1:2380"]
            + ["--initial-advertise-peer-urls", "http://127.0.0.1:2380"]
            + ["--initial-cluster", f"{m.name}=http://127.0.0.1:2380"]
            + ["--listen-metrics-urls", "http://127.0.0.1:2381"],
        )
        m.spawn(
            "kube-apiserver",
            [self.bin("kube-apiserver"), f"--advertise-address={m.ip}", f"--secure-port={API_PORT}"]
            + ["--insecure-port=0", "--etcd-servers=http://127.0.0.1:2379"]
            + [f"--client-ca-file={pki}/ca.crt", f"--tls-cert-file={pki}/apiserver.crt"]
            + [f"--tls-private-key-file={pki}/apiserver.key"]
            + [f"--kubelet-client-certificate={pki}/apiserver-kubelet-client.crt"]
            + [f"--kubelet-client-key={pki}/apiserver-kubelet-client.key"]
            + ["--kubelet-preferred-address-types=InternalIP,Hostname"]
            + ["--service-account-issuer=https://kubernetes.default.svc.cluster.local"]
            + [f"--service-account-key-file={pki}/sa.pub"]
            + [f"--service-account-signing-key-file={pki}/sa.key"]
            + [f"--service-cluster-ip-range={SERVICE_SUBNET}", "--authorization-mode=Node,RBAC"]
            + ["--enable-admission-plugins=NodeRestriction", "--allow-privileged=true"]
            + ["--enable-bootstrap-token-auth=true", "--profiling=false"],
        )

    def _spawn_controllers(self, m: NamespaceMachine) -> None:
        pki = "/etc/kubernetes/pki"
        kcm_conf = "/etc/kubernetes/controller-manager.conf"
        m.spawn(
            "kube-controller-manager",
            [self.bin("kube-controller-manager"), f"--kubeconfig={kcm_conf}"]
            + [f"--authentication-kubeconfig={kcm_conf}", f"--authorization-kubeconfig={kcm_conf}"]
            + ["--bind-address=127.0.0.1", "--port=0", "--leader-elect=false"]
            + [f"--service-account-private-key-file={pki}/sa.key", f"--root-ca-file={pki}/ca.crt"]
            + [f"--cluster-signing-cert-file={pki}/ca.crt"]
            + [f"--cluster-signing-key-file={pki}/ca.key"]
            + ["--use-service-account-credentials=true"]
            + ["--controllers=*,bootstrapsigner,tokencleaner", "--profiling=false"],
        )
        sched_conf = "/etc/kubernetes/scheduler.conf"
        m.spawn(
            "kube-scheduler",
            [self.bin("kube-scheduler"), f"--kubeconfig={sched_conf}"]
            + [f"--authentication-kubeconfig={sched_conf}"]
            + [f"--authorization-kubeconfig={sched_conf}"]
            + ["--bind-address=127.0.0.1", "--port=0", "--leader-elect=false", "--profiling=false"],
        )

    def start_kubelet(self, machine: NamespaceMachine, bootstrap: bool) -> None:
        etc = machine.data("/etc/kubernetes")
        (etc / "kubelet-config.json").write_text(kubelet_config(machine))
        argv = [self.bin("kubelet"), "--config=/etc/kubernetes/kubelet-config.json"]
        argv += ["--kubeconfig=/etc/kubernetes/kubelet.conf", f"--node-ip={machine.ip}"]
        argv += [
            "--container-runtime=remote",
            f"--container-runtime-endpoint=unix://{CONTAINERD_SOCKET}",
        ]
        argv += [
            "--runtime-request-timeout=5m",
            "--volume-plugin-dir=/var/lib/kubelet/volume-plugins",
        ]
        argv += ["--v=2"]
        if bootstrap:
            argv.append("--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf")
        else:
            argv.append(f"--register-with-taints={MASTER_TAINT}")
        self._kubelet_started = time.monotonic()
        machine.spawn("kubelet", argv)

    def join_worker(self, name: str) -> NamespaceMachine:
        """A worker: containerd and a kubelet that joins with only a bootstrap token."""
        assert self.master is not None, "start the master first"
        machine = self._machine(name)
        ca = (self.master.data("/etc/kubernetes") / "pki" / "ca.crt").read_bytes()
        pki = machine.data("/etc/kubernetes") / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        (pki / "ca.crt").write_bytes(ca)
        (machine.data("/etc/kubernetes") / "manifests").mkdir(exist_ok=True)
        (machine.data("/etc/kubernetes") / "bootstrap-kubelet.conf").write_text(
            bootstrap_kubeconfig(self.server, ca, self.token)
        )
        self.start_containerd(machine)
        self.start_kubelet(machine, bootstrap=True)
        self.wait_ready(name)
        return machine

    def _alive(self) -> bool:
        """True while every daemon runs; else MachineError with the dead one's log tail."""
        for machine in self.machines.values():
            for daemon in machine.daemons.values():
                if daemon.proc.poll() is not None:
                    lines = daemon.log.read_text(errors="replace").splitlines()[-15:]
                    raise MachineError(
                        f"{machine.name}: {daemon.name} exited ({daemon.proc.returncode}); "
                        f"{daemon.log}:\n" + "\n".join(lines)
                    )
        return True

    def node_ready(self, name: str) -> bool:
        jsonpath = '{.status.conditions[?(@.type=="Ready")].status}'
        out = self.kubectl("get", "node", name, "-o", f"jsonpath={jsonpath}", check=False)
        return out.strip() == "True"

    def wait_ready(self, name: str, timeout: float = READY_TIMEOUT) -> None:
        try:
            _wait(
                f"node {name} Ready", lambda: self._alive() and self.node_ready(name), timeout, 0.5
            )
        except MachineError as exc:
            log = self.machines[name].work_dir / "log" / "kubelet.log"
            tail = (
                "\n".join(log.read_text(errors="replace").splitlines()[-15:])
                if log.exists()
                else ""
            )
            raise MachineError(f"{exc}; kubelet log tail:\n{tail}") from None
        self.timings[f"{name}: kubelet start -> Ready"] = time.monotonic() - self._kubelet_started

    def stop(self) -> None:
        """Stop every machine (workers first), then delete the bridge."""
        for machine in reversed(list(self.machines.values())):
            machine.stop()
        self.machines.clear()
        if self.bridge is not None:
            self.bridge.delete()
            self.bridge = None
        if not self.keep:
            shutil.rmtree(self.work_dir, ignore_errors=True)


BUSYBOX_POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  containers:
  - name: main
    image: {image}
    imagePullPolicy: Never
    command: ["/bin/sh", "-c", "echo hello-from-$(hostname); exec httpd -f -p 8080 -h /etc"]
"""


def busybox_pod(name: str, node: str) -> str:
    return BUSYBOX_POD.format(name=name, node=node, image=BUSYBOX_IMAGE)
