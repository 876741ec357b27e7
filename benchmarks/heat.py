"""Issue 25's benchmark: on the same real Nova and Heat (tests/harness/openstack, Heat
with upstream's pacing: 1 s between the leaves of a traversal), a cluster of 3 groups of
20 nodes, side by side in one run:

(a) the way Magnum used Heat: one stack holding one ResourceGroup per group (every
    member of a group alike) and each group's server group, driven directly through
    Heat's API;
(b) shoal's heat provider: one stack per node group;
(c) shoal's openstack provider: Nova servers directly.

Each side: create the three groups (until all are complete), grow one by 10, remove 2
named nodes of it, delete everything (until gone). The sides run in rounds, in turn
forward and backward (a b c, then c b a: `order`), each side of each round on a test
cloud of its own, started afresh (about 10 s): on one cloud kept for the run, the same
side's create took 52 s first and 77 s sixth, as the single-process Nova slowed with
what it had made and deleted, which no order of the sides evens out. Printed: each
side's mean wall per phase and the ratios b/a of the sums (targets: at most 1.2 for
create, 1.0 for the others), each round's b/a beside them, and b/c (what Heat costs).
A side waits by polling every 0.2 s. Run it with `./run bench heat` (named only);
SHOAL_BENCH_HEAT_SIDES (default `abc`) runs only the sides it names, e.g. `ab`, and
SHOAL_BENCH_HEAT_ROUNDS (default 2) sets the rounds.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from benchmarks.harness import Deployment, check
from benchmarks.scenarios import Row
from shoal.drivers.contract import MachineSpec
from shoal.drivers.heat import members

GROUPS, PER_GROUP, GROW, REMOVE = 3, 20, 10, 2
PHASES = ("create", "grow", "remove", "delete")
TARGETS = {"create": 1.2, "grow": 1.0, "remove": 1.0, "delete": 1.0}
POLL_S = 0.2
# Each of (a)'s servers carries what each of (b)'s does: the same metadata keys and Nova
# tags (`_payload`) and user data of the size of shoal's bootstrap for these nodes (1.36
# KB measured), so that the sides differ in their stacks only. With 2 metadata keys, 1
# tag and 0.6 KB instead, (a)'s create took 56 s where it took 82-99 s with these, each
# on a fresh test cloud (docs/decisions.md, "The heat benchmark: a test cloud per side").
USER_DATA = "#cloud-config\n" + "#" * 1350 + "\n"


class Walls(dict[str, float]):
    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        t0 = time.monotonic()
        yield
        self[name] = time.monotonic() - t0


def _wait(what: str, done: Callable[[], bool], timeout: float = 1800.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not done after {timeout:.0f} s")
        time.sleep(POLL_S)


def _payload(tag: str, cloud: Any) -> tuple[dict[str, str], list[str]]:
    """A member's metadata and Nova tags as shoal's heat driver makes them (`members.entry`
    of a spec like (b)'s, its node id ending in the ResourceGroup's `%index%`)."""
    spec = MachineSpec(
        machine_id=str(uuid.uuid4())[:-7] + "%index%", name="", project_id=uuid.uuid4().hex,
        cluster_id=str(uuid.uuid4()), nodegroup_id=str(uuid.uuid4()), role="worker",
        flavor_id=cloud.flavor_small.name, image_id=cloud.image_name,
    )  # fmt: skip
    entry = members.entry(spec, tag, ())
    return entry["metadata"], entry["tags"]


def _magnum_template(cloud: Any, tag: str) -> dict[str, Any]:
    params: dict[str, Any] = {f"count{g}": {"type": "number"} for g in range(GROUPS)}
    params.update({f"removal{g}": {"type": "json", "default": []} for g in range(GROUPS)})
    # Each group's members in a soft-anti-affinity server group of the same stack, as
    # Magnum's templates keep their minions (`worker_nodes_server_group`) and as (b)
    # places each group's members: both sides do the same placement work.
    resources: dict[str, Any] = {
        f"server_group{g}": {
            "type": "OS::Nova::ServerGroup",
            "properties": {"name": f"{tag}-{g}", "policies": ["soft-anti-affinity"]},
        }
        for g in range(GROUPS)
    }
    payloads = [_payload(tag, cloud) for _ in range(GROUPS)]
    resources |= {
        f"group{g}": {
            "type": "OS::Heat::ResourceGroup",
            "properties": {
                "count": {"get_param": f"count{g}"},
                "removal_policies": {"get_param": f"removal{g}"},
                "resource_def": {
                    "type": "OS::Nova::Server",
                    "properties": {
                        "name": f"{tag}-{g}-%index%",
                        "image": cloud.image_name,
                        "flavor": cloud.flavor_small.name,
                        "networks": [{"allocate_network": "auto"}],
                        "metadata": payloads[g][0],
                        "tags": payloads[g][1],
                        "user_data_format": "RAW",
                        "user_data": USER_DATA,
                        "scheduler_hints": {"group": {"get_resource": f"server_group{g}"}},
                    },
                },
            },
        }
        for g in range(GROUPS)
    }
    outputs = {
        f"refs{g}": {"value": {"get_attr": [f"group{g}", "refs_map"]}} for g in range(GROUPS)
    }
    return {"heat_template_version": "2018-08-31", "parameters": params,
            "resources": resources, "outputs": outputs}  # fmt: skip


def magnum_way(cloud: Any, project: Any) -> Walls:
    """(a): one stack, one ResourceGroup per group, through Heat's API."""
    conn = cloud.connection(project.creds)
    heat = conn.orchestration
    tag, walls = f"magnum-{uuid.uuid4().hex[:6]}", Walls()
    counts = {f"count{g}": PER_GROUP for g in range(GROUPS)}

    def settled(sid: str, action: str) -> Callable[[], bool]:
        def done() -> bool:
            s = heat.get_stack(sid)
            if s.status.endswith("FAILED"):
                raise RuntimeError(f"(a) {action}: {s.status} {s.status_reason}")
            return bool(s.status == f"{action}_COMPLETE")

        return done

    with walls.phase("create"):
        stack = heat.create_stack(name=tag, template=_magnum_template(cloud, tag),
                                  parameters=counts, disable_rollback=True)  # fmt: skip
        _wait("(a) create", settled(stack.id, "CREATE"))
    with walls.phase("grow"):
        resp = heat.patch(
            f"/stacks/{tag}/{stack.id}", json={"parameters": {"count0": PER_GROUP + GROW}}
        )
        assert resp.status_code == 202, resp.text
        time.sleep(POLL_S)
        _wait("(a) grow", settled(stack.id, "UPDATE"))
    refs = {o["output_key"]: o["output_value"] for o in heat.get_stack(stack.id).outputs}["refs0"]
    victims = [refs["3"], refs["7"]]
    with walls.phase("remove"):
        params = {"count0": PER_GROUP + GROW - REMOVE, "removal0": [{"resource_list": victims}]}
        resp = heat.patch(f"/stacks/{tag}/{stack.id}", json={"parameters": params})
        assert resp.status_code == 202, resp.text
        time.sleep(POLL_S)
        _wait("(a) remove", settled(stack.id, "UPDATE"))

    with walls.phase("delete"):
        heat.delete_stack(stack.id)
        _wait("(a) delete", lambda: _gone(heat, stack.id))
    conn.close()
    return walls


def _gone(heat: Any, stack_id: str) -> bool:
    """Whether the stack is deleted (it may go between a find and a get)."""
    from openstack import exceptions

    try:
        return heat.find_stack(stack_id) is None or (
            heat.get_stack(stack_id).status == "DELETE_COMPLETE"
        )
    except exceptions.NotFoundException:
        return True


def _deployment(cloud: Any, project: Any, work: Path, driver: str) -> Deployment:
    work.mkdir(parents=True, exist_ok=True)
    clouds = project.clouds_yaml(work / "clouds.yaml")
    settings = {"cloud": project.entry, "clouds_yaml": str(clouds), "deployment": f"b{driver}"}
    provider = {"name": "cloud", "driver": driver, "settings": settings}
    config = work / "shoal.yaml"
    config.write_text(yaml.safe_dump({"providers": [provider]}))
    return Deployment(env_extra={"SHOAL_CONFIG": str(config)}, workdir=work)


def _status(c: Any, path: str) -> str | None:
    r = c.get(path)
    if r.status_code == 404:
        return None
    got = str(r.json()["status"])
    if got.endswith("FAILED"):
        raise RuntimeError(f"{path}: {got} {r.json().get('status_reason')}")
    return got


def shoal_way(cloud: Any, project: Any, work: Path, driver: str) -> Walls:
    """(b) and (c): shoal with a provider of kind `driver`."""
    walls = Walls()
    names = [f"w{g}" for g in range(GROUPS)]
    with _deployment(cloud, project, work, driver) as dep, dep.client() as c:
        master = {"name": "m", "role": "master", "flavor_id": "m1.small", "node_count": 1}
        check(c.post("/clusters", json={"name": "bench", "image_id": cloud.image_name,
                                        "node_groups": [master]}), 202)  # fmt: skip
        _wait(f"{driver}: the master", lambda: _status(c, "/clusters/bench") == "CREATE_COMPLETE")
        group = "/clusters/bench/nodegroups/"
        with walls.phase("create"):
            for name in names:
                ng = {"name": name, "flavor_id": "m1.small", "node_count": PER_GROUP}
                check(c.post("/clusters/bench/nodegroups", json=ng), 202)
            _wait(f"{driver} create", lambda: all(
                _status(c, group + n) == "CREATE_COMPLETE" for n in names))  # fmt: skip

        def resized(count: int) -> Callable[[], bool]:
            def done() -> bool:
                r = c.get(group + names[0]).json()
                return (
                    r["status"] == "UPDATE_COMPLETE"
                    and r["node_count"] == count
                    and len(
                        c.get("/clusters/bench/nodes", params={"nodegroup": names[0]}).json()[
                            "nodes"
                        ]
                    )
                    == count
                )

            return done

        resize = "/clusters/bench/actions/resize"
        with walls.phase("grow"):
            body = {"node_count": PER_GROUP + GROW, "nodegroup": names[0]}
            check(c.post(resize, json=body), 202)
            _wait(f"{driver} grow", resized(PER_GROUP + GROW))
        nodes = c.get("/clusters/bench/nodes", params={"nodegroup": names[0]}).json()["nodes"]
        victims = [nodes[3]["uuid"], nodes[7]["uuid"]]
        with walls.phase("remove"):
            count = PER_GROUP + GROW - REMOVE
            body = {"node_count": count, "nodegroup": names[0], "nodes_to_remove": victims}
            check(c.post(resize, json=body), 202)
            _wait(f"{driver} remove", resized(count))
        with walls.phase("delete"):
            check(c.delete("/clusters/bench"), 204)
            _wait(f"{driver} delete", lambda: _status(c, "/clusters/bench") is None)
    return walls


def order(sides: str, rounds: int) -> list[tuple[int, str]]:
    """(round, side) in the order they run: forward in even rounds, backward in odd."""
    return [(r, side) for r in range(rounds) for side in (sides if r % 2 == 0 else sides[::-1])]


def mean(runs: list[Walls]) -> Walls:
    """Each phase's mean wall over the rounds that measured it."""
    out = Walls()
    for phase in PHASES:
        got = [w[phase] for w in runs if phase in w]
        if got:
            out[phase] = sum(got) / len(got)
    return out


def per_round(num: list[Walls], den: list[Walls], phase: str) -> list[float]:
    """The ratio num/den of `phase` in each round both sides measured it."""
    return [n[phase] / d[phase] for n, d in zip(num, den, strict=False)
            if phase in n and d.get(phase)]  # fmt: skip


def heat_side_by_side() -> list[Row]:
    from tests.harness.openstack.cloud import OpenStackCloud
    from tests.support.openstack_project import shoal_project

    sides = os.environ.get("SHOAL_BENCH_HEAT_SIDES", "abc")
    rounds = max(1, int(os.environ.get("SHOAL_BENCH_HEAT_ROUNDS", "2")))
    runs: dict[str, list[Walls]] = {"a": [], "b": [], "c": []}
    for r, side in order("".join(x for x in "abc" if x in sides), rounds):
        with OpenStackCloud() as cloud:  # a fresh cloud for each side of each round
            cloud.start_heat(trigger_delay=1.0)  # upstream's pacing: Heat is measured here
            project = shoal_project(cloud, f"bench-{side}{r}")
            if side == "a":
                runs["a"].append(magnum_way(cloud, project))
            else:
                driver = "heat" if side == "b" else "openstack"
                work = Path(cloud.work_dir or ".") / "bench" / f"{side}{r}"
                runs[side].append(shoal_way(cloud, project, work, driver))
    return rows_of(runs)


def rows_of(runs: dict[str, list[Walls]]) -> list[Row]:
    a, b, c = mean(runs["a"]), mean(runs["b"]), mean(runs["c"])
    n, rows = GROUPS * PER_GROUP, []
    for phase in PHASES:
        if phase in a:
            rows.append(Row(f"heat (a) one stack {phase}", n, a[phase],
                            note="Magnum's way: one stack, a ResourceGroup per group; "
                            f"mean of {len(runs['a'])}"))  # fmt: skip
        if phase in b:
            ratio_bc = f"b/c {b[phase] / c[phase]:.2f}" if phase in c else "b/c not measured"
            each = ", ".join(f"{x:.2f}" for x in per_round(runs["b"], runs["a"], phase))
            ok = b[phase] / a[phase] <= TARGETS[phase] if phase in a else None
            note = f"one stack per group; b/a by round {each or '-'}; {ratio_bc} (what Heat costs)"
            rows.append(Row(f"heat (b) shoal heat {phase}", n, b[phase],
                            lower_bound_s=a.get(phase), target=f"b/a <= {TARGETS[phase]}",
                            ok=ok, note=note))  # fmt: skip
        if phase in c:
            rows.append(Row(f"heat (c) shoal openstack {phase}", n, c[phase],
                            note="Nova servers directly"))  # fmt: skip
    return rows
