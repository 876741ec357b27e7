"""The database's own failures, as the layers above see them (they import no
SQLAlchemy): which exception a database driver raises, and which of those is a
race lost inside PostgreSQL that the caller should retry."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

# Deadlock, serialization failure, lock not available: a concurrent writer won.
CONFLICT_SQLSTATES = frozenset({"40P01", "40001", "55P03"})

DatabaseError = DBAPIError  # what a database driver's failure is raised as


def lost_race(exc: BaseException) -> bool:
    """True when `exc` is a transaction PostgreSQL aborted for a concurrent one."""
    return getattr(getattr(exc, "orig", None), "sqlstate", None) in CONFLICT_SQLSTATES
