"""Real `shoal` processes for end-to-end tests: an environment of their own and
`shoal serve` until its API answers (stopped with SIGINT, as a person would)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support.waiting import scaled

SHOAL = str(Path(sys.executable).with_name("shoal"))
HEADERS = {"OpenStack-API-Version": "container-infra latest"}


def admin_token(env: dict[str, str]) -> str:
    """The admin token of the deployment `env` names: the file `shoal serve` wrote in the
    data directory on first start; when another process of a shared database made the
    first one, a new one by `shoal token bootstrap`, as an operator would."""
    path = Path(env["SHOAL_DATA_DIR"]) / "admin-token"
    if not path.exists():
        subprocess.run(
            [SHOAL, "token", "bootstrap"], env=env, check=True, capture_output=True, timeout=60
        )
    return path.read_text().strip()


def admin_headers(env: dict[str, str]) -> dict[str, str]:
    """Latest microversion, as the deployment's admin."""
    return {**HEADERS, "X-Auth-Token": admin_token(env)}


def shoal_env(data: Path, **extra: str) -> dict[str, str]:
    """This environment without SHOAL_* settings, plus a data dir, a fast sim and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")}
    env.update({"SHOAL_DATA_DIR": str(data), "SHOAL_SIM_TIME_SCALE": "100", **extra})
    return env


@contextmanager
def serving(env: dict[str, str], port: int, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`shoal serve --port PORT` until its API answers; SIGINT and wait at the end."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [SHOAL, "serve", "--port", str(port)], env=env, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + scaled(60)
        while True:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "shoal serve did not start"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class Server:
    """`shoal serve` on a fixed port and data dir (in `env`); SIGKILLed and restarted
    by PID, its output appended to `log`."""

    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.env, self.log = env, log
        self.url = f"http://127.0.0.1:{port}/v1"
        self.http = httpx.Client(base_url=self.url, headers=HEADERS, timeout=scaled(30))
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        """Spawn the process and wait until its API answers."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [SHOAL, "serve"], env=self.env, stdout=out, stderr=out, start_new_session=True
            )
        deadline = time.monotonic() + scaled(60)
        while True:
            assert self.proc.poll() is None, f"shoal serve exited:\n{self.log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "shoal serve did not start"
            try:
                if self.http.get("", timeout=1).status_code == 200:
                    self.http.headers.update(admin_headers(self.env))
                    return
            except httpx.TransportError:
                time.sleep(0.05)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.kills += 1
        self.proc = None

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params)
        assert r.status_code == 200, r.text
        return r.json()
