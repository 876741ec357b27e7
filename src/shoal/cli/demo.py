"""`shoal demo`: what shoal does, in under a minute, on a fresh machine.

It starts the embedded default (SQLite + the simulated cloud with compressed
time) in a temporary data directory, then drives it over HTTP only, like any
client: a template with three node group templates, a heterogeneous cluster
from it with live progress, the removal of one named worker, a scale-up, and
the final cluster, node groups and nodes with their AZs and addresses.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shoal import logs
from shoal.cli import output, wait
from shoal.cli.client import Client, Connection, fail
from shoal.cli.nodegroups import LIST_COLUMNS as NG_COLUMNS
from shoal.cli.nodes import LIST_COLUMNS as NODE_COLUMNS
from shoal.settings import Settings, SettingsError

if TYPE_CHECKING:
    from shoal.cli.embedded import EmbeddedServer

TEMPLATE = "k8s-hetero"
CLUSTER = "demo"
IMAGE = "fedora-coreos-40"
NODEGROUP_TEMPLATES: list[dict[str, Any]] = [
    {
        "name": "masters",
        "role": "master",
        "flavor_id": "m1.medium",
        "node_count": 3,
        "availability_zones": ["az-1", "az-2", "az-3"],
    },
    {
        "name": "gpu",
        "role": "worker",
        "flavor_id": "g1.large",
        "node_count": 2,
        "availability_zones": ["az-1", "az-2"],
        "node_labels": {"accelerator": "nvidia"},
    },
    {
        "name": "ssd",
        "role": "worker",
        "flavor_id": "s1.large",
        "node_count": 2,
        "availability_zones": ["az-1"],
        "node_labels": {"disk": "ssd"},
    },
]
SSD_SCALE_TO = 4
TIME_SCALE = 10.0
DEMO_NODE_COLUMNS = NODE_COLUMNS[:7]  # name … flavor_id: fits a terminal


def demo_settings(data_dir: Path, port: int, time_scale: float) -> Settings:
    """The embedded default in `data_dir`; SHOAL_* variables are ignored (self-contained)."""
    return Settings.from_env(
        env={},
        data_dir=data_dir,
        database_url=None,
        host="127.0.0.1",
        port=port,
        conductor=True,
        sim={"time_scale": time_scale, "boot_seconds": 20.0, "delete_seconds": 5.0},
        conductor_settings={"poll_seconds": 0.1, "requeue_seconds": 0.2},
    )


class Demo:
    """The demo's steps against one running shoal, through its HTTP API only."""

    def __init__(self, client: Client, wait_timeout: float) -> None:
        self.client = client
        self.wait_timeout = wait_timeout
        self.out = output.console()

    def step(self, text: str) -> None:
        self.out.print(f"\n[bold]==> {text}[/bold]", highlight=False)

    def wait(self, cluster: str) -> None:
        """Wait for the step; Ctrl-C ends the demo (its embedded server stops with it)."""
        wait.wait_for(
            self.client,
            cluster,
            timeout=self.wait_timeout,
            label=f"cluster {CLUSTER}",
            interruptible=False,
        )

    def nodes(self, group: str | None = None) -> list[dict[str, Any]]:
        return self.client.list_all(f"/clusters/{CLUSTER}/nodes", "nodes", nodegroup=group)

    def create_template(self) -> None:
        self.step(f"Cluster template {TEMPLATE} with three node group templates")
        body = {
            "name": TEMPLATE,
            "coe": "kubernetes",
            "image_id": IMAGE,
            "flavor_id": "m1.medium",
            "master_flavor_id": "m1.medium",
            "external_network_id": "public",
            "node_group_templates": NODEGROUP_TEMPLATES,
        }
        ct = self.client.post("/clustertemplates", body)
        output.show_list(
            ct.get("node_group_templates") or NODEGROUP_TEMPLATES,
            output.Format.table,
            None,
            ("name", "role", "flavor_id", "node_count", "availability_zones", "node_labels"),
        )

    def create_cluster(self) -> None:
        self.step(f"Cluster {CLUSTER} from {TEMPLATE}: 3 masters over 3 AZs, GPU and SSD workers")
        uuid = self.client.post("/clusters", {"name": CLUSTER, "cluster_template_id": TEMPLATE})
        self.wait(uuid["uuid"])
        output.show_list(self.nodes(), output.Format.table, None, DEMO_NODE_COLUMNS)

    def remove_named_worker(self) -> str:
        gpu = self.nodes("gpu")
        if not gpu:
            fail("the gpu node group has no nodes")
        victim = str(gpu[0]["name"])
        self.step(f"Remove exactly one named worker: {victim} (resize --remove {victim})")
        body = {"nodegroup": "gpu", "node_count": len(gpu) - 1, "nodes_to_remove": [victim]}
        self.client.post(f"/clusters/{CLUSTER}/actions/resize", body)
        self.wait(CLUSTER)
        left = [n["name"] for n in self.nodes("gpu")]
        if victim in left or len(left) != len(gpu) - 1:
            fail(f"after removing {victim}, gpu has {left}")
        self.out.print(f"{victim} is gone; the other GPU node(s) {', '.join(left)} stayed.")
        return victim

    def scale_up(self) -> None:
        self.step(f"Scale the ssd node group up to {SSD_SCALE_TO} (az-1 only)")
        body = {"nodegroup": "ssd", "node_count": SSD_SCALE_TO}
        self.client.post(f"/clusters/{CLUSTER}/actions/resize", body)
        self.wait(CLUSTER)

    def final_state(self) -> dict[str, Any]:
        self.step("Final state")
        cluster = self.client.get(f"/clusters/{CLUSTER}")
        output.show_one(
            cluster,
            output.Format.table,
            ["uuid", "name", "status", "master_count", "node_count", "api_address"],
        )
        groups = self.client.list_all(f"/clusters/{CLUSTER}/nodegroups/detail", "nodegroups")
        columns = [c for c in NG_COLUMNS if c != "uuid"]
        output.show_list(groups, output.Format.table, None, columns, title="node groups")
        nodes = self.nodes()
        output.show_list(nodes, output.Format.table, None, DEMO_NODE_COLUMNS, title="nodes")
        return {"cluster": cluster, "nodes": nodes}

    def check(self, final: dict[str, Any], removed: str) -> None:
        """Fail loudly if the end state is not what the demo promised."""
        nodes = final["nodes"]
        by_group: dict[str, list[dict[str, Any]]] = {}
        for n in nodes:
            by_group.setdefault(str(n.get("nodegroup_name")), []).append(n)
        masters = by_group.get("masters", [])
        problems = []
        if final["cluster"].get("status") not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            problems.append(f"cluster status {final['cluster'].get('status')}")
        if sorted(str(n.get("availability_zone")) for n in masters) != ["az-1", "az-2", "az-3"]:
            problems.append("masters are not spread over az-1, az-2, az-3")
        if len(by_group.get("gpu", [])) != 1 or removed in {n["name"] for n in nodes}:
            problems.append("the named GPU worker was not removed exactly")
        ssd = by_group.get("ssd", [])
        if len(ssd) != SSD_SCALE_TO or {n.get("availability_zone") for n in ssd} != {"az-1"}:
            problems.append(f"ssd should have {SSD_SCALE_TO} nodes in az-1")
        if any(not n.get("address") for n in nodes):
            problems.append("some nodes have no address")
        if problems:
            fail("the demo did not end as expected: " + "; ".join(problems))


SUMMARY = """
What you just saw:
  - one cluster template carrying three node group templates (masters, gpu, ssd);
  - a heterogeneous cluster made from it: 3 masters spread over az-1/az-2/az-3,
    GPU workers (g1.large) and SSD workers (s1.large) pinned to az-1, each group
    reconciled on its own, with live desired / ready / failed counts;
  - `resize --remove`: exactly the node you named went away, no other;
  - a scale-up of one group that left the others alone;
  - every node with its AZ and address, all through the Magnum-compatible HTTP API
    (the same calls `openstack coe` and the `shoal` CLI make)."""


def stays(stay: bool | None, stdin_tty: bool, stdout_tty: bool) -> bool:
    """--stay / --no-stay when given; else stay only for a person at a terminal."""
    return stdin_tty and stdout_tty if stay is None else stay


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM end the demo with KeyboardInterrupt, so its server
    stops and its temp directory goes; only in the main thread, where Python delivers
    signals. SIGINT too: a process started with SIGINT ignored (a background job, a
    test runner's worker) would otherwise never see the Ctrl-C the demo promises."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        sig: signal.signal(sig, signal.default_int_handler)
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def serve_until_stopped(server: EmbeddedServer, stay_for: float | None) -> None:
    """Keep the embedded shoal serving until Ctrl-C / SIGTERM, or `stay_for` seconds."""
    deadline = None if stay_for is None else time.monotonic() + stay_for
    try:
        while deadline is None or time.monotonic() < deadline:
            if not server.running():
                fail("the embedded shoal stopped by itself; its log is above")
            left = 1.0 if deadline is None else deadline - time.monotonic()
            time.sleep(max(0.0, min(1.0, left)))
    except KeyboardInterrupt:
        pass


def demo(
    keep: Annotated[
        bool, typer.Option("--keep", help="keep the data directory and say how to reuse it")
    ] = False,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="use this directory (default: a temp one)")
    ] = None,
    time_scale: Annotated[
        float,
        typer.Option(
            help="sim time compression (10: a 20 s boot takes 2 s; 1: watch it at real pace)",
            min=1,
        ),
    ] = TIME_SCALE,
    wait_timeout: Annotated[float, typer.Option(help="give up a step after N seconds")] = 120,
    stay: Annotated[
        bool | None,
        typer.Option(
            "--stay/--no-stay",
            help="after the demo, keep serving the API and dashboard until Ctrl-C "
            "(default: stay when stdin and stdout are terminals)",
        ),
    ] = None,
    stay_for: Annotated[
        float | None,
        typer.Option("--stay-for", help="with --stay: stop after N seconds", min=0),
    ] = None,
) -> None:
    """Run the one-minute demo on an embedded shoal (SQLite + simulated cloud).

    Example: shoal demo --keep; shoal demo --stay --time-scale 1 (watch it on the dashboard)
    """
    from shoal.cli.embedded import EmbeddedServer, free_port

    # The demo's own output is the show: its server logs warnings and errors only,
    # unless SHOAL_LOG_LEVEL asks for more (the demo ignores other SHOAL_* variables).
    try:
        logs.configure_from(
            os.environ.get("SHOAL_LOG_LEVEL", "WARNING"),
            os.environ.get("SHOAL_LOG_FORMAT", "text"),
        )
    except SettingsError as exc:
        fail(str(exc), 2)
    staying = stays(stay, sys.stdin.isatty(), sys.stdout.isatty())
    started = time.monotonic()
    made_dir = data_dir is None
    directory = Path(tempfile.mkdtemp(prefix="shoal-demo-")) if data_dir is None else data_dir
    directory.mkdir(parents=True, exist_ok=True)
    out = output.console()
    try:
        server = EmbeddedServer(demo_settings(directory, free_port(), time_scale))
        server.start()
    except Exception as exc:  # e.g. the API is not installed or the port is taken
        _cleanup(directory, made_dir and not keep)
        fail(f"could not start the embedded shoal: {exc.__class__.__name__}: {exc}")
    out.print(f"shoal demo: embedded shoal (SQLite + simulated cloud) at {server.url}")
    out.print(f"data directory: {directory}")
    out.print(
        f"[bold]dashboard: {server.url}/ui/[/bold] (log in with the token in "
        f"{directory}/admin-token{'; open it now to watch the cluster come up' if staying else ''})"
    )
    client = Client(Connection(url=server.url, token=server.token))
    try:
        with signals_as_interrupt():
            d = Demo(client, wait_timeout)
            d.create_template()
            d.create_cluster()
            removed = d.remove_named_worker()
            d.scale_up()
            final = d.final_state()
            d.check(final, removed)
            out.print(SUMMARY, highlight=False)
            out.print(f"\ndemo finished in {time.monotonic() - started:.1f}s")
            if staying:
                out.print(_stay_line(server.url, directory, stay_for), highlight=False)
                serve_until_stopped(server, stay_for)
                out.print("stopping the embedded shoal")
    finally:
        client.close()
        server.stop()
        _cleanup(directory, made_dir and not keep)
    if keep or not made_dir:
        out.print(
            f"\nThe data is kept in {directory}. Keep using it (the CLI finds the admin "
            f"token in the data directory):\n"
            f"  export SHOAL_DATA_DIR={directory} SHOAL_URL={server.url}\n"
            f"  SHOAL_SIM_TIME_SCALE={time_scale:g} shoal serve --port {server.settings.port} &\n"
            f"  shoal cluster show {CLUSTER}; shoal node list {CLUSTER}\n"
            f"The dashboard is then at {server.url}/ui/ (the token: {directory}/admin-token)",
            highlight=False,
        )


def _stay_line(url: str, directory: Path, stay_for: float | None) -> str:
    """The one line that says where to look while the demo keeps serving (no token in it)."""
    until = "Ctrl-C stops it" + ("" if stay_for is None else f" (or {stay_for:g} s from now)")
    return (
        f"\n[bold]Still serving: dashboard {url}/ui/[/bold] (token in {directory}/admin-token); "
        f"CLI: SHOAL_URL={url} SHOAL_DATA_DIR={directory} shoal node list {CLUSTER}. {until}."
    )


def _cleanup(directory: Path, remove: bool) -> None:
    if remove:
        shutil.rmtree(directory, ignore_errors=True)


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
