"""`shoal events CLUSTER [--follow]`: what happened to a cluster, oldest first."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

import typer

from shoal.cli.client import Client, connect
from shoal.cli.output import ColumnsOpt, Format, FormatOpt, safe_text, show_list

LIST_COLUMNS = ("id", "time", "type", "reason", "message")


def _page(
    client: Client, cluster: str, after: int | None, limit: int
) -> list[dict[str, Any]] | None:
    """One page of events after `after`; None when the cluster is gone."""
    params = {"limit": limit} if after is None else {"limit": limit, "after": after}
    body = client.request("GET", f"/clusters/{cluster}/events", params=params, allow_404=True)
    return None if body is None else list(body.get("events", []))


def _line(event: dict[str, Any], fmt: Format) -> str:
    if fmt in (Format.json, Format.yaml):
        return json.dumps(event, default=str)
    return safe_text(
        f"{event.get('time', '')}  {event.get('type', ''):<7} {event.get('reason', ''):<20} "
        f"{event.get('message', '')}"
    )


def events(
    ctx: typer.Context,
    cluster: Annotated[str, typer.Argument(help="cluster name or uuid")],
    follow: Annotated[
        bool, typer.Option("--follow", "-F", help="keep printing new events (Ctrl-C to stop)")
    ] = False,
    after: Annotated[int | None, typer.Option(help="only events after this event id")] = None,
    limit: Annotated[int, typer.Option(help="events per request", min=1)] = 1000,
    interval: Annotated[float, typer.Option(help="seconds between polls", min=0.05)] = 1.0,
    timeout: Annotated[
        float | None, typer.Option(help="with --follow: stop after this many seconds")
    ] = None,
    fmt: FormatOpt = Format.table,
    column: ColumnsOpt = None,
) -> None:
    """Show a cluster's events, oldest first; `--follow` streams new ones (JSON lines with -f json).

    Following ends on Ctrl-C, after --timeout, or when the cluster is deleted.

    Example: shoal events demo --follow
    """
    client = connect(ctx)
    uuid = client.get(f"/clusters/{cluster}")["uuid"]
    if not follow:
        items: list[dict[str, Any]] = []
        while True:
            page = _page(client, uuid, after, limit) or []
            items.extend(page)
            if len(page) < limit:
                break
            after = int(page[-1]["id"])
        show_list(items, fmt, column, LIST_COLUMNS)
        return
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            batch = _page(client, uuid, after, limit)
            for event in batch or []:
                typer.echo(_line(event, fmt))
                after = int(event["id"])
            if deadline is not None and time.monotonic() >= deadline:
                return
            if batch is None or client.find(f"/clusters/{uuid}") is None:
                typer.echo(f"cluster {cluster} is gone", err=True)
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def register(app: typer.Typer) -> None:
    app.command("events")(events)
