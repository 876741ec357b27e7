"""The sim cloud in a process of its own, as a real cloud runs apart from shoal.

With `SHOAL_SIM_OWN_PROCESS=true`, a child process (started fresh, "spawn")
hosts the SimWorld behind a multiprocessing manager, and this process holds a
proxy with the same methods: SimDriver and the /v1/sim admin API work
unchanged. Every call crosses a local socket, as a driver's calls cross the
network to a cloud's API, so the cloud's own work (its database, its rate
limiter) runs on its own interpreter instead of sharing shoal's. The child
stops with `close()`, or by itself when this process dies.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from multiprocessing.managers import BaseManager
from typing import Any

from shoal.drivers.sim.settings import SimSettings
from shoal.drivers.sim.world import SimWorld

_WATCH_S = 0.5  # how often the child checks that its parent is alive


def _open(url: str, settings: SimSettings, parent: int) -> SimWorld:
    """In the child: open the world, and exit when the parent is gone."""
    threading.Thread(target=_watch, args=(parent,), name="sim-parent", daemon=True).start()
    return SimWorld.open(url, settings)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_S)
    os._exit(0)  # orphaned (the parent was killed): nobody can call us any more


class _Manager(BaseManager):
    pass


_Manager.register("SimWorld", callable=_open)


class SimProcess:
    """A child process hosting one SimWorld; `world` is its proxy."""

    def __init__(self, url: str, settings: SimSettings) -> None:
        self._manager = _Manager(ctx=multiprocessing.get_context("spawn"))
        self._manager.start()
        try:
            self.world: Any = self._manager.SimWorld(url, settings, os.getpid())  # type: ignore[attr-defined]
        except BaseException:
            self._manager.shutdown()
            raise

    @property
    def pid(self) -> int:
        """The child's process id."""
        return int(self._manager._process.pid)  # type: ignore[attr-defined]

    def close(self) -> None:
        """Close the world and stop the child."""
        try:
            self.world.close()
        except Exception:  # the child is gone already: nothing left to close
            pass
        finally:
            self._manager.shutdown()
