"""A cloud's message with terminal escapes reaches `shoal events`, `cluster show` and
`nodegroup list` as visible `\\x1b` text, never as raw control bytes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_support import Shoal, fast_settings
from tests.support.server import LiveServer, live_server

EVIL = "no room\x1b[2J\x1b]0;owned\x07\x9b31m\rFAKE"
SHOWN = "no room\\x1b[2J\\x1b]0;owned\\x07\\x9b31m\\x0dFAKE"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(fast_settings(tmp_path)) as srv:
        yield srv


def test_escape_bytes_from_the_cloud_are_shown_not_sent(server: LiveServer) -> None:
    sh = Shoal(server)
    headers = {"X-Auth-Token": server.token("default", "admin")}
    with httpx.Client(base_url=server.v1, headers=headers, timeout=30) as api:
        rule = {"kind": "quota_exceeded", "message": EVIL}
        assert api.post("/sim/faults", json=rule).status_code in (200, 201)
    sh.ok("cluster", "create", "evil", "--image", "fedora-coreos-40", "--flavor", "m1.small",
          "-n", "name=m,role=master,flavor=m1.small,count=1")  # fmt: skip
    deadline = time.monotonic() + 30
    while not any("owned" in str(e.get("message")) for e in sh.json("events", "evil")):
        assert time.monotonic() < deadline, "the cloud's message never became an event"
        time.sleep(0.1)

    outputs = {
        "events": sh.ok("events", "evil").stdout,
        "events -f value": sh.ok("events", "evil", "-f", "value").stdout,
        "events --follow": sh.ok("events", "evil", "--follow", "--timeout", "0.2").stdout,
        "nodegroup list": sh.ok("nodegroup", "list", "evil", "-c", "status_reason").stdout,
        "cluster show": sh.ok("cluster", "show", "evil").stdout,
    }
    for what, out in outputs.items():
        bad = sorted(
            {hex(ord(c)) for c in out if (ord(c) < 32 and c not in "\n") or 127 <= ord(c) < 160}
        )
        assert bad == [], f"{what} printed raw control characters {bad}:\n{out!r}"
    assert SHOWN.split("\\x0d")[0] in outputs["events -f value"]
    assert "\\x1b[2J" in outputs["events"] and "\\x1b[2J" in outputs["events --follow"]
