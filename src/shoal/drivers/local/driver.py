"""The local driver: machines that are namespace machines on the shoal host
(`machines.py`), keyed by shoal's node ids, tagged with shoal's tags, with addresses
from the provider's subnet (`addresses.py`) on a host bridge, and bootstrapped by
the real cloud-init from a NoCloud seed of shoal's user data."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from shoal.drivers.contract import (
    Capabilities,
    Feature,
    Machine,
    MachineSpec,
    MachineState,
    PermanentError,
    TransientError,
)
from shoal.drivers.local import balancer, hostops, machines
from shoal.drivers.local.addresses import Leases
from shoal.drivers.local.hostops import MachineError
from shoal.drivers.local.settings import LocalSettings

# A machine whose init has not started this long after its record was written (a shoal
# killed mid-create) is reported in ERROR, so the conductor replaces it.
START_GRACE = 120.0
PACE_S = 0.5  # namespace machines start and stop in about a second (Capabilities.pace_seconds)
# How often a listing looks for balancers to start again (a host restart, a kill).
BALANCER_CHECK = 2.0


class LocalDriver:
    name = "local"

    def __init__(self, settings: LocalSettings) -> None:
        self.settings = settings
        self.state_dir = Path(settings.state_dir)
        self.leases = Leases(self.state_dir, settings.subnet)
        self._lock = threading.Lock()
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._balancers_checked = 0.0
        self._caps = Capabilities(
            availability_zones=(settings.zone,),
            flavors=tuple(settings.flavors),
            images=tuple(settings.images),
            features=frozenset({Feature.RELEASE, Feature.API_LOAD_BALANCER}),
            pace_seconds=PACE_S,
        )

    # -- facts ---------------------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return self._caps

    def check(self) -> Capabilities:
        why = self.cannot_run()
        if why:
            raise TransientError(f"local provider: {why}")
        return self._caps

    def programs(self) -> dict[str, Path]:
        """What each machine sees in /usr/local/bin: the Kubernetes programs and the agent."""
        out: dict[str, Path] = {}
        kube = Path(self.settings.kubernetes_bin) if self.settings.kubernetes_bin else None
        if kube is not None and kube.is_dir():
            out.update({p.name: p for p in sorted(kube.iterdir()) if os.access(p, os.X_OK)})
        agent = self._agent()
        if agent is not None:
            out["shoal-agent"] = agent
        return out

    def _agent(self) -> Path | None:
        if self.settings.agent:
            return Path(self.settings.agent)
        beside = Path(sys.executable).parent / "shoal-agent"
        return beside if beside.exists() else None

    def cannot_run(self) -> str:
        """Why this host cannot run local machines, or ""."""
        why = hostops.missing_prerequisites()
        if why:
            return why
        if shutil.which("cloud-init") is None:
            return "cloud-init is not installed on the host (Debian: apt-get install cloud-init)"
        kube = self.settings.kubernetes_bin
        if kube and not Path(kube).is_dir():
            return f"kubernetes_bin {kube} is not a directory"
        agent = self._agent()
        if agent is not None and not agent.exists():
            return f"agent {agent} does not exist"
        for p in self.settings.preload:
            if not Path(p.archive).is_file():
                return f"preload archive {p.archive} does not exist"
        return ""

    def validate(self, spec: MachineSpec) -> list[str]:
        problems: list[str] = []
        s = self.settings
        if spec.flavor_id not in s.flavors:
            problems.append(f"flavor {spec.flavor_id!r} is not one of {', '.join(s.flavors)}")
        if spec.image_id not in s.images:
            problems.append(f"image {spec.image_id!r} is not one of {', '.join(s.images)}")
        if spec.availability_zone not in (None, s.zone):
            problems.append(f"availability zone {spec.availability_zone!r} is not {s.zone!r}")
        problems += [f"option {k!r} is not one the local driver knows" for k in spec.options]
        return problems

    # -- machines ------------------------------------------------------------------

    def _dir(self, machine_id: str) -> Path:
        return self.state_dir / "machines" / machine_id

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One create or delete at a time, in this process and across processes."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._lock, (self.state_dir / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def reserve_address(self, cluster_id: str) -> str:
        """Cluster `cluster_id`'s API address, known before its first master is made:
        held for the cluster until `release_cluster`, and served by the cluster's
        balancer (`balancer.py`: a forwarder on the host to its running masters),
        started now if it is not running."""
        with self._locked():
            address = self.leases.reserve(cluster_id)
            running = balancer.read(self.state_dir, cluster_id)
            if running is None or not running.alive():
                self._ensure_bridge()
                balancer.ensure(self.state_dir, cluster_id, address, self.settings.bridge, _env())
            return address

    def reserve_machine_address(self, machine_id: str) -> str:
        """The address machine `machine_id` gets when it is made, held from now on (a
        master's is in its cluster's other masters' configuration before it exists)."""
        with self._locked():
            return self.leases.take(machine_id)

    def release_cluster(self, project_id: str, cluster_id: str) -> None:
        with self._locked():
            balancer.stop(self.state_dir, cluster_id, self.settings.bridge)
            self.leases.release_cluster(cluster_id)

    def _keep_balancers(self) -> None:
        """Start again each balancer whose process is gone (at most every few seconds)."""
        now = time.monotonic()
        if now - self._balancers_checked < BALANCER_CHECK:
            return
        self._balancers_checked = now
        gone = [r for r in balancer.every(self.state_dir) if not r.alive()]
        if not gone or not hostops.link_exists(self.settings.bridge):
            return
        with self._locked():
            for r in gone:
                balancer.ensure(
                    self.state_dir, r.cluster_id, r.address, self.settings.bridge, _env()
                )

    def ensure_machine(self, spec: MachineSpec) -> Machine:
        problems = self.validate(spec)
        if problems:
            raise PermanentError("; ".join(problems))
        why = self.cannot_run()
        if why:
            raise PermanentError(f"the local provider cannot run machines here: {why}")
        with self._locked():
            directory = self._dir(spec.machine_id)
            found = machines.read(directory)
            if found is not None:
                if found.deleting:
                    raise TransientError(f"machine {spec.machine_id} is being deleted")
                return self._machine(found)
            address = self.leases.take(spec.machine_id)
            record = machines.Record(
                machine_id=spec.machine_id,
                name=spec.name or spec.machine_id,
                tags=dict(spec.tags),
                address=address,
                image_id=spec.image_id,
                flavor_id=spec.flavor_id,
                zone=self.settings.zone,
            )
            directory.mkdir(parents=True)
            machines.write(directory, record)
            try:
                self._boot(directory, record, spec.user_data)
            except (MachineError, OSError, subprocess.SubprocessError) as exc:
                with contextlib.suppress(MachineError, OSError):
                    machines.stop(directory, record, self._procs.pop(record.machine_id, None))
                self.leases.release(spec.machine_id)
                raise TransientError(f"machine {record.name} could not start: {exc}") from exc
            return self._machine(record)

    def _boot(self, directory: Path, record: machines.Record, user_data: str | None) -> None:
        machines.write_seed(directory, record, user_data)
        machines.show_programs(directory, self.programs())
        lines = []
        for p in self.settings.preload:
            lines.append(f"import {p.archive} {' '.join(p.names)}".rstrip())
        (directory / "preload").write_text("\n".join(lines) + ("\n" if lines else ""))
        self._ensure_bridge()
        self._procs[record.machine_id] = machines.start(directory, record, _env())
        machines.write(directory, record)
        machines.wire(record, self.settings.bridge, self.leases.gateway, self.leases.prefix)
        (directory / "net.ready").write_text("ready\n")

    def _ensure_bridge(self) -> None:
        bridge = self.settings.bridge
        if not hostops.link_exists(bridge):
            hostops.ip("link", "add", bridge, "type", "bridge")
        with contextlib.suppress(MachineError):  # held already
            hostops.ip("addr", "add", f"{self.leases.gateway}/{self.leases.prefix}", "dev", bridge)
        hostops.ip("link", "set", bridge, "up")

    def _machine(self, r: machines.Record) -> Machine:
        fault = None
        if r.deleting:
            state = MachineState.DELETING
        elif r.alive():
            state = MachineState.ACTIVE
        elif not r.init_pid and time.time() - r.created_at < START_GRACE:
            state = MachineState.BUILDING
        else:
            state = MachineState.ERROR
            fault = "the machine's processes are gone (killed, or the host restarted)"
        return Machine(
            machine_id=r.machine_id,
            name=r.name,
            state=state,
            tags=dict(r.tags),
            availability_zone=r.zone,
            address=r.address,
            provider_id=r.machine_id,
            fault=fault,
            image_id=r.image_id,
            flavor_id=r.flavor_id,
        )

    def list_machines(self, tags: Mapping[str, str]) -> list[Machine]:
        self._keep_balancers()
        root = self.state_dir / "machines"
        out: list[Machine] = []
        if not root.is_dir():
            return out
        for directory in sorted(root.iterdir()):
            r = machines.read(directory)
            if r is not None and all(r.tags.get(k) == v for k, v in tags.items()):
                out.append(self._machine(r))
        return out

    def delete_machine(self, machine_id: str) -> None:
        with self._locked():
            directory = self._dir(machine_id)
            record = machines.read(directory)
            if record is None:
                shutil.rmtree(directory, ignore_errors=True)
                self.leases.release(machine_id)
                return
            record.deleting = True
            machines.write(directory, record)
            try:
                machines.stop(directory, record, self._procs.pop(machine_id, None))
            except MachineError as exc:
                raise TransientError(str(exc)) from exc
            self.leases.release(machine_id)

    def reboot_machine(self, machine_id: str) -> None:
        raise PermanentError("the local driver does not reboot machines (no feature reboot)")

    def rebuild_machine(self, machine_id: str, image_id: str) -> None:
        raise PermanentError("the local driver does not rebuild machines (no feature rebuild)")

    # -- for tests and tools -------------------------------------------------------

    def pids(self, machine_id: str) -> list[int]:
        r = machines.read(self._dir(machine_id))
        return hostops.pid_namespace_pids(r.init_pid) if r is not None and r.alive() else []

    def run(self, machine_id: str, argv: list[str], timeout: float = 60.0) -> str:
        r = machines.read(self._dir(machine_id))
        if r is None or not r.alive():
            raise MachineError(f"machine {machine_id} is not running")
        return machines.run(r, argv, timeout)


def _env() -> dict[str, str]:
    """The environment of what the driver starts (machines, balancers)."""
    env = {"PATH": hostops.PATH, "HOME": "/root", "LANG": "C.UTF-8"}
    if os.environ.get("PYTHONPATH"):  # they run shoal's own code, as shoal does
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env
