"""What the node agent and shoal say to each other (JSON over HTTP), shared by both.

The agent authenticates with its node's own token (header `X-Shoal-Node-Token`),
which shoal wrote into the node's bootstrap data.

- `POST /v1/agent/heartbeat` `{"node", "version", "task": <uuid or null>}` -> `{"task": Task
  or null, "interval": seconds}`: the agent is alive (and says which task it is
  running, if any); shoal answers with the task it should run now (the one
  already under way first, so a restarted agent finds it again).
- `POST /v1/agent/tasks/<uuid>` `{"state": RUNNING|SUCCEEDED|FAILED, "output": text,
  "exit_code": n}` -> `{}`: progress and the end of a task. Idempotent: the same
  report twice changes nothing; a report for a task that was cancelled is ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TOKEN_HEADER = "X-Shoal-Node-Token"
IDENTITY_PATH = "/etc/shoal/node.json"
OUTPUT_MAX = 16 * 1024  # characters of a task's output kept (its tail)

# Task kinds the agent runs, and what each means on the node (tasks.py).
RESTART_SERVICES = "restart-services"  # params: services (list)
UPGRADE_PACKAGES = "upgrade-packages"  # params: packages (list)
UPGRADE_IMAGES = "upgrade-images"  # params: images (list): pull new container images
REBASE = "rebase"  # params: ref: rpm-ostree rebase, then reboot
SET_LABELS = "set-labels"  # params: labels (dict), taints (list): the node's own view
AGENT_KINDS = (RESTART_SERVICES, UPGRADE_PACKAGES, UPGRADE_IMAGES, REBASE, SET_LABELS)

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = (
    "PENDING",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "CANCELLED",
)
ENDED = (SUCCEEDED, FAILED, CANCELLED)


@dataclass(frozen=True)
class Task:
    """One task for one node."""

    uuid: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"uuid": self.uuid, "kind": self.kind, "params": dict(self.params)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        return cls(str(data["uuid"]), str(data["kind"]), dict(data.get("params") or {}))


def tail(text: str) -> str:
    """The end of an output, bounded."""
    return text if len(text) <= OUTPUT_MAX else "..." + text[-(OUTPUT_MAX - 3) :]
