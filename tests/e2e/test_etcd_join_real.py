"""Three masters' etcd members as shoal renders them, run by Debian's real etcd on this
host: the first starts a cluster of one, the two others join it through
`shoal-agent etcd-join` (member add over TLS with the master's certificate from the
cluster CA), the cluster has three started members and a quorum; one member is
killed, and a master that replaces it (a new name and address) joins: the lost
member is removed, the new one added, three started members again.

The rendered paths are moved under a temporary directory; each member's "own
address" is a loopback address of its own (127.0.0.1N), its "loopback" listener
another (127.0.1.N), so three members share this host. Skips without etcd on the
PATH (Debian's etcd-server); fails under CI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from shoal.domain import pki
from shoal.domain.bootstrap import NodeIdentity, certs, kubernetes, versions
from tests.support.waiting import until

NOW = datetime.now(UTC)
V = versions.resolve("v1.20.2", "kube_tag")
TOKEN = "abcdef.0123456789abcdef"


@pytest.fixture
def etcd_program() -> str:
    found = shutil.which("etcd")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI needs etcd on the PATH (Debian: etcd-server)", pytrace=False)
        pytest.skip("etcd is not on the PATH (Debian: etcd-server)")
    return found


def plan(masters: list[tuple[str, str]], *, exists: bool) -> kubernetes.ClusterPlan:
    return kubernetes.ClusterPlan(
        "c-etcd",
        "127.0.0.99",
        tuple(kubernetes.Master(n, a) for n, a in masters),
        etcd_exists=exists,
    )


class Member:
    """One master's rendered etcd service, run with its paths under `root`."""

    def __init__(self, root: Path, index: int, name: str, address: str, cluster: Any) -> None:
        self.name, self.address = name, address
        self.dir = root / name
        ca = cluster["ca"]
        node = kubernetes.KubeNode(
            NodeIdentity(f"u-{name}", name, "c-etcd", "g", "p", "master"), index, address
        )
        b = kubernetes.bundle(node, cluster["plan"], cluster["secrets"], V, NOW)
        for f in b.files:
            if f.path.startswith(kubernetes.PKI):
                out = self.dir / f.path.lstrip("/")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(f.content)
        (self.dir / "etc/kubernetes/pki/ca.crt").write_text(ca.cert_pem)
        argv = next(s for s in b.services if s.name == "etcd").argv
        self.joins = argv[0] == "shoal-agent"
        lo = f"127.0.1.{index + 1}"
        self.argv = [
            a.replace("/etc/kubernetes", str(self.dir / "etc/kubernetes"))
            .replace("/var/lib/etcd", str(self.dir / "data"))
            .replace("127.0.0.1:", f"{lo}:")
            for a in argv
        ]
        if self.joins:  # the agent's entry point, from this test's Python
            self.argv = [sys.executable, "-m", "shoal.agent.main", *self.argv[1:]]
            self.argv.insert(self.argv.index("--"), "--every=0.3")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = (self.dir / "log").open("ab")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        self.proc = subprocess.Popen(self.argv, stdout=log, stderr=log, env=env)

    def supervise(self) -> None:
        """Start it again once it exited, as the node agent's supervisor does."""
        if self.proc is not None and self.proc.poll() is not None:
            self.start()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def log(self) -> str:
        return (self.dir / "log").read_text(errors="replace")[-3000:]


def members(m: Member) -> list[dict[str, Any]]:
    """The members as `m`'s etcd lists them (over TLS, with its own certificate)."""
    tls = ssl.create_default_context(cafile=str(m.dir / "etc/kubernetes/pki/ca.crt"))
    tls.check_hostname = False
    pki_dir = m.dir / "etc/kubernetes/pki/etcd"
    tls.load_cert_chain(str(pki_dir / "peer.crt"), str(pki_dir / "peer.key"))
    req = urllib.request.Request(
        f"https://{m.address}:2379/v3/cluster/member/list", data=b"{}", method="POST"
    )
    with urllib.request.urlopen(req, timeout=3, context=tls) as resp:
        return list(json.loads(resp.read())["members"])


def put_and_get(m: Member) -> bool:
    """A write through `m` (needs a quorum), read back."""
    tls = ssl.create_default_context(cafile=str(m.dir / "etc/kubernetes/pki/ca.crt"))
    tls.check_hostname = False
    pki_dir = m.dir / "etc/kubernetes/pki/etcd"
    tls.load_cert_chain(str(pki_dir / "peer.crt"), str(pki_dir / "peer.key"))
    url = f"https://{m.address}:2379/v3/kv/put"
    body = json.dumps({"key": "c2hvYWw=", "value": "eWVz"}).encode()
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, data=body, method="POST"), timeout=3, context=tls
        ):
            return True
    except OSError:
        return False


def wait(done: Any, progress: Any, what: str) -> None:
    until(done, progress=progress, what=what, idle=30.0, cap=120.0)


def progress(ms: list[Member], m: Member) -> list[str]:
    for each in ms:
        each.supervise()
    return started(m)


def started(m: Member) -> list[str]:
    try:
        return sorted(x["name"] for x in members(m) if x.get("name"))
    except OSError:
        return []


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, Any]]:
    ca = pki.new_ca("c-etcd", NOW)
    sa = certs.new_service_account_key()
    out: dict[str, Any] = {
        "ca": ca,
        "secrets": kubernetes.ClusterSecrets(ca, sa, TOKEN),
        "root": tmp_path,
        "members": [],
    }
    yield out
    for m in out["members"]:
        m.kill()


def test_masters_join_one_by_one_and_a_replacement_takes_a_lost_members_place(
    etcd_program: str, cluster: dict[str, Any]
) -> None:
    three = [("m0", "127.0.0.10"), ("m1", "127.0.0.11"), ("m2", "127.0.0.12")]
    cluster["plan"] = plan(three, exists=False)
    ms = [Member(cluster["root"], i, n, a, cluster) for i, (n, a) in enumerate(three)]
    cluster["members"] += ms
    assert [m.joins for m in ms] == [False, True, True]
    for m in ms:  # all at once, as the conductor makes them
        m.start()
    try:
        wait(
            lambda: started(ms[0]) == ["m0", "m1", "m2"],
            lambda: progress(ms, ms[0]),
            "three members",
        )
    except AssertionError:
        raise AssertionError("\n".join(f"--- {m.name}\n{m.log()}" for m in ms)) from None
    assert put_and_get(ms[1])

    # m0 is lost; m3 replaces it at the address m0 had (freed with its machine),
    # rendered with the masters that are left and itself.
    ms[0].kill()
    # two of three: still a quorum (once they have elected a leader, if m0 led)
    wait(lambda: put_and_get(ms[2]), lambda: None, "a write with two of three")
    rest = [("m1", "127.0.0.11"), ("m2", "127.0.0.12"), ("m3", "127.0.0.10")]
    cluster["plan"] = plan(rest, exists=True)
    m3 = Member(cluster["root"], 3, "m3", "127.0.0.10", cluster)
    cluster["members"].append(m3)
    assert m3.joins
    m3.start()
    try:
        wait(
            lambda: started(ms[1]) == ["m1", "m2", "m3"],
            lambda: progress([*ms[1:], m3], ms[1]),
            "m0 out, m3 in",
        )
    except AssertionError:
        raise AssertionError(m3.log()) from None
    assert "removed member m0" in (m3.dir / "log").read_text(errors="replace")
    assert put_and_get(m3)

    # A member restarted with its data dir starts at once, without joining again.
    ms[1].kill()
    ms[1].start()
    wait(lambda: put_and_get(ms[1]), lambda: None, "m1 back")
    assert started(m3) == ["m1", "m2", "m3"]
