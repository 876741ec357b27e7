"""`./run bench kubernetes`: a real Kubernetes cluster from create to "all nodes Ready",
through shoal and through a plain script, in one run.

Both sides make the same machines: the `local` provider's namespace machines on this
host (shoal.drivers.local: root, the harness's Kubernetes v1.20.2 binaries), each
bootstrapped by the real cloud-init from a NoCloud seed, whose node agent starts the
node's Kubernetes services. shoal's side is one `shoal serve` (API + conductor, SQLite)
on the provider's bridge address, asked over the Magnum API for a cluster of 1 master +
W workers. The plain side boots the same number of machines of the same kind, one after
the other, by calling the driver directly (`LocalDriver.ensure_machine`: no API, no
database, no conductor), each fed the user data shoal rendered for the same node in its
latest run (byte for byte: the same CA, API address, node names and bootstrap token).

Both are timed the same way: from the first request (POST /clusters; the plain side's
first driver call) until one poller sees every node Ready in the API server's
/api/v1/nodes, asked every 0.5 s with the admin kubeconfig found in the master's user
data. The sides alternate (shoal once unmeasured to warm the page cache and give the
plain side its user data, then plain, shoal, shoal, plain, twice) so that drift in the
machine's load falls on both; the ratio is of the sums. The note says where each side's
time went: until every machine was started, until the API server first answered.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import ipaddress
import json
import shutil
import ssl
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import Deployment, check, peak_rss_mb
from benchmarks.scenarios import Row

TARGET = 1.10
POLL_S = 0.5  # both sides' poll of the API server (0.5 s on walls of a minute or more)
READY_TIMEOUT_S = 600.0
DELETE_TIMEOUT_S = 300.0
KUBE_TAG = "v1.20.2"
PAUSE_AS = "k8s.gcr.io/pause:3.4"  # the name the rendered containerd config starts pods with
ADMIN_CONF = "/etc/kubernetes/admin.conf"
# Where the local driver puts a machine's NoCloud user data (machines.write_seed).
SEED = Path("ov/_var_lib/upper/cloud/seed/nocloud/user-data")
FULL_ORDER = ("warmup", *("plain", "shoal", "shoal", "plain") * 2)
QUICK_ORDER = ("shoal", "plain")


@dataclass
class Node:
    """One machine shoal made: what the plain side boots in its place."""

    machine_id: str
    name: str
    role: str
    address: str
    user_data: str


@dataclass
class Run:
    """One measured (or warm-up) run of one side."""

    side: str  # "shoal", "plain" or "warmup" (shoal, not counted)
    workers: int
    wall_s: float  # first request -> every node Ready
    machines_s: float  # first request -> the last machine started
    api_s: float  # first request -> the API server's first answer
    first_ready_s: float  # first request -> a first node Ready (the master, in practice)
    ready: list[str]  # the Ready nodes' names
    user_data_sha: str  # of every node's user data, in name order
    shoal_cpu_s: float = 0.0  # `shoal serve`'s own CPU (not its machines') over the run
    shoal_rss_mb: float = 0.0  # `shoal serve`'s own peak RSS so far


@dataclass
class Result:
    runs: list[Run] = field(default_factory=list)
    shoal_log: Path | None = None

    def of(self, side: str, workers: int) -> list[Run]:
        return [r for r in self.runs if r.side == side and r.workers == workers]


def missing_prerequisites() -> str:
    """Why this host cannot run the scenario (root, the local driver's tools, cloud-init),
    or ""; the Kubernetes binaries are built when missing (tests/harness/kubernetes)."""
    from shoal.drivers.local import hostops

    why = hostops.missing_prerequisites()
    if why:
        return why
    if shutil.which("cloud-init") is None:
        return "cloud-init is not installed (Debian: apt-get install cloud-init)"
    return ""


class NodesWatch:
    """The API server's Node list with the admin kubeconfig of a master's user data, at
    the cluster's API address (the kubeconfig names the master's own 127.0.0.1)."""

    def __init__(self, user_data: str, api_address: str, workdir: Path) -> None:
        conf = json.loads(_file_of(user_data, ADMIN_CONF))
        cluster = conf["clusters"][0]["cluster"]
        user = conf["users"][0]["user"]
        port = urllib.parse.urlsplit(cluster["server"]).port or 443
        self.server = f"https://{api_address}:{port}"
        ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
        self.ctx = ssl.create_default_context(cadata=ca)
        cert, key = workdir / "admin.crt", workdir / "admin.key"
        key.touch(mode=0o600)
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        self.ctx.load_cert_chain(str(cert), str(key))
        self.answered: float | None = None  # monotonic time of the first answer
        self.last = ""  # the last answer or error, for a timeout's message
        self.first_ready: float | None = None  # monotonic time a first node was Ready

    def ready(self) -> list[str]:
        """Names of the Ready nodes ([] while the API server does not answer)."""
        try:
            with urllib.request.urlopen(
                self.server + "/api/v1/nodes", context=self.ctx, timeout=5
            ) as r:
                items = json.loads(r.read())["items"]
        except (urllib.error.URLError, OSError, ValueError) as exc:
            self.last = f"{self.server}: {exc}"
            return []
        if self.answered is None:
            self.answered = time.monotonic()
        self.last = f"{self.server}: nodes {[n['metadata']['name'] for n in items]}"
        ready = sorted(
            n["metadata"]["name"]
            for n in items
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n.get("status", {}).get("conditions", [])
            )
        )
        if ready and self.first_ready is None:
            self.first_ready = time.monotonic()
        return ready


def _file_of(user_data: str, path: str) -> str:
    """The content of `path` among the #cloud-config's write_files (shoal renders JSON)."""
    config = json.loads(user_data.removeprefix("#cloud-config\n"))
    for f in config["write_files"]:
        if f["path"] == path:
            return str(f["content"])
    raise RuntimeError(f"the user data writes no {path}")


def _wait(what: str, timeout: float, every: float, probe: Any, why: Any = str) -> Any:
    """`probe()` every `every` s until it is truthy; `why()` says more on a timeout."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f}s: {what}\n{why()}")
        time.sleep(every)


def _machine_logs(state: Path, lines: int = 15) -> str:
    """The tails of each machine's cloud-init output and its node agent's service logs."""
    out = []
    for d in sorted((state / "machines").glob("*")):
        logs = [d / "log" / "cloud-init.out", d / "log" / "preload.out"]
        logs += sorted((d / "ov" / "_var_lib" / "upper" / "shoal-agent" / "logs").glob("*"))
        for f in logs:
            if f.is_file():
                tail = f.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {f}\n" + "\n".join(tail))
    return "\n".join(out)


def _sha(nodes: list[Node]) -> str:
    h = hashlib.sha256()
    for n in sorted(nodes, key=lambda n: n.name):
        h.update(n.user_data.encode())
    return h.hexdigest()[:16]


class Bench:
    """One local provider (a slot's bridge and subnet), one `shoal serve` on its bridge
    address, and the plain side's driver on the same bridge with a state dir of its own
    (shoal's sweeper never sees the plain machines)."""

    def __init__(self, work: Path, kube_bin: Path, pause_archive: Path) -> None:
        from shoal.drivers.local import hostops
        from shoal.drivers.local.settings import LocalSettings, PreloadImage
        from shoal.drivers.local.testing import local_settings

        self.work = work
        slot, self._slot_lock = local_settings(work)
        self.settings: LocalSettings = dataclasses.replace(
            slot,
            kubernetes_bin=str(kube_bin),
            preload=(PreloadImage(str(pause_archive), (PAUSE_AS,)),),
        )
        self.gateway = self.settings.subnet.rsplit(".", 1)[0] + ".1"
        self.hostops = hostops
        self.latest: dict[int, list[Node]] = {}  # workers -> shoal's latest nodes
        self.apis: dict[int, str] = {}  # workers -> the API address of shoal's latest run
        self._n = 0

    def config(self) -> Path:
        s = self.settings
        local = {
            "state_dir": s.state_dir,
            "bridge": s.bridge,
            "subnet": s.subnet,
            "kubernetes_bin": s.kubernetes_bin,
            "preload": [{"archive": p.archive, "names": list(p.names)} for p in s.preload],
        }
        config = {
            "default_provider": "local",
            "providers": [{"name": "local", "driver": "local", "settings": local}],
        }
        path = self.work / "shoal.yaml"
        path.write_text(json.dumps(config))
        return path

    def __enter__(self) -> Bench:
        # The bridge exists before shoal listens on its address (docs/drivers.md).
        ip, bridge = self.hostops.ip, self.settings.bridge
        if self.hostops.link_exists(bridge):  # a leftover of a killed run in this slot
            ip("link", "del", bridge)
        ip("link", "add", bridge, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        return self

    def __exit__(self, *exc: object) -> None:
        from shoal.drivers.local.driver import LocalDriver

        try:
            for state in (self.settings.state_dir, str(self.work / "plain")):
                d = LocalDriver(dataclasses.replace(self.settings, state_dir=state))
                for m in d.list_machines({}):
                    with contextlib.suppress(Exception):
                        d.delete_machine(m.machine_id)
            if self.hostops.link_exists(self.settings.bridge):
                self.hostops.ip("link", "del", self.settings.bridge)
        finally:
            self._slot_lock.close()

    # -- shoal ---------------------------------------------------------------------

    def template(self, dep: Deployment) -> str:
        body = {
            "name": "k8s-local",
            "coe": "kubernetes",
            "image_id": "host",
            "flavor_id": "local",
            "master_flavor_id": "local",
            "external_network_id": "public",
            "labels": {"kube_tag": KUBE_TAG, "provider": "local"},
        }
        with dep.client() as c:
            return str(check(c.post("/clustertemplates", json=body), 201, 202)["uuid"])

    def through_shoal(self, dep: Deployment, template: str, workers: int, side: str) -> Run:
        """One cluster of 1 master + `workers` through shoal's API, to every node Ready;
        then deleted (not timed). Keeps the user data shoal rendered for each node."""
        from shoal.drivers.contract import TAG_CLUSTER
        from shoal.drivers.local.driver import LocalDriver

        driver = LocalDriver(self.settings)  # reads shoal's machine records, makes nothing
        self._n += 1
        name = f"bench-{self._n}"
        body = {
            "name": name,
            "cluster_template_id": template,
            "master_count": 1,
            "node_count": workers,
            "create_timeout": 30,
        }
        serve = dep.procs[0]
        with dep.client() as c:
            cpu0 = _own_cpu(serve.pid)
            start, wall0 = time.monotonic(), time.time()
            uid = str(check(c.post("/clusters", json=body), 202)["uuid"])

            def nodes() -> list[Node]:
                out = []
                for m in driver.list_machines({TAG_CLUSTER: uid}):
                    seed = Path(self.settings.state_dir) / "machines" / m.machine_id / SEED
                    if not seed.exists() or m.address is None:
                        return []
                    role = m.tags.get("shoal-role", "")
                    out.append(Node(m.machine_id, m.name, role, m.address, seed.read_text()))
                return out if len(out) == workers + 1 else []

            def failed() -> None:
                got = c.get(f"/clusters/{uid}").json()
                if str(got.get("status", "")).endswith("FAILED"):
                    raise RuntimeError(f"cluster {name} failed: {got.get('status_reason')}")

            def made() -> list[Node]:
                failed()
                return nodes()

            made_nodes = _wait(f"shoal's {workers + 1} machines", READY_TIMEOUT_S, POLL_S, made)
            state = Path(self.settings.state_dir)
            machines_s = max(_created(state, n.machine_id) for n in made_nodes) - wall0
            (master,) = [n for n in made_nodes if n.role == "master"]
            watch = NodesWatch(master.user_data, master.address, self._tmp())

            def all_ready() -> list[str]:
                got = watch.ready()
                return got if len(got) == workers + 1 else []

            ready = _wait("every node Ready (shoal)", READY_TIMEOUT_S, POLL_S, all_ready,
                          lambda: f"{watch.last}\n{_machine_logs(state)}")  # fmt: skip
            wall = time.monotonic() - start
            cpu = _own_cpu(serve.pid) - cpu0
            api_url = str(c.get(f"/clusters/{uid}").json().get("api_address") or "")
            check(c.delete(f"/clusters/{uid}"), 204)
            _wait("cluster deleted", DELETE_TIMEOUT_S, 0.5,
                  lambda: c.get(f"/clusters/{uid}").status_code == 404)  # fmt: skip
        self.latest[workers] = made_nodes
        self.apis[workers] = urllib.parse.urlsplit(api_url).hostname or ""
        assert watch.answered is not None and watch.first_ready is not None
        return Run(side, workers, wall, machines_s, watch.answered - start,
                   watch.first_ready - start, ready, _sha(made_nodes), cpu,
                   peak_rss_mb(serve.pid))  # fmt: skip

    # -- the plain script ----------------------------------------------------------

    def plain(self, workers: int) -> Run:
        """The machines of shoal's latest run of this shape, booted with the local driver
        alone (master first, one after the other), to every node Ready; then deleted."""
        from shoal.drivers.contract import MachineSpec
        from shoal.drivers.local.driver import LocalDriver

        nodes = sorted(self.latest[workers], key=lambda n: (n.role != "master", n.name))
        state = self.work / "plain"
        shutil.rmtree(state, ignore_errors=True)
        driver = LocalDriver(dataclasses.replace(self.settings, state_dir=str(state)))
        cluster = str(uuid.uuid4())
        (master,) = [n for n in nodes if n.role == "master"]
        watch = NodesWatch(master.user_data, master.address, self._tmp())
        ids: list[str] = []
        start, wall0 = time.monotonic(), time.time()
        try:
            # The user data names the addresses shoal's run had (the API's, its balancer's,
            # and each machine's): the driver gives the lowest free address first, so
            # reserving them in ascending order gives the same ones here.
            mids = {n.name: str(uuid.uuid4()) for n in nodes}
            wanted = sorted(
                [(self.apis[workers], None), *((n.address, n) for n in nodes)],
                key=lambda a: ipaddress.ip_address(a[0]),
            )
            for address, node in wanted:
                got = (
                    driver.reserve_address(cluster)
                    if node is None
                    else driver.reserve_machine_address(mids[node.name])
                )
                if got != address:
                    raise RuntimeError(
                        f"the plain side got address {got} where shoal's run had {address}: "
                        f"something holds addresses in {state}"
                    )
            for n in nodes:
                mid = mids[n.name]
                ids.append(mid)
                spec = MachineSpec(mid, n.name, "bench", cluster, "g", n.role, "local", "host",
                                   user_data=n.user_data)  # fmt: skip
                driver.ensure_machine(spec)
            machines_s = max(_created(state, mid) for mid in ids) - wall0

            def all_ready() -> list[str]:
                got = watch.ready()
                return got if len(got) == len(nodes) else []

            ready = _wait("every node Ready (plain)", READY_TIMEOUT_S, POLL_S, all_ready,
                          lambda: f"{watch.last}\n{_machine_logs(state)}")  # fmt: skip
            wall = time.monotonic() - start
            # what the machines were given, read back from their seeds
            given = [(state / "machines" / mid / SEED).read_text() for mid in ids]
            pairs = zip(nodes, given, strict=True)
            fed = _sha([dataclasses.replace(n, user_data=u) for n, u in pairs])
        finally:
            for mid in ids:
                with contextlib.suppress(Exception):
                    driver.delete_machine(mid)
            driver.release_cluster("bench", cluster)
        assert watch.answered is not None and watch.first_ready is not None
        return Run("plain", workers, wall, machines_s, watch.answered - start,
                   watch.first_ready - start, ready, fed)  # fmt: skip

    def _tmp(self) -> Path:
        return Path(tempfile.mkdtemp(dir=self.work, prefix="poller-"))


def _own_cpu(pid: int) -> float:
    """A process's own user + system CPU seconds (not its children's: shoal's machines
    are its children)."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


def _created(state: Path, machine_id: str) -> float:
    """When the driver wrote the machine's record (wall clock), just before starting it."""
    record = json.loads((state / "machines" / machine_id / "machine.json").read_text())
    return float(record["created_at"])


def measure(shapes: tuple[int, ...] = (1,), order: tuple[str, ...] = FULL_ORDER) -> Result:
    """For each shape (workers beside the one master), the runs in `order`."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.harness
    from tests.harness.kubernetes.build import PAUSE_IMAGE, ensure_binaries, images

    kube_bin = ensure_binaries()
    pause = images()[PAUSE_IMAGE]
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-k8s-"))
    result = Result()
    try:
        with Bench(work, kube_bin, pause) as bench:
            env = {"SHOAL_CONFIG": str(bench.config())}
            with Deployment(env_extra=env, host=bench.gateway, workdir=work) as dep:
                result.shoal_log = dep.procs[0].log
                template = bench.template(dep)
                for workers in shapes:
                    for side in order:
                        if side == "plain":
                            run = bench.plain(workers)
                        else:
                            run = bench.through_shoal(dep, template, workers, side)
                        result.runs.append(run)
                        print(f"  1+{workers} {side}: {_fmt([run])}", flush=True)
    finally:
        _keep_log(result, work)
    return result


def _keep_log(result: Result, work: Path) -> None:
    """The serve log outlives the work dir (for a failed run's diagnosis)."""
    if result.shoal_log is not None and result.shoal_log.exists():
        kept = Path(tempfile.gettempdir()) / "shoal-bench-k8s-serve.log"
        shutil.copyfile(result.shoal_log, kept)
        result.shoal_log = kept
    shutil.rmtree(work, ignore_errors=True)


def rows_for(result: Result, shapes: tuple[int, ...]) -> list[Row]:
    rows: list[Row] = []
    for w in shapes:
        plain, shoal = result.of("plain", w), result.of("shoal", w)
        if not plain or not shoal:
            continue
        p, s = sum(r.wall_s for r in plain) / len(plain), sum(r.wall_s for r in shoal) / len(shoal)
        ratio = s / p
        cpu = sum(r.shoal_cpu_s for r in shoal) / len(shoal)
        label = f"kubernetes 1+{w}"
        rows.append(Row(f"{label}: plain script", w + 1, p, note=f"runs {_fmt(plain)}"))
        rows.append(
            Row(
                f"{label}: shoal",
                w + 1,
                s,
                cpu_ms_per_node=1000 * cpu / (w + 1),
                peak_rss_mb=max(r.shoal_rss_mb for r in shoal),
                lower_bound_s=p,
                target=f"ratio <= {TARGET}",
                ok=ratio <= TARGET,
                note=f"runs {_fmt(shoal)}; to every node Ready",
            )
        )
    return rows


def _fmt(runs: list[Run]) -> str:
    """Each run as wall (last machine begun / API answered / first node Ready), seconds."""
    return (
        ", ".join(
            f"{r.wall_s:.1f} ({r.machines_s:.1f}/{r.api_s:.1f}/{r.first_ready_s:.1f})" for r in runs
        )
        + " s"
    )


def kubernetes_ready(shapes: tuple[int, ...] = (1,), quick: bool = False) -> list[Row]:
    """The scenario's rows (a skipped row where the host cannot run it)."""
    missing = missing_prerequisites()
    if missing:
        return [Row("kubernetes", 0, 0.0, note="skipped: " + missing)]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.harness.kubernetes.build import KubernetesUnavailable

    try:
        result = measure(shapes, QUICK_ORDER if quick else FULL_ORDER)
    except KubernetesUnavailable as exc:
        return [Row("kubernetes", 0, 0.0, note=f"skipped: {exc}")]
    return rows_for(result, shapes)


def main() -> None:  # python -m benchmarks.kubernetes: the raw runs as JSON
    result = measure()
    print(json.dumps([dataclasses.asdict(r) for r in result.runs], indent=1))


if __name__ == "__main__":
    main()
