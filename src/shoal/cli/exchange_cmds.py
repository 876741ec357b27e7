"""`shoal export` / `shoal import`: move the management plane to another deployment
(db/exchange.py). Both work on the configured database directly, like
`shoal db`; the importing deployment must run with the exporting one's secret key."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from shoal import datadir, keys, logs
from shoal.cli.db_cmds import settings_or_exit
from shoal.domain.errors import ShoalError
from shoal.settings import Settings, SettingsError


def _key_id(settings: Settings) -> str:
    """The id of this deployment's secret key (the CA keys are sealed with it)."""
    try:
        return keys.load(settings).key_id
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def export(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="file to write (default: stdout)")
    ] = None,
) -> None:
    """Write every resource of this deployment (templates, clusters, node groups, nodes,
    CAs sealed, operations, events, quotas) as one JSON document.

    Example: shoal export -o edge.json
    """
    from shoal.db import exchange, migrations
    from shoal.db.engine import Database

    settings = settings_or_exit()
    datadir.secure(settings)
    key_id = _key_id(settings)
    db = Database(settings.db_url)
    try:
        migrations.upgrade(db)
        doc = exchange.export_document(db, key_id)
    finally:
        db.close()
    text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text)
        out.chmod(0o600)  # the CA keys are sealed, the rest is still the deployment's
    count = sum(len(rows) for rows in doc["tables"].values())
    clusters = len(doc["tables"]["clusters"])
    typer.echo(f"exported {clusters} cluster(s), {count} row(s) in all", err=True)


def import_(
    source: Annotated[Path, typer.Argument(help="a file `shoal export` wrote")],
) -> None:
    """Add an export's resources to this deployment; it adopts the machines the cloud
    holds (nothing is recreated). Stop the exporting deployment first.

    Example: shoal import edge.json
    """
    from shoal.db import exchange, migrations
    from shoal.db.engine import Database

    settings = settings_or_exit()
    datadir.secure(settings)
    try:
        doc = json.loads(source.read_text())
    except OSError as exc:
        typer.echo(f"error: cannot read {source}: {exc.strerror}", err=True)
        raise typer.Exit(2) from exc
    except ValueError as exc:
        typer.echo(f"error: {source} is not JSON: {exc}", err=True)
        raise typer.Exit(2) from exc
    key_id = _key_id(settings)
    db = Database(settings.db_url)
    try:
        migrations.upgrade(db)
        report = exchange.import_document(db, doc, key_id, lambda line: typer.echo(line, err=True))
    except ShoalError as exc:
        typer.echo(f"error: {logs.redact(exc.message)}", err=True)
        raise typer.Exit(1) from exc
    finally:
        db.close()
    typer.echo(
        f"imported {report.rows.get('clusters', 0)} cluster(s), {report.total} row(s); the "
        "conductor adopts their machines when shoal runs"
    )


def register(app: typer.Typer) -> None:
    app.command("export")(export)
    app.command("import")(import_)
