"""`shoal template ...`: cluster templates, with embedded node group templates."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from shoal.cli import args
from shoal.cli.client import connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, show_list, show_one

app = typer.Typer(help="Cluster templates (may embed node group templates).", no_args_is_help=True)

LIST_COLUMNS = ("uuid", "name", "coe", "image_id", "flavor_id", "master_flavor_id", "source_id")

NgtOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--nodegroup-template",
        "-n",
        help="embedded node group template: name=gpu,role=worker,flavor=g1.large,count=2,"
        "az=az-1+az-2[,image=..,min=..,max=..,volume=..,policy=..,label.K=V], or a "
        "reference to a standalone one: ngt=NGT[,name=..,count=..] (repeatable)",
    ),
]
LabelOpt = Annotated[
    list[str] | None, typer.Option("--label", "-l", help="label KEY=VALUE (repeatable)")
]
AttrOpt = Annotated[
    list[str] | None,
    typer.Option("--attr", help="any other attribute KEY=VALUE, value as JSON if it parses"),
]


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="template name")],
    from_cluster: Annotated[
        str | None, typer.Option("--from-cluster", help="copy this cluster (name or uuid)")
    ] = None,
    from_template: Annotated[
        str | None,
        typer.Option("--from-template", help="copy this cluster template (name or uuid)"),
    ] = None,
    coe: Annotated[str | None, typer.Option(help="container engine (default kubernetes)")] = None,
    image: Annotated[str | None, typer.Option("--image", help="image of the nodes")] = None,
    flavor: Annotated[str | None, typer.Option("--flavor", help="worker flavor")] = None,
    master_flavor: Annotated[str | None, typer.Option(help="master flavor")] = None,
    keypair: Annotated[str | None, typer.Option(help="SSH keypair")] = None,
    external_network: Annotated[str | None, typer.Option(help="external network")] = None,
    network_driver: Annotated[str | None, typer.Option(help="flannel|calico|cilium")] = None,
    docker_volume_size: Annotated[int | None, typer.Option(help="volume size (GB)")] = None,
    label: LabelOpt = None,
    nodegroup_template: NgtOpt = None,
    attr: AttrOpt = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Create a cluster template: from attributes, a cluster or another template, plus
    overrides. `-n ngt=NGT` references a standalone node group template (copied when a
    cluster is made).

    Example: shoal template create k8s --image fedora-coreos-40 --flavor m1.medium \\
    -n name=masters,role=master,flavor=m1.medium,count=3,az=az-1+az-2+az-3 \\
    -n name=gpu,flavor=g1.large,count=2 -n ngt=ssd,count=1

    From another template: shoal template create k8s-big --from-template k8s --flavor m1.large
    """
    body: dict[str, Any] = {
        "name": name,
        "from_cluster": from_cluster,
        "from_clustertemplate": from_template,
        "coe": coe or (None if from_cluster or from_template else "kubernetes"),
        "image_id": image,
        "flavor_id": flavor,
        "master_flavor_id": master_flavor,
        "keypair_id": keypair,
        "external_network_id": external_network,
        "network_driver": network_driver,
        "docker_volume_size": docker_volume_size,
        "labels": args.pairs(label, "--label"),
        "node_group_templates": [args.nodegroup_spec(s) for s in nodegroup_template or ()],
    }
    body.update({k: args.scalar(v) for k, v in args.pairs(attr, "--attr").items()})
    show_one(connect(ctx).post("/clustertemplates", args.drop_none(body)), fmt, column)


@app.command("list")
def list_(ctx: typer.Context, fmt: FormatOpt = Format.table, column: ColumnsOpt = None) -> None:
    """List cluster templates.

    Example: shoal template list -f value -c name
    """
    items = connect(ctx).list_all("/clustertemplates", "clustertemplates")
    show_list(items, fmt, column, LIST_COLUMNS)


@app.command("show")
def show(
    ctx: typer.Context,
    template: Annotated[str, typer.Argument(help="name or uuid")],
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show a cluster template and its embedded node group templates.

    Example: shoal template show k8s -f yaml
    """
    show_one(connect(ctx).get(f"/clustertemplates/{template}"), fmt, column)


@app.command("update")
def update(
    ctx: typer.Context,
    template: Annotated[str, typer.Argument(help="name or uuid")],
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="KEY=VALUE or labels.KEY=VALUE (repeatable)")
    ] = None,
    unset: Annotated[list[str] | None, typer.Option("--unset", help="KEY (repeatable)")] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Change attributes of a cluster template (clusters made from it do not change).

    Example: shoal template update k8s --set image_id=fedora-coreos-41 --unset keypair_id
    """
    ops = args.json_patch(set_, unset)
    show_one(connect(ctx).patch(f"/clustertemplates/{template}", ops), fmt, column)


@app.command("delete")
def delete(
    ctx: typer.Context,
    templates: Annotated[list[str], typer.Argument(help="names or uuids")],
) -> None:
    """Delete cluster templates (clusters made from them keep running).

    Example: shoal template delete k8s
    """
    client = connect(ctx)
    for template in templates:
        client.delete(f"/clustertemplates/{template}")
        typer.echo(f"deleted cluster template {template}")
