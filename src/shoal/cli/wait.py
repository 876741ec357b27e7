"""`--wait` and `cluster watch`: poll until an operation ends, showing live progress
per node group (desired / ready / failed and the current reason, e.g.
`BLOCKED: quota exceeded: cores 20 of 20`).

Progress goes to stderr so that `-f json` output on stdout stays parseable. On a
terminal it is a live table; otherwise one line per change (logs, CI, pipes).
Exit codes: 0 complete, 1 the operation ended *_FAILED, 3 timed out, 130
interrupted (Ctrl-C); after a time-out or an interruption the operation goes on
in the service, and the message says how to follow it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from shoal.cli.client import Client
from shoal.cli.output import console, safe_text

EXIT_FAILED = 1
EXIT_TIMEOUT = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C stopped

WaitOpt = Annotated[
    bool, typer.Option("--wait", help="wait until done, showing progress; exit 1 if it fails")
]
TimeoutOpt = Annotated[
    float, typer.Option("--wait-timeout", help="give up waiting after this many seconds (exit 3)")
]


@dataclass
class Snapshot:
    """What one poll saw: the cluster (None once deleted) and its node groups."""

    cluster: dict[str, Any] | None
    groups: list[dict[str, Any]] = field(default_factory=list)


def _state(status: str | None) -> str:
    """IN_PROGRESS, COMPLETE, FAILED or '' from a Magnum status string."""
    for end in ("IN_PROGRESS", "COMPLETE", "FAILED"):
        if status and status.endswith(end):
            return end
    return ""


def poll_cluster(client: Client, ref: str) -> Snapshot:
    """The cluster and the detail of each of its node groups (live counts included)."""
    cluster = client.find(f"/clusters/{ref}")
    if cluster is None:
        return Snapshot(None)
    groups = client.list_all(f"/clusters/{cluster['uuid']}/nodegroups/detail", "nodegroups")
    return Snapshot(cluster, groups)


def _settled(obj: dict[str, Any]) -> bool:
    """Whether the conductor has seen the latest desired state (when the API says)."""
    gen, seen = obj.get("generation"), obj.get("observed_generation")
    return gen is None or seen is None or int(seen) >= int(gen)


def _ready(ng: dict[str, Any]) -> int:
    return int(ng.get("nodes_ready") or 0)


def group_line(ng: dict[str, Any]) -> str:
    """One node group's progress as a single line."""
    reason = ng.get("status_reason") or ""
    return safe_text(
        f"  {ng.get('name', '?'):<16} {ng.get('role', ''):<8} "
        f"desired {ng.get('node_count', 0):>3}  ready {_ready(ng):>3}  "
        f"failed {int(ng.get('nodes_failed') or 0):>3}  {ng.get('status', '')}"
        + (f"  {reason}" if reason else "")
    )


def progress_table(snap: Snapshot, what: str, elapsed: float) -> Group:
    """The live view: a header line and a row per node group."""
    cluster = snap.cluster or {}
    head = Text(f"{what}: {cluster.get('status', 'gone')}  ({elapsed:.0f}s)")
    table = Table(box=box.SIMPLE)
    for col in ("node group", "role", "desired", "ready", "failed", "status", "reason"):
        table.add_column(col, overflow="fold")
    for ng in snap.groups:
        cells = (
            ng.get("name"),
            ng.get("role", ""),
            ng.get("node_count", 0),
            _ready(ng),
            ng.get("nodes_failed") or 0,
            ng.get("status", ""),
            ng.get("status_reason") or "",
        )
        table.add_row(*(Text(safe_text(str(c))) for c in cells))
    return Group(head, table)


def _verdict(snap: Snapshot, deleting: bool, only: str | None) -> str:
    """'' while in progress, else COMPLETE or FAILED."""
    if snap.cluster is None:
        return "COMPLETE" if deleting and only is None else "FAILED"
    groups = [g for g in snap.groups if only in (None, g.get("uuid"), g.get("name"))]
    if only is not None:
        if not groups:
            return "COMPLETE" if deleting else "FAILED"
        state = _state(groups[0].get("status"))
        if state == "FAILED" or (state == "COMPLETE" and not deleting and _settled(groups[0])):
            return state
        return ""
    state = _state(snap.cluster.get("status"))
    if state == "FAILED":
        return "FAILED"
    busy = any(_state(g.get("status")) == "IN_PROGRESS" or not _settled(g) for g in groups)
    if state == "COMPLETE" and not busy and not deleting and _settled(snap.cluster):
        return "COMPLETE"
    return ""


def _failure_text(snap: Snapshot, only: str | None) -> str:
    if snap.cluster is None:
        return "the cluster is gone"
    reasons = [
        f"{g.get('name')}: {g.get('status')}: {g.get('status_reason') or 'no reason given'}"
        for g in snap.groups
        if only in (None, g.get("uuid"), g.get("name")) and _state(g.get("status")) == "FAILED"
    ]
    if only is None and snap.cluster.get("status_reason"):
        reasons.insert(0, str(snap.cluster["status_reason"]))
    return safe_text("; ".join(reasons) or str(snap.cluster.get("status")))


def wait_for(
    client: Client,
    cluster: str,
    *,
    timeout: float,
    deleting: bool = False,
    nodegroup: str | None = None,
    interval: float = 1.0,
    label: str | None = None,
    on_poll: Callable[[Snapshot], None] | None = None,
    interruptible: bool = True,
) -> Snapshot:
    """Poll until the cluster (or one node group of it) settles; exit non-zero on failure.

    Returns the last snapshot when the operation completed. Ctrl-C stops waiting,
    not the operation: it says so and how to follow it, and exits 130
    (`interruptible=False` lets KeyboardInterrupt through, for a caller that owns
    the server, like the demo).
    """
    seen: list[Snapshot] = []

    def remember(snap: Snapshot) -> None:
        seen[:] = [snap]
        if on_poll is not None:
            on_poll(snap)

    try:
        return _wait(client, cluster, timeout, deleting, nodegroup, interval, label, remember)
    except KeyboardInterrupt:
        if not interruptible:
            raise
        name = _name(seen[0] if seen else None, cluster)
        typer.echo(
            f"\ninterrupted: stopped waiting; the operation goes on in the service. "
            f"Follow it with `shoal cluster watch {name}` or `shoal events {name}`",
            err=True,
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _name(snap: Snapshot | None, cluster: str) -> str:
    """The cluster's name when a poll saw it (what a person types), else what was given."""
    if snap is not None and snap.cluster is not None and snap.cluster.get("name"):
        return str(snap.cluster["name"])
    return cluster


def _wait(
    client: Client,
    cluster: str,
    timeout: float,
    deleting: bool,
    nodegroup: str | None,
    interval: float,
    label: str | None,
    on_poll: Callable[[Snapshot], None],
) -> Snapshot:
    what = label or (f"cluster {cluster}" + (f" node group {nodegroup}" if nodegroup else ""))
    err = console(err=True)
    start = time.monotonic()
    last_lines: dict[str, str] = {}
    last_head = ""

    def show_lines(snap: Snapshot) -> None:
        nonlocal last_head
        head = f"{what}: {(snap.cluster or {}).get('status', 'deleted')}"
        if head != last_head:
            err.print(Text(safe_text(f"{head}  ({time.monotonic() - start:.0f}s)")))
            last_head = head
        for ng in snap.groups:
            line = group_line(ng)
            if last_lines.get(str(ng.get("uuid"))) != line:
                err.print(Text(line))
                last_lines[str(ng.get("uuid"))] = line

    live = Live(console=err, auto_refresh=False, transient=False) if err.is_terminal else None
    if live is not None:
        live.start()
    try:
        while True:
            snap = poll_cluster(client, cluster)
            on_poll(snap)
            if live is not None:
                live.update(progress_table(snap, what, time.monotonic() - start), refresh=True)
            else:
                show_lines(snap)
            verdict = _verdict(snap, deleting, nodegroup)
            elapsed = time.monotonic() - start
            if verdict == "COMPLETE":
                err.print(f"{what}: done in {elapsed:.1f}s")
                return snap
            if verdict == "FAILED":
                typer.echo(f"error: {what} failed: {_failure_text(snap, nodegroup)}", err=True)
                raise typer.Exit(EXIT_FAILED)
            if elapsed > timeout:
                status = (snap.cluster or {}).get("status")
                typer.echo(
                    f"error: timed out after {timeout:g}s waiting for {what} (still {status}); "
                    f"it goes on in the service: `shoal cluster watch {_name(snap, cluster)}`",
                    err=True,
                )
                raise typer.Exit(EXIT_TIMEOUT)
            time.sleep(interval)
    finally:
        if live is not None:
            live.stop()
