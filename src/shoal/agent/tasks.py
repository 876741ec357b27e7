"""What a task means on a node: the commands it runs (the node's own knowledge of
its OS: systemd, dnf or apt, rpm-ostree, crictl). An agent config may replace
any kind's commands (`commands`: kind -> list of argv templates with `{name}`
placeholders filled from the task's params), for nodes that differ and for tests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shoal.agent import protocol as p

Argv = list[str]


def commands(
    task: p.Task, overrides: Mapping[str, Sequence[Sequence[str]]], state_dir: Path
) -> list[Argv]:
    """The argv lists task `task` runs, in order (each must succeed)."""
    if task.kind in overrides:
        return [[_fill(a, task.params) for a in argv] for argv in overrides[task.kind]]
    params = task.params
    if task.kind == p.RESTART_SERVICES:
        return [["systemctl", "restart", str(s)] for s in _list(params, "services", ["kubelet"])]
    if task.kind == p.UPGRADE_PACKAGES:
        packages = [str(x) for x in _list(params, "packages", [])]
        if shutil.which("dnf"):
            return [["dnf", "-y", "upgrade", *packages]]
        return [["apt-get", "update"], ["apt-get", "install", "-y", "--only-upgrade", *packages]]
    if task.kind == p.UPGRADE_IMAGES:
        return [["crictl", "pull", str(i)] for i in _list(params, "images", [])]
    if task.kind == p.REBASE:
        return [["rpm-ostree", "rebase", str(params["ref"])], ["systemctl", "reboot"]]
    if task.kind == p.SET_LABELS:
        path = state_dir / "labels.json"
        view = {"labels": params.get("labels") or {}, "taints": params.get("taints") or []}
        return [["python3", "-c", _WRITE, str(path), json.dumps(view, sort_keys=True)]]
    raise ValueError(f"unknown task kind {task.kind!r}")


# Write a file atomically: what set-labels does (a file the node's kubelet config reads).
_WRITE = (
    "import os,sys;t=sys.argv[1]+'.tmp';open(t,'w').write(sys.argv[2]+'\\n');"
    "os.replace(t,sys.argv[1])"
)


def _list(params: Mapping[str, Any], key: str, default: list[Any]) -> list[Any]:
    value = params.get(key, default)
    return list(value) if isinstance(value, list | tuple) else [value]


def _fill(template: str, params: Mapping[str, Any]) -> str:
    """`{name}` placeholders from params (lists joined by spaces); unknown: empty."""

    class Missing(dict[str, str]):
        def __missing__(self, key: str) -> str:
            return ""

    values = Missing(
        {k: " ".join(map(str, v)) if isinstance(v, list) else str(v) for k, v in params.items()}
    )
    return template.format_map(values)
