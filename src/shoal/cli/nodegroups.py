"""`shoal nodegroup ...`: the node groups of a cluster."""

from __future__ import annotations

from typing import Annotated

import typer

from shoal.cli import args, wait
from shoal.cli import nodegroup_templates as ngt
from shoal.cli.client import connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(help="Node groups of a cluster.", no_args_is_help=True)

LIST_COLUMNS = (
    "uuid",
    "name",
    "role",
    "flavor_id",
    "availability_zones",
    "node_count",
    "nodes_ready",
    "nodes_failed",
    "status",
    "is_default",
)

ClusterArg = Annotated[str, typer.Argument(help="cluster name or uuid")]
GroupArg = Annotated[str, typer.Argument(help="node group name, uuid or id")]


@app.command("create")
def create(
    ctx: typer.Context,
    cluster: ClusterArg,
    name: Annotated[str, typer.Argument(help="node group name")],
    from_template: Annotated[
        str | None, typer.Option("--from-template", help="node group template (name or uuid)")
    ] = None,
    from_nodegroup: Annotated[
        str | None,
        typer.Option("--from-nodegroup", help="copy a node group: name in this cluster, or uuid"),
    ] = None,
    role: ngt.RoleOpt = None,
    flavor: ngt.FlavorOpt = None,
    image: ngt.ImageOpt = None,
    count: ngt.CountOpt = None,
    min_count: ngt.MinOpt = None,
    max_count: ngt.MaxOpt = None,
    az: ngt.AzOpt = None,
    label: ngt.LabelOpt = None,
    node_label: ngt.NodeLabelOpt = None,
    taint: ngt.TaintOpt = None,
    deletion_policy: ngt.PolicyOpt = None,
    attr: ngt.AttrOpt = None,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 1800,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Add a node group: from attributes, a node group template, or another node group.

    Example: shoal nodegroup create demo gpu2 --flavor g1.large --count 2 --az az-1 --wait
    (or: --from-template gpu --count 3; or: --from-nodegroup gpu --az az-2)
    """
    body = ngt.spec_options(
        role, flavor, image, count, min_count, max_count, az, label, node_label, taint,
        deletion_policy, attr,
    )  # fmt: skip
    body["name"] = name
    if from_template:
        body["nodegroup_template_id"] = from_template
    if from_nodegroup:
        body["from_nodegroup"] = from_nodegroup
    client = connect(ctx)
    group = client.post(f"/clusters/{cluster}/nodegroups", body)
    if wait_:
        what = f"node group {name} of {cluster}"  # not `label`: that is the --label option
        wait.wait_for(client, cluster, timeout=wait_timeout, nodegroup=group["uuid"], label=what)
        group = client.get(f"/clusters/{cluster}/nodegroups/{group['uuid']}")
    show_one(group, fmt, column)


@app.command("list")
def list_(
    ctx: typer.Context,
    cluster: ClusterArg,
    role: Annotated[str | None, typer.Option(help="only this role")] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """List the node groups of a cluster with their live node counts.

    Example: shoal nodegroup list demo -c name -c node_count -c nodes_ready
    """
    path = f"/clusters/{cluster}/nodegroups/detail"
    items = connect(ctx).list_all(path, "nodegroups", role=role)
    show_list(items, fmt, column, LIST_COLUMNS)


@app.command("show")
def show(
    ctx: typer.Context,
    cluster: ClusterArg,
    nodegroup: GroupArg,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show a node group: spec, status, conditions and live counts.

    Example: shoal nodegroup show demo gpu -f json
    """
    show_one(connect(ctx).get(f"/clusters/{cluster}/nodegroups/{nodegroup}"), fmt, column)


@app.command("update")
def update(
    ctx: typer.Context,
    cluster: ClusterArg,
    nodegroup: GroupArg,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="KEY=VALUE, e.g. max_node_count=5")
    ] = None,
    unset: Annotated[list[str] | None, typer.Option("--unset", help="KEY (repeatable)")] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Change min/max counts, node labels or taints (counts change with `cluster resize`).

    Example: shoal nodegroup update demo gpu --set max_node_count=4 --set node_labels.tier=gpu
    """
    ops = args.json_patch(set_, unset)
    show_one(connect(ctx).patch(f"/clusters/{cluster}/nodegroups/{nodegroup}", ops), fmt, column)


@app.command("delete")
def delete(
    ctx: typer.Context,
    cluster: ClusterArg,
    nodegroups: Annotated[list[str], typer.Argument(help="node group names or uuids")],
    force: Annotated[
        bool, typer.Option("--force", help="delete virt hosts even while they carry VMs")
    ] = False,
    wait_: wait.WaitOpt = False,
    wait_timeout: wait.TimeoutOpt = 1800,
) -> None:
    """Delete node groups and their machines (default groups cannot be deleted).

    Example: shoal nodegroup delete demo gpu2 --wait
    """
    client = connect(ctx)
    targets = []
    suffix = "?force=true" if force else ""
    for ng in nodegroups:
        targets.append(client.get(f"/clusters/{cluster}/nodegroups/{ng}")["uuid"])
        client.delete(f"/clusters/{cluster}/nodegroups/{ng}{suffix}")
        typer.echo(f"deleting node group {ng}")
    for ng, uuid in zip(nodegroups, targets, strict=True) if wait_ else ():
        label = f"node group {ng} of {cluster}"
        wait.wait_for(
            client, cluster, timeout=wait_timeout, deleting=True, nodegroup=uuid, label=label
        )
        typer.echo(f"deleted node group {ng}")
