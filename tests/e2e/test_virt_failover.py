"""A lost virt host's VMs fail over with the default health policy, through a real
`shoal serve` (embedded default: the sim and its `vms` provider) and the real
`shoal` command: the host dies behind shoal's back (the sim's admin API deletes its
server), and the master VM and worker VM it carried come back on the surviving
host while the host group gets a new host; no group stops its repairs and the
cluster never reads FAILED."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled

OPEN_SLOTS = [{"id": f"s{i}", "cpu": 2, "ram": 4} for i in range(6)]


def test_a_lost_hosts_vms_fail_over_with_the_default_policy(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = shoal_env(tmp_path / "data", SHOAL_URL=url)
    vms = tmp_path / "vms.json"
    vms.write_text(json.dumps(OPEN_SLOTS))

    def shoal(*argv: str) -> str:
        done = subprocess.run(
            [SHOAL, *argv], env=env, capture_output=True, text=True, timeout=scaled(300),
            check=False,
        )  # fmt: skip
        assert done.returncode == 0, f"shoal {' '.join(argv)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    with serving(env, port, tmp_path / "serve.log"):
        c = httpx.Client(base_url=f"{url}/v1", headers=admin_headers(env), timeout=30)
        shoal(
            "cluster", "create", "lone", "--image", "fedora-coreos-40", "--flavor", "m1.small",
            "-n", "name=m,role=master,provider=vms,count=1",
            "-n", "name=w,provider=vms,count=1",
            "-n", f"name=hosts,role=virt,flavor=bm.large,count=2,vms=@{vms}",
            "--wait",
        )  # fmt: skip

        def nodes(group: str) -> list[dict[str, Any]]:
            r = c.get("/clusters/lone/nodes", params={"nodegroup": group})
            return list(r.json()["nodes"])

        groups = c.get("/clusters/lone/nodegroups/detail").json()["nodegroups"]
        policies = {g["name"]: g.get("health_policy") or {} for g in groups}
        assert all(p.get("max_unhealthy_percent", 40) == 40 for p in policies.values()), (
            policies
        )  # the defaults
        (master,) = nodes("m")
        victim = next(h for h in nodes("hosts") if h["name"] == master["availability_zone"])
        lost = {
            n["uuid"] for n in nodes("m") + nodes("w") if n["availability_zone"] == victim["name"]
        }
        assert master["uuid"] in lost

        assert c.delete(f"/sim/servers/{victim['uuid']}").status_code == 204  # the host dies

        reasons: set[str] = set()
        deadline = time.monotonic() + scaled(180)
        while True:
            cluster = c.get("/clusters/lone").json()
            assert not cluster["status"].endswith("FAILED"), cluster
            for g in c.get("/clusters/lone/nodegroups/detail").json()["nodegroups"]:
                reasons.add(g.get("status_reason") or "")
            hosts = nodes("hosts")
            vm_nodes = nodes("m") + nodes("w")
            names = {h["name"] for h in hosts}
            if (
                len(hosts) == 2
                and victim["name"] not in names
                and len(vm_nodes) == 2
                and not lost & {n["uuid"] for n in vm_nodes}
                and all(n["availability_zone"] in names for n in vm_nodes)
                and all(n["state"] == "ACTIVE" for n in hosts + vm_nodes)
                and cluster["status"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
            ):
                break
            assert time.monotonic() < deadline, (cluster, hosts, vm_nodes, sorted(reasons))
            time.sleep(0.2)
        assert not [r for r in reasons if "repairs stopped" in r], sorted(reasons)
        events = c.get("/clusters/lone/events").json()["events"]
        repairs = [e["message"] for e in events if e.get("reason") == "Repairing"]
        # Each lost VM went to another host as soon as shoal knew its host was down,
        # not after a reboot's and a rebuild's time (300 s each by default). A VM
        # may be rebooted first when its group sees it fail before the host group
        # has seen its host go.
        moved = [m for m in repairs if "replacing it on another host" in m]
        assert len(moved) == len(lost), repairs
        assert not [m for m in repairs if "rebuilding" in m], repairs
