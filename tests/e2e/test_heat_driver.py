"""shoal on real Heat (issue 25): a real `shoal serve` whose provider is of kind `heat` on
the OpenStack test cloud (Heat beside Nova), driven by `openstack coe`, checked from
Heat's and Nova's side: each node group is one stack whose `kube_minions` members are
its nodes' servers, and the node group's stack_id is the stack's id; the cluster's one
cluster stack holds a Nova server group per node group, which its members are in (the
masters on different hosts); a node named by its server id is removed exactly (that
index, that server, nothing else); deleting the cluster deletes its stacks, their
servers and the server groups. The cluster template's label `heat_template` names an
operator's template of the provider's `templates:`, from which every group's stack is
made.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from shoal.drivers.heat import cluster_stack as cs
from shoal.drivers.heat import members as mb
from tests.harness.openstack.cloud import OpenStackCloud
from tests.support.openstack_cli import OPENSTACK, coe_env
from tests.support.openstack_cloud import OPENSTACK_MARKS
from tests.support.openstack_project import admin
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


def open_driver(cloud: OpenStackCloud, prefix: str, tmp_path: Path, **over: Any) -> Any:
    """A new project on `cloud` and the heat driver on it (settings `over` the project's
    entry and clouds.yaml): (project, settings, its Cloud, the driver)."""
    from shoal.drivers.heat.cloud import Cloud, load
    from shoal.drivers.heat.driver import HeatDriver
    from shoal.drivers.heat.settings import HeatSettings
    from tests.support.openstack_project import shoal_project

    project = shoal_project(cloud, prefix)
    settings = HeatSettings(
        cloud=project.entry, clouds_yaml=str(project.clouds_yaml(tmp_path / "clouds.yaml")), **over
    )
    the_cloud = Cloud(load(settings))
    return project, settings, the_cloud, HeatDriver(settings, the_cloud)


def stack_names(s: ShoalOnNova) -> list[str]:
    """Every stack of the project, as its user sees it in Heat (deleted ones excluded)."""
    conn = s.cloud.connection(s.project.creds)
    try:
        return sorted(st.name for st in conn.orchestration.stacks())
    finally:
        conn.close()


def server_groups(s: ShoalOnNova) -> dict[str, Any]:
    """The project's Nova server groups by name (admin's view)."""
    return {g.name: g for g in s.project.server_groups()}


def host_of(s: ShoalOnNova, server_id: str) -> str:
    with admin(s.cloud) as conn:
        return str(conn.compute.get_server(server_id).compute_host)


def check_server_groups(s: ShoalOnNova, cluster: str) -> None:
    """One cluster stack; each node group's members in its own server group (from the
    cluster stack, policy from the group's role), and no server in another."""
    uuid = coe(s, "cluster", "show", cluster, "-f", "json")["uuid"]
    names = stack_names(s)
    assert names.count(cs.stack_name(s.deployment, uuid)) == 1, names
    assert [n for n in names if cs.is_cluster_stack(s.deployment, n)] == [
        cs.stack_name(s.deployment, uuid)
    ]
    sgroups = server_groups(s)
    servers = {sv.metadata["shoal-node"]: sv for sv in s.servers()}
    for g in coe(s, "nodegroup", "list", cluster, "-f", "json"):
        sg = sgroups[f"shoal-{g['uuid']}@{s.deployment}"]
        policy = "anti-affinity" if g["role"] == "master" else "soft-anti-affinity"
        assert sg.policy == policy, (g["name"], sg.policy)
        members = {servers[n["uuid"]].id for n in s.nodes(cluster, g["name"])}
        assert set(sg.member_ids) == members, (g["name"], sg.member_ids, members)


def outputs_and_tags(s: ShoalOnNova, group_uuid: str) -> tuple[dict[str, Any], list[str]]:
    """The group stack's outputs and tags, as its project's user sees them in Heat."""
    conn = s.cloud.connection(s.project.creds)
    try:
        stack = conn.orchestration.get_stack(mb.stack_name(s.deployment, group_uuid))
        outputs = {o["output_key"]: o["output_value"] for o in stack.outputs}
        return outputs, list(stack.tags or [])
    finally:
        conn.close()


def refs_map(s: ShoalOnNova, group_uuid: str) -> dict[str, str]:
    return dict(outputs_and_tags(s, group_uuid)[0]["refs_map"] or {})


EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "heat-group.yaml"


def test_a_cluster_through_openstack_coe_on_heat(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    cloud = openstack_heat
    with shoal_on_nova(cloud, tmp_path, driver="heat", templates={"site": str(EXAMPLE)}) as s:
        coe(s, "cluster", "template", "create", "heat-k8s", "--coe", "kubernetes",
            "--image", cloud.image_name, "--external-network", "public",
            "--flavor", "m1.small", "--master-flavor", "m1.small",
            "--labels", "heat_template=site")  # fmt: skip
        coe(s, "cluster", "create", "hc", "--cluster-template", "heat-k8s",
            "--master-count", "3", "--node-count", "3")  # fmt: skip
        s.wait_status("hc", "CREATE_COMPLETE", timeout=300)
        groups = {g["name"]: g for g in coe(s, "nodegroup", "list", "hc", "-f", "json")}
        assert set(groups) == {"default-master", "default-worker"}
        nodes = {n["uuid"]: n for n in s.nodes("hc")}
        servers = {sv.metadata["shoal-node"]: sv for sv in s.servers()}
        assert set(servers) == set(nodes)  # one server per node, no other
        for uid, node in nodes.items():
            assert servers[uid].name == node["name"] and servers[uid].status == "ACTIVE"
        check_server_groups(s, "hc")
        masters = s.nodes("hc", "default-master")
        assert len(masters) == 3
        hosts = {host_of(s, servers[n["uuid"]].id) for n in masters}
        assert len(hosts) == 3, hosts  # anti-affinity: never two masters on one host
        workers = s.nodes("hc", "default-worker")
        worker_group = groups["default-worker"]["uuid"]
        stack = stack_of(s, worker_group)
        assert stack is not None and stack.status in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
        # The node group's stack_id is its real stack (what the autoscaler reads).
        shown = coe(s, "nodegroup", "show", "hc", "default-worker", "-f", "json")
        assert shown["stack_id"] == stack.id
        # Every group's stack is made from the operator's template the label names.
        for g in groups.values():
            outputs, tags = outputs_and_tags(s, g["uuid"])
            assert outputs["site"] == "rack-7" and "shoal-template=site" in tags, (g, tags)
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

        check_server_groups(s, "hc")  # still one cluster stack after the update

        coe(s, "cluster", "delete", "hc")
        s.wait_status("hc", "GONE", timeout=300)
        assert s.project.wait_empty() == []
        for g in groups.values():
            assert stack_of(s, g["uuid"]) is None
        assert stack_names(s) == []  # the cluster stack too, once the cluster is gone
        assert server_groups(s) == {}


def test_an_operators_template_is_used(openstack_heat: OpenStackCloud, tmp_path: Path) -> None:
    """docs/examples/heat-group.yaml (docs/drivers.md's example): the group's stack is made
    from it, with its extra resource and output, and its members are the group's. The
    group's template does not change later: asking for another is refused, naming both."""
    from shoal.drivers.contract import GroupRequest, MachineSpec, MachineState, PermanentError

    cloud = openstack_heat
    project, settings, the_cloud, driver = open_driver(
        cloud, "heat-tpl", tmp_path, deployment="tpl", template=str(EXAMPLE),
        templates={"other": str(EXAMPLE)},
    )  # fmt: skip
    assert settings.problems() == []
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
    with pytest.raises(PermanentError) as err:
        driver.apply_group(GroupRequest("g", "p", "c", specs[:1], {"template": "other"}))
    assert "made from template 'default'" in str(err.value) and "'other'" in str(err.value)
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
    # A named template is checked the same way, and the error names it.
    s.settings = {"templates": {"site": str(EXAMPLE), "gpu": str(bad)}}
    done = subprocess.run([SHOAL, "serve", "--port", str(s.port)], env=s.env(),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode == 2 and len(errors) == 1, done.stderr
    assert "settings.templates.gpu: " in errors[0] and "parameter 'members'" in errors[0], errors


def test_sigkill_during_create_and_resize_leaves_one_stack_per_group_and_no_leak(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    """`shoal serve` is killed (SIGKILL) while it creates a cluster and again while it
    grows a group: each restart finds the groups' stacks and the cluster stack by name;
    one stack per node group and one cluster stack, one server per node, none without a
    node, each in its group's server group; none of them left after the delete."""
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
            names = stack_names(s)
            groups = coe(s, "nodegroup", "list", "crash", "-f", "json")
            uuid = coe(s, "cluster", "show", "crash", "-f", "json")["uuid"]
            want = [mb.stack_name(s.deployment, g["uuid"]) for g in groups]
            assert names == sorted([*want, cs.stack_name(s.deployment, uuid)])  # 1 cluster stack
            check_server_groups(s, "crash")
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
        assert stack_names(s) == [] and server_groups(s) == {}


# An operator's template that uses the optional parameter `server_group`: an output of it.
WITH_SERVER_GROUP = """\
heat_template_version: 2018-08-31
parameters:
  count: {type: number}
  members: {type: json}
  removal_policies: {type: json, default: []}
  server_group: {type: string, default: ""}
resources:
  kube_minions:
    type: Shoal::Members
outputs:
  refs_map: {value: {get_attr: [kube_minions, refs_map]}}
  joined: {value: {get_param: server_group}}
"""


def test_the_cluster_stack_holds_its_server_groups_and_goes_with_the_cluster(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    """The driver on its own: two groups applied at once make one cluster stack with a
    server group each (sent in one create or update), which their members join and an
    operator's template reads as `server_group`; growth joins the same one;
    `begin_release` deletes the cluster stack and its server groups while a group's
    members still stand, `release_cluster` then deletes a group stack left behind and
    confirms; a project out of server group quota is BlockedError(QUOTA). A server
    group deleted in Nova behind shoal's back is noticed when a member fails on it, and
    replaced (issue 25)."""
    import threading

    from shoal.drivers.contract import (
        BlockedError,
        BlockedKind,
        GroupRequest,
        GroupState,
        MachineSpec,
        MachineState,
        PlacementGroup,
        PlacementPolicy,
        TransientError,
    )

    cloud = openstack_heat
    template = tmp_path / "group.yaml"
    template.write_text(WITH_SERVER_GROUP)
    project, _, the_cloud, driver = open_driver(
        cloud, "heat-cs", tmp_path, deployment="cs", template=str(template)
    )
    driver.check()
    s = ShoalOnNova(cloud, project, tmp_path, "cs")
    pgs = {
        "m": PlacementGroup("shoal-m", PlacementPolicy.ANTI_AFFINITY),
        "w": PlacementGroup("shoal-w", PlacementPolicy.SOFT_ANTI_AFFINITY),
    }

    def request(group: str, count: int, cluster: str = "c1") -> GroupRequest:
        specs = tuple(
            MachineSpec(
                machine_id=f"{cluster}-{group}{n}-{project.name}",
                name=f"{group}-{n}",
                project_id="p",
                cluster_id=cluster,
                nodegroup_id=f"{cluster}-{group}",
                role="worker",
                flavor_id=cloud.flavor_small.name,
                image_id=cloud.image_name,
                placement_group=pgs[group],
            )  # fmt: skip
            for n in range(count)
        )
        return GroupRequest(f"{cluster}-{group}", "p", cluster, specs)

    def active(count: int) -> bool:
        return [m.state for m in driver.list_machines({})] == [MachineState.ACTIVE] * count

    failed: list[BaseException] = []

    def apply(r: GroupRequest) -> None:
        try:
            driver.apply_group(r)
        except BaseException as exc:  # said below: a thread's exception is otherwise lost
            failed.append(exc)

    threads = [threading.Thread(target=apply, args=(request(g, 2),)) for g in "mw"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert failed == [] and not any(t.is_alive() for t in threads)
    s.wait(lambda: active(4), "four members active", timeout=300)
    assert stack_names(s).count(cs.stack_name("cs", "c1")) == 1
    sgroups = server_groups(s)
    assert {n: g.policy for n, g in sgroups.items()} == {
        "shoal-m@cs": "anti-affinity",
        "shoal-w@cs": "soft-anti-affinity",
    }
    by_group: dict[str, set[str]] = {}
    for m in driver.list_machines({}):
        by_group.setdefault(m.tags["shoal-nodegroup"], set()).add(str(m.provider_id))
    for g in "mw":
        sg = sgroups[f"shoal-{g}@cs"]
        assert set(sg.member_ids) == by_group[f"c1-{g}"]
        stack = the_cloud.stack(mb.stack_name("cs", f"c1-{g}"))
        assert stack is not None
        name = mb.stack_name("cs", f"c1-{g}")
        assert the_cloud.output(name, stack["id"], "joined") == sg.id  # the optional parameter
    masters = [m for m in driver.list_machines({}) if m.tags["shoal-nodegroup"] == "c1-m"]
    assert len({host_of(s, str(m.provider_id)) for m in masters}) == 2  # anti-affinity

    driver.apply_group(request("w", 3))  # growth: the new member joins the same group
    s.wait(lambda: active(5), "five members active", timeout=300)
    workers = {str(m.provider_id) for m in driver.list_machines({"shoal-nodegroup": "c1-w"})}
    assert len(workers) == 3
    s.wait(lambda: set(server_groups(s)["shoal-w@cs"].member_ids) == workers, "3 in the group")
    assert len(server_groups(s)) == 2 and stack_names(s).count(cs.stack_name("cs", "c1")) == 1

    # The workers' server group deleted in Nova behind shoal's back: the next member is
    # refused by Nova (its hint names a group Nova lacks), the group stack fails saying
    # so; the next apply replaces the server group in the cluster stack and sends the
    # refused member again, which joins the new one (same policy).
    dead = server_groups(s)["shoal-w@cs"]
    with admin(cloud) as conn:
        conn.compute.delete_server_group(dead.id)
    driver.apply_group(request("w", 4))

    def group_state() -> tuple[Any, list[Any]]:
        machines, report = driver.list_group("c1-w", {})
        return report, machines

    s.wait(lambda: group_state()[0].state is GroupState.FAILED, "the group stack failed")
    report, machines = group_state()
    said = f"Instance group {dead.id} could not be found"
    assert report.reason is not None and said in report.reason, report.reason
    assert report.reason.startswith(f"the Nova server group {dead.id} of this node group")
    refused = [m for m in machines if m.state is MachineState.ERROR]
    assert [m.machine_id for m in refused] == [f"c1-w3-{project.name}"]
    assert refused[0].fault is not None and said in refused[0].fault
    driver.apply_group(request("w", 4))  # the repair, then the member sent again
    s.wait(lambda: active(6), "six members active", timeout=300)
    s.wait(lambda: group_state()[0].state is GroupState.COMPLETE, "the group stack complete")
    sg = server_groups(s)["shoal-w@cs"]
    assert sg.id != dead.id and sg.policy == "soft-anti-affinity"
    again = driver.list_machines({"shoal-node": refused[0].machine_id})
    assert set(sg.member_ids) == {str(again[0].provider_id)}  # the old members: in none
    group_stack = the_cloud.stack(mb.stack_name("cs", "c1-w"))
    assert group_stack is not None and group_stack["stack_status"] == "UPDATE_COMPLETE"
    assert the_cloud.output(mb.stack_name("cs", "c1-w"), group_stack["id"], "joined") == sg.id
    cluster_stack = the_cloud.stack(cs.stack_name("cs", "c1"))
    assert cluster_stack is not None and cluster_stack["stack_status"] == "UPDATE_COMPLETE"

    driver.delete_group("c1-m")  # c1-w is left behind: release deletes it first
    # The early release: the cluster stack goes beside the group stacks, its server
    # groups before their members (c1-w's servers stay until its stack goes).
    driver.begin_release("p", "c1")
    s.wait(
        lambda: cs.stack_name("cs", "c1") not in stack_names(s),
        "the cluster stack deleted beside the group stacks",
        timeout=300,
    )
    assert mb.stack_name("cs", "c1-w") in stack_names(s) and server_groups(s) == {}
    assert len(driver.list_machines({"shoal-nodegroup": "c1-w"})) == 4

    def released(cluster: str) -> bool:
        try:
            driver.release_cluster("p", cluster)
        except TransientError:
            return False
        return True

    s.wait(lambda: released("c1"), "the cluster released", timeout=300)
    assert stack_names(s) == [] and server_groups(s) == {}
    assert s.project.wait_empty() == []
    assert released("c1")  # idempotent

    project.quota(server_groups=0)
    with pytest.raises(BlockedError) as blocked:
        driver.apply_group(request("m", 1, "c2"))
    assert blocked.value.kind is BlockedKind.QUOTA
    assert cs.stack_name("cs", "c2") in blocked.value.reason and "uota" in blocked.value.reason
    assert stack_names(s) == [cs.stack_name("cs", "c2")]  # no group stack made without it
    project.quota(server_groups=-1)
    s.wait(lambda: released("c2"), "the failed cluster stack released", timeout=300)
    assert stack_names(s) == [] and server_groups(s) == {}
    the_cloud.close()


def test_a_server_no_stack_holds_is_deleted_once_its_group_stack_is_gone(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    """Heat can lose a group's servers: a nested stack whose create RPC timed out in Heat's
    own engine (MessagingTimeout) keeps making its servers, and the group stack made
    again holds another; once the group stack is deleted, those first servers are held
    by no stack and Heat never deletes them. Such a server (shoal's tags, its group's
    stack gone) is deleted in Nova by the group's listing, and by `delete_machine`,
    instead of being reported as going forever."""
    from shoal.drivers.contract import GroupState, MachineState

    cloud = openstack_heat
    project, _, the_cloud, driver = open_driver(cloud, "heat-lost", tmp_path, deployment="lost")
    driver.check()
    s = ShoalOnNova(cloud, project, tmp_path, "lost")

    def lost(node: str, group: str) -> str:
        meta = {"shoal-deployment": "lost", "shoal-cluster": "c1", "shoal-nodegroup": group,
                "shoal-node": node, "shoal-role": "worker"}  # fmt: skip
        conn = cloud.connection(project.creds)
        try:
            server = conn.compute.create_server(
                name=node, image_id=cloud.image_id, flavor_id=cloud.flavor_small.id,
                networks=[{"uuid": cloud.network_id}], metadata=meta,
                tags=[mb.nova_tag(k, v) for k, v in meta.items()],
            )  # fmt: skip
            return str(server.id)
        finally:
            conn.close()

    def nova_ids() -> set[str]:
        return {str(x.id) for x in s.project.servers()}

    first = lost("n1", "g1")
    s.wait(lambda: first in nova_ids(), "the lost server in Nova")
    machines, report = driver.list_group("g1", {})
    assert report.state is GroupState.ABSENT
    assert [(m.machine_id, m.state) for m in machines] == [("n1", MachineState.DELETING)]
    s.wait(lambda: first not in nova_ids(), "the lost server deleted", timeout=300)

    second = lost("n2", "g2")
    s.wait(lambda: second in nova_ids(), "the second lost server in Nova")
    driver.delete_machine("n2")
    s.wait(lambda: second not in nova_ids(), "the second lost server deleted", timeout=300)
    assert s.project.wait_empty() == []
    the_cloud.close()


def test_a_group_stack_made_when_members_had_addresses_still_grows(
    openstack_heat: OpenStackCloud, tmp_path: Path
) -> None:
    """A group stack made by an earlier shoal keeps its group template, whose output
    `addresses` passes on the members' output of that name, which the members' template
    shoal writes now lacks (resolved, it cost Heat a Nova call per member): Heat takes
    the stack's updates all the same, that output left unresolved."""
    from shoal.drivers.contract import GroupRequest, GroupState, MachineSpec, MachineState
    from shoal.drivers.heat import templates

    cloud = openstack_heat
    project, _, the_cloud, driver = open_driver(cloud, "heat-old", tmp_path, deployment="old")
    driver.check()
    s = ShoalOnNova(cloud, project, tmp_path, "old")
    earlier = {"get_attr": [templates.GROUP_RESOURCE, "addresses"]}
    driver.group_templates[templates.DEFAULT] = {  # the group template as it was
        **templates.GROUP,
        "outputs": {**templates.GROUP["outputs"], "addresses": {"value": earlier}},
    }

    def request(count: int) -> GroupRequest:
        specs = tuple(
            MachineSpec(machine_id=f"old-{n}-{project.name}", name=f"w-{n}", project_id="p",
                        cluster_id="c1", nodegroup_id="c1-w", role="worker",
                        flavor_id=cloud.flavor_small.name, image_id=cloud.image_name)
            for n in range(count)
        )  # fmt: skip
        return GroupRequest("c1-w", "p", "c1", specs)

    def settled(count: int) -> bool:
        machines, report = driver.list_group("c1-w", {})
        assert report.state is not GroupState.FAILED, report.reason
        states = [m.state for m in machines]
        return report.state is GroupState.COMPLETE and states == [MachineState.ACTIVE] * count

    driver.apply_group(request(1))
    s.wait(lambda: settled(1), "one member", timeout=300)
    name = mb.stack_name("old", "c1-w")
    stack_id = the_cloud.stack(name)["id"]  # type: ignore[index]
    assert the_cloud.output(name, stack_id, "addresses") is None
    driver.apply_group(request(2))  # growth: a PATCH with the members' template of now
    s.wait(lambda: settled(2), "two members", timeout=300)
    refs = the_cloud.output(name, stack_id, "refs_map")
    assert sorted(refs) == ["0", "1"]
    assert {m.provider_id for m in driver.list_machines({})} == set(refs.values())
    driver.delete_group("c1-w")
    driver.release_cluster("p", "c1")
    assert s.project.wait_empty() == []
    the_cloud.close()
