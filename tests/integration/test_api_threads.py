"""SHOAL_API_THREADS bounds the requests a real server handles at once (its sync
routes run on the event loop's thread limiter, set at start).

A write waits on the database while another process holds SQLite's write lock; it
holds a thread all that time. With one thread, a request that needs nothing of the
database (`GET /`) waits behind it and is answered once the lock goes; with two, it
is answered at once."""

from __future__ import annotations

import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import httpx
import pytest

from tests.integration.cli_support import fast_settings
from tests.support.server import live_server
from tests.support.waiting import scaled

TEMPLATE = {"name": "k8s", "coe": "kubernetes", "image_id": "fedora-coreos-40"}


@pytest.mark.parametrize("threads", [1, 2])
def test_a_request_beyond_api_threads_waits_for_a_thread(tmp_path: Path, threads: int) -> None:
    settings = fast_settings(tmp_path, conductor=False, api_threads=threads)
    with live_server(settings) as srv, ThreadPoolExecutor(2) as pool:
        headers = {"X-Auth-Token": srv.token()}
        assert httpx.get(f"{srv.v1}/clustertemplates", headers=headers).status_code == 200
        lock = sqlite3.connect(tmp_path / "shoal.db", timeout=30, isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")  # another process's write: the server's waits
            write = pool.submit(
                httpx.post, f"{srv.v1}/clustertemplates", json=TEMPLATE, headers=headers,
                timeout=60,
            )  # fmt: skip
            time.sleep(scaled(0.5))  # the write has its thread, waiting on the lock
            started = time.monotonic()
            root = pool.submit(httpx.get, f"{srv.url}/", timeout=60)
            try:
                root.result(timeout=scaled(2))
                answered_while_locked: float | None = time.monotonic() - started
            except FutureTimeout:
                answered_while_locked = None
            assert not write.done()  # still waiting on the lock
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        assert root.result(timeout=60).status_code == 200
        assert write.result(timeout=60).status_code == 201
    if threads == 1:
        assert answered_while_locked is None, (
            f"GET / was served in {answered_while_locked:.2f} s while the only thread waited"
        )
    else:
        assert answered_while_locked is not None, "GET / waited though a thread was free"
