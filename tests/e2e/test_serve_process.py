"""`shoal serve` as an operator runs it, a real process: the port is checked before
it says it serves, its logs are text or JSON lines with no password in them, and
counts no site can run are refused without the process growing."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest
from sqlalchemy import inspect

from shoal.db.engine import Database
from tests.support.databases import throwaway_pg
from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port

LATEST = {"OpenStack-API-Version": "container-infra latest"}
HUGE = 2_147_483_647


def test_serve_on_a_taken_port_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [SHOAL, "serve", "--port", str(port)],
            env=shoal_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "--port" in lines[0] and "SHOAL_PORT" in lines[0]
    assert "serving on" not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_serve_logs_json_lines_with_the_access_log(tmp_path: Path) -> None:
    port, log = free_port(), tmp_path / "serve.log"
    env = shoal_env(tmp_path / "data", SHOAL_LOG_FORMAT="json", SHOAL_LOG_LEVEL="INFO")
    with serving(env, port, log):
        auth = admin_headers(env)
        httpx.get(f"http://127.0.0.1:{port}/v1/clusters", headers=auth).raise_for_status()
        nope = httpx.get(f"http://127.0.0.1:{port}/v1/clusters/nope", headers=auth)
        assert nope.status_code == 404
    assert auth["X-Auth-Token"] not in log.read_text()  # the admin token never reaches a log
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    start = [r for r in records if r["logger"] == "shoal" and "serving on" in r["message"]]
    assert len(start) == 1 and f":{port}" in start[0]["message"]
    access = [r["message"] for r in records if r["logger"] == "uvicorn.access"]
    assert any("GET /v1/clusters/nope" in m and "404" in m for m in access), access
    # The level is honoured: WARNING drops the start line and the access log.
    log2 = tmp_path / "quiet.log"
    with serving({**env, "SHOAL_LOG_LEVEL": "WARNING"}, free_port(), log2):
        pass
    assert "serving on" not in log2.read_text()


@pytest.mark.postgres
def test_no_password_reaches_the_output_of_serve_or_db_migrate(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with throwaway_pg() as url, throwaway_pg() as target:
        # Trust authentication ignores the password, so it can be any secret here.
        secret = "s3cret-pw-9"
        with_pw = url.replace("postgresql://postgres@", f"postgresql://postgres:{secret}@")
        port, log = free_port(), tmp_path / "serve.log"
        env = shoal_env(data, SHOAL_DATABASE_URL=with_pw)
        with serving(env, port, log):
            auth = admin_headers(env)
            httpx.get(f"http://127.0.0.1:{port}/v1/clusters", headers=auth).raise_for_status()
        out = log.read_text()
        assert "postgres:***@127.0.0.1" in out and secret not in out

        target_pw = target.replace("postgresql://postgres@", f"postgresql://postgres:{secret}@")
        done = subprocess.run(
            [SHOAL, "db", "migrate", "--to", target_pw],
            env=shoal_env(data, SHOAL_DATABASE_URL=with_pw),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert secret not in done.stdout + done.stderr
        assert "postgres:***@127.0.0.1" in done.stdout
        # A failure names the target masked too (a database that does not exist).
        missing = target_pw.rsplit("/", 1)[0] + "/shoal_no_such_db"
        done = subprocess.run(
            [SHOAL, "db", "migrate", "--to", missing],
            env=shoal_env(data, SHOAL_DATABASE_URL=with_pw),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1 and done.stderr.startswith("error: ")
        assert secret not in done.stdout + done.stderr
        assert "createdb" in done.stderr


def test_huge_counts_are_refused_and_the_server_does_not_grow(tmp_path: Path) -> None:
    """The conductor runs: a stored count of 2**31 - 1 would have it grow by hundreds
    of MB a second. Refused at the door, nothing is stored and RSS stays flat."""
    port, log = free_port(), tmp_path / "serve.log"
    env = shoal_env(tmp_path / "data")
    with serving(env, port, log) as proc:
        auth = admin_headers(env)
        api = httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", headers=auth, timeout=30)
        api.post("/clusters", json={"name": "base", "image_id": "fedora-coreos-40"})
        rss = psutil.Process(proc.pid)
        for _ in range(3):  # warm up the paths (imports, caches) before measuring
            api.post("/clusters/base/actions/resize", json={"node_count": HUGE})
        before = rss.memory_info().rss
        for _ in range(20):
            for method, path, body in [
                ("POST", "/clusters", {"name": "x", "image_id": "fedora-coreos-40",
                                       "node_count": HUGE}),
                ("PATCH", "/clusters/base",
                 [{"op": "replace", "path": "/node_count", "value": HUGE}]),
                ("POST", "/clusters/base/actions/resize", {"node_count": HUGE}),
            ]:  # fmt: skip
                r = api.request(method, path, json=body)
                assert r.status_code == 400, r.text
        time.sleep(2)  # what a conductor pass on a stored count would take
        grown = rss.memory_info().rss - before
        clusters = api.get("/clusters").json()["clusters"]
        assert [c["name"] for c in clusters] == ["base"]
        assert clusters[0]["node_count"] == 1
        assert grown < 30 * 1024 * 1024, f"RSS grew by {grown / 2**20:.1f} MB"


@pytest.mark.postgres
def test_db_migrate_refuses_while_an_idle_server_runs_and_copies_once_it_stopped(
    tmp_path: Path,
) -> None:
    """An API-only `shoal serve` holds no lease and does no work; its heartbeat alone
    makes `db migrate` refuse, writing nothing; a clean stop lets it copy at once."""
    data = tmp_path / "data"
    env = shoal_env(data)
    with throwaway_pg() as target:

        def migrate() -> subprocess.CompletedProcess[str]:
            cmd = [SHOAL, "db", "migrate", "--to", target]
            return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)

        port = free_port()
        api_only = {**env, "SHOAL_CONDUCTOR": "false"}
        with serving(api_only, port, tmp_path / "serve.log"):
            httpx.get(
                f"http://127.0.0.1:{port}/v1/clusters", headers=admin_headers(env)
            ).raise_for_status()
            done = migrate()
            assert done.returncode == 1, done
            assert "a shoal process still runs on the source (shoal-api" in done.stderr
            assert "stop every shoal process" in done.stderr
            db = Database(target)
            try:
                assert inspect(db.engine).get_table_names() == []  # the target untouched
            finally:
                db.close()
        done = migrate()
        assert done.returncode == 0, done.stderr
