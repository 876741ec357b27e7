"""shoal on real Heat (issue 25): a real `shoal serve` whose provider is of kind `heat` on
the OpenStack test cloud (Heat beside Nova), driven by `openstack coe`, checked from
Heat's and Nova's side: each node group is one stack whose `kube_minions` members are
its nodes' servers, and the node group's stack_id is the stack's id; a node named by
its server id is removed exactly (that index, that
server, nothing else); deleting the cluster deletes its stacks and their servers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from shoal.drivers.heat import members as mb
from tests.harness.openstack.cloud import OpenStackCloud
from tests.support.openstack_cli import OPENSTACK, coe_env
from tests.support.openstack_cloud import OPENSTACK_MARKS
from tests.support.process import admin_token
from tests.support.shoal_on_nova import ShoalOnNova, shoal_on_nova

pytestmark = [
    *OPENSTACK_MARKS,
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:openstack"),
]


def coe(s: ShoalOnNova, *args: str) -> Any:
    """`openstack coe ...` against the deployment, as its admin (admin_token plugin)."""
    cmd = [OPENSTACK, "--os-auth-type", "admin_token", "--os-endpoint", s.url + "/v1",
           "--os-token", admin_token(s.env()), "coe", *args]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=coe_env())
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return json.loads(done.stdout) if "-f" in args else done.stdout


def stack_of(s: ShoalOnNova, group_uuid: str) -> Any:
    """The group's stack, as its project's user sees it in Heat."""
    conn = s.cloud.connection(s.project.creds)
    try:
        return conn.orchestration.find_stack(mb.stack_name(s.deployment, group_uuid))
    finally:
        conn.close()


def refs_map(s: ShoalOnNova, group_uuid: str) -> dict[str, str]:
    conn = s.cloud.connection(s.project.creds)
    try:
        stack = conn.orchestration.get_stack(mb.stack_name(s.deployment, group_uuid))
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs}
        return dict(outputs["refs_map"] or {})
    finally:
        conn.close()


def test_a_cluster_through_openstack_coe_on_heat(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    cloud = openstack_heat
    with shoal_on_nova(cloud, tmp_path, driver="heat") as s:
        coe(s, "cluster", "template", "create", "heat-k8s", "--coe", "kubernetes",
            "--image", cloud.image_name, "--external-network", "public",
            "--flavor", "m1.small", "--master-flavor", "m1.small")  # fmt: skip
        coe(s, "cluster", "create", "hc", "--cluster-template", "heat-k8s",
            "--master-count", "1", "--node-count", "3")  # fmt: skip
        s.wait_status("hc", "CREATE_COMPLETE", timeout=300)
        groups = {g["name"]: g for g in coe(s, "nodegroup", "list", "hc", "-f", "json")}
        assert set(groups) == {"default-master", "default-worker"}
        nodes = {n["uuid"]: n for n in s.nodes("hc")}
        servers = {sv.metadata["shoal-node"]: sv for sv in s.servers()}
        assert set(servers) == set(nodes)  # one server per node, no other
        for uid, node in nodes.items():
            assert servers[uid].name == node["name"] and servers[uid].status == "ACTIVE"
        workers = s.nodes("hc", "default-worker")
        worker_group = groups["default-worker"]["uuid"]
        stack = stack_of(s, worker_group)
        assert stack is not None and stack.status in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
        # The node group's stack_id is its real stack (what the autoscaler reads).
        shown = coe(s, "nodegroup", "show", "hc", "default-worker", "-f", "json")
        assert shown["stack_id"] == stack.id
        before = refs_map(s, worker_group)
        assert sorted(before.values()) == sorted(servers[n["uuid"]].id for n in workers)

        victim = servers[workers[1]["uuid"]]  # by its Nova server id, as the autoscaler does
        coe(s, "cluster", "resize", "hc", "2", "--nodegroup", "default-worker",
            "--nodes-to-remove", victim.id)  # fmt: skip
        s.wait(lambda: victim.id not in {sv.id for sv in s.servers()}, "the server removed")
        s.wait_status("hc", "UPDATE_COMPLETE", timeout=300)
        after = refs_map(s, worker_group)
        gone = [i for i, ref in before.items() if ref == victim.id]
        assert after == {i: ref for i, ref in before.items() if i not in gone}  # exactly it
        left = {n["uuid"] for n in s.nodes("hc", "default-worker")}
        assert left == {n["uuid"] for n in workers} - {workers[1]["uuid"]}

        coe(s, "cluster", "delete", "hc")
        s.wait_status("hc", "GONE", timeout=300)
        assert s.project.wait_empty() == []
        for g in groups.values():
            assert stack_of(s, g["uuid"]) is None


EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "heat-group.yaml"


def test_an_operators_template_is_used(openstack_heat: OpenStackCloud, tmp_path: Path) -> None:
    """docs/examples/heat-group.yaml (docs/drivers.md's example): the group's stack is made
    from it, with its extra resource and output, and its members are the group's."""
    from shoal.drivers.contract import GroupRequest, MachineSpec, MachineState
    from shoal.drivers.heat.cloud import Cloud, load
    from shoal.drivers.heat.driver import HeatDriver
    from shoal.drivers.heat.settings import HeatSettings
    from tests.support.openstack_project import shoal_project

    cloud = openstack_heat
    project = shoal_project(cloud, "heat-tpl")
    settings = HeatSettings(
        cloud=project.entry,
        clouds_yaml=str(project.clouds_yaml(tmp_path / "clouds.yaml")),
        deployment="tpl",
        template=str(EXAMPLE),
    )
    assert settings.problems() == []
    the_cloud = Cloud(load(settings))
    driver = HeatDriver(settings, the_cloud)
    driver.check()
    specs = tuple(
        MachineSpec(
            machine_id=f"m{n}-{project.name}",
            name=f"tpl-{n}",
            project_id="p",
            cluster_id="c",
            nodegroup_id="g",
            role="worker",
            flavor_id=cloud.flavor_small.name,
            image_id=cloud.image_name,
            availability_zone="az1",
        )  # fmt: skip
        for n in range(2)
    )
    driver.apply_group(GroupRequest("g", "p", "c", specs))
    s = ShoalOnNova(cloud, project, tmp_path, "tpl")
    s.wait(
        lambda: [m.state for m in driver.list_machines({})] == [MachineState.ACTIVE] * 2,
        "both members active",
    )
    machines, report = driver.list_group("g", {})
    assert {m.name for m in machines} == {"tpl-0", "tpl-1"}
    assert report.ref is not None
    name = mb.stack_name("tpl", "g")
    assert the_cloud.output(name, report.ref, "site") == "rack-7"
    refs = the_cloud.output(name, report.ref, "refs_map")
    assert sorted(refs.values()) == sorted(m.provider_id for m in machines)
    driver.delete_group("g")
    s.wait(lambda: driver.list_machines({}) == [], "the stack gone")
    the_cloud.close()


def test_a_template_without_the_contract_is_refused_naming_what_it_lacks(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    from tests.support.openstack_project import shoal_project
    from tests.support.process import SHOAL

    bad = tmp_path / "bad.yaml"
    text = EXAMPLE.read_text().replace("  members: {type: json}\n", "")
    bad.write_text(text.replace("  refs_map:", "  refs:"))
    s = ShoalOnNova(openstack_heat, shoal_project(openstack_heat, "heat-bad"), tmp_path, "bad")
    s.driver, s.settings = "heat", {"template": str(bad)}
    done = subprocess.run([SHOAL, "serve", "--port", str(s.port)], env=s.env(),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr
    assert "parameter 'members'" in errors[0] and "output 'refs_map'" in errors[0], errors
    assert "Traceback" not in done.stderr


def test_sigkill_during_create_and_resize_leaves_one_stack_per_group_and_no_leak(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    """`shoal serve` is killed (SIGKILL) while it creates a cluster and again while it
    grows a group: each restart finds the groups' stacks by name; one stack per node
    group, one server per node, none without a node."""
    import random
    import time

    rng = random.Random(25)
    cloud = openstack_heat
    with shoal_on_nova(cloud, tmp_path, driver="heat") as s:
        coe(s, "cluster", "template", "create", "crash-t", "--coe", "kubernetes",
            "--image", cloud.image_name, "--external-network", "public",
            "--flavor", "m1.small", "--master-flavor", "m1.small")  # fmt: skip

        def killed_while(busy: str) -> int:
            kills = 0
            for _ in range(2):
                time.sleep(rng.uniform(0.3, 1.5))
                if s.status("crash") != busy:
                    break
                s.kill()
                kills += 1
                s.start()
            return kills

        def one_stack_per_group_and_no_leak() -> None:
            conn = s.cloud.connection(s.project.creds)
            try:
                names = [st.name for st in conn.orchestration.stacks()]
            finally:
                conn.close()
            groups = coe(s, "nodegroup", "list", "crash", "-f", "json")
            assert sorted(names) == sorted(mb.stack_name(s.deployment, g["uuid"]) for g in groups)
            s.wait(lambda: len(s.servers()) == len(s.nodes("crash")), "no more servers than nodes")
            nodes = {n["uuid"] for n in s.nodes("crash")}
            servers = [sv.metadata["shoal-node"] for sv in s.servers()]
            assert sorted(servers) == sorted(nodes)  # one each: no duplicate, no leak

        coe(s, "cluster", "create", "crash", "--cluster-template", "crash-t",
            "--master-count", "1", "--node-count", "4")  # fmt: skip
        kills = killed_while("CREATE_IN_PROGRESS")
        s.wait_status("crash", "CREATE_COMPLETE", timeout=300)
        one_stack_per_group_and_no_leak()
        coe(s, "cluster", "resize", "crash", "7", "--nodegroup", "default-worker")
        kills += killed_while("UPDATE_IN_PROGRESS")
        assert kills >= 1
        s.wait_status("crash", "UPDATE_COMPLETE", timeout=300)
        s.wait(lambda: len(s.nodes("crash", "default-worker")) == 7, "7 workers")
        one_stack_per_group_and_no_leak()
        coe(s, "cluster", "delete", "crash")
        s.wait_status("crash", "GONE", timeout=300)
        assert s.project.wait_empty() == []
