"""The first admin token of a deployment in authentication mode `local` (its file).

A fresh deployment has no token, so nobody could make one: the first process that
serves it issues an admin token of the default project, writes it to `admin-token` in
the data directory (0600) and prints it once. The `shoal` CLI reads that file when no
token is given (`SHOAL_TOKEN`, `--token`), so the walkthrough works unchanged on the
machine that runs shoal. Lost it? `shoal token bootstrap` makes another.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from shoal.settings import Settings

TOKEN_FILE = "admin-token"


def path(settings: Settings) -> Path:
    return settings.data_dir / TOKEN_FILE


def ensure(settings: Settings, db: Any) -> str | None:
    """Mode local, no token issued yet: the first admin token, written to `path`; None
    otherwise (another process or an earlier start made it). `db`: a Database."""
    if settings.auth != "local":
        return None
    from shoal.services import tokens  # the CLI imports this module for TOKEN_FILE only

    token = tokens.first_admin(db, settings.default_project)
    if token is not None:
        write(settings, token)
    return token


def for_embedded(settings: Settings, db: Any) -> str | None:
    """An admin token for a shoal that talks to itself (`shoal demo`): the first one, or
    the one in the data directory's file, or a new one when the file is gone. None
    outside mode local."""
    if settings.auth != "local":
        return None
    from shoal.services import tokens

    token = ensure(settings, db)
    if token is not None:
        return token
    try:
        return path(settings).read_text().strip()
    except OSError:
        token = tokens.recovery_admin(db, settings.default_project, "the demo's own")
        write(settings, token)
        return token


def write(settings: Settings, token: str) -> Path:
    """`token` in the data directory's token file, readable by its owner only."""
    target = path(settings)
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    target.chmod(0o600)
    return target
