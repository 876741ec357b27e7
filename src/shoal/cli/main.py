"""The `shoal` command. Sub-command groups live in their own modules."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import (
    clusters,
    db_cmds,
    demo,
    events,
    exchange_cmds,
    nodegroup_templates,
    nodegroups,
    nodes,
    operations,
    orphans,
    providers,
    server_cmds,
    templates,
    tokens,
)
from shoal.cli.client import Connection

app = typer.Typer(
    name="shoal",
    help="shoal: Kubernetes clusters made of independently managed node groups.\n\n"
    "Try `shoal demo`, or `shoal serve` and then `shoal cluster list`.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def _global(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option("--url", envvar="SHOAL_URL", help="shoal API (default http://127.0.0.1:9511)"),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="SHOAL_TOKEN",
            help="sent as X-Auth-Token (default: SHOAL_TOKEN_FILE, else the data directory's "
            "admin-token file)",
        ),
    ] = None,
    project: Annotated[
        str | None,
        typer.Option(
            "--project",
            envvar="SHOAL_PROJECT",
            help="sent as X-Project-Id (only a server with SHOAL_AUTH=none reads it)",
        ),
    ] = None,
) -> None:
    """Global options for every command that talks to the API."""
    ctx.obj = Connection.from_env(url=url, token=token, project=project)


server_cmds.register(app)
demo.register(app)
app.add_typer(templates.app, name="template")
app.add_typer(nodegroup_templates.app, name="nodegroup-template")
app.add_typer(clusters.app, name="cluster")
app.add_typer(nodegroups.app, name="nodegroup")
app.add_typer(nodes.app, name="node")
app.add_typer(providers.app, name="provider")
app.add_typer(orphans.app, name="orphan")
app.add_typer(operations.app, name="operation")
app.add_typer(tokens.app, name="token")
events.register(app)
db_cmds.register(app)
exchange_cmds.register(app)


def main() -> None:
    app()
