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
workers) with the same flavor, image, network, tags and metadata, so Nova does the
same work. Printed: wall times, CPU per node (shoal's server process; the loop's own
process), and the ratio b/a (target: at most 1.10 for N = 50), from each side's
fastest of its rounds.
"""

from __future__ import annotations

import base64
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness import Deployment, check
from benchmarks.scenarios import Row

TARGET = 1.10
POLL_S = 2.0  # openstacksdk's wait_for_server default; shoal's requeue_seconds default


def _plain(cloud: Any, conn: Any, n: int, concurrency: int) -> tuple[float, float, float]:
    """(a): create and wait ACTIVE, then delete and wait gone; walls and CPU seconds."""
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

    with ThreadPoolExecutor(concurrency) as pool:
        cpu0, t0 = time.process_time(), time.monotonic()
        servers = list(pool.map(create, range(n)))
        create_wall = time.monotonic() - t0
        t1 = time.monotonic()
        list(pool.map(delete, servers))
        delete_wall = time.monotonic() - t1
        cpu = time.process_time() - cpu0
    conn.compute.delete_server_group(group)
    return create_wall, delete_wall, cpu


def _shoal(dep: Deployment, cloud: Any, n: int) -> tuple[float, float, float, float]:
    """(b): a node group of N created, then deleted; walls and CPU seconds of each."""
    with dep.client() as c:
        ng = {
            "name": f"w{n}",
            "flavor_id": cloud.flavor_small.name,
            "node_count": n,
            "role": "worker",
        }
        cpu0, t0 = dep.cpu_seconds(), time.monotonic()
        check(c.post("/clusters/bench/nodegroups", json=ng), 202)
        _until(c, f"/clusters/bench/nodegroups/w{n}", "CREATE_COMPLETE")
        create_wall, cpu1 = time.monotonic() - t0, dep.cpu_seconds()
        t1 = time.monotonic()
        check(c.delete(f"/clusters/bench/nodegroups/w{n}"), 204)
        _until(c, f"/clusters/bench/nodegroups/w{n}", None)
        delete_wall, cpu2 = time.monotonic() - t1, dep.cpu_seconds()
    return create_wall, delete_wall, cpu1 - cpu0, cpu2 - cpu1


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
                plain: list[tuple[float, float, float]] = []
                shoal: list[tuple[float, float, float, float]] = []
                for _ in range(rounds):
                    plain.append(_plain(cloud, conn, n, concurrency))
                    shoal.append(_shoal(dep, cloud, n))
                rows += _rows(n, concurrency, plain, shoal)
        conn.close()
    return rows


def _rows(
    n: int,
    concurrency: int,
    plain: list[tuple[float, float, float]],
    shoal: list[tuple[float, float, float, float]],
) -> list[Row]:
    a_create = min(p[0] for p in plain)
    a_delete = min(p[1] for p in plain)
    a_cpu = min(p[2] for p in plain)
    b_create = min(s[0] for s in shoal)
    b_delete = min(s[1] for s in shoal)
    b_cpu_create = min(s[2] for s in shoal)
    b_cpu_delete = min(s[3] for s in shoal)

    def walls(values: list[float]) -> str:
        return "/".join(f"{v:.1f}" for v in values)

    creates = f"rounds: a {walls([p[0] for p in plain])}, b {walls([s[0] for s in shoal])} s"
    deletes = f"rounds: a {walls([p[1] for p in plain])}, b {walls([s[1] for s in shoal])} s"
    target = f"b/a <= {TARGET}"
    return [
        Row("nova plain sdk create", n, a_create, 1000 * a_cpu / n,
            note=f"concurrency {concurrency}, polls every {POLL_S:g} s; CPU: the loop's "
            "process, create and delete"),
        Row("nova shoal create", n, b_create, 1000 * b_cpu_create / n, lower_bound_s=a_create,
            target=target, ok=b_create / a_create <= TARGET if n >= 50 else None, note=creates),
        Row("nova plain sdk delete", n, a_delete, note=f"concurrency {concurrency}"),
        Row("nova shoal delete", n, b_delete, 1000 * b_cpu_delete / n, lower_bound_s=a_delete,
            target=target, ok=b_delete / a_delete <= TARGET if n >= 50 else None, note=deletes),
    ]  # fmt: skip
