"""Unnamed scale-down order: failed, not ready, then policy (pure)."""

from datetime import UTC, datetime, timedelta

from shoal.domain import deletion
from shoal.domain.model import DeletionPolicy, Node, NodeState

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def node(i: int, state: NodeState = NodeState.ACTIVE, az: str = "az-1") -> Node:
    return Node(i, f"u{i}", f"n{i}", "c", "g", "p", state, az, created_at=T0 + timedelta(i))


def names(nodes: list[Node]) -> list[str]:
    return [n.name for n in nodes]


def test_failed_then_not_ready_then_newest() -> None:
    nodes = [node(1), node(2, NodeState.BUILDING), node(3), node(4, NodeState.ERROR), node(5)]
    got = deletion.choose(nodes, 4, DeletionPolicy.NEWEST)
    assert names(got) == ["n4", "n2", "n5", "n3"]


def test_oldest_policy() -> None:
    nodes = [node(1), node(2), node(3)]
    assert names(deletion.choose(nodes, 2, DeletionPolicy.OLDEST)) == ["n1", "n2"]


def test_pending_counts_as_not_ready() -> None:
    nodes = [node(1), node(2, NodeState.PENDING)]
    assert names(deletion.choose(nodes, 1, DeletionPolicy.OLDEST)) == ["n2"]


def test_az_balanced_keeps_zones_even() -> None:
    nodes = [node(1, az="az-1"), node(2, az="az-1"), node(3, az="az-1"), node(4, az="az-2"),
             node(5, az="az-2"), node(6, az="az-3")]  # fmt: skip
    got = deletion.choose(nodes, 3, DeletionPolicy.AZ_BALANCED)
    left = [n for n in nodes if n not in got]
    assert sorted(n.availability_zone or "" for n in left) == ["az-1", "az-2", "az-3"]
    assert got[0].name == "n3"  # the newest in the fullest zone


def test_az_balanced_still_takes_failed_first() -> None:
    nodes = [node(1, az="az-1"), node(2, az="az-1"), node(3, NodeState.ERROR, az="az-2")]
    assert names(deletion.choose(nodes, 1, DeletionPolicy.AZ_BALANCED)) == ["n3"]


def test_nothing_to_choose() -> None:
    assert deletion.choose([node(1)], 0, DeletionPolicy.NEWEST) == []
    assert len(deletion.choose([node(1)], 5, DeletionPolicy.NEWEST)) == 1
