"""Fixtures shared by every test layer."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.postgres import PrivatePostgres
from tests.harness.postgres import stop as stop_postgres
from tests.support.databases import provision, throwaway_pg

_private_postgres: PrivatePostgres | None = None


def pytest_configure(config: pytest.Config) -> None:
    """Choose the session's PostgreSQL once, in the controller, before xdist spawns the
    workers: they inherit its address from the environment and share the one server."""
    global _private_postgres
    if os.environ.get("PYTEST_XDIST_WORKER") or hasattr(config, "workerinput"):
        return
    _private_postgres = provision()


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the private PostgreSQL this session started (by its PID), none other."""
    global _private_postgres
    if _private_postgres is not None:
        stop_postgres(_private_postgres)
        _private_postgres = None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Make `--dist loadgroup` keep each `xdist_group` on one worker under pytest 9.2.

    xdist groups tests by an `@<group>` suffix that each worker appends to the node
    ids. pytest-xdist 3.8 writes it to `item._nodeid`, which pytest 9.2 no longer
    reads (it keeps a structured `item._id`), so every group was silently spread over
    both workers (pytest-xdist issue #1386): two OpenStack clouds, two libvirt hosts,
    HA tests racing each other. Until a fixed xdist is pinned, append the suffix
    where pytest 9.2 reads it, when xdist's own did not take.
    """
    if not getattr(config.option, "loadgroup", False):  # set on xdist workers (loadgroup)
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:  # an older pytest, where xdist's own suffix works
        return
    for item in items:
        groups = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
        if len(groups) == 1 and not item.nodeid.endswith(f"@{groups[0]}"):
            item._id = NodeId.parse(f"{item.nodeid}@{groups[0]}")


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database (skips when unreachable, fails under CI)."""
    with throwaway_pg() as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test using this runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shoal.db'}"
    else:
        with throwaway_pg() as url:
            yield url


@pytest.fixture(autouse=True)
def _no_log_handler_left_behind() -> Iterator[None]:
    """A command run in-process (`shoal serve`, `shoal demo` under CliRunner) installs
    shoal's log handler on a stream the runner closes afterwards; a later test's
    background thread logging through it would print "Logging error" into that
    test's output. Each test starts with the root logger as it found it."""
    root = logging.getLogger()
    before = list(root.handlers)
    level = root.level
    yield
    for handler in [h for h in root.handlers if h not in before]:
        root.removeHandler(handler)
    root.setLevel(level)
