"""`shoal orphan list|delete|adopt`: the machines the sweeper holds because their node
groups are unknown to the database (after a restore, say), and what an admin does
with them."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli.client import connect, fail
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list

app = typer.Typer(
    help="Machines the sweeper holds (their node groups are unknown to the database).",
    no_args_is_help=True,
)

LIST_COLUMNS = (
    "machine_id",
    "name",
    "provider",
    "state",
    "age_seconds",
    "cluster_id",
    "cluster_name",
    "nodegroup_name",
    "role",
    "fate",
)


@app.command("list")
def list_(ctx: typer.Context, fmt: FormatOpt = Format.table, column: ColumnsOpt = None) -> None:
    """List the held machines: provider, age, the cluster and node group they claim, and
    what the sweeper will do (held; delete requested; group deleted by shoal).

    Example: shoal orphan list -c machine_id -c cluster_id -f value
    """
    show_list(connect(ctx).get("/orphans")["orphans"], fmt, column, LIST_COLUMNS)


@app.command("delete")
def delete(
    ctx: typer.Context,
    machine_ids: Annotated[list[str], typer.Argument(help="held machines' ids")],
) -> None:
    """Have the next sweep delete these held machines (none when one is not held).

    Example: shoal orphan delete 5b1c0c7e-...
    """
    client = connect(ctx)
    held = {o["machine_id"] for o in client.get("/orphans")["orphans"]}
    missing = [m for m in machine_ids if m not in held]
    if missing:
        fail(
            f"not held by the sweeper: {', '.join(missing)}; nothing requested "
            "(see shoal orphan list)"
        )
    for mid in machine_ids:
        client.delete(f"/orphans/{mid}")
    typer.echo(f"{len(machine_ids)} machine(s) will be deleted by the next sweep")


@app.command("adopt")
def adopt(
    ctx: typer.Context,
    cluster_id: Annotated[str, typer.Argument(help="the cluster id the held machines claim")],
    name: Annotated[
        str | None,
        typer.Option("--name", help="the cluster's name (default: from its node names)"),
    ] = None,
) -> None:
    """Make a cluster the database lost (or its lost node groups) again from the held
    machines that claim it: its node groups from their tags and listed flavor and
    image; each group's pass then adopts its machines (none made, none deleted).

    Example: shoal orphan adopt 0e1d7c2a-... --name prod
    """
    body = {"cluster_id": cluster_id, **({"name": name} if name is not None else {})}
    made = connect(ctx).post("/orphans/adopt", body)
    uuid = made["uuid"]
    typer.echo(f"cluster {made['name']} ({uuid}) adopted: see shoal cluster show {uuid}")
