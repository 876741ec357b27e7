"""The `shoal` CLI without a server: help and examples, completion, bad input,
and the message for an unreachable service."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from shoal.cli.main import app
from tests.support.server import free_port

runner = CliRunner()


def _commands(group: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, cmd in group.commands.items():
        path = (*prefix, name)
        if hasattr(cmd, "commands"):
            found.extend(_commands(cmd, path))
        else:
            found.append(path)
    return found


ALL_COMMANDS = _commands(typer.main.get_command(app))


def test_the_command_tree_is_complete() -> None:
    want = {
        ("serve",), ("conductor",), ("demo",), ("events",), ("node", "list"),
        *((g, c) for g in ("template", "nodegroup-template", "nodegroup")
          for c in ("create", "list", "show", "update", "delete")),
        *(("cluster", c) for c in ("create", "list", "show", "update", "delete", "resize",
                                   "upgrade", "watch")),
    }  # fmt: skip
    assert want <= set(ALL_COMMANDS)


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=" ".join)
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = runner.invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output


def test_shell_completion_script_is_offered() -> None:
    # From a real bash: the completion script is for the shell the command runs in
    # (found among its parent processes, which a test worker may not have).
    shoal = Path(sys.executable).parent / "shoal"
    done = subprocess.run(
        ["bash", "-c", f"{shoal} --show-completion; exit $?"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "complete" in done.stdout and "_SHOAL_COMPLETE" in done.stdout


def test_unreachable_server_says_how_to_start_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["--url", url, "cluster", "list"])
    assert result.exit_code == 1
    assert f"cannot reach shoal at {url}" in result.stderr
    assert "shoal serve" in result.stderr
    assert "Traceback" not in result.output


def test_shoal_url_variable_is_used() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["template", "list"], env={"SHOAL_URL": url})
    assert result.exit_code == 1
    assert url in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["cluster", "update", "c1"], "nothing to change"),
        (["cluster", "update", "c1", "--set", "node_count"], "KEY=VALUE"),
        (["template", "create", "t", "-n", "role=master,count=3"], "needs name="),
        (["template", "create", "t", "-n", "name=a,count=three"], "must be an integer"),
        (["nodegroup", "create", "c", "g", "--taint", "dedicated"], "KEY=VALUE:EFFECT"),
        (["cluster", "list", "-f", "xml"], "xml"),
        (["cluster", "resize", "c1", "many"], "should be a valid integer"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(argv: list[str], message: str) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # never contacted: input is checked first
    result = runner.invoke(app, ["--url", url, *argv])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())
    assert "Traceback" not in result.output


def test_the_installed_entry_point_exits_cleanly_when_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "shoal", "--url", url, "node", "list", "demo"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    want = f"error: cannot reach shoal at {url}: start it with `shoal serve` (or set SHOAL_URL"
    assert proc.stderr.strip().splitlines() == [want + " / --url)"]
    assert proc.stdout == ""
