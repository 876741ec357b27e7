"""Alembic, driven from code: migrations ship inside the package and apply on
start, so a fresh data directory and an old one both end at the same schema."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

from shoal.db.engine import Database

SCRIPT_DIR = Path(__file__).parent / "alembic"


def alembic_config(db: Database) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPT_DIR))
    cfg.set_main_option("sqlalchemy.url", db.url.replace("%", "%%"))
    cfg.attributes["engine"] = db.write_engine
    return cfg


def upgrade(db: Database, revision: str = "head") -> None:
    """Apply every pending migration (every entry point calls this on start)."""
    command.upgrade(alembic_config(db), revision)
