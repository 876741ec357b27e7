"""Glance's WSGI app for gunicorn (runs in the services' venv).

The config dir comes from $OS_GLANCE_CONFIG_DIR. SQLite waits for a busy
database instead of failing at once.
"""

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine


@event.listens_for(Engine, "connect")
def _busy_timeout(dbapi_conn: Any, _record: Any) -> None:
    if type(dbapi_conn).__module__.startswith("sqlite3"):
        dbapi_conn.execute("PRAGMA busy_timeout = 30000")


from glance.wsgi.api import application  # noqa: E402,F401
