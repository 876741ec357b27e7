"""Which database failures the API answers as a conflict to retry (409), as "not now"
(503) or as a server error, on the exceptions the drivers really raise."""

from __future__ import annotations

import sqlite3

import psycopg
import pytest
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from shoal.db import errors


def wrapped(orig: Exception, kind: type = OperationalError) -> Exception:
    return kind("SELECT 1", {}, orig)


@pytest.mark.parametrize(
    ("exc", "race", "why"),
    [
        (wrapped(psycopg.errors.DeadlockDetected("deadlock")), True, None),
        (wrapped(psycopg.errors.SerializationFailure("x")), True, None),
        (wrapped(psycopg.errors.TooManyConnections("x")), False, "no connection to spare"),
        (wrapped(psycopg.errors.CannotConnectNow("x")), False, "no connection to spare"),
        (
            wrapped(psycopg.OperationalError("FATAL:  too many clients already")),
            False,
            "no connection to spare",
        ),
        (
            wrapped(psycopg.OperationalError("connection refused")),
            False,
            "unreachable or busy",
        ),
        (wrapped(sqlite3.OperationalError("database is locked")), False, "unreachable or busy"),
        (wrapped(sqlite3.OperationalError("no such table: events")), False, None),
        (wrapped(psycopg.errors.AdminShutdown("terminating connection")), False, "to spare"),
        (wrapped(psycopg.errors.QueryCanceled("statement timeout")), False, None),
        (PoolTimeout("QueuePool limit of size 4 overflow 26 reached"), False, "in use"),
        (wrapped(psycopg.errors.UniqueViolation("dup"), IntegrityError), False, None),
        (ValueError("not the database's"), False, None),
    ],
)
def test_a_failure_is_classified(exc: Exception, race: bool, why: str | None) -> None:
    assert errors.lost_race(exc) is race
    said = errors.unavailable(exc)
    assert (said is None) if why is None else (why in (said or "")), said
