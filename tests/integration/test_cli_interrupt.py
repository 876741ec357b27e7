"""Ctrl-C during `--wait` stops the waiting, not the operation: the real `shoal`
process says so, names the commands that follow it, and exits 130."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_support import fast_settings
from tests.support.server import LiveServer, live_server
from tests.support.waiting import scaled

SHOAL = str(Path(sys.executable).with_name("shoal"))
POLL_LINE = re.compile(r"IN_PROGRESS\s+\(\d+s\)")  # the wait's first line, not a terminal


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose machines take minutes to boot: a wait cannot end by itself."""
    data: Path = tmp_path_factory.mktemp("interrupt")
    sim = {"time_scale": 1.0, "boot_seconds": 600.0}
    with live_server(fast_settings(data, sim=sim)) as srv:
        yield srv


@pytest.fixture(scope="module")
def auth(slow: LiveServer) -> dict[str, str]:
    return {"X-Auth-Token": slow.token(), "OpenStack-API-Version": "container-infra latest"}


@pytest.mark.parametrize("operation", ["create", "resize"])
def test_ctrl_c_during_wait_says_the_operation_goes_on_and_exits_130(
    slow: LiveServer, auth: dict[str, str], operation: str
) -> None:
    name = f"slow-{operation}"
    if operation == "create":
        argv = ["cluster", "create", name, "--image", "fedora-coreos-40", "--wait"]
    else:
        body = {"name": name, "image_id": "fedora-coreos-40"}
        httpx.post(f"{slow.v1}/clusters", json=body, headers=auth).raise_for_status()
        argv = ["cluster", "resize", name, "3", "--wait"]
    proc = subprocess.Popen(
        [SHOAL, "--url", slow.url, "--token", auth["X-Auth-Token"], *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_on_a_terminal,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr or ()), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + scaled(30)
        # Interrupt once the CLI is polling (it polls only once the service accepted the
        # request): it has printed its first poll's line ("...: CREATE_IN_PROGRESS  (0s)").
        while not any(POLL_LINE.search(x) for x in list(lines)):
            assert proc.poll() is None and time.monotonic() < deadline, "".join(lines)
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=scaled(30))
        reader.join(timeout=scaled(10))
        err = "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "goes on in the service" in err
    assert f"shoal cluster watch {name}" in err and f"shoal events {name}" in err
    assert "Traceback" not in err and "Aborted" not in err
    cluster = httpx.get(f"{slow.v1}/clusters/{name}", headers=auth).json()
    assert cluster["status"].endswith("IN_PROGRESS")
    assert cluster["node_count"] == (3 if operation == "resize" else 1)  # the request stands


def _ctrl_c_as_on_a_terminal() -> None:
    """The CLI as a person starts it: SIGINT at its default, whatever this test process
    inherited or was left with (an ignored SIGINT is inherited across exec, and the
    suite's workers run other tests' code before this one)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
