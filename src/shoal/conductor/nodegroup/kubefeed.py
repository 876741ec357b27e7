"""Kubernetes feeds the node group pass (docs/kubernetes.md, "Kubernetes feeds shoal
back"): where shoal runs Kubernetes on the group's provider, each pass reads the
cluster's Nodes (and the pods of the nodes being drained) before it decides, and
after its driver calls makes the calls its decisions ask of the API server: the
group's labels and taints onto its Nodes, cordons and evictions, and the Node
objects of nodes whose machine is gone deleted.

Reads and calls are bounded by `kube_timeout_seconds` each, made for several
clusters in parallel, and an API server that does not answer is a fact of its own
cluster's pass ("API server unreachable: ..."), never an error of the pass.
The rules are pure, in `domain/kubenodes.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from shoal.conductor.context import Context
from shoal.conductor.guard import Guard
from shoal.conductor.nodegroup.state import Pass
from shoal.domain import kubenodes
from shoal.domain.kubenodes import ClusterView, Op
from shoal.domain.model import NodeState
from shoal.kube import Client, KubeError, Unreachable

log = logging.getLogger(__name__)
PARALLEL = 8  # clusters read or called at once
EVICTIONS_MAX = 200  # evictions asked for one node in one pass
UNREACHABLE = "API server unreachable: "
Groups = dict[tuple[str, str], list[Pass]]  # (cluster uuid, API server) -> its passes


def runs_kubernetes(ctx: Context, p: Pass) -> bool:
    """Whether shoal runs Kubernetes on this pass's group and reads its cluster's API
    server: the group's provider runs the Kubernetes shoal renders, the cluster's coe
    is kubernetes, and neither is being deleted."""
    s = p.snap
    provider = ctx.provider(p.provider)
    return (
        ctx.kube is not None
        and provider is not None
        and provider.kubernetes
        and s.cluster_attrs.get("coe", "kubernetes") == "kubernetes"
        and not s.group.deleting
        and not s.cluster_deleting
    )


def managed(ctx: Context, p: Pass) -> bool:
    """Whether this pass reads its cluster's API server: shoal runs Kubernetes there,
    the cluster's API address is known, and the group's machines were listed."""
    return runs_kubernetes(ctx, p) and bool(p.snap.cluster_api_address) and p.listing_error is None


def _by_cluster(passes: Iterable[Pass]) -> Groups:
    out: Groups = {}
    for p in passes:
        key = (p.snap.group.cluster_id, str(p.snap.cluster_api_address))
        out.setdefault(key, []).append(p)
    return out


def _parallel(guard: Guard, groups: Groups, fn: Callable[[str, str, list[Pass]], None]) -> None:
    """`fn` for each cluster, several at once; an unexpected exception fails that
    cluster's groups alone."""
    if not groups:
        return
    with ThreadPoolExecutor(min(PARALLEL, len(groups)), thread_name_prefix="kube") as pool:
        futures = {pool.submit(fn, c, s, ps): ps for (c, s), ps in groups.items()}
        for fut, ps in futures.items():
            exc = fut.exception()
            if exc is not None and isinstance(exc, Exception):
                for p in ps:
                    guard.fail(p.group_uuid, exc)


def read(ctx: Context, guard: Guard, passes: Iterable[Pass]) -> None:
    """Each managed pass's view of its cluster's API server (`p.kube`), one read per
    cluster; a ready group is looked at again within `kube_check_seconds`."""
    ours = [p for p in passes if guard.ok(p.group_uuid) and runs_kubernetes(ctx, p)]
    for p in ours:  # (also before the API address is known: a ready group looks again)
        p.drain_timeout_s = ctx.settings.drain_timeout_seconds
        p.look_again(p.now + timedelta(seconds=ctx.settings.kube_check_seconds))
    mine = [p for p in ours if managed(ctx, p)]

    def one(cluster: str, server: str, ps: list[Pass]) -> None:
        draining = {
            p.nodes[u].name for p in ps for u in p.memory.drains if u in p.nodes and p.nodes[u].name
        }
        view = _read(ctx, cluster, server, draining)
        for p in ps:
            p.kube = view

    _parallel(guard, _by_cluster(mine), one)


def _read(ctx: Context, cluster: str, server: str, draining: set[str]) -> ClusterView:
    assert ctx.kube is not None
    try:
        client = ctx.kube.client(cluster, server)
        nodes = {n.name: n for n in map(kubenodes.parse_node, client.nodes())}
        pods = {
            name: tuple(kubenodes.parse_pod(x) for x in client.pods_on(name))
            for name in sorted(draining)
            if name in nodes
        }
    except Unreachable as exc:
        return ClusterView(error=UNREACHABLE + exc.reason)
    except KubeError as exc:
        return ClusterView(error=f"API server refused: {exc.reason}")
    return ClusterView(nodes, pods)


def plan(p: Pass) -> None:
    """The calls the group's Nodes need (after the phases decided): its labels and
    taints on each of its ready nodes' Nodes, and the Node objects labelled for
    this group whose node shoal no longer has deleted."""
    view = p.kube
    if view is None or not view.reachable:
        return
    g = p.snap.group
    spec = g.spec
    names = set()
    fresh = False
    for node in p.nodes.values():
        names.add(node.name)
        kn = view.nodes.get(node.name)
        if kn is None or node.state is not NodeState.ACTIVE or node.to_delete:
            continue
        patch = kubenodes.wanted_patch(kn, spec.node_labels, spec.node_taints, g.uuid)
        if patch is not None:
            p.kube_ops.append(Op(kubenodes.PATCH_OP, kn.name, patch))
            first = kubenodes.LABELS_NOTE not in kn.annotations
            fresh = fresh or first or g.observed_generation < g.generation
    _, bad = kubenodes.split_labels(spec.node_labels)
    if bad and fresh:  # said when a Node is first labelled, or the spec changed
        p.event(
            "NodeLabelsSkipped",
            f"node group {g.name}: node_labels {', '.join(bad)} are not valid Kubernetes "
            "labels (keys: [prefix/]name of at most 63 of [A-Za-z0-9-_.]; values the "
            "same or empty): not set on its Nodes; fix them with a PATCH of node_labels",
            warning=True,
        )
    queued = {op.node for op in p.kube_ops if op.kind == kubenodes.DELETE_OP}
    for kn in view.nodes.values():
        mine = kn.labels.get(kubenodes.GROUP_LABEL) == g.uuid
        if mine and kn.name not in names and kn.name not in queued:
            p.kube_ops.append(Op(kubenodes.DELETE_OP, kn.name))


def act(ctx: Context, guard: Guard, passes: Iterable[Pass]) -> None:
    """Make each pass's calls to its cluster's API server (`p.kube_ops`), clusters in
    parallel; a call that fails is logged and made again by a later pass (labels,
    deletes) or counted by the drain's timeout; once the API server stops answering,
    the cluster's remaining calls wait for the next pass."""
    mine = [
        p
        for p in passes
        if guard.ok(p.group_uuid) and p.kube_ops and p.kube is not None and p.kube.reachable
    ]

    def one(cluster: str, server: str, ps: list[Pass]) -> None:
        assert ctx.kube is not None
        client = ctx.kube.client(cluster, server)
        for p in ps:
            for op in p.kube_ops:
                try:
                    _call(client, p, op)
                except Unreachable as exc:
                    log.warning("cluster %s: %s%s; calls left for the next pass",
                                cluster, UNREACHABLE, exc.reason)  # fmt: skip
                    return
                except KubeError as exc:
                    log.warning("cluster %s: %s of Node %s failed: %s",
                                cluster, op.kind, op.node, exc.reason)  # fmt: skip

    _parallel(guard, _by_cluster(mine), one)


def _call(client: Client, p: Pass, op: Op) -> None:
    if op.kind == kubenodes.PATCH_OP:
        client.patch_node(op.node, dict(op.patch or {}))
    elif op.kind == kubenodes.CORDON_OP:
        client.patch_node(op.node, kubenodes.CORDON)
    elif op.kind == kubenodes.EVICT_OP:
        pods = kubenodes.to_evict(kubenodes.parse_pod(x) for x in client.pods_on(op.node))
        refused = [x.ref for x in pods[:EVICTIONS_MAX] if not client.evict(x.namespace, x.name)]
        if refused:
            log.info("Node %s: evictions refused for now (disruption budgets): %s",
                     op.node, ", ".join(refused[:10]))  # fmt: skip
    elif op.kind == kubenodes.DELETE_OP:
        client.delete_node(op.node)
        p.event("NodeObjectDeleted", f"Node {op.node} deleted from Kubernetes: its machine is gone")
