"""Kubernetes' skew rule for workers beside their masters, as a table on plain values:
a kubelet never newer than the oldest master, at most two minors older than the newest."""

from __future__ import annotations

import pytest

from shoal.domain.bootstrap import versions
from shoal.domain.errors import Invalid


@pytest.mark.parametrize(
    ("masters", "worker", "says"),
    [
        (["v1.20.2"], "v1.20.2", None),
        (["v1.20.2"], "1.20.2", None),
        ([], "v1.22.0", None),  # no master known: nothing to hold it to
        (["v1.21.0"], "v1.20.2", None),
        (["v1.22.1"], "v1.20.2", None),  # two minors behind: allowed
        (["v1.20.2"], "v1.20.3", "newer than the masters (v1.20.2): upgrade the master"),
        (["v1.20.2"], "v1.21.0", "newer than the masters"),
        (["v1.21.0", "v1.20.2"], "v1.21.0", "newer than the masters (v1.20.2)"),  # mid-upgrade
        (["v1.23.0"], "v1.20.2", "more than 2 minor releases older than the masters (v1.23.0)"),
        (["v2.0.0"], "v1.20.2", "older than the masters"),
    ],
)
def test_workers_beside_masters(masters: list[str], worker: str, says: str | None) -> None:
    problem = versions.skew_problem(masters, worker)
    assert (problem is None) if says is None else (says in (problem or "")), problem


@pytest.mark.parametrize("bad", ["latest", "v1.20", "v1.x.2", ""])
def test_a_version_that_is_not_one_is_refused(bad: str) -> None:
    with pytest.raises(Invalid):
        versions.parse(bad)
