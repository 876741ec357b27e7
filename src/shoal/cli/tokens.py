"""`shoal token create|list|revoke|bootstrap`: API tokens of authentication mode `local`."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.client import connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(
    help="API tokens shoal issues (SHOAL_AUTH=local): who may do what, by project and role.",
    no_args_is_help=True,
)

LIST_COLUMNS = (
    "uuid", "hint", "project_id", "user_id", "role", "expires_at", "revoked_at", "description"
)  # fmt: skip


@app.command("create")
def create(
    ctx: typer.Context,
    project: Annotated[str, typer.Option("--project", help="the project the token acts in")],
    role: Annotated[
        str, typer.Option("--role", help="reader (look), member (change), admin (everything)")
    ] = "member",
    expires: Annotated[
        str | None,
        typer.Option("--expires", help="lifetime (30m, 12h, 90d, 2w) or an ISO 8601 time"),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="the user name it acts as (shown as user_id)")
    ] = None,
    description: Annotated[str | None, typer.Option("--description", help="a note")] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Issue a token; it is shown this once (shoal keeps only its digest).

    Example: shoal token create --project team-a --role member --expires 90d -f value -c token
    """
    body: dict[str, str] = {"project_id": project, "role": role}
    for key, value in (("expires", expires), ("user_id", user), ("description", description)):
        if value is not None:
            body[key] = value
    made = connect(ctx).post("/tokens", body)
    made.pop("links", None)
    show_one(made, fmt, column)


@app.command("list")
def list_(
    ctx: typer.Context,
    project: Annotated[str | None, typer.Option("--project", help="only this project's")] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """List the tokens shoal issued (never the tokens themselves).

    Example: shoal token list --project team-a
    """
    items = connect(ctx).get("/tokens", project_id=project)["tokens"]
    show_list(items, fmt, column, LIST_COLUMNS)


@app.command("revoke")
def revoke(
    ctx: typer.Context, uuid: Annotated[str, typer.Argument(help="the token's uuid")]
) -> None:
    """Revoke a token: it stops working at once.

    Example: shoal token revoke 6f1c1a1e-...
    """
    connect(ctx).delete(f"/tokens/{uuid}")
    typer.echo(f"token {uuid} revoked")


@app.command("bootstrap")
def bootstrap() -> None:
    """Issue a new admin token straight into the database and the data directory's
    admin-token file, for an operator who lost every admin token. Runs where shoal's
    database is (SHOAL_DATABASE_URL / SHOAL_DATA_DIR), like `shoal db`.

    Example: SHOAL_DATA_DIR=/var/lib/shoal shoal token bootstrap
    """
    from shoal import admin_token, datadir
    from shoal.cli.db_cmds import settings_or_exit
    from shoal.db import migrations
    from shoal.db.engine import Database
    from shoal.services import tokens

    settings = settings_or_exit()
    if settings.auth != "local":
        typer.echo(
            f"error: SHOAL_AUTH is {settings.auth}: tokens of shoal's own are for SHOAL_AUTH=local",
            err=True,
        )
        raise typer.Exit(2)
    datadir.secure(settings)
    db = Database(settings.db_url)
    try:
        migrations.upgrade(db)
        token = tokens.recovery_admin(db, settings.default_project, "shoal token bootstrap")
    finally:
        db.close()
    where = admin_token.write(settings, token)
    typer.echo(
        f"a new admin token of project {settings.default_project}, saved in {where}:\n  {token}"
    )
