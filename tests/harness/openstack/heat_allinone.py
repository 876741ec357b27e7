"""Heat in one process for tests: the engine and the REST API (what `heat-all` was).

Runs in the services' venv:

    python heat_allinone.py --config-file heat.conf --bind-fd 3 [--trigger-delay 1.0]

* RPC is oslo.messaging's in-process fake:// driver, so the API and the engine
  must share this process. oslo.service's launcher would fork a worker even for
  one, which breaks fake://: the engine service is started directly.
* SQLite: every transaction takes the write lock at BEGIN and waits when busy
  (Heat writes from many threads; a deferred BEGIN fails at once when locked).
* `--trigger-delay`: Heat sleeps 1 s between triggering the leaves of a
  traversal (heat/engine/stack.py). A test may shorten it; a measurement of Heat
  against shoal must keep upstream's 1.0.
* The API listens on a socket the caller bound and passed down (--bind-fd).
* Prints READY on stdout once the API is about to serve.
"""

import faulthandler
import os
import signal
import socket
import socketserver
import sys
import time
import types
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

import oslo_i18n as i18n  # noqa: E402
from heat import version  # noqa: E402
from heat.common import config, messaging, profiler  # noqa: E402
from heat.engine import template  # noqa: E402
from heat.rpc import api as rpc_api  # noqa: E402
from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402

CONF = cfg.CONF
CONF.register_cli_opts(
    [
        cfg.IntOpt("bind-fd", required=True, help="a bound TCP socket to serve the API on"),
        cfg.FloatOpt("trigger-delay", default=1.0, help="Heat's pause between leaves, s"),
    ]
)
LOG = logging.getLogger("heat-allinone")


class ThreadingWSGIServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        LOG.debug("api: " + format, *args)


def _serialize_sqlite() -> None:
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


def _trigger_delay(delay: float) -> None:
    """Heat's stack module sleeps 1 s per leaf: give it a clock whose 1 s is `delay`."""
    from heat.engine import stack as stack_module

    clock = types.SimpleNamespace(
        **{k: getattr(time, k) for k in dir(time) if not k.startswith("__")}
    )
    clock.sleep = lambda s: time.sleep(delay if s == 1 else s)
    stack_module.time = clock
    LOG.warning("heat-allinone: per-leaf trigger delay %ss (test only)", delay)


def _serve_on_fd(fd: int, app: Any) -> ThreadingWSGIServer:
    sock = socket.socket(fileno=fd)
    httpd = ThreadingWSGIServer(sock.getsockname(), QuietHandler, bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = sock
    host, port = sock.getsockname()[:2]
    httpd.server_name = host
    httpd.server_port = port
    httpd.setup_environ()
    httpd.server_activate()
    httpd.set_app(app)
    return httpd


def main() -> None:
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    i18n.enable_lazy()
    logging.register_options(CONF)
    CONF(
        sys.argv[1:],
        project="heat",
        prog="heat-allinone",
        version=version.version_info.version_string(),
    )
    logging.setup(CONF, "heat")
    config.set_config_defaults()
    if CONF.database.connection.startswith("sqlite"):
        _serialize_sqlite()
    messaging.setup()
    config.startup_sanity_check()
    if not template._get_template_extension_manager().names():
        raise SystemExit("heat-allinone: no template plugins found")
    from heat.engine import service as engine

    if CONF.trigger_delay != 1.0:
        _trigger_delay(CONF.trigger_delay)
    profiler.setup("heat-allinone", CONF.host)
    srv = engine.EngineService(CONF.host, rpc_api.ENGINE_TOPIC)
    srv.start()
    app = config.load_paste_app("heat-api")
    httpd = _serve_on_fd(CONF.bind_fd, app)
    LOG.info("heat-allinone: API on %s, engine started", httpd.socket.getsockname())
    print("READY", flush=True)

    def _term(signum: int, _frame: Any) -> None:
        # Like nova_allinone: everything here is thrown away with the test cloud.
        LOG.info("heat-allinone: exiting on signal %d", signum)
        os._exit(0)

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
