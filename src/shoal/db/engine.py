"""Connections to shoal's database: SQLite (WAL) embedded, or PostgreSQL.

`Database.read()` gives a session for queries; `Database.write()` gives a
session inside one transaction that commits on success and rolls back on any
error, so a rejected request stores nothing. `core_read()` and `core_write()`
are the same without the ORM, for the conductor's hot paths (claims, leases,
pass snapshots and writes): they read and write columns by key, and a small
transaction through a Session costs several times what SQLite spends on it.
On SQLite, writers start with BEGIN IMMEDIATE: the write lock is taken up
front, so two writers queue on the busy timeout instead of failing with
"database is locked" halfway through.
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000


def upsert(dialect: str, table: Table) -> Any:
    """An INSERT on `table` that takes ON CONFLICT clauses (PostgreSQL's or SQLite's
    form, which SQLAlchemy spells alike); `dialect` is the connection's dialect name."""
    return (pg_insert if dialect == "postgresql" else sqlite_insert)(table)


# Statements run alike through a Core connection (the conductor's hot paths) and an
# ORM session (the services and tests).
Executor = Connection | Session


def dialect_of(executor: Executor) -> str:
    """The dialect name behind a Core connection or an ORM session."""
    if isinstance(executor, Connection):
        return executor.dialect.name
    return executor.get_bind().dialect.name


_XACT_LOCK = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")


def xact_lock(executor: Executor, key: str) -> None:
    """Serialize, until the transaction ends, every transaction that takes the lock
    `key` (PostgreSQL: several processes may run at once). SQLite needs nothing: its
    write transactions (BEGIN IMMEDIATE) already run one at a time."""
    if dialect_of(executor) == "postgresql":
        executor.execute(_XACT_LOCK, {"key": key})


def normalize_url(url: str) -> str:
    """Accept postgresql:// and postgres:// and use psycopg 3 for them."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://") :]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return url


# SQLite keeps a database's data in these files beside it (the -wal and -shm of
# WAL mode, a -journal during recovery); they get the database file's mode.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
FILE_MODE = 0o600


def secure_sqlite_file(path: Path) -> None:
    """`path` exists and is 0600 before SQLite opens it, as are the side files SQLite
    keeps beside it (SQLite gives new side files the database file's mode). The
    directory is made 0700 when it does not exist; an existing one is left alone
    (it may be /tmp: the data directory is tightened by `shoal.datadir`)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(fd)
    for p in (path, *(path.with_name(path.name + end) for end in SQLITE_SIDE_FILES)):
        try:
            if stat.S_IMODE(p.stat().st_mode) != FILE_MODE:
                p.chmod(FILE_MODE)
        except FileNotFoundError:
            continue


def _sqlite_engine(url: str, begin: str) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql(begin)

    return engine


PG_POOL_KEPT = 4  # connections a process keeps open to PostgreSQL between uses
PG_POOL_MAX = 30  # at most this many at once (the rest opened for a burst, closed after)
# A pooled connection idle longer than this is pinged before it is handed out; one used
# more recently is not (a busy conductor takes one several hundred times a second).
PG_PING_IDLE_S = 5.0


def _ping_when_idle(engine: Engine, idle_s: float) -> None:
    """Hand out a pooled connection unchecked when it was in use within `idle_s`, and
    ping it first when it was not: a dead one is replaced (the pool retries with a
    new connection). SQLAlchemy's `pool_pre_ping` pings on every checkout, one round
    trip per transaction, which was 44 % of what PostgreSQL counted as transactions in
    the fleet benchmark. A server that restarts under a connection used within
    `idle_s` fails that connection's next transaction (a database error the callers
    already retry, as for a restart in the middle of one); SQLAlchemy then replaces
    every connection the pool held before it."""

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checked_out(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        since = record.info.pop("idle_since", None)
        if since is None or time.monotonic() - since < idle_s:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_conn)
        except Exception as exc:
            raise DisconnectionError(f"pooled connection lost: {exc}") from exc
        if not alive:
            raise DisconnectionError("pooled connection lost")


class Database:
    """Engines and session factories for one database URL."""

    def __init__(
        self, url: str, pool_max: int = PG_POOL_MAX, ping_idle_s: float = PG_PING_IDLE_S
    ) -> None:
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                secure_sqlite_file(Path(parsed.database))
            self.engine = _sqlite_engine(self.url, "BEGIN")
            self.write_engine = _sqlite_engine(self.url, "BEGIN IMMEDIATE")
        else:
            # Few connections kept open per process, more only for a burst, at most
            # `pool_max` (SHOAL_DATABASE_POOL_MAX): a thread past it waits for one, where
            # PostgreSQL would refuse a connection past its max_connections
            # (docs/configuration.md).
            kept = min(PG_POOL_KEPT, pool_max)
            # Last in, first out: the connections in use stay warm (not pinged), the
            # rest sit idle and are pinged when a burst takes them again.
            self.engine = create_engine(
                self.url, pool_size=kept, max_overflow=pool_max - kept, pool_use_lifo=True
            )
            _ping_when_idle(self.engine, ping_idle_s)
            self.write_engine = self.engine
        self._read = sessionmaker(self.engine, expire_on_commit=False)
        self._write = sessionmaker(self.write_engine, expire_on_commit=False)
        # SQLite has one writer at a time: this process's writers queue on a lock
        # instead of in SQLite's busy handler, which sleeps in steps of up to
        # 100 ms however soon the writer before it commits.
        self._write_lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.dialect == "sqlite" else contextlib.nullcontext()
        )

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @property
    def write_sessions(self) -> sessionmaker[Session]:
        """The factory of `write()`'s sessions: SQLAlchemy session events registered
        on it apply to every write session (`notify.install` hooks wake-ups there)."""
        return self._write

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._read() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        with self._write_lock, self._write() as session, session.begin():
            yield session

    @contextmanager
    def core_read(self, *, snapshot: bool = False) -> Iterator[Connection]:
        """A Core connection for queries; `snapshot`: every query sees one snapshot
        (REPEATABLE READ on PostgreSQL; SQLite's deferred transaction already is one)."""
        with self.engine.connect() as conn:
            if snapshot and not self.is_sqlite:
                conn.execution_options(isolation_level="REPEATABLE READ")
            yield conn

    @contextmanager
    def core_write(self) -> Iterator[Connection]:
        """A Core connection inside one transaction: commit on success, rollback on error."""
        with self._write_lock, self.write_engine.begin() as conn:
            yield conn

    def close(self) -> None:
        self.engine.dispose()
        if self.write_engine is not self.engine:
            self.write_engine.dispose()
