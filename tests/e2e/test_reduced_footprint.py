"""Reduced footprint, grown into HA, through a real `shoal serve` (embedded default:
the sim and its `vms` provider) and the real `shoal` command: one virt host carries
three master VMs and two worker VMs; two more hosts join; the masters move one per
host, one at a time, with at least two masters up at every poll (etcd keeps its
quorum) and the API address never lost."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port

LATEST = {"OpenStack-API-Version": "container-infra latest"}


def slots(ids: list[str], group: str, host: int | None = None) -> list[dict[str, Any]]:
    extra = {} if host is None else {"host": host}
    return [{"id": i, "cpu": 2, "ram": 4, "nodegroup": group, **extra} for i in ids]


def test_one_host_grows_to_three_with_masters_spread_and_quorum_kept(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # time scale 20: a master is down about 1 s while it moves, long enough to be seen loaded
    env = shoal_env(tmp_path / "data", SHOAL_SIM_TIME_SCALE="20", SHOAL_URL=url)
    vms = tmp_path / "vms.json"
    vms.write_text(json.dumps(slots(["m0", "m1", "m2"], "m") + slots(["w0", "w1"], "w")))

    def shoal(*argv: str, timeout: float = 300) -> str:
        done = subprocess.run(
            [SHOAL, *argv], env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
        assert done.returncode == 0, f"shoal {' '.join(argv)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    with serving(env, port, tmp_path / "serve.log"):
        auth = admin_headers(env)
        c = httpx.Client(base_url=f"{url}/v1", headers=auth, timeout=30)
        shoal(
            "cluster", "create", "edge", "--image", "fedora-coreos-40", "--flavor", "m1.small",
            "-n", "name=m,role=master,provider=vms,count=3",
            "-n", "name=w,provider=vms,count=2",
            "-n", f"name=hosts,role=virt,flavor=bm.large,count=1,vms=@{vms}",
            "--wait",
        )  # fmt: skip

        def nodes(group: str) -> list[dict[str, Any]]:
            return list(c.get("/clusters/edge/nodes", params={"nodegroup": group}).json()["nodes"])

        (first,) = nodes("hosts")
        assert {n["availability_zone"] for n in nodes("m") + nodes("w")} == {first["name"]}
        api = c.get("/clusters/edge").json()["api_address"]
        assert api

        shoal("cluster", "resize", "edge", "3", "-g", "hosts", "--wait")
        more = slots(["m0", "m1", "m2"], "m") + slots(["w0", "w1"], "w")
        more += slots(["m3"], "m", host=1) + slots(["m4"], "m", host=2)
        vms.write_text(json.dumps(more))
        shoal("nodegroup", "update", "edge", "hosts", "--set", f"vms=@{vms}")

        movers = [n["name"] for n in nodes("m")][1:]  # two of the three move
        out = tmp_path / "op.out"
        with out.open("w") as sink:
            op = subprocess.Popen(
                [SHOAL, "operation", "start", "edge", "replace", "-g", "m",
                 "-n", movers[0], "-n", movers[1], "--batch-size", "1", "--wait"],
                env=env, stdout=sink, stderr=subprocess.STDOUT,
            )  # fmt: skip
            deadline = time.monotonic() + 300
            least = 3
            while op.poll() is None:
                assert time.monotonic() < deadline, "the masters did not move"
                up = [n for n in nodes("m") if n["state"] == "ACTIVE"]
                least = min(least, len(up))
                assert len(up) >= 2, f"quorum lost: {[n['name'] for n in up]} up"
                assert c.get("/clusters/edge").json()["api_address"], "the API address was lost"
                time.sleep(0.1)
        assert op.returncode == 0, out.read_text()
        assert least == 2  # one master down at a time, and the test saw it

        hosts = {n["name"] for n in nodes("hosts")}
        masters = nodes("m")
        assert len(masters) == 3 and {n["availability_zone"] for n in masters} == hosts
        assert {n["vm"] for n in masters} == {"m0", "m3", "m4"}
        shoal("cluster", "watch", "edge", "--interval", "0.2", timeout=120)  # until it settles
        cluster = c.get("/clusters/edge").json()
        assert cluster["status"] == "UPDATE_COMPLETE" and cluster["health_status"] == "HEALTHY"
        # The domain XML each master VM was made with holds its slot's size.
        for n in masters:
            server = c.get(f"/sim/servers/{n['uuid']}").json()
            assert "<vcpu>2</vcpu>" in server["domain_xml"]
            assert "<memory unit='MiB'>4096</memory>" in server["domain_xml"]
