"""Issue 16's benchmark: shoal on real Nova against a plain openstacksdk loop, side by
side in one run on the same cloud (tests/harness/openstack: Keystone, Glance,
Placement, Nova with the fake driver, on this machine).

For each N:
(a) a plain concurrent loop: `concurrency` threads of openstacksdk; each creates a
    server and polls it until ACTIVE (openstacksdk's `wait_for_server`, its default
    2 s interval), then, once all are up, each deletes one and polls until it is gone;
(b) shoal (a real `shoal serve`, the openstack provider with the same concurrency)
    creates a node group of N (in a cluster whose master exists already) until the
    group is CREATE_COMPLETE, then deletes it until it is gone.
Both put their servers in one soft-anti-affinity server group (shoal's default for
workers) with the same flavor, image, network, tags, metadata and size of user data,
so Nova does the same work. Each N runs three rounds, (a) then (b). Printed: each
side's fastest round (the one least slowed by whatever else the machine runs; every
round is in the note), CPU per node (shoal's server process; the loop's own
process), the ratio b/a (target: at most 1.10 for N = 50), and the CPU the cloud's
services spent on each side (median of the rounds): Nova runs in one process, so
its CPU bounds how fast it builds, and it is steadier than wall time on a shared
machine.

Run it with `./run bench openstack` (`--quick`: N = 5, one round).
"""

from __future__ import annotations

import base64
import contextlib
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from benchmarks.harness import Deployment, check
from benchmarks.scenarios import Row

TARGET = 1.10
POLL_S = 2.0  # openstacksdk's wait_for_server default; shoal's requeue_seconds default


def _plain(cloud: Any, conn: Any, n: int, concurrency: int) -> Side:
    """(a): create and wait ACTIVE, then delete and wait gone."""
    group = conn.compute.create_server_group(
        name=f"plain-{uuid.uuid4().hex[:6]}", policy="soft-anti-affinity"
    )
    tag = f"plain-{uuid.uuid4().hex[:8]}"

    def create(i: int) -> Any:
        # What shoal sends for a node: five tags, the same as metadata with the image and
        # flavor names, and user data of the size of shoal's bootstrap data.
        labels = {
            "shoal-deployment": tag,
            "shoal-project": conn.current_project_id,
            "shoal-cluster": str(uuid.uuid4()),
            "shoal-nodegroup": str(uuid.uuid4()),
            "shoal-node": str(uuid.uuid4()),
        }
        server = conn.compute.create_server(
            name=f"{tag}-{i}",
            flavor_id=cloud.flavor_small.id,
            image_id=cloud.image_id,
            networks=[{"uuid": cloud.network_id}],
            tags=[f"{k}={v}" for k, v in labels.items()],
            metadata={**labels, "shoal-image": cloud.image_name, "shoal-flavor": "m1.small"},
            user_data=base64.b64encode(b"#cloud-config\n" + b"#" * 600 + b"\n").decode(),
            scheduler_hints={"group": group.id},
        )
        return conn.compute.wait_for_server(
            server, status="ACTIVE", failures=["ERROR"], interval=POLL_S, wait=600
        )

    def delete(server: Any) -> None:
        conn.compute.delete_server(server)
        conn.compute.wait_for_delete(server, interval=POLL_S, wait=600)

    side = Side()
    with ThreadPoolExecutor(concurrency) as pool:
        with side.phase("create", time.process_time, cloud):
            servers = list(pool.map(create, range(n)))
        with side.phase("delete", time.process_time, cloud):
            list(pool.map(delete, servers))
    conn.compute.delete_server_group(group)
    return side


def _shoal(dep: Deployment, cloud: Any, n: int) -> Side:
    """(b): a node group of N created, then deleted."""
    side = Side()
    with dep.client() as c:
        ng = {
            "name": f"w{n}",
            "flavor_id": cloud.flavor_small.name,
            "node_count": n,
            "role": "worker",
        }
        with side.phase("create", dep.cpu_seconds, cloud):
            check(c.post("/clusters/bench/nodegroups", json=ng), 202)
            _until(c, f"/clusters/bench/nodegroups/w{n}", "CREATE_COMPLETE")
        with side.phase("delete", dep.cpu_seconds, cloud):
            check(c.delete(f"/clusters/bench/nodegroups/w{n}"), 204)
            _until(c, f"/clusters/bench/nodegroups/w{n}", None)
    return side


@dataclass
class Side:
    """One side's round: per phase, wall seconds, its own CPU seconds, and the CPU
    seconds of the cloud's services (Nova is one process, so its CPU is what bounds
    how fast it builds: a side that makes Nova work more would show it here)."""

    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    cloud: dict[str, float] = field(default_factory=dict)

    @contextlib.contextmanager
    def phase(self, name: str, cpu: Callable[[], float], cloud: Any) -> Iterator[None]:
        cpu0, cloud0, t0 = cpu(), _cloud_cpu(cloud), time.monotonic()
        yield
        self.wall[name] = time.monotonic() - t0
        self.cpu[name] = cpu() - cpu0
        self.cloud[name] = _cloud_cpu(cloud) - cloud0


def _cloud_cpu(cloud: Any) -> float:
    """CPU seconds of every process of the cloud's services so far."""
    total = 0.0
    for pid in cloud.pids().values():
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            for p in (proc, *proc.children(recursive=True)):
                with contextlib.suppress(psutil.NoSuchProcess):
                    t = p.cpu_times()
                    total += t.user + t.system
    return total


def _until(c: Any, path: str, status: str | None, timeout: float = 600.0) -> None:
    """Poll shoal's API (every 0.2 s) until the group has `status` (None: gone)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = c.get(path)
        if status is None and r.status_code == 404:
            return
        if r.status_code == 200:
            got = r.json()["status"]
            if got == status:
                return
            if got.endswith("FAILED"):
                raise RuntimeError(f"{path}: {got} {r.json().get('status_reason')}")
        time.sleep(0.2)
    raise RuntimeError(f"{path} not {status or 'gone'} after {timeout}s")


def _deployment(cloud: Any, project: Any, work: Path, concurrency: int) -> Deployment:
    clouds = project.clouds_yaml(work / "clouds.yaml")
    provider = {
        "name": "nova",
        "driver": "openstack",
        "concurrency": concurrency,
        "settings": {"cloud": project.entry, "clouds_yaml": str(clouds), "deployment": "bench"},
    }
    config = work / "shoal.yaml"
    config.write_text(yaml.safe_dump({"providers": [provider]}))
    return Deployment(env_extra={"SHOAL_CONFIG": str(config)}, workdir=work)


def nova_side_by_side(ns: list[int], concurrency: int = 10, rounds: int = 3) -> list[Row]:
    """The rows of (a) and (b) for each N, on one OpenStack test cloud. Each N runs
    `rounds` times, (a) then (b); the table shows each side's fastest round (the one
    least slowed by whatever else the machine runs), the note every round."""
    from tests.harness.openstack.cloud import OpenStackCloud
    from tests.support.openstack_project import shoal_project

    rows: list[Row] = []
    with OpenStackCloud() as cloud:
        project = shoal_project(cloud, "bench")
        conn = cloud.connection(project.creds)
        work = Path(cloud.work_dir or ".") / "bench"
        work.mkdir(parents=True, exist_ok=True)
        with _deployment(cloud, project, work, concurrency) as dep, dep.client() as c:
            master = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
            body = {
                "name": "bench",
                "image_id": cloud.image_name,
                "fixed_network": cloud.network_id,  # as the plain loop names it
                "node_groups": [master],
            }
            check(c.post("/clusters", json=body), 202)
            _until(c, "/clusters/bench", "CREATE_COMPLETE")
            for n in ns:
                plain: list[Side] = []
                shoal: list[Side] = []
                for _ in range(rounds):
                    plain.append(_plain(cloud, conn, n, concurrency))
                    shoal.append(_shoal(dep, cloud, n))
                rows += _rows(n, concurrency, plain, shoal)
        conn.close()
    return rows


def _rows(n: int, concurrency: int, plain: list[Side], shoal: list[Side]) -> list[Row]:
    rows = []
    for phase in ("create", "delete"):
        a = min(plain, key=lambda r: r.wall[phase])
        b = min(shoal, key=lambda r: r.wall[phase])
        a_walls = "/".join(f"{r.wall[phase]:.1f}" for r in plain)
        b_walls = "/".join(f"{r.wall[phase]:.1f}" for r in shoal)
        a_cloud = statistics.median(r.cloud[phase] for r in plain)
        b_cloud = statistics.median(r.cloud[phase] for r in shoal)
        ratio = b.wall[phase] / a.wall[phase]
        rows += [
            Row(f"nova plain sdk {phase}", n, a.wall[phase], 1000 * a.cpu[phase] / n,
                note=f"concurrency {concurrency}, polls every {POLL_S:g} s; CPU: the loop's "
                f"process; the cloud's CPU {a_cloud:.1f} s"),
            Row(f"nova shoal {phase}", n, b.wall[phase], 1000 * b.cpu[phase] / n,
                lower_bound_s=a.wall[phase], target=f"b/a <= {TARGET}",
                ok=ratio <= TARGET if n >= 50 else None,
                note=f"rounds a {a_walls}, b {b_walls} s; the cloud's CPU {b_cloud:.1f} s "
                f"(b/a {b_cloud / a_cloud:.2f})"),
        ]  # fmt: skip
    return rows
