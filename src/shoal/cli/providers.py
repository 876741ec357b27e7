"""`shoal provider list|show`: the clouds and hosts this deployment drives."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.client import connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(help="Providers: the clouds and hosts node groups live in.", no_args_is_help=True)

LIST_COLUMNS = ("name", "driver", "default", "reachable", "reason", "nodegroups", "checked_at")


@app.command("list")
def list_(ctx: typer.Context, fmt: FormatOpt = Format.table, column: ColumnsOpt = None) -> None:
    """List the providers: driver, default, reachable (and why not), node groups.

    Example: shoal provider list -f value -c name
    """
    items = connect(ctx).get("/providers")["providers"]
    show_list(items, fmt, column, LIST_COLUMNS)


@app.command("show")
def show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="provider name")],
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show one provider: its zones, flavors, images and features as last checked.

    Example: shoal provider show sim
    """
    show_one(connect(ctx).get(f"/providers/{name}"), fmt, column)
