"""`shoal nodegroup-template ...`: stand-alone node group templates."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli import args
from shoal.cli.client import Client, connect, fail
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(help="Node group templates.", no_args_is_help=True)

LIST_COLUMNS = (
    "uuid",
    "name",
    "role",
    "flavor_id",
    "image_id",
    "node_count",
    "availability_zones",
    "cluster_template_id",
)


def nodegroup_uuid(client: Client, ref: str) -> str:
    """A node group uuid from `uuid` or `CLUSTER/NODEGROUP` (names or uuids)."""
    if "/" not in ref:
        return ref
    cluster, _, group = ref.partition("/")
    if not cluster or not group:
        fail(f"--from-nodegroup takes UUID or CLUSTER/NODEGROUP, got {ref!r}", 2)
    return str(client.get(f"/clusters/{cluster}/nodegroups/{group}")["uuid"])


def spec_options(
    role: str | None,
    flavor: str | None,
    image: str | None,
    count: int | None,
    min_count: int | None,
    max_count: int | None,
    az: list[str] | None,
    label: list[str] | None,
    node_label: list[str] | None,
    taint: list[str] | None,
    policy: str | None,
    attr: list[str] | None,
) -> dict[str, Any]:
    """The node group attributes given as options (shared by NGTs and node groups)."""
    zones = [z for item in az or () for z in item.replace("+", ",").split(",") if z]
    body: dict[str, Any] = {
        "role": role,
        "flavor_id": flavor,
        "image_id": image,
        "node_count": count,
        "min_node_count": min_count,
        "max_node_count": max_count,
        "availability_zones": zones,
        "labels": args.pairs(label, "--label"),
        "node_labels": args.pairs(node_label, "--node-label"),
        "node_taints": args.taints(taint),
        "deletion_policy": policy,
    }
    body.update({k: args.scalar(v) for k, v in args.pairs(attr, "--attr").items()})
    return args.drop_none(body)


RoleOpt = Annotated[str | None, typer.Option(help="master, worker or any worker kind (gpu…)")]
FlavorOpt = Annotated[str | None, typer.Option("--flavor", help="flavor of the nodes")]
ImageOpt = Annotated[str | None, typer.Option("--image", help="image of the nodes")]
CountOpt = Annotated[int | None, typer.Option("--count", "--node-count", help="node count")]
MinOpt = Annotated[int | None, typer.Option("--min", "--min-nodes", help="min node count")]
MaxOpt = Annotated[int | None, typer.Option("--max", "--max-nodes", help="max node count")]
AzOpt = Annotated[
    list[str] | None, typer.Option("--az", help="availability zone (repeatable, or az-1+az-2)")
]
LabelOpt = Annotated[list[str] | None, typer.Option("--label", help="label KEY=VALUE")]
NodeLabelOpt = Annotated[
    list[str] | None, typer.Option("--node-label", help="Kubernetes node label KEY=VALUE")
]
TaintOpt = Annotated[list[str] | None, typer.Option("--taint", help="taint KEY=VALUE:EFFECT")]
PolicyOpt = Annotated[
    str | None, typer.Option("--deletion-policy", help="newest|oldest|az-balanced")
]
AttrOpt = Annotated[list[str] | None, typer.Option("--attr", help="any other attribute KEY=VALUE")]


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="template name")],
    from_nodegroup: Annotated[
        str | None,
        typer.Option("--from-nodegroup", help="copy a node group: UUID or CLUSTER/NODEGROUP"),
    ] = None,
    from_template: Annotated[
        str | None,
        typer.Option(
            "--from", "--from-template", help="copy a standalone node group template (name or uuid)"
        ),
    ] = None,
    role: RoleOpt = None,
    flavor: FlavorOpt = None,
    image: ImageOpt = None,
    count: CountOpt = None,
    min_count: MinOpt = None,
    max_count: MaxOpt = None,
    az: AzOpt = None,
    label: LabelOpt = None,
    node_label: NodeLabelOpt = None,
    taint: TaintOpt = None,
    deletion_policy: PolicyOpt = None,
    attr: AttrOpt = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Create a node group template from attributes, a node group or another node group
    template, plus overrides.

    Example: shoal nodegroup-template create gpu --role worker --flavor g1.large --count 2 \\
    --az az-1 --az az-2

    From a node group: shoal nodegroup-template create gpu4 --from-nodegroup demo/gpu --count 4

    From another: shoal nodegroup-template create gpu8 --from gpu4 --count 8
    """
    client = connect(ctx)
    body = spec_options(
        role, flavor, image, count, min_count, max_count, az, label, node_label, taint,
        deletion_policy, attr,
    )  # fmt: skip
    body["name"] = name
    if from_nodegroup:
        body["from_nodegroup"] = nodegroup_uuid(client, from_nodegroup)
    if from_template:
        body["from_nodegrouptemplate"] = from_template
    show_one(client.post("/nodegrouptemplates", body), fmt, column)


@app.command("list")
def list_(ctx: typer.Context, fmt: FormatOpt = Format.table, column: ColumnsOpt = None) -> None:
    """List node group templates (stand-alone and embedded in cluster templates).

    Example: shoal nodegroup-template list -f json
    """
    items = connect(ctx).list_all("/nodegrouptemplates", "nodegrouptemplates")
    show_list(items, fmt, column, LIST_COLUMNS)


@app.command("show")
def show(
    ctx: typer.Context,
    template: Annotated[str, typer.Argument(help="name or uuid")],
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show a node group template.

    Example: shoal nodegroup-template show gpu -c flavor_id -f value
    """
    show_one(connect(ctx).get(f"/nodegrouptemplates/{template}"), fmt, column)


@app.command("update")
def update(
    ctx: typer.Context,
    template: Annotated[str, typer.Argument(help="name or uuid")],
    set_: Annotated[list[str] | None, typer.Option("--set", help="KEY=VALUE (repeatable)")] = None,
    unset: Annotated[list[str] | None, typer.Option("--unset", help="KEY (repeatable)")] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Change a node group template (node groups made from it do not change).

    Example: shoal nodegroup-template update gpu --set node_count=3 --set flavor_id=g1.large
    """
    ops = args.json_patch(set_, unset)
    show_one(connect(ctx).patch(f"/nodegrouptemplates/{template}", ops), fmt, column)


@app.command("delete")
def delete(
    ctx: typer.Context,
    templates: Annotated[list[str], typer.Argument(help="names or uuids")],
) -> None:
    """Delete node group templates.

    Example: shoal nodegroup-template delete gpu
    """
    client = connect(ctx)
    for template in templates:
        client.delete(f"/nodegrouptemplates/{template}")
        typer.echo(f"deleted node group template {template}")
