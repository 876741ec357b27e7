"""`shoal demo` end to end: it finishes in under a minute, and the data it keeps
holds the promised cluster when a new shoal is started on it."""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shoal.cli.main import app
from tests.integration.cli_support import Shoal, fast_settings
from tests.support.server import live_server
from tests.support.waiting import scaled

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
