"""Wake-ups: tell conductors that desired state changed, without busy polling.

Writers: `install(db, on_commit)` watches every write session of `db`. When a
flush inserts a cluster or node group, or moves its `next_reconcile_at` (what
the services do on every desired-state write), the session is flagged; just
before its commit it runs `NOTIFY shoal_work` on PostgreSQL (so the
notification fires exactly when the write becomes visible, and never for a
rolled-back request), and right after the commit it calls `on_commit` (the
in-process conductor's `wake`, for the embedded SQLite setup). Code that writes
with Core statements flags the session itself with `request(session)`; the
conductor, which writes through Core connections, calls `send(conn)` (its own
process goes on claiming after a pass, so only other processes need telling).

Readers: `Listener` holds one dedicated autocommit psycopg connection that
`LISTEN`s on the channel and calls a callback for each notification; it
reconnects by itself and calls the callback after a reconnect (notifications
sent while disconnected are lost, so the conductor looks once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy import Connection, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from shoal.db.engine import Database
from shoal.db.tables import ClusterRow, NodeGroupRow

CHANNEL = "shoal_work"
_FLAG = "shoal_wake"
_WATCHED = (ClusterRow, NodeGroupRow)

log = logging.getLogger(__name__)


def request(session: Session) -> None:
    """Wake conductors when this session's transaction commits."""
    session.info[_FLAG] = True


def send(conn: Connection) -> None:
    """NOTIFY conductors when `conn`'s transaction commits (PostgreSQL delivers a
    NOTIFY at commit, never for a rollback); nothing to send on SQLite."""
    if conn.dialect.name == "postgresql":
        conn.execute(text(f"NOTIFY {CHANNEL}"))


def _moved(obj: Any) -> bool:
    return bool(inspect(obj).attrs.next_reconcile_at.history.has_changes())


def install(db: Database, on_commit: Callable[[], None] | None = None) -> None:
    """Hook `db`'s write sessions: NOTIFY (PostgreSQL) and `on_commit` after due writes."""
    factory = db.write_sessions  # events on the factory apply to every write session
    if getattr(factory, "_shoal_notify", False):
        return
    factory._shoal_notify = True  # type: ignore[attr-defined]
    postgres = not db.is_sqlite

    @event.listens_for(factory, "before_flush")
    def _flag(session: Session, _ctx: Any, _instances: Any) -> None:
        if session.info.get(_FLAG):
            return
        if any(isinstance(o, _WATCHED) for o in session.new) or any(
            isinstance(o, _WATCHED) and _moved(o) for o in session.dirty
        ):
            request(session)

    @event.listens_for(factory, "before_commit")
    def _notify(session: Session) -> None:
        session.flush()  # flag changes still pending in the identity map
        if postgres and session.info.get(_FLAG):
            session.execute(text(f"NOTIFY {CHANNEL}"))

    @event.listens_for(factory, "after_commit")
    def _wake(session: Session) -> None:
        if session.info.pop(_FLAG, False) and on_commit is not None:
            on_commit()

    @event.listens_for(factory, "after_rollback")
    def _forget(session: Session) -> None:
        session.info.pop(_FLAG, None)


def libpq_url(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as a libpq connection string for psycopg."""
    u = make_url(url).set(drivername="postgresql")
    return u.render_as_string(hide_password=False)


class Listener:
    """A background thread LISTENing on `CHANNEL`; `on_notify()` for each wake-up."""

    def __init__(self, url: str, on_notify: Callable[[], None], *, period: float = 1.0) -> None:
        self.conninfo = libpq_url(url)
        self.on_notify = on_notify
        self.period = period
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start listening; returns once connected (or after 5 s of trying)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="listen", daemon=True)
        self._thread.start()
        self.connected.wait(5)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        first = True
        while not self._stop.is_set():
            try:
                with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    if not first:
                        self.on_notify()  # whatever was sent while we were away
                    first = False
                    while not self._stop.is_set():
                        for _ in conn.notifies(timeout=self.period):
                            self.on_notify()
            except psycopg.Error as exc:
                self.connected.clear()
                log.warning("LISTEN %s: %s; reconnecting", CHANNEL, exc)
                self._stop.wait(1.0)
