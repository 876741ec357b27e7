"""Which nodes go on an unnamed scale-down: failed first, then not yet ready, then
by the group's policy (newest | oldest | az-balanced). Pure: no I/O."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from shoal.domain.model import DeletionPolicy, Node, NodeState

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _health_rank(node: Node) -> int:
    if node.state is NodeState.ERROR:
        return 0
    if node.state is not NodeState.ACTIVE:
        return 1
    return 2


def _created(node: Node) -> float:
    return (node.created_at or _EPOCH).timestamp()


def choose(nodes: list[Node], count: int, policy: DeletionPolicy) -> list[Node]:
    """The `count` nodes to remove from `nodes` (in removal order)."""
    if count <= 0:
        return []
    sign = 1 if policy is DeletionPolicy.OLDEST else -1  # ties: by row id, same direction
    ranked = sorted(nodes, key=lambda n: (_health_rank(n), sign * _created(n), sign * n.id))
    if policy is not DeletionPolicy.AZ_BALANCED:
        return ranked[:count]
    return _az_balanced(ranked, count)


def _az_balanced(ranked: list[Node], count: int) -> list[Node]:
    """Unhealthy nodes first; then always take from the zone with the most nodes left
    (ties: the newest node among them), so the survivors stay evenly spread."""
    out: list[Node] = []
    pool = list(ranked)
    while pool and len(out) < count and _health_rank(pool[0]) < 2:
        out.append(pool.pop(0))
    left = Counter(n.availability_zone for n in pool)
    while pool and len(out) < count:
        most = max(left.values())
        # `pool` is in policy order (newest first), so the first node of a
        # fullest zone is the newest node there.
        pick = next(n for n in pool if left[n.availability_zone] == most)
        pool.remove(pick)
        left[pick.availability_zone] -= 1
        out.append(pick)
    return out
