"""Run the real `openstack coe` CLI against a live shoal server.

The environment is the caller's minus any `OS_*` settings (so a developer's
cloud credentials never leak into a test), plus a `SHELL`: `openstack coe
cluster config` reads it to choose the shell syntax it prints, and CI runners
often have none set."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.server import LiveServer

OPENSTACK = str(Path(sys.executable).parent / "openstack")


def coe_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.setdefault("SHELL", "/bin/bash")
    return env


def run_coe(
    server: LiveServer, *args: str, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    """One `openstack coe ...` call against `server`, with a token of the server's own
    (an admin of project `default` unless `token` is given), the way an operator of a
    shoal without Keystone runs it: keystoneauth's `admin_token` plugin, which sends a
    fixed token to a fixed endpoint."""
    token = token or server.token()
    cmd = [
        OPENSTACK, "--os-auth-type", "admin_token", "--os-endpoint", server.v1,
        "--os-token", token, "coe", *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=coe_env())
