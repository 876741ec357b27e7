"""One SQLAlchemy engine per world, tuned so several threads and processes share it.

SQLite: WAL (readers never wait for the writer), busy_timeout (writers of other
processes wait instead of failing), synchronous=NORMAL (no fsync per commit,
which WAL makes safe), and BEGIN IMMEDIATE for write transactions so that two
writers never deadlock upgrading a read lock. PostgreSQL needs none of this.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

WRITE = {"sim_write": True}


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def is_memory(url: str) -> bool:
    return is_sqlite(url) and make_url(url).database in (None, "", ":memory:")


def make_engine(url: str, pool_max: int = 40) -> Engine:
    """An engine for `url` with a pool large enough for the conductor's threads (on
    PostgreSQL at most `pool_max` connections at once: more calls wait for one)."""
    if not is_sqlite(url):
        u = make_url(url)
        if u.drivername == "postgresql":  # psycopg 3 is the driver shoal ships with
            u = u.set(drivername="postgresql+psycopg")
        kept = min(8, pool_max)
        # No ping before each use (a round trip per call): a connection the server
        # dropped fails its call, which the driver reports as transient (driver.py), and
        # SQLAlchemy replaces the pool's connections.
        return create_engine(u, pool_size=kept, max_overflow=pool_max - kept)
    pool: dict[str, Any] = {"pool_size": 8, "max_overflow": 32}
    if is_memory(url):  # one shared connection, or every connection is a new world
        pool = {"poolclass": StaticPool}
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, **pool)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
        cur = dbapi_conn.cursor()
        if not is_memory(url):
            cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        write = conn.get_execution_options().get("sim_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine
