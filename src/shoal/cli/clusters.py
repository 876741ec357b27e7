"""`shoal cluster ...`: create (four ways), list, show, update, delete, resize,
upgrade and watch clusters."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli import args, wait
from shoal.cli.client import Client, connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(help="Clusters.", no_args_is_help=True)

LIST_COLUMNS = ("uuid", "name", "status", "master_count", "node_count", "health_status")

ClusterArg = Annotated[str, typer.Argument(help="cluster name or uuid")]


def _finish(client: Client, ref: str, fmt: Format, column: list[str] | None, waited: bool) -> None:
    """Show the cluster after an accepted change (the service answers 202 with its uuid)."""
    cluster = client.get(f"/clusters/{ref}")
    if not waited and fmt is Format.table:
        typer.echo(f"accepted: cluster {cluster['name']} is {cluster.get('status')}", err=True)
    show_one(cluster, fmt, column)


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="cluster name")],
    template: Annotated[
        str | None, typer.Option("--template", "-t", help="cluster template (name or uuid)")
    ] = None,
    from_cluster: Annotated[
        str | None, typer.Option("--from-cluster", help="clone this cluster (name or uuid)")
    ] = None,
    master_count: Annotated[int | None, typer.Option(help="masters (default group)")] = None,
    node_count: Annotated[int | None, typer.Option(help="workers (default group)")] = None,
    image: Annotated[str | None, typer.Option("--image", help="image of the nodes")] = None,
    flavor: Annotated[str | None, typer.Option("--flavor", help="worker flavor")] = None,
    master_flavor: Annotated[str | None, typer.Option(help="master flavor")] = None,
    keypair: Annotated[str | None, typer.Option(help="SSH keypair")] = None,
    label: Annotated[list[str] | None, typer.Option("--label", "-l", help="KEY=VALUE")] = None,
    create_timeout: Annotated[
        int | None, typer.Option("--timeout", help="minutes before a blocked create fails")
    ] = None,
    nodegroup: Annotated[
        list[str] | None,
        typer.Option(
            "--nodegroup",
            "-n",
            help="node group: name=gpu,role=worker,flavor=g1.large,count=2,az=az-1+az-2 "
            "(repeatable; replaces the default groups)",
        ),
    ] = None,
    attr: Annotated[
        list[str] | None, typer.Option("--attr", help="any other attribute KEY=VALUE")
    ] = None,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 1800,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Create a cluster: from attributes, a template, or another cluster; options win.

    Example: shoal cluster create demo --template k8s --wait
    (or: shoal cluster create demo2 --from-cluster demo --node-count 1;
    or: shoal cluster create solo --image ubuntu-24.04 -n name=cp,role=master,flavor=m1.medium)
    """
    body: dict[str, Any] = {
        "name": name,
        "cluster_template_id": template,
        "from_cluster": from_cluster,
        "master_count": master_count,
        "node_count": node_count,
        "image_id": image,
        "flavor_id": flavor,
        "master_flavor_id": master_flavor,
        "keypair": keypair,
        "labels": args.pairs(label, "--label"),
        "create_timeout": create_timeout,
        "node_groups": [args.nodegroup_spec(s) for s in nodegroup or ()],
    }
    body.update({k: args.scalar(v) for k, v in args.pairs(attr, "--attr").items()})
    client = connect(ctx)
    uuid = client.post("/clusters", args.drop_none(body))["uuid"]
    if wait_:
        wait.wait_for(client, uuid, timeout=wait_timeout, label=f"cluster {name}")
    _finish(client, uuid, fmt, column, wait_)


@app.command("list")
def list_(
    ctx: typer.Context,
    long: Annotated[bool, typer.Option("--long", help="every field")] = False,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """List clusters.

    Example: shoal cluster list -f value -c name -c status
    """
    path = "/clusters/detail" if long or column else "/clusters"
    show_list(connect(ctx).list_all(path, "clusters"), fmt, column, LIST_COLUMNS)


@app.command("show")
def show(
    ctx: typer.Context,
    cluster: ClusterArg,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show a cluster, its conditions and its node groups.

    Example: shoal cluster show demo -c status -c api_address -f value
    """
    show_one(connect(ctx).get(f"/clusters/{cluster}"), fmt, column)


@app.command("update")
def update(
    ctx: typer.Context,
    cluster: ClusterArg,
    set_: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE (repeatable)")] = None,
    unset: Annotated[list[str] | None, typer.Option("--unset", help="KEY (repeatable)")] = None,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 1800,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Change a cluster (Magnum allows node_count, health_status, health_status_reason).

    Example: shoal cluster update demo --set node_count=3 --wait
    """
    client = connect(ctx)
    uuid = client.patch(f"/clusters/{cluster}", args.json_patch(set_, unset))["uuid"]
    if wait_:
        wait.wait_for(client, uuid, timeout=wait_timeout, label=f"cluster {cluster}")
    _finish(client, uuid, fmt, column, wait_)


@app.command("delete")
def delete(
    ctx: typer.Context,
    clusters: Annotated[list[str], typer.Argument(help="cluster names or uuids")],
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 1800,
) -> None:
    """Delete clusters: their machines, then their records.

    Example: shoal cluster delete demo --wait
    """
    client = connect(ctx)
    uuids = []
    for cluster in clusters:
        uuids.append((cluster, client.get(f"/clusters/{cluster}")["uuid"]))
        client.delete(f"/clusters/{cluster}")
        typer.echo(f"deleting cluster {cluster}")
    for cluster, uuid in uuids if wait_ else ():
        wait.wait_for(client, uuid, timeout=wait_timeout, deleting=True, label=f"cluster {cluster}")
        typer.echo(f"deleted cluster {cluster}")


@app.command("resize")
def resize(
    ctx: typer.Context,
    cluster: ClusterArg,
    node_count: Annotated[int, typer.Argument(help="node count the group ends with")],
    nodegroup: Annotated[
        str | None, typer.Option("--nodegroup", "-g", help="node group (default: default worker)")
    ] = None,
    remove: Annotated[
        list[str] | None,
        typer.Option(
            "--remove", help="remove exactly this node: name, uuid, address or index (repeatable)"
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="shrink virt hosts even while they carry VMs")
    ] = False,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 1800,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Resize a node group; `--remove` names the nodes to delete (never another one).

    Example: shoal cluster resize demo 1 --nodegroup gpu --remove demo-gpu-x7k2p --wait
    """
    body = args.drop_none(
        {"node_count": node_count, "nodegroup": nodegroup, "nodes_to_remove": remove or []}
    )
    if force:
        body["force"] = True
    client = connect(ctx)
    uuid = client.post(f"/clusters/{cluster}/actions/resize", body)["uuid"]
    if wait_:
        wait.wait_for(client, uuid, timeout=wait_timeout, label=f"cluster {cluster}")
    _finish(client, uuid, fmt, column, wait_)


@app.command("upgrade")
def upgrade(
    ctx: typer.Context,
    cluster: ClusterArg,
    template: Annotated[str, typer.Argument(help="target cluster template (name or uuid)")],
    nodegroup: Annotated[
        str | None, typer.Option("--nodegroup", "-g", help="upgrade only this node group")
    ] = None,
    max_batch_size: Annotated[int, typer.Option(help="nodes replaced at once", min=1)] = 1,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 3600,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Roll a cluster (or one node group) to a template's image and version, node by node.

    Example: shoal cluster upgrade demo k8s-v2 --nodegroup gpu --wait
    """
    body = args.drop_none(
        {"cluster_template": template, "max_batch_size": max_batch_size, "nodegroup": nodegroup}
    )
    client = connect(ctx)
    uuid = client.post(f"/clusters/{cluster}/actions/upgrade", body)["uuid"]
    if wait_:
        wait.wait_for(client, uuid, timeout=wait_timeout, label=f"cluster {cluster}")
    _finish(client, uuid, fmt, column, wait_)


def _hold(action: str) -> None:
    def command(
        ctx: typer.Context,
        cluster: ClusterArg,
        nodegroup: Annotated[
            str | None, typer.Option("--nodegroup", "-g", help="only this node group")
        ] = None,
    ) -> None:
        client = connect(ctx)
        client.post(
            f"/clusters/{cluster}/actions/{action}", args.drop_none({"nodegroup": nodegroup})
        )
        typer.echo(f"{action}: requested for cluster {cluster}", err=True)

    command.__doc__ = {
        "pause": "Pause the rollout of a cluster (or of one node group): nothing is replaced "
        "until resume.\n\nExample: shoal cluster pause demo",
        "resume": "Resume a paused or aborted rollout.\n\nExample: shoal cluster resume demo",
        "abort": "Abort a rollout where it stands (the group stays usable; an upgrade to "
        "the previous template rolls back).\n\nExample: shoal cluster abort demo -g gpu",
    }[action]
    app.command(action)(command)


for _action in ("pause", "resume", "abort"):
    _hold(_action)


@app.command("watch")
def watch(
    ctx: typer.Context,
    cluster: ClusterArg,
    interval: Annotated[float, typer.Option(help="seconds between polls", min=0.05)] = 1.0,
    timeout: Annotated[float, typer.Option(help="stop watching after this many seconds")] = 3600,
) -> None:
    """Follow a cluster's progress per node group until its operation ends.

    Exit 0 when it completes, 1 when it fails, 3 on timeout.

    Example: shoal cluster watch demo
    """
    client = connect(ctx)
    current = client.get(f"/clusters/{cluster}")
    deleting = str(current.get("status") or "").startswith("DELETE")
    wait.wait_for(
        client,
        current["uuid"],
        timeout=timeout,
        interval=interval,
        deleting=deleting,
        label=f"cluster {cluster}",
    )
