"""The cluster's api_address on plain values (conductor/cluster.py `api_address`):
a ready master's, moving when it goes; the masters' load balancer's where their
provider has one, whichever masters are up."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shoal.conductor.cluster import Pass, api_address
from shoal.db.snapshots import ClusterSnapshot
from shoal.domain import conditions as cond
from shoal.domain import model as m

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def pass_of(current: str | None, up: tuple[str, ...]) -> Pass:
    c = m.Cluster(1, "c-1", "p", "u", "demo", {"coe": "kubernetes"}, api_address=current)
    return Pass(ClusterSnapshot(c, None, [], 3, len(up), up), NOW)


@pytest.mark.parametrize(
    ("current", "up", "balanced", "written", "why"),
    [
        (None, ("10.0.0.3", "10.0.0.4"), None, "https://10.0.0.3:6443", "the oldest master"),
        ("https://10.0.0.3:6443", ("10.0.0.4",), None, "https://10.0.0.4:6443", "it went"),
        (None, ("10.0.0.3",), "10.0.0.2", "https://10.0.0.2:6443", "the balancer"),
        ("https://10.0.0.3:6443", ("10.0.0.3",), "10.0.0.2", "https://10.0.0.2:6443",
         "a master's address gives way to the balancer's"),
        ("https://10.0.0.2:6443", ("10.0.0.5",), "10.0.0.2", None,
         "masters come and go: the balancer's stays"),
        (None, (), "10.0.0.2", None, "no master up yet: none"),
    ],
)  # fmt: skip
def test_which_address_the_cluster_gives(
    current: str | None, up: tuple[str, ...], balanced: str | None, written: str | None, why: str
) -> None:
    p = pass_of(current, up)
    api_address(p, balanced)
    assert p.w.api_address == written, why
    known = cond.get(p.conds, cond.API_ADDRESS_KNOWN)
    assert known is not None and (known.status == cond.TRUE) == bool(up), why
