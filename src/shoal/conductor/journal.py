"""The conductor's log of what it changed: every event a pass records (a state
change of a cluster, a node group or a node) is logged too, at INFO (WARNING for
warnings), with the cluster, node group and node ids as structured fields
(`shoal.logs`); each pass's decisions at DEBUG."""

from __future__ import annotations

import logging

from shoal import logs
from shoal.db import writes

log = logging.getLogger("shoal.conductor")


def events(cluster: str, recorded: list[writes.EventIn]) -> None:
    """Log the events a pass committed for `cluster`."""
    for e in recorded:
        level = logging.WARNING if e.type == "Warning" else logging.INFO
        if log.isEnabledFor(level):
            fields = logs.ids(cluster=cluster, nodegroup=e.nodegroup_uuid, node=e.node_uuid)
            log.log(level, "%s: %s", e.reason, e.message, extra=fields)


def decided(cluster: str, group: str, what: str) -> None:
    """A pass's decisions, at DEBUG."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", what, extra=logs.ids(cluster=cluster, nodegroup=group))
