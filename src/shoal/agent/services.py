"""The node's services, supervised by the agent (no systemd needed): read the
services manifest the bootstrap data wrote (`/etc/shoal/services.json`), start
each service once the ones it depends on are ready, restart one that exits
(after a backoff that doubles up to a bound, and starts over once a run lasted),
run a `oneshot` step until it has succeeded once, stop them on request (the
reverse of the start order), and report each one's state for the heartbeat.

Manifest (format 1): `{"version": 1, "node_ip_route_to": host?, "services":
[{"name", "argv", "env"?, "cwd"?, "depends_on"?, "ready"?, "oneshot"?}]}`; a
`ready` probe is `{"tcp": "host:port"}`, `{"file": path}` or `{"command": argv}`.
`${node_ip}` in argv and env values is this node's address.

States: `waiting` (for a dependency), `starting` (running, not yet ready),
`running` (ready), `backoff` (exited; restarts at `retry_at`), `missing` (its
program is not on this node; retried like an exit), `done` (a oneshot that
succeeded), `stopped` (on request).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

MANIFEST_PATH = "/etc/shoal/services.json"
FORMAT_VERSION = 1
NODE_IP = "${node_ip}"
PROBE_TIMEOUT_S = 5.0
STOP_GRACE_S = 10.0

WAITING, STARTING, RUNNING, BACKOFF, MISSING, DONE, STOPPED = (
    "waiting",
    "starting",
    "running",
    "backoff",
    "missing",
    "done",
    "stopped",
)
READY_STATES = (RUNNING, DONE)


@dataclass(frozen=True)
class Spec:
    """One service as the manifest describes it."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    depends_on: tuple[str, ...] = ()
    ready: Mapping[str, Any] | None = None
    oneshot: bool = False


@dataclass(frozen=True)
class Manifest:
    services: tuple[Spec, ...]
    node_ip_route_to: str | None = None


def parse(doc: Any) -> Manifest:
    """A manifest from its JSON value; ValueError naming what is wrong."""
    if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"a services manifest is an object with version {FORMAT_VERSION}")
    entries = doc.get("services")
    if not isinstance(entries, list):
        raise ValueError("services must be a list")
    specs: list[Spec] = []
    seen: set[str] = set()
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"]:
            raise ValueError(f"services[{i}] needs a name")
        name = e["name"]
        argv = e.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"service {name}: argv must be a non-empty list of strings")
        deps = e.get("depends_on") or []
        if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
            raise ValueError(f"service {name}: depends_on must be a list of names")
        unknown = [d for d in deps if d not in seen]
        if unknown:
            raise ValueError(f"service {name} depends on {unknown}, not listed before it")
        if name in seen:
            raise ValueError(f"service {name} is listed twice")
        ready = e.get("ready")
        if ready is not None and not _probe_ok(ready):
            raise ValueError(
                f"service {name}: ready must be one of "
                '{"tcp": "host:port"}, {"file": path}, {"command": [argv]}'
            )
        env = e.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"service {name}: env must map names to strings")
        seen.add(name)
        specs.append(
            Spec(
                name,
                tuple(argv),
                dict(env),
                e.get("cwd"),
                tuple(deps),
                ready,
                bool(e.get("oneshot", False)),
            )
        )
    route = doc.get("node_ip_route_to")
    return Manifest(tuple(specs), str(route) if route else None)


def _probe_ok(ready: Any) -> bool:
    if not isinstance(ready, dict) or len(ready) != 1:
        return False
    kind, target = next(iter(ready.items()))
    if kind in ("tcp", "file"):
        return isinstance(target, str) and bool(target)
    if kind == "command":
        return isinstance(target, list) and bool(target) and all(isinstance(a, str) for a in target)
    return False


def load(path: Path) -> Manifest:
    return parse(json.loads(path.read_text()))


def node_ip(route_to: str | None) -> str:
    """This node's address: the source address of its route to `route_to` (a UDP
    socket's connect sends nothing), else its hostname's, else loopback."""
    if route_to:
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((route_to, 9))
            return str(s.getsockname()[0])
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


def probe(ready: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> bool:
    """Whether a service is ready by its probe (no probe: yes)."""
    if not ready:
        return True
    kind, target = next(iter(ready.items()))
    if kind == "file":
        return os.path.exists(target)
    if kind == "tcp":
        host, _, port = str(target).rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                return True
        except (OSError, ValueError):
            return False
    try:
        done = subprocess.run(
            list(target),
            capture_output=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
            env=dict(env) if env is not None else None,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


@dataclass
class _Run:
    """What the supervisor knows of one service now."""

    spec: Spec
    state: str = WAITING
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0
    exit_code: int | None = None
    message: str = ""
    started_at: float = 0.0
    retry_at: float = 0.0
    delay: float = 0.0
    log: IO[bytes] | None = None


class Supervisor:
    """Runs the manifest's services. `step()` does one non-blocking pass (start what
    can start, notice exits and readiness); `run()` steps until stopped. Thread-safe:
    `report()`, `stop()` and `restart()` may be called from other threads."""

    def __init__(
        self,
        manifest: Manifest,
        log_dir: Path,
        *,
        backoff: tuple[float, float] = (1.0, 30.0),
        stable_after: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        facts: Mapping[str, str] | None = None,
    ) -> None:
        self.manifest = manifest
        self.log_dir = log_dir
        self.backoff = backoff
        self.stable_after = stable_after
        self.clock = clock
        values = dict(facts or {})
        if "node_ip" not in values and self._uses_node_ip():
            values["node_ip"] = node_ip(manifest.node_ip_route_to)
        self.facts = values
        self._runs = {s.name: _Run(s) for s in manifest.services}
        self._lock = threading.RLock()

    def _uses_node_ip(self) -> bool:
        return any(NODE_IP in a for s in self.manifest.services for a in (*s.argv, *s.env.values()))

    def _fill(self, text: str) -> str:
        for key, value in self.facts.items():
            text = text.replace("${" + key + "}", value)
        return text

    # -- one pass ------------------------------------------------------------

    def step(self) -> None:
        """Start what may start, reap what exited, probe what is starting."""
        with self._lock:
            now = self.clock()
            for run in self._runs.values():
                self._step_one(run, now)

    def _step_one(self, run: _Run, now: float) -> None:
        if run.state in (STOPPED, DONE):
            return
        if run.process is not None:
            code = run.process.poll()
            if code is None:
                if run.state == STARTING and not run.spec.oneshot and self._ready(run.spec):
                    run.state = RUNNING
                    run.message = ""
                return
            self._exited(run, code, now)
            return
        if run.state in (BACKOFF, MISSING) and now < run.retry_at:
            return
        blocking = [d for d in run.spec.depends_on if self._runs[d].state not in READY_STATES]
        if blocking:
            run.state = WAITING
            run.message = f"waiting for {', '.join(blocking)}"
            return
        self._start(run, now)

    def _ready(self, spec: Spec) -> bool:
        ready = spec.ready
        if ready and "command" in ready:
            ready = {"command": [self._fill(a) for a in ready["command"]]}
        return probe(ready, self._env(spec))

    def _env(self, spec: Spec) -> dict[str, str]:
        env = dict(os.environ)
        env.update({k: self._fill(v) for k, v in spec.env.items()})
        return env

    def _start(self, run: _Run, now: float) -> None:
        argv = [self._fill(a) for a in run.spec.argv]
        program = argv[0]
        found = shutil.which(program) if "/" not in program else program
        if not found or not os.path.exists(found):
            run.state = MISSING
            run.message = f"{program} is not on this node (not found on PATH)"
            self._schedule_retry(run, now)
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if run.log is None:
            run.log = (self.log_dir / f"{run.spec.name}.log").open("ab")
        try:
            run.process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=run.log,
                stderr=subprocess.STDOUT,
                env=self._env(run.spec),
                cwd=run.spec.cwd or None,
                start_new_session=True,  # its own process group: stopped as a whole
            )
        except OSError as exc:
            run.state = BACKOFF
            run.message = f"cannot start {program}: {exc.strerror}"
            self._schedule_retry(run, now)
            return
        run.started_at = now
        run.exit_code = None
        run.message = ""
        run.state = STARTING

    def _exited(self, run: _Run, code: int, now: float) -> None:
        run.process = None
        run.exit_code = code
        if run.spec.oneshot and code == 0:
            run.state = DONE
            run.message = ""
            return
        if now - run.started_at >= self.stable_after:
            run.delay = 0.0  # it had run long enough: the next restart is quick again
        run.restarts += 1
        run.state = BACKOFF
        run.message = f"exited with {code}; see {self.log_dir / (run.spec.name + '.log')}"
        self._schedule_retry(run, now)

    def _schedule_retry(self, run: _Run, now: float) -> None:
        low, high = self.backoff
        run.delay = min(high, max(low, run.delay * 2))
        run.retry_at = now + run.delay

    # -- requests ------------------------------------------------------------

    def stop(self, names: Iterable[str] | None = None, grace: float = STOP_GRACE_S) -> None:
        """Stop services (all when `names` is None), in reverse start order: SIGTERM to
        the process group, SIGKILL after `grace` seconds. They stay stopped until
        `start` or `restart`."""
        with self._lock:
            chosen = self._chosen(names)
            for run in reversed(chosen):
                self._terminate(run, grace)
                run.state = STOPPED
                run.message = "stopped on request"

    def start(self, names: Iterable[str] | None = None) -> None:
        """Let stopped services start again (at the next step)."""
        with self._lock:
            for run in self._chosen(names):
                if run.state == STOPPED:
                    run.state = WAITING
                    run.delay = 0.0
                    run.retry_at = 0.0

    def restart(self, names: Iterable[str], grace: float = STOP_GRACE_S) -> None:
        """Stop then start services now (a oneshot that was done runs again)."""
        wanted = list(names)
        self.stop(wanted, grace)
        self.start(wanted)
        self.step()

    def _chosen(self, names: Iterable[str] | None) -> list[_Run]:
        if names is None:
            return list(self._runs.values())
        wanted = list(names)
        unknown = [n for n in wanted if n not in self._runs]
        if unknown:
            raise KeyError(f"no such service: {', '.join(unknown)}")
        return [r for r in self._runs.values() if r.spec.name in wanted]

    def _terminate(self, run: _Run, grace: float) -> None:
        process = run.process
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=grace)
        run.exit_code = process.returncode
        run.process = None

    def close(self) -> None:
        """Stop everything and close the log files."""
        self.stop()
        with self._lock:
            for run in self._runs.values():
                if run.log is not None:
                    run.log.close()
                    run.log = None

    # -- what the heartbeat says ---------------------------------------------

    def report(self) -> list[dict[str, Any]]:
        """Each service's state, in start order."""
        with self._lock:
            return [
                {
                    "name": r.spec.name,
                    "state": r.state,
                    "pid": r.process.pid if r.process is not None else None,
                    "restarts": r.restarts,
                    "exit_code": r.exit_code,
                    "message": r.message,
                }
                for r in self._runs.values()
            ]

    def state(self, name: str) -> str:
        with self._lock:
            return self._runs[name].state

    def names(self) -> list[str]:
        return [s.name for s in self.manifest.services]

    def run(self, stop: threading.Event, interval: float = 1.0) -> None:
        """Step every `interval` seconds until `stop` is set, then stop everything."""
        try:
            while not stop.is_set():
                self.step()
                stop.wait(interval)
        finally:
            self.close()
