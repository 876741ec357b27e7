"""Pause, resume and abort a rollout (shoal's actions; Magnum has none): a hold on
the node groups' spec, which the conductor's rollout phase reads. Each is new
desired state (the generation moves), recorded as an event."""

from __future__ import annotations

import dataclasses
from typing import Any

from shoal.db import events
from shoal.db.engine import Database
from shoal.db.repo import clusters, nodegroups
from shoal.db.types import utcnow
from shoal.domain import policy
from shoal.domain import validation as v
from shoal.domain.rollout import RolloutState
from shoal.services.context import Caller

# action -> the hold it puts on the groups (resume lifts it)
HOLDS: dict[str, str | None] = {
    "pause": RolloutState.PAUSED.value,
    "resume": None,
    "abort": RolloutState.ABORTED.value,
}
KEYS = frozenset({"nodegroup"})


def hold(db: Database, caller: Caller, ident: str, action: str, body: dict[str, Any]) -> str:
    """Put `action`'s hold on the cluster's node groups (or the one named); the
    cluster's uuid."""
    policy.enforce(caller, "cluster:rollout")
    v.reject_unknown(action, body, KEYS)
    want = HOLDS[action]
    with db.write() as s:
        cluster = clusters.find_changeable(s, caller.scope, ident)
        groups = nodegroups.targets(s, cluster.uuid, v.string("nodegroup", body.get("nodegroup")))
        now = utcnow()
        for group in groups:
            if group.spec.rollout_hold != want:
                new = dataclasses.replace(group.spec, rollout_hold=want)
                nodegroups.write_spec(s, group.uuid, new, "UPDATE_IN_PROGRESS", now)
        clusters.touch(s, cluster.uuid, "UPDATE_IN_PROGRESS", now)
        names = ", ".join(g.name for g in groups)
        events.record(s, cluster.uuid, f"Rollout{action.capitalize()}", f"{action}: {names}")
        return cluster.uuid
