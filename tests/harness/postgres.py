"""A private PostgreSQL server for one test session, made with the machine's `initdb`.

The suite uses the PostgreSQL at 127.0.0.1:5432 when it accepts `postgres` without a
password (a CI image, a developer's machine). A fresh Debian answers nothing there, or
refuses password-less TCP logins; then the session makes its own cluster in a temporary
directory (trust authentication, 127.0.0.1 only, a free port, no Unix socket), starts
it, hands its URL to the tests through the environment, and stops it at the end: by the
PID it started, never a server it did not start.

Started once by the pytest controller (tests/conftest.py, `pytest_configure`) before the
xdist workers are spawned, so every worker inherits the same URL and shares one server.
`SHOAL_TEST_PRIVATE_POSTGRES=1` forces the private server even when 5432 answers.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PG_LIB = Path("/usr/lib/postgresql")
DIR_PREFIX = "shoal-test-postgres-"
START_SECONDS = 60.0
STOP_SECONDS = 30.0
# A test server: durability off (the data is thrown away), room for both xdist workers'
# pools, the HA tests' several processes and the migration tests' copies.
SERVER_OPTIONS = (
    "-c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c fsync=off "
    "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
)


class PostgresUnavailable(RuntimeError):
    """No private server can be made here; the message says what to install."""


@dataclass(frozen=True)
class PrivatePostgres:
    """A running private server: where it listens and the PID that stops it."""

    port: int
    pid: int
    data_dir: Path
    base_dir: Path

    @property
    def url_base(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    @property
    def admin_dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"


def bin_dir() -> Path:
    """The newest installed server's bin directory (Debian's layout)."""
    majors = sorted(
        (p for p in PG_LIB.glob("*/bin") if (p / "initdb").exists() and (p / "pg_ctl").exists()),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
    )
    if not majors:
        raise PostgresUnavailable(
            f"no PostgreSQL server under {PG_LIB}: install Debian's `postgresql` package "
            "(`./run test` does it as root) or set SHOAL_TEST_PG_DSN and SHOAL_TEST_PG_URL"
        )
    return majors[-1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> str | None:
    """initdb and postgres refuse root: as root, run them as the `postgres` system user."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise PostgresUnavailable(
            "running as root and there is no `postgres` system user to run the server as: "
            "install Debian's `postgresql` package, or run the tests as an unprivileged user"
        ) from None
    return "postgres"


def _alive(pid: int) -> bool:
    """The process runs (a zombie left unreaped by a container's init counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def reap_leftovers(tmp_root: Path) -> None:
    """Stop and remove the servers of earlier sessions that died without stopping theirs.

    Each base dir records the pytest PID that made it; a dir whose owner is gone is a
    leftover. Bounded: one pass over the temp dir, each stop waits STOP_SECONDS at most.
    """
    for base in sorted(tmp_root.glob(f"{DIR_PREFIX}*"))[:50]:
        try:
            owner = int((base / "owner.pid").read_text())
        except (OSError, ValueError):
            continue
        if _alive(owner):
            continue
        pid = _postmaster_pid(base / "data")
        if pid is not None and _alive(pid):
            _stop_pid(pid)
        shutil.rmtree(base, ignore_errors=True)


def start(tmp_root: Path | None = None) -> PrivatePostgres:
    """initdb a fresh cluster in a temporary dir and start it on a free port."""
    binaries = bin_dir()
    user = _run_as()
    root = tmp_root or Path(tempfile.gettempdir())
    reap_leftovers(root)
    base = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=root))
    (base / "owner.pid").write_text(str(os.getpid()))
    data = base / "data"
    data.mkdir(mode=0o700)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(data, entry.pw_uid, entry.pw_gid)
        base.chmod(0o755)  # mkdtemp's 0700 would keep the postgres user out
    try:
        _initdb(binaries, data, user)
        last = ""
        for _ in range(3):  # a port taken between free_port() and the bind: try another
            port = free_port()
            proc = subprocess.run(
                [
                    str(binaries / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(data / "server.log"),
                    "-w",
                    "-t",
                    str(int(START_SECONDS)),
                    "-o",
                    f"-p {port} {SERVER_OPTIONS}",
                    "start",
                ],
                user=user,
                capture_output=True,
                text=True,
                timeout=START_SECONDS + 10,
                cwd=base,
                check=False,
            )
            pid = _postmaster_pid(data)
            if proc.returncode == 0 and pid is not None:
                return PrivatePostgres(port=port, pid=pid, data_dir=data, base_dir=base)
            last = proc.stderr.strip() + _log_tail(data)
        raise PostgresUnavailable(f"the private PostgreSQL did not start: {last}")
    except BaseException:
        pid = _postmaster_pid(data)
        if pid is not None and _alive(pid):
            _stop_pid(pid)
        shutil.rmtree(base, ignore_errors=True)
        raise


def _initdb(binaries: Path, data: Path, user: str | None) -> None:
    proc = subprocess.run(
        [
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ],
        user=user,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=data.parent,
        check=False,
    )
    if proc.returncode != 0:
        raise PostgresUnavailable(f"initdb failed: {proc.stderr.strip() or proc.stdout.strip()}")


def _log_tail(data: Path) -> str:
    with contextlib.suppress(OSError):
        return "\n" + "\n".join((data / "server.log").read_text().splitlines()[-10:])
    return ""


def _stop_pid(pid: int) -> None:
    """Fast shutdown by the postmaster's PID (SIGINT), then SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + STOP_SECONDS
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def stop(server: PrivatePostgres) -> None:
    """Stop the server this session started (by its PID) and remove its files."""
    _stop_pid(server.pid)
    shutil.rmtree(server.base_dir, ignore_errors=True)
