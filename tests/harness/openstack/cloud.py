"""A real, small OpenStack cloud on 127.0.0.1 for tests: Keystone, Glance, Placement, Nova,
and Heat when a test asks for it.

    with OpenStackCloud() as cloud:
        conn = cloud.connection("demo")
        conn.compute.create_server(name="n0", flavor_id=cloud.flavor_small.id, ...)

The services run from their own cached venv (see venv.py) on SQLite, with
Nova's fake compute driver: three fake hosts, `az1-host1` and `az1-host2` in
availability zone `az1` and `az2-host1` in `az2` (host aggregates). Neutron is
Nova's in-process stub: pass `networks=[{"uuid": cloud.network_id}]` or
`networks="auto"`; servers get a fixed 192.168.x.y address.

What it sets up, with throwaway passwords made per cloud (the admin's is made
with the venv's database template and shared by its clouds, see databases.py):

* Keystone: user `admin` (admin of project `admin`); project `service` with the
  service users `glance`, `placement`, `nova` and `shoal` (admin role there);
  project `demo` with user `demo` (member); roles reader, member, admin.
  Catalog in region RegionOne: identity, image, placement, compute.
* Glance (file store) with one tiny public raw image, `cloud.image_id`.
* Flavors `m1.small` (1 vCPU, 512 MiB), `m1.medium` (2 vCPUs, 2 GiB) and
  `huge` (8192 vCPUs: more than any host has, so a server of it goes to ERROR
  with "No valid host was found").
* Compute quotas of projects `admin` and `demo` lifted (instances, cores, RAM
  unlimited); use `set_compute_quota` to set limits.

* Heat (engine and API in one process, heat_allinone.py) only once a test calls
  `start_heat()`: then in the catalog as `orchestration`/`heat`
  (`<heat_url>/v1/%(project_id)s`). Its templates must not use `OS::Neutron::*`
  or `networks: [{network: ...}]` (Neutron is a stub): use
  `networks: [{allocate_network: auto}]`; a server's `first_address` works.

Every process it starts is stopped by PID in `stop()` (also at interpreter
exit), and its work dir is removed unless `keep=True`.
"""

from __future__ import annotations

import atexit
import dataclasses
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from openstack import exceptions
from openstack.connection import Connection

from tests.harness.openstack import configs, databases, processes, provision
from tests.harness.openstack.credentials import Credentials
from tests.harness.openstack.processes import CloudStartError, Service
from tests.harness.openstack.provision import SERVICE_USERS, Flavor
from tests.harness.openstack.venv import VenvUnavailable, ensure_venv, note

__all__ = ["CloudStartError", "Credentials", "Flavor", "OpenStackCloud", "VenvUnavailable"]

HERE = Path(__file__).resolve().parent
REGION = configs.REGION
# Nova's in-process Neutron stub (nova.tests.fixtures.NeutronFixture.network_1)
NETWORK_ID = "3cb9bc59-5699-4588-a4b1-b87f96708bc6"
COMPUTE_HOSTS = {"az1-host1": "az1", "az1-host2": "az1", "az2-host1": "az2"}
STOP_GRACE = 10.0


_running: set[OpenStackCloud] = set()
_running_lock = threading.Lock()


def _stop_all_at_exit() -> None:
    with _running_lock:
        clouds = list(_running)
    for cloud in clouds:
        cloud.stop()


atexit.register(_stop_all_at_exit)


def _bound_socket() -> socket.socket:
    """A TCP socket bound to a free port of 127.0.0.1, to hand to a service (no race)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.set_inheritable(True)
    return sock


class OpenStackCloud:
    """Keystone + Glance + Placement + Nova (fake driver) on 127.0.0.1; see the module doc."""

    def __init__(
        self,
        *,
        work_dir: Path | None = None,
        keep: bool = False,
        start_timeout: float = 300.0,
        venv: Path | None = None,
    ) -> None:
        self.keep = keep
        self.start_timeout = start_timeout
        self._work_dir_arg = work_dir
        self._venv_arg = venv
        self.work_dir: Path | None = None
        self.venv: Path | None = None
        self._services: dict[str, Service] = {}
        self._services_lock = threading.Lock()
        self.timings: dict[str, float] = {}
        self._sockets: dict[str, socket.socket] = {}
        self._layout: configs.Layout | None = None
        self._stopped = False
        # filled in by start()
        self.admin: Credentials
        self.demo: Credentials
        self.shoal: Credentials
        self.flavors: dict[str, Flavor] = {}
        self.image_id = ""
        self.image_name = "tiny-raw"
        self.network_id = NETWORK_ID
        self.zones: dict[str, list[str]] = {}
        for host, zone in COMPUTE_HOSTS.items():
            self.zones.setdefault(zone, []).append(host)
        self.project_ids: dict[str, str] = {}
        self._heat_lock = threading.Lock()

    # ------------------------------------------------------------------ public
    @property
    def auth_url(self) -> str:
        return self.layout.keystone_url

    @property
    def layout(self) -> configs.Layout:
        if self._layout is None:
            raise RuntimeError("the cloud is not started")
        return self._layout

    @property
    def endpoints(self) -> dict[str, str]:
        """Catalog URL per service type (`orchestration` once Heat runs: its root URL)."""
        lay = self.layout
        found = {
            "identity": lay.keystone_url,
            "image": lay.glance_url,
            "placement": lay.placement_url,
            "compute": lay.nova_url,
        }
        if lay.ports.heat:
            found["orchestration"] = lay.heat_url
        return found

    @property
    def heat_running(self) -> bool:
        with self._services_lock:
            return "heat" in self._services

    def start_heat(self, *, trigger_delay: float = 0.02, timeout: float = 180.0) -> str:
        """Start Heat on the running cloud (once; later calls return at once) and add it to
        the catalog as `orchestration`/`heat`; return its root URL.

        `trigger_delay` replaces Heat's 1 s pause between the leaves of a traversal
        (upstream's value is 1.0: keep it where Heat is measured). Raises
        CloudStartError when Heat does not come up."""
        with self._heat_lock:
            if self.heat_running:
                return self.layout.heat_url
            assert self.venv is not None
            deadline = time.monotonic() + timeout
            sock = _bound_socket()
            self._sockets["heat"] = sock
            lay = self.layout
            ports = dataclasses.replace(lay.ports, heat=sock.getsockname()[1])
            self._layout = lay = dataclasses.replace(lay, ports=ports)
            databases.install_heat(databases.ensure_template(self.venv, note), lay)
            conf = configs.heat(lay)
            d = lay.dir("heat")
            argv = [self._bin("python"), str(HERE / "heat_allinone.py"), "--config-file", str(conf)]
            argv += ["--bind-fd", str(sock.fileno()), "--trigger-delay", str(trigger_delay)]
            svc = Service(
                "heat",
                argv,
                cwd=d,
                env=processes.service_env(self.venv),
                logs=[d / "stdout.log", d / "heat.log"],
                pass_fds=[sock.fileno()],
            )
            t0 = time.monotonic()
            self._add(svc)
            self._wait_http("heat", lay.heat_url + "/", svc, deadline)
            self.register_service("heat", "orchestration", lay.heat_url + "/v1/%(project_id)s")
            self.timings["heat"] = time.monotonic() - t0
            return lay.heat_url

    @property
    def clouds(self) -> dict[str, Credentials]:
        """The logins it made: `admin`, `demo` (member of project demo), `shoal` (service user)."""
        return {"admin": self.admin, "demo": self.demo, "shoal": self.shoal}

    @property
    def flavor_small(self) -> Flavor:
        return self.flavors["m1.small"]

    @property
    def flavor_medium(self) -> Flavor:
        return self.flavors["m1.medium"]

    @property
    def flavor_huge(self) -> Flavor:
        return self.flavors["huge"]

    def connection(self, cloud: str | Credentials = "admin", **options: Any) -> Connection:
        """An openstacksdk connection as one of `clouds` (or any other login)."""
        creds = self.clouds[cloud] if isinstance(cloud, str) else cloud
        return creds.connect(**options)

    def write_clouds_yaml(
        self,
        path: Path,
        *,
        prefix: str = "",
        extra: Mapping[str, Credentials] | None = None,
    ) -> Path:
        """Write a clouds.yaml with an entry per login (`<prefix>admin`, ...); return its path."""
        entries = {**self.clouds, **(extra or {})}
        data = {"clouds": {prefix + name: c.cloud_entry() for name, c in entries.items()}}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=True))
        path.chmod(0o600)
        return path

    def set_compute_quota(
        self,
        project: str,
        *,
        instances: int | None = None,
        cores: int | None = None,
        ram: int | None = None,
        server_groups: int | None = None,
        server_group_members: int | None = None,
    ) -> None:
        """Set a project's Nova quota (name or id; -1 is unlimited; None leaves one as it is)."""
        asked = {
            "instances": instances,
            "cores": cores,
            "ram": ram,
            "server_groups": server_groups,
            "server_group_members": server_group_members,
        }
        limits = {k: v for k, v in asked.items() if v is not None}
        with self._admin() as conn:
            conn.compute.update_quota_set(self._project_id(conn, project), **limits)

    def create_project_user(
        self,
        project: str,
        user: str | None = None,
        *,
        role: str = "member",
        password: str | None = None,
    ) -> Credentials:
        """A new project (reused if it exists) and a user with `role` on it; its login."""
        user = user or f"{project}-user"
        password = password or secrets.token_urlsafe(12)
        with self._admin() as conn:
            try:
                proj = conn.identity.find_project(
                    project, domain_id="default", ignore_missing=False
                )
            except exceptions.NotFoundException:
                proj = conn.identity.create_project(name=project, domain_id="default")
            self.project_ids[project] = proj.id
            new = conn.identity.create_user(
                name=user, password=password, domain_id="default", default_project_id=proj.id
            )
            conn.identity.assign_project_role_to_user(
                proj, new, conn.identity.find_role(role, ignore_missing=False)
            )
        return Credentials(self.auth_url, user, password, project)

    def register_service(
        self,
        name: str,
        service_type: str,
        url: str,
        *,
        interfaces: tuple[str, ...] = provision.INTERFACES,
    ) -> str:
        """Add a service and its endpoints to Keystone's catalog; return the service id."""
        with self._admin() as conn:
            return provision.register(conn, name, service_type, url, interfaces)

    def unregister_services(self, service_type: str) -> int:
        """Remove every catalog service of a type (what a test registered), so that
        the next test that looks the type up in the shared cloud finds its own."""
        with self._admin() as conn:
            return provision.unregister(conn, service_type)

    @property
    def services(self) -> list[Service]:
        """The processes it started, by service name order of start."""
        with self._services_lock:
            return list(self._services.values())

    def rss_bytes(self) -> int:
        """Resident memory of every process the cloud started (gunicorn workers included)."""
        return sum(svc.rss_bytes() for svc in self.services)

    def pids(self) -> dict[str, int]:
        return {svc.name: svc.pid for svc in self.services if svc.pid is not None}

    def __enter__(self) -> OpenStackCloud:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------- start/stop
    def start(self) -> OpenStackCloud:
        """Start everything and wait until it answers; raise VenvUnavailable or
        CloudStartError (stopping what it started) when it cannot."""
        t0 = time.monotonic()
        self.venv = self._venv_arg or ensure_venv()
        self.timings["venv"] = time.monotonic() - t0
        with _running_lock:
            _running.add(self)
        try:
            self._start(time.monotonic() + self.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.timings["start"] = time.monotonic() - t0
        return self

    def stop(self) -> None:
        """Stop every process it started (by PID) and remove the work dir unless kept."""
        if self._stopped:
            return
        self._stopped = True
        t0 = time.monotonic()
        processes.stop_all(self.services, STOP_GRACE)
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()
        if self.work_dir is not None and not self.keep:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        with _running_lock:
            _running.discard(self)
        self.timings["stop"] = time.monotonic() - t0

    # ---------------------------------------------------------------- private
    def _start(self, deadline: float) -> None:
        assert self.venv is not None
        phase = self._phase_timer()
        template = databases.ensure_template(self.venv, note)
        phase("database template")
        if self._work_dir_arg is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="shoal-openstack-"))
        else:
            self.work_dir = self._work_dir_arg
            self.work_dir.mkdir(parents=True, exist_ok=True)
        for name in ("keystone", "glance", "placement", "nova"):
            self._sockets[name] = _bound_socket()
            (self.work_dir / name).mkdir(exist_ok=True)
        ports = configs.Ports(**{n: s.getsockname()[1] for n, s in self._sockets.items()})
        passwords = {u: secrets.token_urlsafe(16) for u in ("admin", "demo", *SERVICE_USERS)}
        self._layout = lay = configs.Layout(self.work_dir, self.venv, ports, passwords)
        # The admin password is the template's own (a throwaway made with it): changing it
        # would revoke tokens for the rest of that second, in Keystone's 1 s resolution.
        passwords["admin"] = databases.install(template, lay)
        self.admin = Credentials(lay.keystone_url, "admin", passwords["admin"], "admin")
        self.demo = Credentials(lay.keystone_url, "demo", passwords["demo"], "demo")
        self.shoal = Credentials(
            lay.keystone_url, "shoal", passwords["shoal"], configs.SERVICE_PROJECT
        )
        ks_conf = configs.keystone(lay)
        configs.glance(lay)
        configs.placement(lay)
        nova_conf = configs.nova(lay)
        databases.fernet_keys(lay.dir("keystone") / "fernet-keys")
        databases.fernet_keys(lay.dir("keystone") / "credential-keys")
        keystone = self._gunicorn("keystone", "ks_wsgi", 4, OS_KEYSTONE_CONFIG_FILES=str(ks_conf))
        glance = self._gunicorn(
            "glance", "glance_wsgi", 4, OS_GLANCE_CONFIG_DIR=str(lay.dir("glance"))
        )
        # one thread: SQLite then never sees two writers (see placement_wsgi.py)
        placement = self._gunicorn(
            "placement", "placement_wsgi", 1, OS_PLACEMENT_CONFIG_DIR=str(lay.dir("placement"))
        )
        phase("configs, databases copied, keystone/glance/placement launched")

        self._wait_http("keystone", lay.keystone_url, keystone, deadline)
        phase("keystone answers")
        with self._admin() as conn:
            self.project_ids.update(provision.identity(conn, lay))
        phase("projects, users, catalog")
        with self._admin() as conn:  # a new token, whose catalog has the new services
            self._wait_http("placement", lay.placement_url + "/", placement, deadline)
            nova = self._start_nova(nova_conf)
            self._wait_http("glance", lay.glance_url + "/", glance, deadline)
            self.image_id = provision.image(conn, self.image_name)
            phase("image uploaded")
            self._wait_http("nova", lay.nova_url + "/", nova, deadline)
            processes.wait_until(
                "nova compute hosts up and in placement",
                lambda: provision.compute_hosts_ready(conn, set(COMPUTE_HOSTS)),
                watch=[nova],
                timeout=max(deadline - time.monotonic(), 1.0),
                interval=0.5,
            )
            phase("nova answers, compute hosts in placement")
            unlimited = [self.project_ids["admin"], self.project_ids["demo"]]
            self.flavors = provision.compute(conn, self.zones, unlimited)
            phase("zones, flavors, quotas")

    def _phase_timer(self) -> Callable[[str], None]:
        last = [time.monotonic()]

        def phase(name: str) -> None:
            now = time.monotonic()
            self.timings[name] = now - last[0]
            last[0] = now

        return phase

    def _bin(self, name: str) -> str:
        assert self.venv is not None
        return str(self.venv / "bin" / name)

    def _gunicorn(self, service: str, module: str, threads: int, **env: str) -> Service:
        assert self.venv is not None
        d = self.layout.dir(service)
        sock = self._sockets[service]
        argv = [self._bin("gunicorn"), "--bind", f"fd://{sock.fileno()}"]
        argv += ["--pythonpath", str(HERE), "--workers", "1", "--threads", str(threads)]
        argv += ["--no-control-socket", "--error-logfile", str(d / "gunicorn.log")]
        svc = Service(
            service,
            [*argv, f"{module}:application"],
            cwd=d,
            env=processes.service_env(self.venv, **env),
            logs=[d / "stdout.log", d / "gunicorn.log", d / f"{service}.log"],
            pass_fds=[sock.fileno()],
        )
        self._add(svc)
        return svc

    def _add(self, svc: Service) -> None:
        """Record a service before it starts, so that stop() finds it whatever happens next."""
        with self._services_lock:
            self._services[svc.name] = svc
        svc.start()
        # The service holds the listening socket now. Without our copy, a service that dies
        # refuses connections instead of leaving clients waiting in the kernel's backlog.
        self._sockets.pop(svc.name).close()

    def _start_nova(self, conf: Path) -> Service:
        venv = self.venv
        assert venv is not None
        d = self.layout.dir("nova")
        sock = self._sockets["nova"]
        svc = Service(
            "nova",
            [self._bin("python"), str(HERE / "nova_allinone.py"), "--config-file", str(conf)]
            + ["--computes", ",".join(COMPUTE_HOSTS), "--bind-fd", str(sock.fileno())],
            cwd=d,
            env=processes.service_env(venv),
            logs=[d / "stdout.log", d / "nova.log"],
            pass_fds=[sock.fileno()],
        )
        self._add(svc)
        return svc

    def _wait_http(self, name: str, url: str, svc: Service, deadline: float) -> None:
        processes.wait_until(
            f"{name} at {url}",
            lambda: processes.http_status(url) in (200, 300, 401),
            watch=[svc],
            timeout=max(deadline - time.monotonic(), 1.0),
        )

    @contextmanager
    def _admin(self) -> Iterator[Connection]:
        conn = self.admin.connect()
        try:
            yield conn
        finally:
            conn.close()

    def _project_id(self, conn: Connection, project: str) -> str:
        if project not in self.project_ids:
            found = conn.identity.find_project(project, domain_id="default", ignore_missing=False)
            self.project_ids[project] = str(found.id)
        return self.project_ids[project]


if __name__ == "__main__":  # a manual check: start, report, stop
    with OpenStackCloud(keep="--keep" in sys.argv) as c:
        print({k: round(v, 1) for k, v in c.timings.items()})
        print(f"RSS {c.rss_bytes() / 2**20:.0f} MiB; work dir {c.work_dir}")
