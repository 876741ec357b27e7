"""Emulated node agents for the sim (`agents: true` in a sim provider's settings): a
thread that plays the node agent of every ready sim server that was given user
data. It runs the real agent's loop (`shoal.agent`) over real HTTP against
shoal's API, with the node's own identity and token from its user data; only
the commands are emulated (they succeed, after a simulated second each).
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
from pathlib import Path
from typing import Any

import yaml

from shoal.agent.agent import Agent, Client, Identity

log = logging.getLogger(__name__)
PERIOD_S = 1.0  # how often the emulation looks for new nodes and ticks each agent


class EmulatedAgents:
    """The agents of one sim world's nodes, ticked from one thread."""

    def __init__(self, world: Any, state_dir: Path, api_url: str) -> None:
        self.world = world
        self.state_dir = state_dir
        self.api_url = api_url
        self._agents: dict[str, Agent] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sim-agents", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(PERIOD_S):
            try:
                self.tick()
            except Exception:  # the emulation must not die of a transient error
                log.warning("emulated agents: one round failed", exc_info=True)

    def tick(self) -> None:
        """One heartbeat of every emulated agent (new nodes get an agent, gone ones lose it)."""
        seen = set()
        for machine, user_data in self.world.booted_with():
            seen.add(machine)
            agent = self._agents.get(machine) or self._agent(machine, user_data)
            if agent is None:
                continue
            try:
                agent.tick()
            except (urllib.error.URLError, OSError, ValueError) as exc:
                log.debug("emulated agent of %s: %s", machine, exc)
        for gone in set(self._agents) - seen:
            del self._agents[gone]

    def _agent(self, machine: str, user_data: str) -> Agent | None:
        identity = identity_of(user_data)
        if identity is None:
            return None
        agent = Agent(
            Client(Identity(identity["node"], self.api_url, identity["agent_token"]), timeout=10),
            self.state_dir / machine,
            runner=_emulated,
        )
        self._agents[machine] = agent
        return agent


def identity_of(user_data: str) -> dict[str, str] | None:
    """The node identity file a cloud-config writes (None when it has no agent token)."""
    try:
        doc = yaml.safe_load(user_data)
        files = doc.get("write_files") or []
        content = next(f["content"] for f in files if f["path"].endswith("node.json"))
        identity: dict[str, str] = json.loads(content)
    except (yaml.YAMLError, AttributeError, StopIteration, KeyError, ValueError):
        return None
    return identity if identity.get("agent_token") else None


def _emulated(argv: list[str]) -> tuple[int, str]:
    """An emulated command: it succeeds."""
    return 0, f"(emulated) {' '.join(argv)}: ok\n"
