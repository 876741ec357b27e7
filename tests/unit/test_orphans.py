"""The rules of the sweeper and of adoption, on plain values: which held machines are
deleted now (an admin's request; a tombstone after the grace; nothing else), and how
a lost cluster's node groups and names are read back from its machines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from shoal.conductor.sweeper import to_delete
from shoal.db.orphans import Held, Seen
from shoal.domain import adoption
from shoal.domain.adoption import Found

T0 = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
GRACE = timedelta(seconds=300)


def held(mid: str, group: str, seen_ago: float, asked: bool = False) -> Held:
    s = Seen("sim", mid, f"c-w-{mid}", "ACTIVE", {}, "p", "c1", group)
    first = T0 - timedelta(seconds=seen_ago)
    return Held(s, first, T0, T0 if asked else None, "admin" if asked else None)


@pytest.mark.parametrize(
    ("machine", "dead", "asked", "buried"),
    [
        (held("a", "g1", 10_000), set(), [], []),  # unknown for long: held, never deleted
        (held("a", "g1", 10_000), {"g1"}, [], ["a"]),  # shoal deleted its group, grace over
        (held("a", "g1", 299), {"g1"}, [], []),  # within the grace
        (held("a", "g1", 300), {"g1"}, [], ["a"]),  # the grace is inclusive
        (held("a", "g1", 0), {"c1"}, [], []),  # its cluster shoal deleted: grace still
        (held("a", "g1", 400), {"c1"}, [], ["a"]),  # ... then deleted
        (held("a", "g1", 0, asked=True), set(), ["a"], []),  # an admin: at once
        (held("a", "g1", 0, asked=True), {"g1"}, ["a"], []),  # counted once, as asked
        (held("a", "g1", 10_000), {"g2"}, [], []),  # another group's tombstone
    ],
)
def test_what_the_sweeper_deletes(
    machine: Held, dead: set[str], asked: list[str], buried: list[str]
) -> None:
    a, b = to_delete([machine], dead, T0, GRACE)
    assert [h.seen.machine_id for h in a] == asked
    assert [h.seen.machine_id for h in b] == buried


@pytest.mark.parametrize(
    ("prefixes", "given", "cluster", "names"),
    [
        ({"1": "prod-m", "2": "prod-w"}, None, "prod", ["m", "w"]),
        ({"1": "my-k8s-masters", "2": "my-k8s-workers"}, None, "my-k8s", ["masters", "workers"]),
        # Magnum's default groups: the cluster is what precedes them.
        ({"1": "k8s-default-master", "2": "k8s-default-worker"}, None, "k8s",
         ["default-master", "default-worker"]),
        ({"1": "a-b-default-worker"}, None, "a-b", ["default-worker"]),
        ({"1": "solo-gpu"}, None, "solo", ["gpu"]),  # one group: its last part
        ({"1": "nodash"}, None, "", ["nodash"]),
        # The admin names the cluster: the rest is the group's name, as made.
        ({"1": "my-k8s-m", "2": "my-k8s-w"}, "My_K8s", "My_K8s", ["m", "w"]),
        ({"1": "x-a", "2": "x-a"}, None, "x", ["a", "a-2"]),  # names stay unique
    ],
)  # fmt: skip
def test_names_are_read_back_from_node_names(
    prefixes: dict[str, str], given: str | None, cluster: str, names: list[str]
) -> None:
    got_cluster, got = adoption.split_names(prefixes, given)
    assert (got_cluster, list(got.values())) == (cluster, names)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [("c-w-ab12c", "c-w"), ("c-default-worker-0a1b2", "c-default-worker"), ("x", "x")],
)
def test_a_node_name_loses_its_suffix(name: str, prefix: str) -> None:
    assert adoption.prefix_of(name) == prefix


def test_groups_come_from_tags_and_the_listing() -> None:
    found = [
        Found("prod-m-aaaaa", "g-m", "master", "m1.large", "img", "east", "p"),
        Found("prod-w-bbbbb", "g-w", "worker", "m1.small", "img", "east", "p"),
        Found("prod-w-ccccc", "g-w", "worker", "m1.small", "img", "east", "p"),
        Found("prod-w-ddddd", "g-w", None, "m1.tiny", None, "east", "p"),  # odd one out
        Found("prod-x-eeeee", "g-x", None, None, None, "west", "p"),  # made before role tags
    ]
    cluster, groups = adoption.groups_of(found)
    assert cluster == "prod"
    assert [(g.uuid, g.name, g.role, g.flavor_id, g.image_id, g.provider, g.node_count)
            for g in groups] == [
        ("g-m", "m", "master", "m1.large", "img", "east", 1),
        ("g-w", "w", "worker", "m1.small", "img", "east", 3),
        ("g-x", "x", "worker", None, None, "west", 1),
    ]  # fmt: skip
