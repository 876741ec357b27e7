"""Placement's WSGI app for gunicorn (runs in the services' venv).

The config dir comes from $OS_PLACEMENT_CONFIG_DIR. Run it with one worker and
one thread on SQLite: requests are then serialized, so SQLite never sees two
writers. Do not add a "BEGIN IMMEDIATE" listener here: on a resource-provider
generation conflict Placement re-reads the provider in an independent reader
transaction nested inside its open writer transaction, and with BEGIN
IMMEDIATE that reader waits on its own thread's write lock for the whole busy
timeout, then fails with "database is locked" (HTTP 500).
"""

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


@event.listens_for(Engine, "connect")
def _busy_timeout(dbapi_conn: Any, _record: Any) -> None:
    if type(dbapi_conn).__module__.startswith("sqlite3"):
        dbapi_conn.execute("PRAGMA busy_timeout = 30000")


from placement.wsgi.api import application  # noqa: E402,F401
