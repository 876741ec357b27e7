"""Issue 27: a fleet on PostgreSQL: many clusters of mixed shapes, several API and
conductor processes, many clients at once.

One run: a fresh PostgreSQL database, `apis` x `shoal serve --no-conductor` and
`conductors` x `shoal conductor`, each with the sim cloud in a child process of
its own (`SHOAL_SIM_OWN_PROCESS`; the sim's world lives in the same PostgreSQL
database, so every process sees one cloud) at the sim's realistic latencies
(50 ms +/- 20 % per call, 20 s boot, 5 s delete; `time_scale` compresses them
for small smoke runs). `clients` threads POST the clusters; then, all at once,
10 % are resized, 5 % upgraded (a rollout to another image) and 20 % deleted.
Meanwhile a probe times single-resource GETs and, when `readers` > 0, that many
clients read lists, clusters, node groups and nodes (one request per client per
`reader_pause_s`). A sampler reads each process's CPU and RSS, and the
PostgreSQL backends of the run's database (pg_stat_activity -> psutil).
"""

from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import psutil
import psycopg

from benchmarks.harness import ZERO_LATENCY, Deployment, check, list_all
from benchmarks.scenarios import Row, _percentiles, _slope
from benchmarks.speedup import PG_ADMIN

AZS = ["az-1", "az-2", "az-3"]


@dataclass(frozen=True)
class Shape:
    name: str
    masters: int
    workers: tuple[int, ...]  # node_count of each worker group

    @property
    def nodes(self) -> int:
        return self.masters + sum(self.workers)

    def body(self) -> dict[str, Any]:
        groups: list[dict[str, Any]] = [
            {"name": "masters", "role": "master", "node_count": self.masters,
             "availability_zones": AZS},
            *({"name": f"workers-{i}", "role": "worker", "node_count": n,
               "availability_zones": AZS} for i, n in enumerate(self.workers)),
        ]  # fmt: skip
        return {
            "name": self.name,
            "coe": "kubernetes",
            "image_id": "fedora-coreos-40",
            "flavor_id": "m1.small",
            "master_flavor_id": "m1.small",
            "node_groups": groups,
            "create_timeout": 600,
        }


def shapes(nodes: int, seed: int = 27) -> list[Shape]:
    """Clusters of 20-500 nodes (1 or 3 masters: odd, 1-4 worker groups), ~100 nodes on
    average (`nodes` / 100 clusters), summing to exactly `nodes`."""
    rng = random.Random(seed)
    count = max(1, round(nodes / 100))
    lo, hi = 20, 500
    if not count * lo <= nodes <= count * hi:
        raise ValueError(f"{nodes} nodes cannot make {count} clusters of {lo}-{hi}")
    # Most clusters small, a few large (a lognormal), scaled to the total and clipped.
    raw = [rng.lognormvariate(0, 0.9) for _ in range(count)]
    scale = nodes / sum(raw)
    sizes = [min(hi, max(lo, round(r * scale))) for r in raw]
    i = 0
    while (gap := nodes - sum(sizes)) != 0:  # spread the rounding/clipping error
        step = 1 if gap > 0 else -1
        if lo <= sizes[i % count] + step <= hi:
            sizes[i % count] += step
        i += 1
    out = []
    for i, size in enumerate(sizes):
        masters = rng.choice([1, 3]) if size >= 40 else 1  # odd: an etcd quorum
        groups = rng.randint(1, 4)
        workers = size - masters
        per = [workers // groups + (1 if g < workers % groups else 0) for g in range(groups)]
        out.append(Shape(f"fleet-{i:04d}", masters, tuple(per)))
    return out


@dataclass(frozen=True)
class Fleet:
    nodes: int = 100_000
    conductors: int = 4
    apis: int = 2
    clients: int = 50
    readers: int = 0
    reader_pause_s: float = 1.0
    time_scale: float = 1.0  # > 1 compresses the sim's latencies (smoke runs)
    extra_env: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str]:
        return {
            **ZERO_LATENCY,
            "SHOAL_SIM_API_LATENCY_MS": "50",
            "SHOAL_SIM_JITTER": "0.2",
            "SHOAL_SIM_BOOT_SECONDS": "20",
            "SHOAL_SIM_DELETE_SECONDS": "5",
            "SHOAL_SIM_TIME_SCALE": f"{self.time_scale:g}",
            "SHOAL_SIM_OWN_PROCESS": "true",
            "SHOAL_CONDUCTOR_REQUEUE_SECONDS": f"{max(0.05, 2.0 / self.time_scale):g}",
            **dict(self.extra_env),
        }


@dataclass
class Sample:
    """What the sampler saw of one process (by pid) or of PostgreSQL's backends."""

    cpu: dict[int, float] = field(default_factory=dict)  # last CPU seconds per pid
    cpu0: dict[int, float] = field(default_factory=dict)  # first (0 for new backends)
    rss: dict[int, float] = field(default_factory=dict)  # peak RSS MB per pid
    pg_connections: int = 0
    xacts: list[int] = field(default_factory=list)  # the database's commits + rollbacks


class Sampler:
    """Every second: the PostgreSQL backends of `dbname` (CPU, count) and the
    deployment's processes' RSS (their own VmHWM is read at the end too)."""

    def __init__(self, url: str) -> None:
        self.admin = psycopg.connect(url, autocommit=True, connect_timeout=3)
        self.dbname = str(self.admin.info.dbname)
        self.pg = Sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._first = True
        self._lock = threading.Lock()  # the sampler's thread and a reading now (`tick`)

    def start(self) -> None:
        self._tick()
        self._first = False
        self._thread.start()

    def stop(self) -> None:
        if self.admin.closed:
            return
        self._stop.set()
        self._thread.join(timeout=10)
        self.tick()
        self.admin.close()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.tick()

    def tick(self) -> None:
        """Sample now (the figures at the end of a phase)."""
        with self._lock:
            self._tick()

    def _tick(self) -> None:
        (xacts,) = self.admin.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (self.dbname,),
        ).fetchone() or (0,)
        self.pg.xacts.append(int(xacts))
        rows = self.admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (self.dbname,),
        ).fetchall()
        self.pg.pg_connections = max(self.pg.pg_connections, len(rows))
        for (pid,) in rows:
            with suppress(psutil.Error):
                t = psutil.Process(pid).cpu_times()
                self.pg.cpu[pid] = t.user + t.system
                if pid not in self.pg.cpu0:
                    self.pg.cpu0[pid] = self.pg.cpu[pid] if self._first else 0.0

    def pg_transactions(self) -> int:
        return self.pg.xacts[-1] - self.pg.xacts[0] if self.pg.xacts else 0

    def pg_cpu_s(self) -> float:
        return sum(v - self.pg.cpu0.get(p, 0.0) for p, v in self.pg.cpu.items())


@dataclass
class Latencies:
    samples: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, kind: str, ms: float) -> None:
        with self.lock:
            self.samples.setdefault(kind, []).append(ms)

    def error(self, what: str) -> None:
        with self.lock:
            self.errors.append(what)


def _timed_get(c: httpx.Client, path: str, kind: str, lat: Latencies, **params: Any) -> Any:
    t = time.perf_counter()
    try:
        r = c.get(path, params=params)
    except httpx.HTTPError as exc:
        lat.error(f"GET {path}: {exc!r}")
        return None
    lat.add(kind, 1000 * (time.perf_counter() - t))
    if r.status_code == 404:  # a cluster deleted meanwhile: an answer, not an error
        return None
    if r.status_code != 200:
        lat.error(f"GET {path}: {r.status_code} {r.text[:200]}")
        return None
    return r.json()


@contextmanager
def background(n: int, loop: Callable[[int, threading.Event], None]) -> Iterator[None]:
    stop = threading.Event()
    threads = [threading.Thread(target=loop, args=(i, stop), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    try:
        yield
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)


def _probe(
    dep: Deployment, uids: list[str], lat: Latencies
) -> Callable[[int, threading.Event], None]:
    """One client timing single-resource GETs (a cluster) every 0.2 s."""

    def loop(i: int, stop: threading.Event) -> None:
        rng = random.Random(i)
        with dep.client(i) as c:
            while not stop.wait(0.2):
                if uids:
                    _timed_get(c, f"/clusters/{rng.choice(uids)}", "probe GET cluster", lat)

    return loop


def _reader(
    dep: Deployment, uids: list[str], lat: Latencies, pause: float
) -> Callable[[int, threading.Event], None]:
    """A dashboard or Terraform: lists, one cluster, its node groups, one group, a page
    of nodes; one request per `pause`."""

    def loop(i: int, stop: threading.Event) -> None:
        rng = random.Random(1000 + i)
        with dep.client(i) as c:
            while not stop.wait(pause * rng.uniform(0.5, 1.5)):
                if not uids:
                    continue
                u = rng.choice(uids)
                kind = rng.choice(["list", "cluster", "nodegroups", "nodegroup", "nodes"])
                if kind == "list":
                    _timed_get(c, "/clusters", "read list clusters", lat, limit=1000)
                elif kind == "cluster":
                    _timed_get(c, f"/clusters/{u}", "read GET cluster", lat)
                elif kind == "nodegroups":
                    _timed_get(c, f"/clusters/{u}/nodegroups", "read list nodegroups", lat)
                elif kind == "nodegroup":
                    _timed_get(c, f"/clusters/{u}/nodegroups/workers-0", "read GET nodegroup", lat)
                else:
                    _timed_get(c, f"/clusters/{u}/nodes", "read nodes page", lat, limit=100)

    return loop


def _wait(
    c: httpx.Client,
    want: dict[str, str],
    t0: float,
    timeout: float,
    lat: Latencies,
    poll: float = 1.0,
) -> dict[str, float]:
    """Poll the cluster list until every uuid has its wanted status ("GONE": absent);
    seconds from `t0` at which each first did (to the poll period)."""
    done: dict[str, float] = {}
    while len(done) < len(want):
        if time.monotonic() - t0 > timeout:
            late = [u for u in want if u not in done]
            raise RuntimeError(
                f"{len(late)} clusters not settled after {timeout:.0f} s: {late[:3]}"
            )
        try:
            by_id = {x["uuid"]: x["status"] for x in list_all(c, "/clusters", "clusters")}
        except (RuntimeError, httpx.HTTPError) as exc:  # counted; the next poll may answer
            lat.error(f"status poll: {exc}"[:300])
            time.sleep(poll)
            continue
        now = time.monotonic() - t0
        for u, w in want.items():
            if u in done:
                continue
            s = by_id.get(u)
            if (w == "GONE" and s is None) or s == w:
                done[u] = now
            elif s is not None and s.endswith("FAILED"):
                raise RuntimeError(f"cluster {u} {s}: {c.get(f'/clusters/{u}').text[:500]}")
        if len(done) < len(want):
            time.sleep(poll)
    return done


@dataclass
class Result:
    fleet: Fleet
    created: int  # nodes
    post_s: float  # first POST -> last POST
    create_s: float  # last POST -> all CREATE_COMPLETE
    phase2: dict[str, float]  # action -> seconds from its start to all of it done
    mutated: dict[str, int]  # action -> clusters
    cpu_own: dict[str, float]  # process label -> CPU s (own, without the sim child)
    cpu_sim: dict[str, float]  # process label -> CPU s of its sim child
    rss: dict[str, float]  # process label (and "<label> sim") -> peak RSS MB
    pg_cpu_s: float
    pg_connections: int
    pg_transactions: int
    lat: Latencies
    errors: list[str]
    # CPU seconds from the first POST to all created: shoal's processes, their sim
    # children, PostgreSQL's backends; and the database's transactions meanwhile.
    create_cpu: tuple[float, float, float, int] = (0.0, 0.0, 0.0, 0)


def _post_all(dep: Deployment, fleet: Fleet, todo: list[Shape]) -> tuple[list[str], float]:
    clients = [dep.client(i) for i in range(fleet.clients)]
    local = threading.local()
    counter = iter(range(len(clients)))
    counter_lock = threading.Lock()

    def post(s: Shape) -> str:
        if not hasattr(local, "c"):
            with counter_lock:
                local.c = clients[next(counter)]
        return str(check(local.c.post("/clusters", json=s.body()), 202)["uuid"])

    try:
        with ThreadPoolExecutor(fleet.clients) as pool:
            uids = list(pool.map(post, todo))
        last = time.monotonic()
    finally:
        for c in clients:
            c.close()
    return uids, last


def _mutate(
    dep: Deployment, fleet: Fleet, todo: list[Shape], uids: list[str]
) -> tuple[dict[str, str], dict[str, str], float]:
    """10 % resized, 5 % upgraded, 20 % deleted (disjoint, chosen at random), all
    at once by `clients` threads; {uuid: wanted status}, {uuid: action}, t0."""
    rng = random.Random(2027)
    order = list(range(len(uids)))
    rng.shuffle(order)
    n = len(uids)
    k_resize, k_upgrade, k_delete = (max(1, round(n * f)) for f in (0.10, 0.05, 0.20))
    plan: list[tuple[str, int]] = [("resize", i) for i in order[:k_resize]]
    plan += [("upgrade", i) for i in order[k_resize : k_resize + k_upgrade]]
    plan += [("delete", i) for i in order[k_resize + k_upgrade : k_resize + k_upgrade + k_delete]]
    rng.shuffle(plan)
    with dep.client() as c:
        check(c.post("/clustertemplates", json={
            "name": "v41", "coe": "kubernetes", "image_id": "fedora-coreos-41"}), 201)  # fmt: skip
    clients = [dep.client(i) for i in range(fleet.clients)]
    local = threading.local()
    counter = iter(range(len(clients)))
    counter_lock = threading.Lock()

    def act(item: tuple[str, int]) -> None:
        if not hasattr(local, "c"):
            with counter_lock:
                local.c = clients[next(counter)]
        c: httpx.Client = local.c
        action, i = item
        u, s = uids[i], todo[i]
        if action == "delete":
            check(c.delete(f"/clusters/{u}"), 204)
        elif action == "resize":  # the first worker group: half grow by 20 %, half shrink
            now = s.workers[0]
            new = max(1, round(now * (1.2 if i % 2 else 0.8)))
            check(c.post(f"/clusters/{u}/actions/resize",
                         json={"node_count": new, "nodegroup": "workers-0"}), 202)  # fmt: skip
        else:  # a rollout in two batches per worker group (Magnum's max_batch_size)
            batch = max(1, math.ceil(max(s.workers) / 2))
            body = {"cluster_template": "v41", "max_batch_size": batch}
            check(c.post(f"/clusters/{u}/actions/upgrade", json=body), 202)

    want = {uids[i]: ("GONE" if a == "delete" else "UPDATE_COMPLETE") for a, i in plan}
    actions = {uids[i]: a for a, i in plan}
    t0 = time.monotonic()
    try:
        with ThreadPoolExecutor(fleet.clients) as pool:
            list(pool.map(act, plan))
    finally:
        for c in clients:
            c.close()
    return want, actions, t0


def _label(dep: Deployment, i: int) -> str:
    return f"api{i}" if i < dep.apis else f"conductor{i - dep.apis}"


def _process_figures(
    dep: Deployment,
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    own: dict[str, float] = {}
    sim: dict[str, float] = {}
    rss: dict[str, float] = {}
    for i, p in enumerate(dep.procs):
        label = _label(dep, i)
        main, *children = p.family()
        t = main.cpu_times()
        own[label] = t.user + t.system
        with open(f"/proc/{main.pid}/status") as f:
            rss[label] = next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmHWM:"))
        sim[label] = 0.0
        for ch in children:
            with suppress(psutil.Error, OSError):
                ct = ch.cpu_times()
                sim[label] += ct.user + ct.system
                with open(f"/proc/{ch.pid}/status") as f:
                    peak = next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmHWM:"))
                rss[f"{label} sim"] = max(rss.get(f"{label} sim", 0.0), peak)
    return own, sim, rss


# Connections kept free on the server beside the run's pools: the sampler's, the
# admin's, a psql an operator opens, and a margin for other clients coming and going.
PG_SPARE = 10
SIM_POOL = 4  # a sim child's calls hold a connection only for their work, not their latency


def pools(max_connections: int, in_use: int, processes: int) -> tuple[int, int]:
    """The most connections each shoal process and each of their sim children may hold
    (SHOAL_DATABASE_POOL_MAX, SHOAL_SIM_DATABASE_POOL_MAX) so that `processes` of them
    (each with a sim child, and a conductor's LISTEN connection beside its pool) stay
    under the server's `max_connections` with `in_use` held by others: PostgreSQL
    refuses a connection past it, where a pool makes a thread wait."""
    free = max_connections - in_use - PG_SPARE
    return max(2, free // processes - SIM_POOL - 1), SIM_POOL


def fleet_run(fleet: Fleet, database_url: str | None = None) -> Result:
    """One fleet workload on `database_url` (an empty database), else on a throwaway
    database of the machine's PostgreSQL (dropped after)."""
    if database_url is not None:
        return _deployed(fleet, database_url)
    admin = psycopg.connect(PG_ADMIN, autocommit=True, connect_timeout=3)
    name = f"shoal_fleet_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        return _deployed(fleet, f"postgresql://postgres@127.0.0.1:5432/{name}")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _sized(fleet: Fleet, url: str) -> Fleet:
    """`fleet` with its processes' pools sized to the server's room (`pools`)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=3) as conn:
        (most,) = conn.execute("SHOW max_connections").fetchone() or (100,)
        (used,) = conn.execute("SELECT count(*) FROM pg_stat_activity").fetchone() or (0,)
    shoal_pool, sim_pool = pools(int(most), int(used), fleet.apis + fleet.conductors)
    print(f"  PostgreSQL: max_connections {most}, {used} in use: at most {shoal_pool} per "
          f"shoal process and {sim_pool} per sim child", flush=True)  # fmt: skip
    return replace(fleet, extra_env=(
        ("SHOAL_DATABASE_POOL_MAX", str(shoal_pool)),
        ("SHOAL_SIM_DATABASE_POOL_MAX", str(sim_pool)),
        *fleet.extra_env,
    ))  # fmt: skip


def _deployed(fleet: Fleet, url: str) -> Result:
    fleet = _sized(fleet, url)
    with Deployment(
        env_extra=fleet.env(), conductors=fleet.conductors, apis=fleet.apis, database_url=url
    ) as dep:
        return _drive(dep, fleet, url)


def _drive(dep: Deployment, fleet: Fleet, url: str) -> Result:
    todo = shapes(fleet.nodes)
    with dep.client() as c:
        deadline = time.monotonic() + 120
        while sum(s["state"] == "up" for s in check(c.get("/mservices"), 200)["mservices"]) < (
            fleet.conductors
        ):  # measure the work, not the processes' start-up
            if time.monotonic() > deadline:
                raise RuntimeError(f"{fleet.conductors} conductors did not report up")
            time.sleep(0.1)
    cpu_before = _process_figures(dep)[:2]
    sampler = Sampler(url)
    sampler.start()
    try:
        return _phases(dep, fleet, todo, cpu_before, sampler)
    finally:
        sampler.stop()


def _phases(
    dep: Deployment,
    fleet: Fleet,
    todo: list[Shape],
    cpu_before: tuple[dict[str, float], dict[str, float]],
    sampler: Sampler,
) -> Result:
    lat = Latencies()
    uids: list[str] = []  # filled as the POSTs return: the readers pick from it
    t_first = time.monotonic()
    with (
        background(1, _probe(dep, uids, lat)),
        background(fleet.readers, _reader(dep, uids, lat, fleet.reader_pause_s)),
    ):
        got, t_last = _post_all(dep, fleet, todo)
        uids += got
        timeout = 600 + fleet.nodes / 50 / max(1, fleet.conductors) * 4 / fleet.time_scale
        with dep.client() as c:
            done = _wait(c, dict.fromkeys(uids, "CREATE_COMPLETE"), t_last, timeout, lat)
        create_s = max(done.values())
        sampler.tick()
        own_c, sim_c, _ = _spent(dep, cpu_before)
        create_cpu = (
            sum(own_c.values()),
            sum(sim_c.values()),
            sampler.pg_cpu_s(),
            sampler.pg_transactions(),
        )
        want, actions, t2 = _mutate(dep, fleet, todo, uids)
        with dep.client() as c:
            done2 = _wait(c, want, t2, timeout, lat)
    sampler.stop()
    own, sim, rss = _spent(dep, cpu_before)
    phase2 = {a: max(done2[u] for u, x in actions.items() if x == a) for a in set(actions.values())}
    mutated = {a: sum(x == a for x in actions.values()) for a in set(actions.values())}
    return Result(
        fleet, sum(s.nodes for s in todo), t_last - t_first, create_s, phase2, mutated,
        own, sim, rss, sampler.pg_cpu_s(), sampler.pg.pg_connections,
        sampler.pg_transactions(), lat, lat.errors, create_cpu,
    )  # fmt: skip


def _spent(
    dep: Deployment, before: tuple[dict[str, float], dict[str, float]]
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """The CPU seconds each process (own, its sim child) spent since `before`, and the
    peak RSS of each."""
    own, sim, rss = _process_figures(dep)
    return (
        {k: v - before[0][k] for k, v in own.items()},
        {k: v - before[1][k] for k, v in sim.items()},
        rss,
    )


def _fmt_ms(values: dict[str, float], n: int) -> str:
    return ", ".join(f"{k} {1000 * v / n:.2f}" for k, v in values.items())


def rows_for(r: Result, label: str, base: Result | None = None) -> list[Row]:
    """The table rows of one run; `base`: the same size's 1-conductor run (speedup)."""
    n, f = r.created, r.fleet
    shoal_cpu = sum(r.cpu_own.values())
    sim_cpu = sum(r.cpu_sim.values())
    max_rss = max(r.rss.values())
    sim_rss = max((v for k, v in r.rss.items() if k.endswith("sim")), default=0.0)
    c_shoal, c_sim, c_pg, c_xacts = r.create_cpu
    rows = [
        Row(
            f"{label}: create, after the last POST",
            n,
            r.create_s,
            1000 * (c_shoal + c_sim + c_pg) / n,
            max_rss,
            target="<= 120 s (100,000 nodes, 4 conductors)" if f.nodes >= 100_000 else "",
            ok=(r.create_s <= 120) if f.nodes >= 100_000 and f.conductors == 4 else None,
            note=f"{len(shapes(f.nodes))} clusters by {f.clients} clients, POSTs took "
            f"{r.post_s:.1f} s; {f.apis} API + {f.conductors} conductor processes; "
            f"CPU ms/node while creating (the CPU column: all of it): shoal "
            f"{1000 * c_shoal / n:.2f}, sim {1000 * c_sim / n:.2f}, PostgreSQL "
            f"{1000 * c_pg / n:.2f}; {c_xacts / n:.1f} transactions/node"
            + (f"; {f.readers} readers" if f.readers else "")
            + (f"; sim x{f.time_scale:g}" if f.time_scale != 1 else ""),
        )
    ]
    for a in ("resize", "upgrade", "delete"):
        if a in r.phase2:
            note = "all at once, timed from the first of these requests"
            rows.append(Row(f"{label}: {a} {r.mutated[a]} clusters", n, r.phase2[a], note=note))
    rows.append(
        Row(
            f"{label}: CPU ms/node per process",
            n,
            0.0,
            1000 * (shoal_cpu + sim_cpu + r.pg_cpu_s) / n,
            target="",
            note=f"shoal {_fmt_ms(r.cpu_own, n)}; their sim children "
            f"{1000 * sim_cpu / n:.2f}; PostgreSQL backends {1000 * r.pg_cpu_s / n:.2f} "
            f"(CPU column: all of it); {r.pg_transactions / n:.1f} transactions/node",
        )
    )
    rows.append(
        Row(
            f"{label}: peak RSS per process (MB)",
            n,
            0.0,
            peak_rss_mb=max_rss,
            target="<= 1024 MB each",
            ok=max_rss <= 1024,
            note=", ".join(f"{k} {v:.0f}" for k, v in r.rss.items() if not k.endswith("sim"))
            + f"; sim children <= {sim_rss:.0f}"
            + f"; PostgreSQL connections (peak) {r.pg_connections}"
            + "".join(f"; {k} {v}" for k, v in r.fleet.extra_env if k.endswith("POOL_MAX")),
        )
    )
    for kind, samples in sorted(r.lat.samples.items()):
        p50, p99 = _percentiles(samples)
        single = "GET" in kind
        judged = single and f.nodes >= 100_000  # a small fleet's p99 is the machine's noise
        rows.append(
            Row(
                f"{label}: {kind} (ms p99)",
                len(samples),
                p99,
                target="p99 <= 200 ms" if single else "",
                ok=(p99 <= 200) if judged else None,
                note=f"p50 {p50:.1f} ms, {len(samples)} requests"
                + ("" if judged or not single else "; information below 100,000 nodes"),
            )
        )
    rows.append(
        Row(
            f"{label}: errors",
            len(r.errors),
            0.0,
            target="0",
            ok=not r.errors,
            note="; ".join(r.errors[:3]),
        )
    )
    if base is not None and base is not r:
        x = (base.post_s + base.create_s) / (r.post_s + r.create_s)
        rows[0].note += f"; speedup x{x:.2f} vs 1 conductor"
    return rows


@dataclass(frozen=True)
class Plan:
    nodes: int = 100_000
    small: int = 10_000  # the second size, for the growth exponent (0: none)
    conductors: tuple[int, ...] = (4, 2, 1)
    readers: int = 64
    time_scale: float = 1.0


def _show(rows: list[Row]) -> None:
    """One run's rows at once (a full fleet runs for hours): the table comes at the end."""
    for r in rows:
        print(f"  {r.scenario}: {r.wall_s:.2f}; CPU ms/node {r.cpu_ms_per_node}; "
              f"RSS {r.peak_rss_mb}; ok {r.ok}; {r.note}", flush=True)  # fmt: skip


def fleet_bench(plan: Plan) -> list[Row]:
    """The whole scenario: the full size with each conductor count, with readers
    beside the first, and the small size for the growth exponent."""
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
    except psycopg.Error as exc:
        return [Row("fleet", 0, 0, note=f"skipped: PostgreSQL unreachable ({exc})")]
    full = plan.nodes >= 100_000  # the ratios' targets are for the issue's size

    def judged(row: Row) -> Row:
        if not full and row.ok is not None:
            row.note = f"information below 100,000 nodes (target {row.target}); {row.note}"
            row.ok = None
        return row

    rows: list[Row] = []
    runs: dict[int, Result] = {}
    for k in plan.conductors:
        runs[k] = fleet_run(Fleet(plan.nodes, conductors=k, time_scale=plan.time_scale))
        _show(rows_for(runs[k], f"fleet {k}c"))
    base = runs.get(1)
    for k, r in runs.items():
        rows += rows_for(r, f"fleet {k}c", base)
    first = plan.conductors[0]
    if base is not None and first != 1:
        s = (base.post_s + base.create_s) / (runs[first].post_s + runs[first].create_s)
        rows.append(judged(Row(f"fleet speedup {first} vs 1 conductor (create)", plan.nodes, s,
                               target=">= 3", ok=s >= 3,
                               note="first POST -> all CREATE_COMPLETE")))  # fmt: skip
    if plan.readers:
        read = fleet_run(Fleet(plan.nodes, conductors=first, readers=plan.readers,
                               time_scale=plan.time_scale))  # fmt: skip
        rows += rows_for(read, f"fleet {first}c + {plan.readers} readers")
        _show(rows_for(read, f"fleet {first}c + {plan.readers} readers"))
        quiet = runs[first]
        slow = (read.post_s + read.create_s) / (quiet.post_s + quiet.create_s)
        rows.append(judged(Row("fleet: readers' cost to the conductors (create)", plan.nodes,
                               slow, target="<= 1.20", ok=slow <= 1.20,
                               note=f"time with {plan.readers} readers / without")))  # fmt: skip
    if plan.small:
        small = fleet_run(Fleet(plan.small, conductors=first, time_scale=plan.time_scale))
        rows += rows_for(small, f"fleet {first}c small")
        big = runs[first]
        ns = [float(small.created), float(big.created)]
        cpu = [sum(small.cpu_own.values()), sum(big.cpu_own.values())]
        wall = [small.post_s + small.create_s, big.post_s + big.create_s]
        e = _slope(ns, cpu)
        rows.append(judged(Row("fleet growth exponent (shoal CPU)", big.created, e,
                               target="<= 1.1", ok=e <= 1.1,
                               note=f"wall exponent {_slope(ns, wall):.2f}; "
                               f"N = {small.created}, {big.created}")))  # fmt: skip
    return rows


# `--quick`: a small fleet (4 clusters), 4 conductors with and without 16 readers, the
# sim's latencies compressed x20 (a boot of 1 s).
QUICK = Plan(nodes=400, small=0, conductors=(4,), readers=16, time_scale=20.0)
