"""Local machines on disk: each machine is a directory under the provider's state dir
(`machines/<machine id>/`) holding what it is (`machine.json`: name, tags, address,
the host PIDs of its init and of `unshare`, with their start times), its cloud-init
seed, its overlays' upper layers, its private state dirs and its logs. The processes
run in a session of their own, so a killed or restarted shoal leaves them running and
finds them again here."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from shoal.drivers.local import hostops
from shoal.drivers.local.hostops import MachineError

NODE_INIT = Path(__file__).resolve().parent / "node_init.sh"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0
CLOUD_CFG = "/etc/cloud/cloud.cfg.d/90-shoal-local.cfg"
# cloud-init's configuration inside a machine: the NoCloud seed only, no network
# configuration (the host wires it), and the modules that make sense in a namespace
# machine (no disks, users, SSH keys or package installs).
CLOUD_CFG_TEXT = """\
datasource_list: [NoCloud]
network: {config: disabled}
cloud_init_modules: [bootcmd, write_files, set_hostname, update_hostname, update_etc_hosts]
cloud_config_modules: [runcmd]
cloud_final_modules: [write_files_deferred, scripts_per_once, scripts_per_boot,
  scripts_per_instance, scripts_user, final_message]
"""


@dataclass
class Record:
    """What `machine.json` holds."""

    machine_id: str
    name: str
    tags: dict[str, str]
    address: str
    image_id: str
    flavor_id: str
    zone: str
    init_pid: int = 0
    init_started: int = 0
    unshare_pid: int = 0
    deleting: bool = False
    created_at: float = field(default_factory=time.time)

    @property
    def cgroup_root(self) -> str:
        return f"/shoal-local-{self.machine_id}"

    @property
    def veth(self) -> str:
        return "shl" + hashlib.sha1(self.machine_id.encode()).hexdigest()[:11]

    def alive(self) -> bool:
        return bool(self.init_pid) and hostops.start_time(self.init_pid) == self.init_started


def read(directory: Path) -> Record | None:
    try:
        data = json.loads((directory / "machine.json").read_text())
        return Record(**data)
    except (OSError, ValueError, TypeError):
        return None


def write(directory: Path, record: Record) -> None:
    tmp = directory / "machine.json.tmp"
    tmp.write_text(json.dumps(asdict(record), sort_keys=True))
    tmp.replace(directory / "machine.json")


def write_seed(directory: Path, record: Record, user_data: str | None) -> None:
    """The NoCloud seed and cloud-init's settings, in the overlays' upper layers (so
    only the machine sees them); the user data 0600 (it holds keys)."""
    seed = directory / "ov" / "_var_lib" / "upper" / "cloud" / "seed" / "nocloud"
    seed.mkdir(parents=True, exist_ok=True)
    meta = f"instance-id: {record.machine_id}\nlocal-hostname: {record.name}\n"
    (seed / "meta-data").write_text(meta)
    ud = seed / "user-data"
    ud.touch(mode=0o600)
    ud.write_text(user_data or "#cloud-config\n{}\n")
    cfg = directory / "ov" / "_etc" / "upper" / CLOUD_CFG.removeprefix("/etc/")
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text(CLOUD_CFG_TEXT)


def show_programs(directory: Path, programs: dict[str, Path]) -> None:
    """Make `programs` (name -> host path) appear in the machine's /usr/local/bin."""
    bin_dir = directory / "ov" / "_usr_local" / "upper" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, target in programs.items():
        link = bin_dir / name
        with contextlib.suppress(FileNotFoundError):
            link.unlink()
        link.symlink_to(target)


def start(directory: Path, record: Record, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start the machine's init in its own namespaces and session, inside its cgroups;
    return once the init has made its mounts (`init.ready`)."""
    (directory / "log").mkdir(parents=True, exist_ok=True)
    procs = hostops.make_cgroups(record.cgroup_root)
    join = 'for f in "$@"; do echo $$ > "$f"; done; exec unshare ' + " ".join(
        [
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--net",
            "--uts",
            "--ipc",
            "--cgroup",
            "--mount",
            "--propagation",
            "private",
            "sh",
            str(NODE_INIT),
            str(directory),
            record.name,
        ]
    )
    with (directory / "log" / "init.log").open("ab") as log:
        proc = subprocess.Popen(
            ["sh", "-c", join, "join", *map(str, procs)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            cwd="/",
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while not (directory / "init.ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT)
            tail = (directory / "log" / "init.log").read_text(errors="replace")[-1500:]
            raise MachineError(f"machine {record.name} did not start: {tail}")
        time.sleep(0.05)
    kids = hostops.children(proc.pid)
    if not kids:
        raise MachineError(f"machine {record.name}: its init is gone")
    record.unshare_pid = proc.pid
    record.init_pid = kids[0]
    record.init_started = hostops.start_time(kids[0])
    return proc


def wire(record: Record, bridge: str, gateway: str, prefix: int) -> None:
    """The machine's eth0 on `bridge` with its address; default route via the host."""
    with contextlib.suppress(MachineError):  # a leftover of an earlier try
        hostops.ip("link", "del", record.veth)
    hostops.ip(
        "link", "add", record.veth, "type", "veth", "peer", "name", "eth0",
        "netns", str(record.init_pid),
    )  # fmt: skip
    hostops.ip("link", "set", record.veth, "master", bridge, "up")
    run(record, ["ip", "addr", "add", f"{record.address}/{prefix}", "dev", "eth0"])
    run(record, ["ip", "link", "set", "eth0", "up"])
    run(record, ["ip", "route", "add", "default", "via", gateway])


def run(record: Record, argv: list[str], timeout: float = 60.0) -> str:
    """Run a command inside the machine and wait for it; its output."""
    enter = ["nsenter", "--target", str(record.init_pid), "--mount", "--uts", "--ipc", "--net"]
    done = subprocess.run(
        [*enter, "--pid", *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
        env={"PATH": hostops.PATH},
        check=False,
    )
    if done.returncode != 0:
        raise MachineError(
            f"{record.name}: {' '.join(argv)} exited {done.returncode}: "
            f"{(done.stderr or done.stdout).strip()[-1500:]}"
        )
    return done.stdout


def stop(directory: Path, record: Record, proc: subprocess.Popen[bytes] | None) -> None:
    """End every process of the machine by PID, then remove its veth, cgroups and
    directory. Safe to repeat."""
    pids = hostops.pid_namespace_pids(record.init_pid) if record.alive() else []
    for pid in [record.init_pid, *pids] if pids else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if record.unshare_pid and hostops.start_time(record.unshare_pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(record.unshare_pid, signal.SIGKILL)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT)
    deadline = time.monotonic() + STOP_TIMEOUT
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if hostops.start_time(p)]
        if pids:
            time.sleep(0.05)
    with contextlib.suppress(MachineError):  # gone with the namespace, normally
        hostops.ip("link", "del", record.veth)
    hostops.remove_cgroups(record.cgroup_root)
    while hostops.leftover_cgroups(record.cgroup_root) and time.monotonic() < deadline:
        time.sleep(0.2)  # tasks of killed processes leave their cgroups a moment later
        hostops.remove_cgroups(record.cgroup_root)
    left = hostops.leftover_cgroups(record.cgroup_root)
    if left:
        raise MachineError(f"machine {record.name}: cgroups still busy: {left[0]}")
    shutil.rmtree(directory, ignore_errors=True)
