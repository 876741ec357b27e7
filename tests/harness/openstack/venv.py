"""The OpenStack services' own venv, built once per requirement set and cached.

The services pin packages that conflict with shoal's, so they get a venv of
their own, outside the repository:
`${XDG_CACHE_HOME:-~/.cache}/shoal/openstack-venv-<hash>`, where the hash
covers requirements.txt, constraints.txt and the Python version. A missing
venv is built (pip, with a persistent cache beside it) under a file lock, so
that two test runs on the machine build it once. A venv is used only once a
stamp file says that its build finished.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
CONSTRAINTS = HERE / "constraints.txt"
STAMP = ".shoal-venv-complete"
# What a complete venv must be able to run.
ENTRY_POINTS = (
    "keystone-manage",
    "glance-manage",
    "placement-manage",
    "nova-manage",
    "heat-manage",
    "gunicorn",
)
BUILD_TIMEOUT = 1200.0  # seconds for the whole pip install
LOCK_TIMEOUT = 1500.0  # seconds to wait for another process's build


class VenvUnavailable(RuntimeError):
    """The services' venv is missing and could not be built (no network, ...)."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shoal"


def requirements_hash() -> str:
    h = hashlib.sha256()
    for path in (REQUIREMENTS, CONSTRAINTS):
        h.update(path.read_bytes())
    h.update(f"python{sys.version_info.major}.{sys.version_info.minor}".encode())
    return h.hexdigest()[:16]


def venv_path() -> Path:
    return cache_root() / f"openstack-venv-{requirements_hash()}"


def is_complete(venv: Path) -> bool:
    return (venv / STAMP).is_file() and all((venv / "bin" / e).exists() for e in ENTRY_POINTS)


def note(msg: str) -> None:
    print(f"[shoal openstack harness] {msg}", file=sys.stderr, flush=True)


def _pip_env(pip_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_", "PYTHON"))}
    env.pop("VIRTUAL_ENV", None)
    env.update(
        PIP_CACHE_DIR=str(pip_cache),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
    )
    return env


def _log_tail(log: Path, lines: int = 15) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    # pip here can print hundreds of harmless "Location ... is ignored" lines
    kept = [line for line in text.splitlines() if "is ignored" not in line]
    return "\n".join(kept[-lines:])


def _build(venv: Path, log: Path) -> None:
    if venv.exists():  # a build that died half-way
        shutil.rmtree(venv)
    pip_cache = cache_root() / "pip-cache"
    pip_cache.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    note(f"building the OpenStack services' venv {venv} (once; about 1-2 min; log: {log})")
    with log.open("w") as out:
        steps = [
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install"]
            + ["-r", str(REQUIREMENTS), "-c", str(CONSTRAINTS)],
        ]
        for argv in steps:
            out.write(f"$ {' '.join(argv)}\n")
            out.flush()
            remaining = BUILD_TIMEOUT - (time.monotonic() - started)
            try:
                done = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_pip_env(pip_cache),
                    timeout=max(remaining, 1.0),
                )
            except subprocess.TimeoutExpired:
                raise VenvUnavailable(
                    f"building {venv} took more than {BUILD_TIMEOUT:.0f}s; see {log}"
                ) from None
            if done.returncode != 0:
                raise VenvUnavailable(
                    f"could not build the OpenStack services' venv (status {done.returncode}; "
                    f"log {log}):\n{_log_tail(log)}"
                )
    missing = [e for e in ENTRY_POINTS if not (venv / "bin" / e).exists()]
    if missing:
        raise VenvUnavailable(f"{venv} lacks {missing} after pip install; see {log}")
    elapsed = time.monotonic() - started
    (venv / STAMP).write_text(f"{requirements_hash()} built in {elapsed:.1f}s\n")
    note(f"OpenStack services' venv ready in {elapsed:.0f}s")


def ensure_venv() -> Path:
    """The path of a complete services' venv, built first when missing."""
    venv = venv_path()
    if is_complete(venv):
        return venv
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    lock_path = root / f"{venv.name}.lock"
    with lock_path.open("w") as lock:
        deadline = time.monotonic() + LOCK_TIMEOUT
        noted = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not noted:
                    note(f"waiting for another process to finish building {venv}")
                    noted = True
                if time.monotonic() > deadline:
                    raise VenvUnavailable(
                        f"{lock_path} was held for more than {LOCK_TIMEOUT:.0f}s"
                    ) from None
                time.sleep(1.0)
        try:
            if not is_complete(venv):  # another process may have built it meanwhile
                _build(venv, root / f"{venv.name}.build.log")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return venv
