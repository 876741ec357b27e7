"""`--wait` exit codes: failure (a node group the cloud refuses for good) exits 1
with the reason, a blocked group past the wait timeout exits 3 and shows BLOCKED."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_support import Shoal, fast_settings
from tests.support.server import LiveServer, live_server
from tests.support.waiting import scaled

pytestmark = pytest.mark.xdist_group("cli-wait")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("cli-wait")
    with live_server(fast_settings(data)) as srv:
        yield srv


def test_wait_exits_1_with_the_reason_when_the_operation_fails(server: LiveServer) -> None:
    shoal = Shoal(server, project="failing")
    result = shoal.run("cluster", "create", "bad", "--image", "fedora-coreos-40",
                       "-n", "name=cp,role=master,flavor=no-such-flavor,count=1",
                       "--wait", "--wait-timeout", "60")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "failed" in result.stderr and "no-such-flavor" in result.stderr
    assert "Traceback" not in result.output
    status = shoal.values("cluster", "show", "bad", "-c", "status")
    assert status == [["CREATE_FAILED"]]


def test_wait_times_out_with_exit_3_and_shows_blocked(server: LiveServer) -> None:
    admin = {"X-Auth-Token": server.token()}
    httpx.put(
        f"{server.v1}/sim/quotas/blocked", json={"cores": 1}, headers=admin
    ).raise_for_status()
    shoal = Shoal(server, project="blocked")
    result = shoal.run("cluster", "create", "stuck", "--image", "fedora-coreos-40",
                       "-n", "name=cp,role=master,flavor=m1.large,count=1",
                       "--wait", "--wait-timeout", f"{scaled(5):.0f}")  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "BLOCKED: quota exceeded" in result.stderr
    assert "timed out" in result.stderr
    watch = shoal.run("cluster", "watch", "stuck", "--timeout", "0.5", "--interval", "0.1")
    assert watch.exit_code == 3
    httpx.put(
        f"{server.v1}/sim/quotas/blocked", json={"cores": 100}, headers=admin
    ).raise_for_status()
    assert shoal.run("cluster", "watch", "stuck", "--interval", "0.1").exit_code == 0
