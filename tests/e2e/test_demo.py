"""`shoal demo` end to end: it finishes in under a minute, the data it keeps holds
the promised cluster when a new shoal is started on it, and `--stay` keeps serving the
demo's cluster to the dashboard (a real browser) until Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from shoal.cli.main import app
from tests.integration.cli_support import Shoal, fast_settings
from tests.support.browser import chromium, login
from tests.support.process import SHOAL
from tests.support.server import live_server
from tests.support.waiting import scaled, until

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("demo")]


def test_demo_runs_end_to_end_and_keeps_its_data(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    started = time.monotonic()
    result = CliRunner().invoke(app, ["demo", "--keep", "--data-dir", str(data)])
    took = time.monotonic() - started
    assert result.exit_code == 0, result.output
    assert took < scaled(60), f"the demo took {took:.0f}s"  # a minute on an idle machine
    out = result.stdout
    for text in ("k8s-hetero", "Remove exactly one named worker", "Final state",
                 "What you just saw", f"SHOAL_DATA_DIR={data}"):  # fmt: skip
        assert text in out, text
    assert "Traceback" not in result.output

    # The kept data directory works with a fresh shoal, as the demo says.
    with live_server(fast_settings(data, conductor=False)) as server:
        shoal = Shoal(server)
        cluster = shoal.json("cluster", "show", "demo")
        assert cluster["status"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
        nodes = shoal.json("node", "list", "demo")
        per_group = Counter(n["nodegroup_name"] for n in nodes)
        assert per_group == {"masters": 3, "gpu": 1, "ssd": 4}
        masters = sorted(n["availability_zone"] for n in nodes if n["nodegroup_name"] == "masters")
        assert masters == ["az-1", "az-2", "az-3"]
        assert {n["availability_zone"] for n in nodes if n["nodegroup_name"] == "ssd"} == {"az-1"}
        assert {n["flavor_id"] for n in nodes if n["nodegroup_name"] == "gpu"} == {"g1.large"}
        assert all(n["address"] and n["state"] == "ACTIVE" for n in nodes)


def test_demo_cleans_up_its_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where mkdtemp puts it
    before = set(tmp_path.iterdir())
    result = CliRunner().invoke(app, ["demo", "--time-scale", "50"])
    assert result.exit_code == 0, result.output
    assert "shoal-demo-" in result.stdout
    assert set(tmp_path.iterdir()) == before
    assert "SHOAL_DATA_DIR" not in result.stdout


class StayingDemo:
    """`shoal demo --stay` as a process of its own (its temp directory under `tmp`),
    its output read line by line as it comes."""

    def __init__(self, tmp: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
        env["TMPDIR"] = str(tmp)  # where its temp data directory goes
        env["PYTHONFAULTHANDLER"] = "1"  # a demo that does not stop shows its threads (stop)
        # --stay-for bounds a demo this test would fail to stop; it is stopped long before
        args = [SHOAL, "demo", "--stay", "--stay-for", "600", "--time-scale", "50"]
        # Started with SIGINT ignored, as a background job or a test runner's worker is:
        # Ctrl-C must stop it all the same (the demo says it does).
        self.proc = subprocess.Popen(
            args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )  # fmt: skip
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def staying(self) -> tuple[str, Path]:
        """Wait for the line saying it keeps serving: the dashboard's URL and the data dir."""
        until(lambda: "Ctrl-C stops it" in self.output or self.proc.poll() is not None,
              progress=lambda: len(self.lines), what="the demo's stay line")  # fmt: skip
        found = re.search(
            r"Still serving: dashboard (\S+)/ui/ \(token in (\S+)/admin-token", self.output
        )
        assert found, self.output
        return found[1], Path(found[2])

    def stop(self, sig: signal.Signals) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # faulthandler: every thread's stack
            self.proc.wait(timeout=scaled(10))
            time.sleep(0.5)  # the reader takes the last lines
            raise AssertionError(f"the demo did not stop on {sig.name}:\n{self.output}") from None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


ON_PAGE = (
    "return [[...document.querySelectorAll('section[data-group]')].map(s => s.dataset.group),"
    " document.querySelectorAll('tr[data-node]').length]"
)


def refuses(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.ConnectError:
        return True
    return False


def test_demo_stays_for_the_dashboard_until_ctrl_c(tmp_path: Path) -> None:
    demo = StayingDemo(tmp_path)
    try:
        url, data = demo.staying()
        out = demo.output
        # the dashboard's address comes before the cluster is made, to watch it come up
        assert out.index(f"dashboard: {url}/ui/") < out.index("==> Cluster demo")
        token = (data / "admin-token").read_text().strip()
        assert token not in out
        with chromium(tmp_path) as driver:
            login(driver, url, token)

            def on_page() -> tuple[list[str], int]:
                """The node groups' sections and the node rows on screen."""
                got = driver.execute_script(ON_PAGE)
                return sorted(got[0]), got[1]

            row = "#clusters tr[data-name=demo]"
            until(lambda: bool(driver.find_elements("css selector", row)),
                  progress=on_page, what="the demo listed", idle=20)  # fmt: skip
            driver.find_element("css selector", row + " a").click()

            # 3 masters, the 1 gpu worker left, 4 ssd workers
            until(lambda: on_page() == (["gpu", "masters", "ssd"], 8),
                  progress=on_page, what="the demo's node groups and nodes", idle=20)  # fmt: skip
        assert demo.stop(signal.SIGINT) == 0, demo.output
    finally:
        demo.kill()
    assert "Traceback" not in demo.output
    assert refuses(url)
    assert not data.exists()  # its temp data directory went with it


def test_demo_stays_until_sigterm(tmp_path: Path) -> None:
    demo = StayingDemo(tmp_path)
    try:
        url, data = demo.staying()
        assert httpx.get(url + "/ui/", timeout=10).status_code == 200
        assert data.is_dir()
        assert demo.stop(signal.SIGTERM) == 0, demo.output
    finally:
        demo.kill()
    assert "Traceback" not in demo.output
    assert refuses(url)
    assert not data.exists()
