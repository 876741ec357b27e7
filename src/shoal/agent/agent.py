"""The agent's loop: heartbeat, take the task shoal hands out, run it, report.

A task survives a restart of the agent or of shoal: the agent writes what it is
doing to its state file before it runs anything and what came out before it
reports it; a restarted agent re-runs a task it had not finished (the task
kinds are idempotent: a restart, an upgrade to the latest, a rebase to one ref)
and reports again a result shoal may not have received.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shoal.agent import protocol as p
from shoal.agent import tasks
from shoal.agent.services import Supervisor

VERSION = "1"
COMMAND_TIMEOUT_S = 1800.0
log = logging.getLogger("shoal.agent")


@dataclass(frozen=True)
class Identity:
    """Who this node is, from the file its bootstrap data wrote."""

    node: str
    shoal_url: str
    token: str

    @classmethod
    def load(cls, path: Path) -> Identity:
        data = json.loads(path.read_text())
        return cls(str(data["node"]), str(data["shoal_url"]).rstrip("/"), str(data["agent_token"]))


class Client:
    """shoal's agent API over HTTP(S), with this node's token."""

    def __init__(self, identity: Identity, timeout: float = 30.0) -> None:
        self.identity = identity
        self.timeout = timeout

    def post(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.identity.shoal_url + path,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", p.TOKEN_HEADER: self.identity.token},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310
            raw = answer.read()
        out: dict[str, Any] = json.loads(raw) if raw else {}
        return out


Runner = Callable[[list[str]], tuple[int, str]]  # argv -> (exit code, output)


def run_command(argv: list[str]) -> tuple[int, str]:
    """Run one command on this node, bounded in time; (exit code, output)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except FileNotFoundError as exc:
        return 127, f"{argv[0]}: {exc.strerror}\n"
    except subprocess.TimeoutExpired:
        return 124, f"{' '.join(argv)}: timed out after {COMMAND_TIMEOUT_S:g} s\n"
    return done.returncode, (done.stdout or "") + (done.stderr or "")


@dataclass
class Agent:
    """One node's agent: `tick()` is one heartbeat and, if shoal hands out a task, its
    run to the end; `run()` ticks every `interval` seconds until stopped."""

    client: Client
    state_dir: Path
    runner: Runner = run_command
    overrides: Mapping[str, Sequence[Sequence[str]]] = field(default_factory=dict)
    interval: float = 10.0
    supervisor: Supervisor | None = None  # the node's services, when it has a manifest

    def _beat(self, task: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"node": self.client.identity.node, "version": VERSION, "task": task}
        if self.supervisor is not None:
            body["services"] = self.supervisor.report()
        return body

    @property
    def _state_file(self) -> Path:
        return self.state_dir / "task.json"

    def _state(self) -> dict[str, Any]:
        try:
            data: dict[str, Any] = json.loads(self._state_file.read_text())
            return data
        except (OSError, ValueError):
            return {}

    def _save(self, state: Mapping[str, Any]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self._state_file)

    def tick(self) -> bool:
        """One heartbeat, and the task it brings; whether a task was run or reported."""
        state = self._state()
        running = state.get("task") if state.get("state") == p.RUNNING else None
        answer = self.client.post("/v1/agent/heartbeat", self._beat(running))
        self.interval = float(answer.get("interval") or self.interval)
        if not answer.get("task"):
            return False
        task = p.Task.from_json(answer["task"])
        if state.get("task") == task.uuid and state.get("state") in p.ENDED:
            self._report(task.uuid, state)  # finished before, the report did not land
            return True
        self._run(task)
        return True

    def _run(self, task: p.Task) -> None:
        self._save({"task": task.uuid, "state": p.RUNNING})
        self._report(task.uuid, {"state": p.RUNNING, "output": ""})
        output, code = "", 0
        argvs: list[list[str]] = []
        supervised = self._supervised(task)
        if supervised and self.supervisor is not None:
            self.supervisor.restart(supervised)
            output = f"restarted {', '.join(supervised)} (supervised by the agent)\n"
        else:
            try:
                argvs = tasks.commands(task, self.overrides, self.state_dir)
            except (ValueError, KeyError) as exc:
                output, code = f"cannot run {task.kind}: {exc}\n", 2
        with self._beating(task.uuid):  # a long upgrade is not a silent node
            for argv in argvs:
                output += f"$ {' '.join(argv)}\n"
                code, out = self.runner(argv)
                output += out
                if code != 0:
                    break
        state = {
            "task": task.uuid,
            "state": p.SUCCEEDED if code == 0 else p.FAILED,
            "output": p.tail(output),
            "exit_code": code,
        }
        self._save(state)
        self._report(task.uuid, state)

    @contextlib.contextmanager
    def _beating(self, uuid: str) -> Iterator[None]:
        """Keep heartbeating (saying task `uuid` runs) from a thread while it runs."""
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.interval):
                try:
                    self.client.post("/v1/agent/heartbeat", self._beat(uuid))
                except (urllib.error.URLError, OSError, ValueError) as exc:
                    log.warning("heartbeat failed (%s); the task goes on", exc)

        beater = threading.Thread(target=beat, name="heartbeat", daemon=True)
        beater.start()
        try:
            yield
        finally:
            done.set()
            beater.join(timeout=self.client.timeout + 1)

    def _supervised(self, task: p.Task) -> list[str]:
        """The services a restart-services task names when the agent supervises them all
        (and the task kind is not overridden): restarted by the supervisor, not systemd."""
        if (
            self.supervisor is None
            or task.kind != p.RESTART_SERVICES
            or task.kind in self.overrides
        ):
            return []
        value = task.params.get("services", ["kubelet"])
        names = [str(x) for x in (value if isinstance(value, list) else [value])]
        known = set(self.supervisor.names())
        return names if names and all(n in known for n in names) else []

    def _report(self, uuid: str, state: Mapping[str, Any]) -> None:
        body = {k: state[k] for k in ("state", "output", "exit_code") if k in state}
        self.client.post(f"/v1/agent/tasks/{uuid}", body)

    def run(self, stop: threading.Event) -> None:
        """Tick until `stop` is set; shoal being away is waited out, not fatal."""
        while not stop.is_set():
            try:
                if self.tick():
                    continue  # more may be waiting
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log.warning("shoal is not reachable now (%s); trying again", exc)
            stop.wait(self.interval)
