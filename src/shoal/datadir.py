"""Files at rest: the data directory is 0700 and shoal's SQLite files (and the first
admin token) in it 0600,
whether shoal makes them now or finds them from an older start (they hold
desired state, the sim world, and sealed CA keys; nobody else on the host needs
to read them).

`secure(settings)` runs at the start of every shoal process that opens the
database (`serve`, `conductor`, `demo`, `db`), before anything is opened; it
also sets the process umask to 077, so that whatever it makes later (SQLite's
-wal and -shm files, a key file) is private from the start.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sqlalchemy.engine import make_url

from shoal import admin_token
from shoal.db.engine import secure_sqlite_file
from shoal.drivers import providers
from shoal.settings import Settings

DIR_MODE = 0o700


def secure(settings: Settings) -> None:
    """Private umask; the data directory made or tightened to 0700 when shoal keeps
    anything in it; every SQLite database file shoal uses made or tightened to 0600."""
    os.umask(0o077)
    urls = [settings.db_url, *providers.databases(settings)]
    sqlite_files = [p for p in map(sqlite_path, urls) if p]
    uses_dir = (
        any(p.parent == settings.data_dir for p in sqlite_files)
        or not (settings.secret_key or settings.secret_key_file)  # the default key file
    )
    if uses_dir:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
        if stat.S_IMODE(settings.data_dir.stat().st_mode) != DIR_MODE:
            settings.data_dir.chmod(DIR_MODE)
    for path in sqlite_files:
        secure_sqlite_file(path)
    token = settings.data_dir / admin_token.TOKEN_FILE  # the first admin token, if kept there
    if token.exists() and stat.S_IMODE(token.stat().st_mode) != 0o600:
        token.chmod(0o600)


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for another database or an in-memory one)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(str(parsed.database))
