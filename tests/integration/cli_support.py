"""Helpers for CLI tests: a fast embedded shoal and a runner that calls the real
`shoal` entry point in-process against it over HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner, Result

from shoal.cli.main import app
from shoal.settings import Settings
from tests.support.server import LiveServer

_runner = CliRunner()


def fast_settings(data_dir: Path, **overrides: Any) -> Settings:
    """SQLite + sim with compressed time and a brisk conductor; no SHOAL_* leaks in."""
    values: dict[str, Any] = {
        "data_dir": data_dir,
        "port": 0,
        "sim": {"time_scale": 200.0, "boot_seconds": 20.0, "delete_seconds": 5.0},
        "conductor_settings": {"poll_seconds": 0.05, "requeue_seconds": 0.1},
    }
    values.update(overrides)
    return Settings.from_env(env={}, **values)


class Shoal:
    """`shoal ...` against one server with a token of the server's own (an admin of
    `project`, default `default`); `ok()` asserts success and returns the result."""

    def __init__(self, server: LiveServer, project: str | None = None, role: str = "admin") -> None:
        self.url = server.url
        self.project = project or "default"
        self.token = server.token(self.project, role)

    def run(self, *argv: str) -> Result:
        return _runner.invoke(app, ["--url", self.url, "--token", self.token, *argv])

    def ok(self, *argv: str) -> Result:
        result = self.run(*argv)
        assert result.exit_code == 0, f"shoal {' '.join(argv)}: {result.output}"
        return result

    def json(self, *argv: str) -> Any:
        return json.loads(self.ok(*argv, "-f", "json").stdout)

    def yaml(self, *argv: str) -> Any:
        return yaml.safe_load(self.ok(*argv, "-f", "yaml").stdout)

    def values(self, *argv: str) -> list[list[str]]:
        out = self.ok(*argv, "-f", "value").stdout
        return [line.split(" ") for line in out.splitlines() if line]
