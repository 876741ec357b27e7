"""Rolling replacement through the services the API calls and the real conductor on
the real sim: an upgrade really replaces every node, masters first, within its
policy at every moment; a new image whose nodes never become ready stops the
rollout and keeps the old nodes; pause, resume and abort."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from shoal.services import nodegroups, resize, rollouts, templates
from tests.integration.conductor_support import Env, make_env
from tests.support.waiting import scaled

V1, V2 = "fedora-coreos-40", "fedora-coreos-41"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}")


def template(env: Env, name: str, image: str) -> None:
    # Groups m and w, which the cluster's node_groups entries of the same names override.
    groups = [{"name": "m", "role": "master"}, {"name": "w"}]
    body = {"name": name, "coe": "kubernetes", "image_id": image, "coe_version": "v1.20.2",
            "node_group_templates": groups}  # fmt: skip
    templates.create(env.db, env.caller, body)


def cluster(env: Env, workers: int = 4) -> str:
    template(env, "v1", V1)
    template(env, "v2", V2)
    groups = [
        {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1},
        {"name": "w", "flavor_id": "m1.small", "node_count": workers},
    ]
    cid = env.create("roll", groups, cluster_template_id="v1")
    env.step_until(env.complete(cid))
    return cid


def images(env: Env, cid: str, group: str) -> dict[str, str]:
    """Image of each of the group's machines as the cloud says (those not going)."""
    g = env.group(cid, group)
    servers = env.world.servers(cluster=cid, nodegroup=g.uuid)
    return {s.machine_id: s.image for s in servers if s.state != "DELETING"}


def ready(env: Env, cid: str, group: str) -> int:
    g = env.group(cid, group)
    servers = env.world.servers(cluster=cid, nodegroup=g.uuid, state="ACTIVE")
    return len(servers)


def test_an_upgrade_replaces_every_node_masters_first_one_worker_down_at_most(env: Env) -> None:
    cid = cluster(env)
    resize.upgrade_cluster(env.db, env.caller, cid, {"cluster_template": "v2", "max_batch_size": 1})
    worker_started = master_done = None
    deadline = time.monotonic() + scaled(60)
    step = 0
    while env.cluster(cid).status != "UPDATE_COMPLETE":  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the rollout did not finish"
        env.conductor.run_once()
        time.sleep(0.05)
        step += 1
        assert 4 - ready(env, cid, "w") <= 1, "more than one worker unavailable"
        if master_done is None and set(images(env, cid, "m").values()) == {V2}:
            master_done = step
        if worker_started is None and V2 in images(env, cid, "w").values():
            worker_started = step
        if env.cluster(cid).status == "UPDATE_COMPLETE":  # type: ignore[union-attr]
            break
    assert master_done is not None and worker_started is not None
    assert master_done <= worker_started, "a worker was replaced before the master"
    assert set(images(env, cid, "m").values()) == {V2}
    assert set(images(env, cid, "w").values()) == {V2} and len(images(env, cid, "w")) == 4
    assert {n.image_id for n in env.nodes(cid)} == {V2}
    story = [e.message for e in env.events(cid) if e.reason == "RollingOut"]
    assert sum("retiring node" in m for m in story) == 5  # node by node
    assert sum("adding node" in m for m in story) == 5


def test_an_image_whose_nodes_never_come_up_stops_and_keeps_the_old(env: Env) -> None:
    cid = cluster(env, workers=3)
    before = set(images(env, cid, "w"))
    env.world.add_fault({"kind": "server_error", "nodegroup": env.group(cid, "w").uuid})
    patch = [{"op": "replace", "path": "/image_id", "value": V2}]
    nodegroups.update(env.db, env.caller, cid, "w", patch)  # default policy: surge 1
    env.step_until(lambda: env.group(cid, "w").status.endswith("FAILED"))
    g = env.group(cid, "w")
    assert (g.status_reason or "").startswith("rollout stopped: a node on the new revision")
    assert "Failed to allocate the network" in (g.status_reason or "")
    assert before <= set(images(env, cid, "w"))  # every old node kept
    assert ready(env, cid, "w") == 3
    for _ in range(5):  # it stays stopped: no further old node goes, nothing new is made
        env.skew[0] += timedelta(seconds=30)
        env.conductor.run_once()
    assert set(images(env, cid, "w")) == before
    story = [e.message for e in env.events(cid) if e.reason == "RollingOut"]
    assert not any("retiring node" in m for m in story)
    rollouts.hold(env.db, env.caller, cid, "abort", {"nodegroup": "w"})
    # The clock moved 150 s ahead of the sim's: a delete still under way looks late and
    # its group is looked at again in up to 30 s of the conductor's time (pacing.py).
    env.step_until(
        lambda: env.group(cid, "w").status == "UPDATE_COMPLETE",
        timeout=90.0,
        skew_step=timedelta(seconds=1),
    )
    g = env.group(cid, "w")
    assert "rollout aborted" in (g.status_reason or "")
    env.resize(cid, "w", 2)  # usable as it is
    env.step_until(
        lambda: len(env.nodes(cid, "w")) == 2 and env.complete(cid)(),
        timeout=90.0,
        skew_step=timedelta(seconds=1),
    )


def test_a_new_node_not_ready_by_the_progress_deadline_stops_the_rollout(env: Env) -> None:
    cid = cluster(env, workers=3)
    before = set(images(env, cid, "w"))
    env.world.patch_config({"boot_seconds": 3600})  # new machines stay in BUILD
    patch = [
        {"op": "replace", "path": "/rollout", "value": {"progress_deadline_s": 60}},
        {"op": "replace", "path": "/image_id", "value": V2},
    ]
    nodegroups.update(env.db, env.caller, cid, "w", patch)  # surge 1, unavailable 0
    for _ in range(3):  # the first new node is made; it does not come up
        env.conductor.run_once()
        time.sleep(0.05)
    assert "stopped" not in (env.group(cid, "w").status_reason or "")
    env.skew[0] += timedelta(seconds=61)
    env.step_until(lambda: env.group(cid, "w").status.endswith("FAILED"))
    reason = env.group(cid, "w").status_reason or ""
    assert reason.startswith("rollout stopped: node ") and "is not ready 60 s after" in reason
    for _ in range(5):  # stopped: no old node goes, no second new node is made
        env.skew[0] += timedelta(seconds=30)
        env.conductor.run_once()
    now = images(env, cid, "w")
    assert before < set(now) and len(now) == 4  # the 3 old ones and the one new
    assert ready(env, cid, "w") == 3
    story = [e.message for e in env.events(cid) if e.reason == "RollingOut"]
    assert sum("adding node" in m for m in story) == 1
    assert not any("retiring node" in m for m in story)


def test_pause_holds_the_rollout_and_resume_finishes_it(env: Env) -> None:
    cid = cluster(env, workers=3)
    patch = [{"op": "replace", "path": "/image_id", "value": V2}]
    nodegroups.update(env.db, env.caller, cid, "w", patch)
    env.conductor.run_once()  # the first new node is on its way
    rollouts.hold(env.db, env.caller, cid, "pause", {})
    env.conductor.run_once()
    time.sleep(0.5)
    held = images(env, cid, "w")
    for _ in range(5):
        env.skew[0] += timedelta(seconds=5)
        env.conductor.run_once()
        time.sleep(0.05)
    assert images(env, cid, "w").keys() == held.keys()  # nothing made, nothing retired
    g = env.group(cid, "w")
    assert "rollout paused by request" in (g.status_reason or "")
    rollouts.hold(env.db, env.caller, cid, "resume", {})
    env.step_until(lambda: env.group(cid, "w").status == "UPDATE_COMPLETE", timeout=60)
    assert set(images(env, cid, "w").values()) == {V2}
