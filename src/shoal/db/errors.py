"""The database's own failures, as the layers above see them (they import no
SQLAlchemy): which exception a database driver raises, which of those is a race
lost inside PostgreSQL that the caller should retry, and which says the database
cannot take the request now (out of connections, restarting, unreachable, busy)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

# Deadlock, serialization failure, lock not available: a concurrent writer won.
CONFLICT_SQLSTATES = frozenset({"40P01", "40001", "55P03"})
# Too many connections (the server's or a database's limit), the server starting or
# shutting down: PostgreSQL's words for "not now".
CROWDED_SQLSTATES = frozenset({"53300", "57P03", "57P01"})
# The same refusals met while connecting, where the driver keeps only the words.
CROWDED_WORDS = ("too many connections", "too many clients", "starting up", "shutting down")
# A connection refused or lost (SQLSTATE class 08, or the driver's words when it has
# none), or SQLite's writer lock held past the busy timeout.
UNREACHABLE_WORDS = ("connection", "database is locked")

DatabaseError = DBAPIError  # what a database driver's failure is raised as
PoolExhausted = PoolTimeout  # this process's own connections all in use past the wait


def _sqlstate(exc: BaseException) -> str | None:
    return getattr(getattr(exc, "orig", None), "sqlstate", None)


def lost_race(exc: BaseException) -> bool:
    """True when `exc` is a transaction PostgreSQL aborted for a concurrent one."""
    return _sqlstate(exc) in CONFLICT_SQLSTATES


def unavailable(exc: BaseException) -> str | None:
    """Why the database cannot serve the request now, when that is what `exc` says
    (a retry in a moment may succeed); None for any other failure."""
    if isinstance(exc, PoolTimeout):
        return "all of this server's database connections are in use"
    if not isinstance(exc, OperationalError) or lost_race(exc):
        return None
    words = str(getattr(exc, "orig", exc)).lower()
    state = _sqlstate(exc) or ""
    if state in CROWDED_SQLSTATES or any(w in words for w in CROWDED_WORDS):
        return "the database has no connection to spare or is restarting"
    if state.startswith("08") or any(w in words for w in UNREACHABLE_WORDS):
        return "the database is unreachable or busy"
    return None  # e.g. SQLite's "no such table": a server error
