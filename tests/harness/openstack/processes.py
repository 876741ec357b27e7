"""The test cloud's processes: started with a log, watched, and stopped by PID.

Only processes this module started (and their own children, such as a
gunicorn master's workers) are ever signalled. A child started from the main
thread also asks the kernel to send it SIGTERM when its parent dies: a safety
net for a test run killed before it can clean up. (The kernel sends it when the
*thread* that started the child ends, hence the main thread only.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

_PR_SET_PDEATHSIG = 1
# Resolved now, in the parent: a child between fork and exec must not dlopen.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class CloudStartError(RuntimeError):
    """A service of the test cloud did not come up; the message ends with its log."""


def tail(path: Path, lines: int = 25) -> str:
    """The last `lines` lines of a log file ('' when it does not exist)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Service:
    """One long-running process of the cloud (a gunicorn master, Nova all-in-one)."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: dict[str, str],
        logs: Sequence[Path],
        pass_fds: Sequence[int] = (),
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.cwd = cwd
        self.env = env
        self.logs = list(logs)  # logs[0] receives stdout and stderr
        self.pass_fds = tuple(pass_fds)
        self.proc: subprocess.Popen[bytes] | None = None
        self._ps: psutil.Process | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        with self.logs[0].open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                pass_fds=self.pass_fds,
                start_new_session=True,  # a Ctrl-C in the terminal reaches only the tests
                preexec_fn=_die_with_parent if _in_main_thread() else None,
            )
        self._ps = psutil.Process(self.proc.pid)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 25) -> str:
        parts = []
        for log in self.logs:
            text = tail(log, lines)
            if text:
                parts.append(f"--- {log} (last lines)\n{text}")
        return "\n".join(parts) or "(no log output)"

    def died(self) -> CloudStartError:
        code = self.proc.poll() if self.proc else None
        return CloudStartError(f"{self.name} exited with status {code}\n{self.log_tail()}")

    def processes(self) -> list[psutil.Process]:
        """This process and its live descendants (empty once it is gone)."""
        if self._ps is None or not self._ps.is_running():
            return []
        try:
            return [self._ps, *self._ps.children(recursive=True)]
        except psutil.Error:
            return [self._ps]

    def rss_bytes(self) -> int:
        total = 0
        for p in self.processes():
            with contextlib.suppress(psutil.Error):
                total += p.memory_info().rss
        return total

    def terminate(self) -> None:
        """SIGTERM to the process it started (never to anything else)."""
        if self._ps is not None:
            with contextlib.suppress(psutil.Error):
                self._ps.terminate()  # psutil checks that the PID is still our process

    def reap(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)


def service_env(venv: Path, **extra: str) -> dict[str, str]:
    """The services' environment: the caller's minus OpenStack and Python settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "PYTHON")) and k != "VIRTUAL_ENV"
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONWARNINGS"] = "ignore"  # keeps the logs readable (eventlet, policy, ...)
    env.update(extra)
    return env


def run_step(
    name: str, argv: Sequence[str], *, cwd: Path, env: dict[str, str], log: Path, timeout: float
) -> None:
    """Run one set-up command (a db sync, ...) to completion; raise with its log on failure."""
    with log.open("ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                preexec_fn=_die_with_parent,
            )
        except subprocess.TimeoutExpired:
            raise CloudStartError(f"{name} took more than {timeout:.0f}s\n{tail(log)}") from None
    if done.returncode != 0:
        raise CloudStartError(f"{name} failed with status {done.returncode}\n{tail(log)}")


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status of a GET (None when nothing answers)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def wait_until(
    what: str,
    ready: Callable[[], bool],
    *,
    watch: Sequence[Service],
    timeout: float,
    interval: float = 0.2,
) -> None:
    """Poll `ready` until true; fail at once when a watched service dies, or at `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        for svc in watch:
            if not svc.alive():
                raise svc.died()
        if ready():
            return
        if time.monotonic() > deadline:
            logs = "\n".join(svc.log_tail() for svc in watch)
            raise CloudStartError(f"{what}: not ready after {timeout:.0f}s\n{logs}")
        time.sleep(interval)


def stop_all(services: Sequence[Service], grace: float) -> None:
    """Stop services together: SIGTERM to each, one shared wait, then SIGKILL what is left."""
    procs = [p for svc in services for p in svc.processes()]
    for svc in services:
        svc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(alive, timeout=5)
    for svc in services:
        svc.reap()
