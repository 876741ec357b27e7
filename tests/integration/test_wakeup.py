"""Wake-ups without busy polling: an idle conductor whose safety-net poll is 30 s
starts work within a fraction of a second of a desired-state commit, through
NOTIFY on PostgreSQL (writer and conductor on separate connections, as in two
processes) and through the in-process wake of `shoal serve` on SQLite."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import event, func, select

from shoal.db import notify
from shoal.db.engine import Database
from shoal.db.tables import LeaseRow, NodeRow
from shoal.runtime import build_runtime
from shoal.services import clusters
from shoal.services.context import Caller
from shoal.settings import Settings
from tests.support.server import live_server
from tests.support.waiting import scaled

POLL = 30.0  # far longer than any wake-up we accept
# A wake-up takes tens of ms; a machine other jobs load may hold a thread back for a
# second now and then (a full run saw one of five at 1.16 s). What a lost wake-up costs
# is the poll: the worst sample must stay far below it, the typical one well below 1 s.
TYPICAL_MAX_S = 0.5
WORST_MAX_S = POLL / 6
SIM = {"boot_seconds": 0, "delete_seconds": 0, "api_latency_ms": 0, "jitter": 0}
QUIET = {"poll_seconds": POLL, "listen_poll_seconds": POLL, "sweep_seconds": 3600}


def body(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "master_flavor_id": "m1.small",
        "node_count": 1,
    }


def node_rows(db: Database) -> int:
    with db.read() as s:
        return int(s.scalar(select(func.count()).select_from(NodeRow)) or 0)


def claimed(db: Database) -> bool:
    """A conductor holds a lease right now (it claimed the new work)."""
    with db.read() as s:
        return bool(s.scalar(select(func.count()).select_from(LeaseRow)))


def latency_until(more: Callable[[], bool], t0: float, limit: float = 5.0) -> float:
    limit = scaled(limit)  # a bound on a lost wake-up, stretched on a loaded machine
    while not more():
        assert time.monotonic() - t0 < limit, f"no wake-up within {limit} s"
        time.sleep(0.002)
    return time.monotonic() - t0


@pytest.fixture
def conductor_and_writer(pg_url: str, tmp_path: Path) -> Iterator[tuple[Any, Database]]:
    settings = Settings.from_env({}, data_dir=tmp_path, database_url=pg_url, sim=SIM,
                                 conductor_settings=QUIET)  # fmt: skip
    runtime = build_runtime(settings, with_conductor=True)
    writer = Database(pg_url)  # the "API process": its own engine, NOTIFY only
    notify.install(writer)
    runtime.start()
    try:
        yield runtime, writer
    finally:
        runtime.close()
        writer.close()


@pytest.mark.postgres
def test_notify_wakes_an_idle_conductor_on_another_connection(
    conductor_and_writer: tuple[Any, Database], record_property: Callable[[str, Any], None]
) -> None:
    runtime, writer = conductor_and_writer
    conductor = runtime.conductor
    assert conductor.listener is not None and conductor.listener.connected.is_set()
    assert conductor.poll_period() == POLL
    caller = Caller(project_id="p1")
    claims, rows = [], []
    for i in range(5):
        time.sleep(0.5)  # every worker is idle again, sleeping on the 30 s poll
        latency_until(lambda: not claimed(writer), time.monotonic(), limit=30.0)
        before = node_rows(writer)
        clusters.create(writer, caller, body(f"w{i}"), quota_default=100)
        t0 = time.monotonic()  # the commit (and so the NOTIFY) has happened
        claims.append(latency_until(lambda b=before: claimed(writer) or node_rows(writer) > b, t0))
        rows.append(latency_until(lambda b=before: node_rows(writer) > b, t0))
    for name, samples in (("claim", claims), ("first node row", rows)):
        median, worst = statistics.median(samples), max(samples)
        print(f"\ncommit -> {name}: median {median * 1000:.0f} ms, worst {worst * 1000:.0f} ms")
        key = name.replace(" ", "_")
        record_property(f"notify_{key}_median_ms", round(median * 1000, 1))
        record_property(f"notify_{key}_worst_ms", round(worst * 1000, 1))
    assert statistics.median(rows) < TYPICAL_MAX_S and max(rows) < WORST_MAX_S, rows


@pytest.mark.postgres
def test_rolled_back_write_sends_no_wakeup(conductor_and_writer: tuple[Any, Database]) -> None:
    runtime, writer = conductor_and_writer
    seen: list[float] = []
    listener = notify.Listener(writer.url, lambda: seen.append(time.monotonic()))
    listener.start()
    try:
        with pytest.raises(RuntimeError), writer.write() as s:
            clusters.create(writer, Caller(project_id="p1"), body("ok"), quota_default=100)
            notify.request(s)
            raise RuntimeError("the request fails after its write")
        latency_until(lambda: len(seen) >= 1, time.monotonic())
        time.sleep(0.3)
        assert len(seen) == 1  # the committed create only, not the rolled-back session
    finally:
        listener.stop()


def test_embedded_conductor_is_woken_in_process_on_sqlite(
    tmp_path: Path, record_property: Callable[[str, Any], None]
) -> None:
    settings = Settings.from_env({}, data_dir=tmp_path, port=0, sim=SIM, conductor_settings=QUIET)
    with live_server(settings) as srv:
        http = httpx.Client(base_url=srv.v1, headers={"X-Auth-Token": srv.token()})
        db = srv.runtime.db
        samples = []
        for i in range(3):
            time.sleep(0.5)
            before = node_rows(db)
            t0 = time.monotonic()
            r = http.post("/clusters", json=body(f"e{i}"))
            assert r.status_code == 202, r.text
            samples.append(latency_until(lambda b=before: node_rows(db) > b, t0))
    worst = max(samples)
    print(f"\nin-process wake-up (HTTP create to first node row): worst {worst * 1000:.0f} ms")
    record_property("inprocess_wakeup_worst_ms", round(worst * 1000, 1))
    assert statistics.median(samples) < TYPICAL_MAX_S and worst < WORST_MAX_S, samples


@pytest.mark.postgres
def test_a_conductor_write_notifies_at_commit_only(pg_url: str) -> None:
    """`notify.send` in a Core transaction (the conductor marking a deleted cluster's
    groups): delivered when it commits, never for a rollback."""
    db = Database(pg_url)
    seen: list[float] = []
    listener = notify.Listener(db.url, lambda: seen.append(time.monotonic()))
    listener.start()
    try:
        assert listener.connected.wait(5)
        time.sleep(0.2)
        seen.clear()  # the listener's own first call after connecting
        with pytest.raises(RuntimeError), db.core_write() as conn:
            notify.send(conn)
            raise RuntimeError("the pass fails after its write")
        with db.core_write() as conn:
            notify.send(conn)
            time.sleep(0.3)
            assert seen == []  # not before the commit
        latency_until(lambda: len(seen) == 1, time.monotonic(), limit=2.0)
        time.sleep(0.2)
        assert len(seen) == 1
    finally:
        listener.stop()
        db.close()


def test_an_idle_process_looks_once_per_poll_not_once_per_worker(tmp_path: Path) -> None:
    """Only the timekeeper looks on a timer: 8 idle workers with a 0.1 s poll read the
    queue about once per period (the others would read it 8 times as often)."""
    period, window = 0.1, 2.0
    quick = {"poll_seconds": period, "sweep_seconds": 3600, "workers": 8}
    settings = Settings.from_env({}, data_dir=tmp_path, sim=SIM, conductor_settings=quick)
    runtime = build_runtime(settings, with_conductor=True)
    looks: list[float] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "ORDER BY leases.expires_at" in statement:  # the look's last read (db/queue.py)
            looks.append(time.monotonic())

    event.listen(runtime.db.engine, "before_cursor_execute", count)
    runtime.start()
    try:
        time.sleep(0.5)  # every worker has looked once at start and sleeps
        t0, n0 = time.monotonic(), len(looks)
        time.sleep(window)
        seen, periods = len(looks) - n0, (time.monotonic() - t0) / period
    finally:
        runtime.close()
    print(f"\nidle looks: {seen} in {periods:.0f} poll periods of 8 workers")
    assert 0 < seen <= 2 * periods + 2, (seen, periods)
