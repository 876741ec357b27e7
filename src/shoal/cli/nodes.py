"""`shoal node list`: the machines of a cluster, with their AZs and addresses."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.client import connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list

app = typer.Typer(help="Nodes (machines) of a cluster.", no_args_is_help=True)

LIST_COLUMNS = (
    "name",
    "nodegroup_name",
    "role",
    "state",
    "availability_zone",
    "address",
    "flavor_id",
    "reason",
    "uuid",
)


@app.command("list")
def list_(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Argument(help="cluster name or uuid")],
    nodegroup: Annotated[
        str | None, typer.Option("--nodegroup", "-g", help="only this node group")
    ] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """List the nodes of a cluster: name, group, state, AZ, address.

    Example: shoal node list demo --nodegroup gpu -f value -c name
    """
    items = connect(ctx).list_all(f"/clusters/{cluster}/nodes", "nodes", nodegroup=nodegroup)
    show_list(items, fmt, column, LIST_COLUMNS)
