"""Move a whole deployment from one database to another (SQLite -> PostgreSQL).

A small start (one process, SQLite) grows into HA (PostgreSQL, several
conductors) by copying every row — resources, nodes, events, leases-free state
and the sim cloud's world — into an empty target that carries the same schema,
then comparing every row of every table. Nothing is deleted from the source.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import zip_longest
from typing import Any

from sqlalchemy import MetaData, Table, func, inspect, select, text

from shoal.db import deployment_state, migrations, registry
from shoal.db.engine import Database
from shoal.db.tables import Base, LeaseRow
from shoal.db.types import utcnow
from shoal.domain.errors import Conflict, Invalid

BATCH = 2000
Progress = Callable[[str], None]


@dataclass
class TransferReport:
    """Rows copied and verified, per table."""

    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.rows.values())


# Facts about a database itself, not the deployment's: never copied.
_NOT_COPIED = frozenset({"deployment_state"})
# A shoal process that reported this recently may still be running.
ALIVE_WINDOW = timedelta(seconds=60)


def _tables(sim: MetaData | None = None) -> list[Table]:
    """Every table to move, parents before children (the sim world's after shoal's)."""
    ours = [t for t in Base.metadata.sorted_tables if t.name not in _NOT_COPIED]
    return [*ours, *(sim.sorted_tables if sim is not None else ())]


def _existing(db: Database) -> set[str]:
    return set(inspect(db.engine).get_table_names())


def _rows(db: Database, table: Table) -> Iterator[Any]:
    order = list(table.primary_key.columns)
    with db.engine.connect() as conn:
        result = conn.execution_options(yield_per=BATCH).execute(select(table).order_by(*order))
        yield from result


def _check_source_idle(source: Database) -> None:
    """Refuse while a shoal process may still write to the source: one that reported
    alive in the last minute (every `shoal serve` and `shoal conductor` does, and
    says when it stops), or holds a lease."""
    now = utcnow()
    alive = registry.live_processes(source, now - ALIVE_WINDOW)
    if alive:
        host, binary, seen = alive[0]
        raise Conflict(
            f"a shoal process still runs on the source ({binary} on {host}, last seen "
            f"{seen:%H:%M:%S} UTC; {len(alive)} in all); stop every shoal process (or wait "
            f"{int(ALIVE_WINDOW.total_seconds())} s after one was killed), then migrate"
        )
    with source.read() as s:
        held = s.scalars(select(LeaseRow).where(LeaseRow.expires_at > now)).first()
    if held is not None:
        raise Conflict(
            f"a conductor still works on the source ({held.holder} holds {held.resource} "
            f"until {held.expires_at:%H:%M:%S} UTC); stop every shoal process, then migrate"
        )
    note = deployment_state.unfinished_copy(source)
    if note is not None:
        raise Conflict(f"the source itself is an unfinished copy ({note}); finish that first")


def _mark_target(target: Database, note: str) -> bool:
    """Mark the target as a copy under way, before anything else is written to it (a
    process started on it refuses until the end). True when an earlier run of this
    command left it unfinished (it is emptied below: the copy starts again)."""
    unfinished = deployment_state.unfinished_copy(target) is not None
    if not unfinished and _existing(target) - {"deployment_state"}:
        _check_target_empty(target, None)  # shoal's tables, if any, must be empty
    with target.engine.begin() as conn:
        deployment_state.mark_copy(conn, note, utcnow())
    return unfinished


def _empty_target(target: Database, sim: MetaData | None, unfinished: bool) -> None:
    """An unfinished copy is emptied; any other target must be empty already."""
    if not unfinished:
        _check_target_empty(target, sim)
        return
    with target.engine.begin() as conn:
        for table in reversed(_tables(sim)):
            conn.execute(table.delete())


def _check_target_empty(target: Database, sim: MetaData | None) -> None:
    present = _existing(target)
    with target.engine.connect() as conn:
        for table in (t for t in _tables(sim) if t.name in present):
            if conn.execute(select(func.count()).select_from(table)).scalar_one():
                raise Conflict(
                    f"the target already holds data (table {table.name}); "
                    "migrate into an empty database"
                )


def _reset_sequences(target: Database, sim: MetaData | None) -> None:
    """After explicit ids were inserted, PostgreSQL sequences must move past them."""
    if target.dialect != "postgresql":
        return
    with target.engine.begin() as conn:
        for table in _tables(sim):
            for col in table.primary_key.columns:
                if col.autoincrement is not False and col.type.python_type is int:
                    conn.execute(
                        text(
                            f"SELECT setval(pg_get_serial_sequence('{table.name}', '{col.name}'), "
                            f"COALESCE(MAX({col.name}), 1), MAX({col.name}) IS NOT NULL) "
                            f"FROM {table.name}"
                        )
                    )


def copy_database(
    source_url: str,
    target_url: str,
    progress: Progress = print,
    sim_source_url: str | None = None,
    sim_metadata: MetaData | None = None,
) -> TransferReport:
    """Copy every row from source to an empty target, then verify row by row.

    shoal's tables come from `source_url`; the sim world's tables (`sim_metadata`,
    which the caller names: services do not know drivers) from `sim_source_url`
    (default: the same database); both land in the target."""
    source, target = Database(source_url), Database(target_url)
    sim_source = Database(sim_source_url) if sim_source_url else source
    if target.url in (source.url, sim_source.url):
        raise Invalid("source and target are the same database", field="to")
    try:
        migrations.upgrade(source)
        _check_source_idle(source)
        note = f"started {utcnow():%Y-%m-%d %H:%M:%S} UTC by shoal db migrate"
        unfinished = _mark_target(target, note)
        migrations.upgrade(target)
        if sim_metadata is not None:
            sim_metadata.create_all(target.engine)
        _empty_target(target, sim_metadata, unfinished)
        present = {id(source): _existing(source), id(sim_source): _existing(sim_source)}
        moved: list[tuple[Table, Database]] = []
        report = TransferReport()
        for table in _tables(sim_metadata):
            origin = sim_source if table.metadata is sim_metadata else source
            if table.name not in present[id(origin)]:
                continue
            moved.append((table, origin))
            n = 0
            batch: list[dict[str, Any]] = []
            with target.engine.begin() as conn:
                for row in _rows(origin, table):
                    batch.append(dict(row._mapping))
                    if len(batch) >= BATCH:
                        conn.execute(table.insert(), batch)
                        n += len(batch)
                        batch = []
                if batch:
                    conn.execute(table.insert(), batch)
                    n += len(batch)
            report.rows[table.name] = n
            progress(f"copied {n:>7} rows of {table.name}")
        _reset_sequences(target, sim_metadata)
        verify(moved, target, progress)
        with target.engine.begin() as conn:
            deployment_state.clear_copy(conn)  # complete and verified: it may be served
        return report
    finally:
        if sim_source is not source:
            sim_source.close()
        source.close()
        target.close()


def verify(tables: list[tuple[Table, Database]], target: Database, progress: Progress) -> None:
    """Compare every row of every (table, its source); raise Conflict naming the
    first difference."""
    for table, source in tables:
        n = 0
        for a, b in _zip_rows(_rows(source, table), _rows(target, table)):
            if a != b:
                raise Conflict(f"row differs in {table.name}: source {a!r} target {b!r}")
            n += 1
        progress(f"verified {n:>7} rows of {table.name}")


def _zip_rows(a: Iterator[Any], b: Iterator[Any]) -> Iterator[tuple[Any, Any]]:
    """The rows of both as tuples, side by side; None past the end of the shorter
    (a result row is never None)."""
    for x, y in zip_longest(a, b):
        yield (None if x is None else tuple(x)), (None if y is None else tuple(y))
