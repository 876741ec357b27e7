"""`shoal db ...`: schema upgrades and moving a deployment to PostgreSQL."""

from __future__ import annotations

import typer

from shoal import datadir, keys, logs
from shoal.domain.errors import ShoalError
from shoal.settings import Settings, SettingsError

db_app = typer.Typer(help="Database maintenance (run with shoal stopped).", no_args_is_help=True)


def settings_or_exit() -> Settings:
    """Settings from the environment for a command that opens the database itself;
    a bad value is one line and exit 2."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


@db_app.command("upgrade")
def upgrade() -> None:
    """Apply pending schema migrations (every shoal process also does this on start).

    Example: SHOAL_DATABASE_URL=postgresql://postgres@127.0.0.1/shoal shoal db upgrade
    """
    from shoal.db import migrations
    from shoal.db.engine import Database

    settings = settings_or_exit()
    datadir.secure(settings)
    db = Database(settings.db_url)
    try:
        migrations.upgrade(db)
    finally:
        db.close()
    typer.echo(f"schema is current in {logs.mask_url(settings.db_url)}")


@db_app.command("migrate")
def migrate(
    to: str = typer.Option(..., "--to", help="target database URL (empty), e.g. postgresql://..."),
    source: str = typer.Option(None, "--from", help="source URL (default: the configured one)"),
    sim_source: str = typer.Option(
        None,
        "--sim-from",
        help="where the sim world is (default: the configured one; with --from, that database)",
    ),
) -> None:
    """Copy the whole deployment into an empty database and verify every row.

    Resources, nodes, events and the sim world are copied; the source is left as it was.

    Example: shoal db migrate --to postgresql://postgres@127.0.0.1:5432/shoal
    """
    from shoal.db.transfer import copy_database
    from shoal.drivers.sim import tables as sim_tables
    from shoal.drivers.sim import worlds

    settings = settings_or_exit()
    datadir.secure(settings)
    src = source or settings.db_url
    sim_src = sim_source or (source if source else worlds.first_db_url(settings))
    try:
        report = copy_database(
            src,
            to,
            progress=lambda line: typer.echo(line, err=True),
            sim_source_url=sim_src,
            sim_metadata=sim_tables.metadata,
        )
    except ShoalError as exc:
        typer.echo(f"error: {logs.redact(exc.message)}", err=True)
        raise typer.Exit(1) from exc
    except Exception as exc:  # driver-level connection failures: one clear line
        typer.echo(f"error: cannot migrate: {_failure(exc, to)}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"copied and verified {report.total} rows in {len(report.rows)} tables.")
    typer.echo(f"Now run shoal on it:  SHOAL_DATABASE_URL={logs.mask_url(to)} shoal serve")
    typer.echo(
        "Cluster CA keys were copied sealed, as they are: every shoal serve on the new "
        f"database needs the key they were sealed with ({keys.source(settings)}; e.g. "
        "SHOAL_SECRET_KEY_FILE=/path/to/that/file)."
    )


def _failure(exc: Exception, target: str) -> str:
    """One line for a failure below shoal (a connection refused, a missing
    database), with no password in it, and the step that is missing when known."""
    first = (str(exc).strip().splitlines() or [""])[0]
    line = logs.redact(f"{exc.__class__.__name__}: {first}")
    if "does not exist" in first and "database" in first:
        name = target.rsplit("/", 1)[-1].split("?", 1)[0]
        line += f" (create it first, e.g. `createdb {name}`, then run this again)"
    return line


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
