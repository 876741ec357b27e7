"""Operations on existing nodes through the services the API calls and the real
conductor on the real sim: reboot, rebuild and replace go node by node (or in
batches) through the driver; a task no agent takes fails after the startup
timeout and leaves the later nodes alone; the rollout strategies that keep the
machines; and the repair ladder of a node whose agent falls silent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from shoal.db.repo import operations as op_repo
from shoal.db.types import utcnow
from shoal.domain import conditions as cond
from shoal.domain.errors import Conflict, Invalid, NotFound
from shoal.services import nodegroups, operations, resize, templates
from tests.integration.conductor_support import Env, env_at, make_env
from tests.support.waiting import scaled

V1, V2 = "fedora-coreos-40", "fedora-coreos-41"
WORKERS = [
    {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
    {"name": "w", "flavor_id": "m1.small", "node_count": 3},
]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


def ready_cluster(env: Env, **attrs: object) -> str:
    cid = env.create("ops", WORKERS, **attrs)
    env.step_until(env.complete(cid))
    return cid


def start(env: Env, cid: str, **body: object) -> str:
    (uuid,) = operations.start(env.db, env.caller, cid, dict(body))
    return uuid


def run_to_end(env: Env, cid: str, uuid: str, watch: list[int], seconds: float = 60) -> str:
    """Step until the operation ends, moving the clock 5 s a pass; `watch` gets the
    number of the group's machines not ready at each pass."""
    deadline = time.monotonic() + seconds
    while (state := operations.get(env.db, env.caller, cid, uuid).operation.state) == "RUNNING":
        assert time.monotonic() < deadline, "the operation did not end"
        env.conductor.run_once()
        env.skew[0] += timedelta(seconds=5)
        g = env.group(cid, "w")
        up = env.world.servers(cluster=cid, nodegroup=g.uuid, state="ACTIVE")
        watch.append(3 - len(up))
        time.sleep(0.03)
    return state


def test_a_reboot_goes_node_by_node_and_ends_succeeded(env: Env) -> None:
    cid = ready_cluster(env)
    before = env.servers(cid)
    uuid = start(env, cid, kind="reboot", nodegroup="w", batch_size=1)
    down: list[int] = []
    assert run_to_end(env, cid, uuid, down) == "SUCCEEDED"
    assert max(down) <= 1, "more than one worker was rebooting at once"
    view = operations.get(env.db, env.caller, cid, uuid)
    assert [t.state for t in view.tasks] == ["SUCCEEDED"] * 3
    assert [t.node_id for t in view.tasks] == list(view.operation.nodes)  # in order
    assert env.world.api_calls().get("reboot") == 3
    assert env.servers(cid) == before  # the same machines
    env.step_until(env.complete(cid))
    story = [e.reason for e in env.events(cid)]
    assert story.count("OperationStep") == 3 and "OperationSucceeded" in story


def test_a_rebuild_reinstalls_the_named_nodes_with_a_new_image_keeping_them(env: Env) -> None:
    cid = ready_cluster(env)
    first, second, third = env.nodes(cid, "w")
    uuid = start(
        env, cid, kind="rebuild", nodegroup="w", nodes=[first.name, third.uuid],
        batch_size=2, params={"image_id": V2},
    )  # fmt: skip
    assert run_to_end(env, cid, uuid, []) == "SUCCEEDED"
    images = {s.machine_id: s.image for s in env.world.servers(cluster=cid)}
    by_uuid = {n.uuid: n for n in env.nodes(cid, "w")}
    assert set(by_uuid) == {first.uuid, second.uuid, third.uuid}  # nothing replaced
    assert images[first.uuid] == V2 and by_uuid[first.uuid].image_id == V2
    assert images[third.uuid] == V2
    assert images[second.uuid] == V1  # not named: left alone


def test_replace_makes_a_new_machine_for_each_named_node(env: Env) -> None:
    cid = ready_cluster(env)
    old = env.nodes(cid, "w")[1]
    uuid = start(env, cid, kind="replace", nodegroup="w", nodes=[old.name])
    assert run_to_end(env, cid, uuid, []) == "SUCCEEDED"
    env.step_until(env.complete(cid))
    now = env.nodes(cid, "w")
    assert old.uuid not in {n.uuid for n in now} and len(now) == 3
    assert old.uuid not in env.servers(cid)


def test_an_agent_task_no_agent_takes_fails_and_the_later_nodes_are_left_alone(env: Env) -> None:
    cid = ready_cluster(env)
    uuid = start(env, cid, kind="restart-services", nodegroup="w")
    env.conductor.run_once()
    view = operations.get(env.db, env.caller, cid, uuid)
    assert [t.state for t in view.tasks] == ["PENDING"]  # one at a time: the first only
    env.skew[0] += timedelta(seconds=1801)  # past the health policy's startup timeout
    env.conductor.run_once()
    view = operations.get(env.db, env.caller, cid, uuid)
    assert view.operation.state == "FAILED"
    assert len(view.tasks) == 1 and view.tasks[0].state == "FAILED"
    assert "is shoal-agent running on it?" in (view.tasks[0].output or "")
    assert "the nodes after it were left as they were" in (view.operation.message or "")
    events = [e for e in env.events(cid) if e.reason == "OperationFailed"]
    assert events and events[0].type == "Warning"


def test_one_operation_at_a_time_per_group_and_bad_requests_change_nothing(env: Env) -> None:
    cid = ready_cluster(env)
    with pytest.raises(Invalid, match="give nodegroup too"):
        start(env, cid, kind="reboot", nodes=["x"])
    with pytest.raises(NotFound):
        start(env, cid, kind="reboot", nodegroup="nope")
    with pytest.raises(Invalid, match="nodes"):
        start(env, cid, kind="reboot", nodegroup="w", nodes=["no-such-node"])
    with pytest.raises(Invalid, match="kind must be one of"):
        start(env, cid, kind="reformat", nodegroup="w")
    assert operations.list_for(env.db, env.caller, cid) == []
    start(env, cid, kind="reboot", nodegroup="w")
    with pytest.raises(Conflict, match="already under way"):
        start(env, cid, kind="restart-services", nodegroup="w")
    # Without a group: one operation for each group of the cluster.
    with pytest.raises(Conflict):
        operations.start(env.db, env.caller, cid, {"kind": "reboot"})
    assert len(operations.list_for(env.db, env.caller, cid)) == 1  # the refused one left none


def test_an_upgrade_with_strategy_rebuild_keeps_every_machine(env: Env) -> None:
    for name, image in (("v1", V1), ("v2", V2)):
        # Groups m and w, which the cluster's node_groups entries of the same names override.
        groups = [{"name": "m", "role": "master"}, {"name": "w"}]
        body = {
            "name": name,
            "coe": "kubernetes",
            "image_id": image,
            "node_group_templates": groups,
        }
        templates.create(env.db, env.caller, body)
    cid = ready_cluster(env, cluster_template_id="v1", labels={"upgrade_strategy": "rebuild"})
    machines = env.servers(cid)
    resize.upgrade_cluster(env.db, env.caller, cid, {"cluster_template": "v2"})
    deadline = time.monotonic() + scaled(60)
    while env.cluster(cid).status != "UPDATE_COMPLETE":  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the rollout did not finish"
        env.conductor.run_once()
        env.skew[0] += timedelta(seconds=5)
        time.sleep(0.03)
    assert env.servers(cid) == machines  # the same machines, reinstalled
    assert {s.image for s in env.world.servers(cluster=cid)} == {V2}
    assert {n.image_id for n in env.nodes(cid)} == {V2}
    kinds = [o.operation.kind for o in operations.list_for(env.db, env.caller, cid)]
    assert kinds == ["rebuild", "rebuild"]  # the masters' group, then the workers'


def test_in_place_without_an_ostree_ref_stops_the_rollout_saying_so(env: Env) -> None:
    cid = ready_cluster(env, labels={"upgrade_strategy": "in-place"})
    machines = env.servers(cid)
    nodegroups.update(env.db, env.caller, cid, "w", [
        {"op": "replace", "path": "/image_id", "value": V2}
    ])  # fmt: skip
    env.step_until(lambda: env.group(cid, "w").status == "UPDATE_FAILED")
    assert "the label ostree_ref" in (env.group(cid, "w").status_reason or "")
    assert env.servers(cid) == machines


def test_bad_strategy_labels_are_refused() -> None:
    from shoal.domain import specs

    with pytest.raises(Invalid, match="upgrade_strategy"):
        specs.labels("labels", {"upgrade_strategy": "yolo"})
    with pytest.raises(Invalid, match="ostree_ref"):
        specs.labels("labels", {"ostree_ref": "--force"})


def with_health(env: Env, name: str, count: int, startup_timeout_s: int) -> str:
    """A complete cluster whose group `w` of `count` expects agents with this health
    policy (unhealthy after 30 s of silence); its uuid."""
    policy = {"startup_timeout_s": startup_timeout_s, "unhealthy_timeout_s": 30}
    groups = [
        WORKERS[0],
        {"name": "w", "flavor_id": "m1.small", "node_count": count, "health_policy": policy},
    ]
    cid = env.create(name, groups)
    env.step_until(env.complete(cid))
    return cid


def beat(env: Env, nodes: list[str]) -> None:
    """These nodes' agents report, at the conductor's time."""
    with env.db.write() as s:
        for uid in nodes:
            op_repo.heartbeat(s, uid, utcnow() + env.skew[0])


def advance(env: Env, seconds: int, beating: list[str]) -> None:
    """Ten seconds at a time: the `beating` agents report, the conductor passes."""
    for _ in range(seconds // 10):
        env.skew[0] += timedelta(seconds=10)
        beat(env, beating)
        env.conductor.run_once()
        time.sleep(0.02)


def test_a_node_whose_agent_falls_silent_climbs_the_repair_ladder(tmp_path: Path) -> None:
    """Agents expected: the two nodes whose agents report stay; the silent one is
    rebooted, then rebuilt, then replaced, each rung given the unhealthy timeout."""
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", agents=True) as env:
        cid = with_health(env, "heal", 3, startup_timeout_s=60)
        talking = [n.uuid for n in env.nodes(cid, "w")[:2]]
        silent = env.nodes(cid, "w")[2]
        beat(env, talking)
        advance(env, 70, talking)  # past the startup timeout: the silent node is rebooted
        assert env.world.api_calls().get("reboot") == 1
        status, reason = cond.health_status(env.group(cid, "w").conditions)
        assert status == "UNHEALTHY" and "its agent never reported" in reason["nodes"]
        advance(env, 40, talking)  # the reboot's time is up: rebuilt
        assert env.world.api_calls().get("rebuild") == 1
        advance(env, 40, talking)  # then replaced
        env.step_until(lambda: silent.uuid not in {n.uuid for n in env.nodes(cid, "w")})
        assert set(talking) <= {n.uuid for n in env.nodes(cid, "w")}  # the others untouched
        assert env.world.api_calls().get("reboot") == 1
        reasons = [e.message for e in env.events(cid) if e.reason == "Repairing"]
        assert [r.split("; ")[-1].split()[0] for r in reasons] == [
            "rebooting", "rebuilding", "replacing",
        ]  # fmt: skip


def test_a_node_whose_agent_stops_reporting_is_rebooted_and_healthy_again_once_it_reports(
    tmp_path: Path,
) -> None:
    """An agent that reported and then went quiet (not one that never started): after
    the unhealthy timeout its node is rebooted, only that one, and once its agent
    reports again nothing further is done to it."""
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", agents=True) as env:
        cid = with_health(env, "quiet", 3, startup_timeout_s=600)
        nodes = [n.uuid for n in env.nodes(cid, "w")]
        quiet = nodes[2]
        advance(env, 20, nodes)  # every agent reports
        assert env.world.api_calls().get("reboot") is None
        advance(env, 20, nodes[:2])  # the third goes quiet: not yet past the 30 s
        assert env.world.api_calls().get("reboot") is None
        advance(env, 30, nodes[:2])  # past it: the next passes reboot that node
        env.step_until(lambda: env.world.api_calls().get("reboot") == 1)
        status, reason = cond.health_status(env.group(cid, "w").conditions)
        assert status == "UNHEALTHY"
        assert "its agent has not reported for over 30 s" in reason["nodes"]
        repairing = [e.message for e in env.events(cid) if e.reason == "Repairing"]
        assert len(repairing) == 1 and env.nodes(cid, "w")[2].uuid == quiet
        advance(env, 60, nodes)  # back after its reboot: no rebuild, no replacement
        assert env.world.api_calls().get("rebuild") is None
        assert [n.uuid for n in env.nodes(cid, "w")] == nodes
        assert cond.health_status(env.group(cid, "w").conditions)[0] == "HEALTHY"


def test_when_most_agents_fall_silent_repairs_stop_and_say_so(tmp_path: Path) -> None:
    with env_at(f"sqlite:///{tmp_path / 'shoal.db'}", agents=True) as env:
        cid = with_health(env, "mass", 4, startup_timeout_s=60)
        everyone = [n.uuid for n in env.nodes(cid, "w")]
        beat(env, everyone)  # every agent reported once
        advance(env, 100, everyone[:2])  # then two of the four stay silent (50 % > 40 %)
        g = env.group(cid, "w")
        assert g.status.endswith("FAILED"), g.status
        assert "repairs stopped: 2 of 4 node(s) are unhealthy" in (g.status_reason or "")
        assert "max_unhealthy_percent" in (g.status_reason or "")
        calls = env.world.api_calls()
        assert not calls.get("reboot") and not calls.get("rebuild")  # nothing was touched
        assert {n.uuid for n in env.nodes(cid, "w")} == set(everyone)
        status, reason = cond.health_status(g.conditions)
        assert status == "UNHEALTHY" and "has not reported" in reason["nodes"]
