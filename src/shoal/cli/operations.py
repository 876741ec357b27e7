"""`shoal operation start|list|show`: operations on the nodes of a cluster (restart
services, upgrade packages or images in place, rebase, reboot, rebuild, replace),
node by node or in batches, each node's task with its output."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from shoal.cli import args, wait
from shoal.cli.client import Client, connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(help="Operations on the nodes of a cluster.", no_args_is_help=True)

LIST_COLUMNS = ("uuid", "nodegroup_id", "kind", "state", "progress", "message", "created_at")
TASK_COLUMNS = ("node_id", "state", "exit_code", "started_at", "finished_at", "output")
ClusterArg = Annotated[str, typer.Argument(help="cluster name or uuid")]


@app.command("start")
def start(
    ctx: typer.Context,
    cluster: ClusterArg,
    kind: Annotated[
        str,
        typer.Argument(
            help="restart-services, upgrade-packages, upgrade-images, rebase, set-labels, "
            "reboot, rebuild or replace"
        ),
    ],
    nodegroup: Annotated[
        str | None,
        typer.Option("--nodegroup", "-g", help="only this node group (default: every group)"),
    ] = None,
    node: Annotated[
        list[str] | None,
        typer.Option("--node", "-n", help="only this node of the group (name or uuid; repeat)"),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="nodes at once", min=1)] = 1,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            "-p",
            help="KEY=VALUE parameter (repeat): services=kubelet,crio; packages=...; "
            "images=...; ref=...; image_id=...",
        ),
    ] = None,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 3600,
) -> None:
    """Run an operation on nodes, --batch-size at a time; it stops at the first failure.

    The nodes after a failed one are left as they were.

    Example: shoal operation start demo restart-services -g gpu -p services=kubelet --wait
    """
    params: dict[str, Any] = {}
    for item in param or ():
        key, value = args.split_pair(item, "--param")
        params[key] = value
    body = args.drop_none(
        {"kind": kind, "nodegroup": nodegroup, "nodes": node or None, "batch_size": batch_size}
    )
    if params:
        body["params"] = params
    client = connect(ctx)
    uuids = client.post(f"/clusters/{cluster}/operations", body)["operations"]
    for uuid in uuids:
        typer.echo(uuid)
    if wait_:
        failed = [u for u in uuids if not _wait(client, cluster, u, wait_timeout)]
        if failed:
            raise typer.Exit(wait.EXIT_FAILED)


def _wait(client: Client, cluster: str, uuid: str, timeout: float) -> bool:
    """Poll one operation until it ends, a line on stderr per change; whether it
    succeeded (exit 3 after `timeout`; Ctrl-C stops waiting, not the operation)."""
    deadline = time.monotonic() + timeout
    said = ""
    try:
        while True:
            op = client.get(f"/clusters/{cluster}/operations/{uuid}")
            line = f"{op['kind']} on {op['nodegroup_id']}: {op['state']}, {op['progress']}"
            if line != said:
                typer.echo(line, err=True)
                said = line
            if op["state"] != "RUNNING":
                if op["state"] != "SUCCEEDED":
                    typer.echo(f"failed: {op.get('message') or 'no reason given'}", err=True)
                    for t in op.get("tasks", []):
                        if t["state"] == "FAILED" and t.get("output"):
                            typer.echo(f"--- {t['node_id']}:\n{t['output']}", err=True)
                return bool(op["state"] == "SUCCEEDED")
            if time.monotonic() > deadline:
                typer.echo(
                    f"timed out after {timeout:g} s; the operation goes on. Follow it with "
                    f"`shoal operation show {cluster} {uuid}`",
                    err=True,
                )
                raise typer.Exit(wait.EXIT_TIMEOUT)
            time.sleep(1.0)
    except KeyboardInterrupt:
        typer.echo(
            f"\ninterrupted: stopped waiting; the operation goes on in the service. "
            f"Follow it with `shoal operation show {cluster} {uuid}`",
            err=True,
        )
        raise typer.Exit(wait.EXIT_INTERRUPTED) from None


@app.command("list")
def list_(
    ctx: typer.Context,
    cluster: ClusterArg,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """List the operations of a cluster, oldest first.

    Example: shoal operation list demo -f value -c uuid -c state
    """
    items = connect(ctx).get(f"/clusters/{cluster}/operations")["operations"]
    show_list(items, fmt, column, LIST_COLUMNS)


@app.command("show")
def show(
    ctx: typer.Context,
    cluster: ClusterArg,
    uuid: Annotated[str, typer.Argument(help="operation uuid")],
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show one operation and each node's task with its output.

    Example: shoal operation show demo 6f1c... -f json
    """
    op = connect(ctx).get(f"/clusters/{cluster}/operations/{uuid}")
    if fmt is not Format.table:
        show_one(op, fmt, column)
        return
    show_one({k: v for k, v in op.items() if k != "tasks"}, fmt, column)
    show_list(op.get("tasks", []), fmt, None, TASK_COLUMNS)
