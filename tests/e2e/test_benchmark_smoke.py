"""The scale benchmark's smoke run: the same code path as `./run bench`, small sizes.

Figures are not asserted here (timing belongs to the benchmark); what is
asserted is that every scenario completes through the real processes and that
the correctness checks inside them (exact targeted removal) hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks import fleet, kubernetes, scenarios

from tests.support.kubernetes import KUBERNETES_GROUP, kubernetes_unavailable


@pytest.mark.slow
def test_overhead_and_exact_resize_smoke() -> None:
    rows = scenarios.overhead([(2, 10, 0)])
    assert [r.scenario for r in rows] == ["create 2x10", "delete 2x10"]
    assert all(r.wall_s > 0 and r.cpu_ms_per_node is not None for r in rows)
    (resize,) = scenarios.targeted_resize(20, 3)
    assert "exactly the named: True" in resize.note


@pytest.mark.slow
@pytest.mark.postgres
def test_fleet_smoke(pg_url: str) -> None:
    """A tiny fleet (3 clusters, 300 nodes) through 2 API and 2 conductor processes on
    PostgreSQL, the sim in processes of its own (x20): every phase completes, nothing
    errs, and the figures the table prints were measured."""
    r = fleet.fleet_run(
        fleet.Fleet(300, conductors=2, clients=4, readers=4, reader_pause_s=0.2, time_scale=20),
        database_url=pg_url,
    )
    assert r.created == 300 and r.errors == []
    assert r.mutated == {"resize": 1, "upgrade": 1, "delete": 1}
    assert set(r.phase2) == {"resize", "upgrade", "delete"}
    assert set(r.cpu_own) == {"api0", "api1", "conductor0", "conductor1"}
    assert all(v > 0 for v in r.cpu_own.values()) and r.pg_cpu_s > 0
    assert r.pg_connections >= 6  # 4 processes and their sim children at least
    pools = {k: int(v) for k, v in r.fleet.extra_env if k.endswith("_POOL_MAX")}
    assert set(pools) == {"SHOAL_DATABASE_POOL_MAX", "SHOAL_SIM_DATABASE_POOL_MAX"}
    each = pools["SHOAL_DATABASE_POOL_MAX"] + 1 + pools["SHOAL_SIM_DATABASE_POOL_MAX"]
    assert r.pg_connections <= 4 * each + 2  # 4 processes' pools, the sampler's, a migration
    assert 0 < max(r.rss.values()) < 1024
    readers = {k for k in r.lat.samples if k.startswith("read ")}
    assert "probe GET cluster" in r.lat.samples and len(readers) >= 3
    rows = fleet.rows_for(r, "smoke")
    assert rows[0].wall_s == r.create_s and rows[-1].ok is True  # the errors row


@pytest.mark.slow
@pytest.mark.kubernetes
@pytest.mark.xdist_group(KUBERNETES_GROUP)
@pytest.mark.timeout(1800)
def test_kubernetes_smoke(kubernetes_bin: Path) -> None:
    """`./run bench --quick kubernetes`: one cluster of 1 master + 1 worker through a real
    `shoal serve` on the local provider, then the same machines booted by the plain script
    with the user data shoal rendered: both reach two Ready nodes of the same names, the
    plain machines were given shoal's user data byte for byte, and the phases come in
    their order (machines begun, API server answering, every node Ready)."""
    why = kubernetes.missing_prerequisites()
    if why:
        kubernetes_unavailable(why)
    result = kubernetes.measure((1,), kubernetes.QUICK_ORDER)
    (shoal,) = result.of("shoal", 1)
    (plain,) = result.of("plain", 1)
    assert len(shoal.ready) == 2 and plain.ready == shoal.ready
    assert plain.user_data_sha == shoal.user_data_sha
    for run in (shoal, plain):
        assert (
            0
            <= run.machines_s
            < run.api_s
            <= run.first_ready_s
            <= run.wall_s
            < kubernetes.READY_TIMEOUT_S
        )
    assert shoal.shoal_cpu_s > 0
    rows = kubernetes.rows_for(result, (1,))
    assert [r.scenario for r in rows] == ["kubernetes 1+1: plain script", "kubernetes 1+1: shoal"]
    assert rows[1].ratio == shoal.wall_s / plain.wall_s
