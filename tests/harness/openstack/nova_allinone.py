"""Nova in one process for tests: API + conductor + scheduler + N fake compute hosts.

Runs in the services' venv:

    python nova_allinone.py --config-file nova.conf --computes h1,h2 --bind-fd 3

* RPC is oslo.messaging's in-process fake:// driver, so every Nova service must
  share this process. Nova opens one transport per cell mapping URL and fake://
  transports do not share queues, so nova.rpc.create_transport is collapsed onto
  one transport (as Nova's own RPCFixture does in its functional tests).
* Virt driver: [DEFAULT] compute_driver (fake.FakeDriver).
* Keystone, Glance and Placement are real services. Neutron is not: it is
  Nova's in-tree NeutronFixture (an in-memory stub of the Neutron client), with
  two changes so that every project sees its network and each port gets its own
  IP address.
* The API listens on a socket the caller bound and passed down (--bind-fd), so
  no other process can take the port between choosing and listening.
* Prints READY on stdout once the API is about to serve.
"""

import os
import sys

os.environ.setdefault("OS_NOVA_DISABLE_EVENTLET_PATCHING", "1")  # native threads
from nova import monkey_patch  # noqa: E402

monkey_patch.patch(backend="threading")

import faulthandler  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import socketserver  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer  # noqa: E402

import fixtures  # noqa: E402
import nova.conf  # noqa: E402
import oslo_messaging as messaging  # noqa: E402
from nova import config, context, objects, rpc, service  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402
from paste import deploy  # noqa: E402

CONF = nova.conf.CONF
CONF.register_cli_opts(
    [
        cfg.IntOpt("bind-fd", required=True, help="a bound TCP socket to serve the API on"),
        cfg.ListOpt("computes", default=["compute1"], help="fake compute host names"),
        cfg.BoolOpt(
            "skip-reshape-allocs",
            default=True,
            help="Test only: the resource tracker fetches the allocations of every consumer "
            "on the host from Placement (one GET each) on every claim and periodic update, "
            "only to hand them to a reshape that the fake drivers never do; N servers on "
            "one host then cost O(N^2) Placement calls. Return {} instead.",
        ),
    ]
)
LOG = logging.getLogger("nova-allinone")
NEUTRON_ADDRESSES = 250  # per /24 handed out by the stub


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Shim:
    """The parts of nova.test.TestCase that Nova's Neutron fixture calls."""

    def __init__(self) -> None:
        self.fixtures: list[Any] = []

    def useFixture(self, fixture: Any) -> Any:
        fixture.setUp()
        self.fixtures.append(fixture)
        return fixture

    def stub_out(self, old: str, new: Any) -> None:
        self.useFixture(fixtures.MonkeyPatch(old, new))

    def flags(self, **kw: Any) -> None:
        group = kw.pop("group", None)
        for key, value in kw.items():
            CONF.set_override(key, value, group)


def _serialize_sqlite() -> None:
    """Test only: every SQLite transaction takes the write lock at BEGIN and waits when busy."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.execute("PRAGMA busy_timeout = 60000")

    @event.listens_for(Engine, "begin")
    def _on_begin(conn: Any) -> None:
        if conn.engine.dialect.name == "sqlite" and "in_transaction" not in conn.info:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            conn.info["in_transaction"] = True


def _single_bus() -> None:
    transports: dict[None, Any] = {}

    def create_transport(url: Any) -> Any:
        if None not in transports:
            transports[None] = messaging.get_rpc_transport(
                CONF, url=None, allowed_remote_exmods=rpc.get_allowed_exmods()
            )
        return transports[None]

    rpc.create_transport = create_transport


def _stub_neutron(shim: _Shim) -> None:
    from nova.tests.fixtures import neutron as neutron_fx

    class NeutronFixture(neutron_fx.NeutronFixture):  # type: ignore[misc]
        _ip_lock = threading.Lock()
        _next_ip = [10]

        # The fixture's network and security group belong to a fixed test
        # project; drop the tenant filters so that every project sees them.
        def _list_resource(self, resources: Any, retrieve_all: Any, **params: Any) -> Any:
            params.pop("tenant_id", None)
            params.pop("project_id", None)
            return super()._list_resource(resources, retrieve_all, **params)

        # The fixture gives every new port the same fixed IP; hand out distinct ones.
        def create_port(self, body: Any = None) -> Any:
            port = super().create_port(body)["port"]
            with self._ip_lock:
                n = self._next_ip[0]
                self._next_ip[0] += 1
            for ip in port.get("fixed_ips", []):
                if ":" not in ip["ip_address"]:
                    third, fourth = divmod(n, NEUTRON_ADDRESSES)
                    ip["ip_address"] = f"192.168.{third + 1}.{fourth + 2}"
            self._ports[port["id"]]["fixed_ips"] = port["fixed_ips"]
            return {"port": port}

    shim.useFixture(NeutronFixture(shim))


def _serve_on_fd(fd: int, app: Any) -> ThreadingWSGIServer:
    sock = socket.socket(fileno=fd)
    httpd = ThreadingWSGIServer(sock.getsockname(), QuietHandler, bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = sock
    host, port = sock.getsockname()[:2]
    httpd.server_name = socket.getfqdn(host)
    httpd.server_port = port
    httpd.setup_environ()
    httpd.server_activate()
    httpd.set_app(app)
    return httpd


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    config.parse_args(sys.argv, prog="nova-allinone")
    logging.setup(CONF, "nova")
    from oslo_service import _options as service_opts

    CONF.register_opts(service_opts.service_opts)
    objects.register_all()
    if CONF.database.connection.startswith("sqlite"):
        _serialize_sqlite()
    _single_bus()
    if rpc.TRANSPORT:
        rpc.cleanup()
    rpc.init(CONF)
    shim = _Shim()
    _stub_neutron(shim)
    if CONF.skip_reshape_allocs:
        shim.stub_out(
            "nova.scheduler.client.report.SchedulerReportClient.get_allocations_for_provider_tree",
            lambda self, ctx, nodename: {},
        )

    from nova.compute import rpcapi as compute_rpcapi

    t0 = time.monotonic()
    services = []
    for name in ("conductor", "scheduler"):
        svc = service.Service.create(binary=f"nova-{name}", host=CONF.host)
        svc.start()
        services.append(svc)
    for host in CONF.computes:
        svc = service.Service.create(
            binary="nova-compute",
            host=host,
            topic=compute_rpcapi.RPC_TOPIC,
            topic_alt=compute_rpcapi.RPC_TOPIC_ALT,
        )
        svc.start()
        services.append(svc)
    mapped = objects.host_mapping.discover_hosts(context.get_admin_context())
    LOG.info(
        "nova-allinone: %d services started in %.1fs, mapped hosts: %s",
        len(services),
        time.monotonic() - t0,
        [m.host for m in mapped],
    )

    from nova.api.openstack import wsgi_app

    wsgi_app._setup_service(CONF.host, "osapi_compute")
    app = deploy.loadapp(f"config:{CONF.wsgi.api_paste_config}", name="osapi_compute")
    httpd = _serve_on_fd(CONF.bind_fd, app)
    LOG.info("nova-allinone: API on %s", httpd.socket.getsockname())
    print("READY", flush=True)

    def _term(_signum: int, _frame: Any) -> None:
        # Everything this process holds is thrown away with the test cloud (SQLite is
        # crash-safe for a post-mortem), so exit at once instead of stopping each
        # service in turn, which takes seconds.
        logging.getLogger("nova-allinone").info("nova-allinone: exiting on signal %d", _signum)
        os._exit(0)

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
