"""What a node's agent says its image lacks: the services of its manifest in state
`missing` (the program is not on the node's PATH). Such a node cannot become a
Kubernetes node whatever shoal retries, so its group fails with this reason
(`conductor/nodegroup/status.py`) until a heartbeat no longer reports it."""

from __future__ import annotations

from typing import Any

PREFIX = "the node's image lacks "
MAX_NAMES = 8


def missing_reason(services: Any) -> str | None:
    """The node's reason for what its agent reported (`services`: the heartbeat's list
    of {name, state, message}), or None when nothing is missing. Anything not of that
    shape counts as nothing reported."""
    if not isinstance(services, list):
        return None
    names = sorted(
        {
            str(s["name"])[:64]
            for s in services
            if isinstance(s, dict) and s.get("state") == "missing" and s.get("name")
        }
    )
    if not names:
        return None
    shown = ", ".join(names[:MAX_NAMES]) + (" ..." if len(names) > MAX_NAMES else "")
    return (
        f"{PREFIX}{shown} (not on its PATH): use an image that carries them "
        "(docs/kubernetes.md, What a node image must carry)"
    )


def is_missing_reason(reason: str | None) -> bool:
    return bool(reason) and str(reason).startswith(PREFIX)
