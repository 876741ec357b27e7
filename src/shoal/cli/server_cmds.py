"""`shoal serve` and `shoal conductor`: run the service processes."""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
from pathlib import Path

import typer

from shoal import admin_token, datadir, keys, logs
from shoal.domain.errors import ShoalError
from shoal.domain.sealing import Sealer
from shoal.runtime import Runtime, build_runtime
from shoal.settings import Settings, SettingsError

log = logging.getLogger("shoal")
EXIT_USAGE = 2


def _settle_heap() -> None:
    """What a service process builds at start (modules, the app, the runtime) lives
    as long as it does: move it out of the cyclic garbage collector's reach, so
    that a full collection under load scans only what requests and passes
    allocate. Without this, one full collection 150 ms into a 1,003-node create
    stopped every thread for 65-75 ms."""
    gc.collect()
    gc.freeze()


def _settings(**overrides: object) -> Settings:
    """Settings from the environment and the options, and logging configured from
    them; a bad value is one line and exit 2."""
    try:
        given = {k: v for k, v in overrides.items() if v is not None}
        settings = Settings.from_env(env=None, **given)  # env=None: os.environ
        logs.configure(settings)
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    return settings


def serve(
    host: str = typer.Option(None, help="listen address (SHOAL_HOST, default 127.0.0.1)"),
    port: int = typer.Option(None, help="listen port (SHOAL_PORT, default 9511)"),
    no_conductor: bool = typer.Option(
        False, "--no-conductor", help="API only; run `shoal conductor` elsewhere"
    ),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="embedded SQLite database directory (SHOAL_DATA_DIR)"
    ),
) -> None:
    """Run the API (and, by default, the conductor) in this process.

    Example: SHOAL_DATA_DIR=/tmp/shoal shoal serve --port 9511
    """
    import uvicorn

    from shoal.api import serving
    from shoal.api.app import create_app

    settings = _settings(
        host=host, port=port, data_dir=data_dir, conductor=False if no_conductor else None
    )
    try:
        sock = serving.bind(settings.host, settings.port)
    except serving.PortTaken as exc:
        typer.echo(
            f"error: {exc.strerror}; is another shoal listening there? Stop it, or pick "
            "another port with --port or SHOAL_PORT (and point the CLI at it with SHOAL_URL)",
            err=True,
        )
        raise typer.Exit(EXIT_USAGE) from exc
    try:
        runtime, sealer = _open(settings)
    except BaseException:
        sock.close()
        raise
    port_bound = sock.getsockname()[1]
    _announce_auth(settings, runtime, port_bound)
    log.info(
        "shoal serving on http://%s:%d (data: %s; conductor: %s; dashboard: /ui/); Ctrl-C to stop",
        settings.host,
        port_bound,
        _where(settings),
        "on" if settings.conductor else "off",
    )
    _settle_heap()
    try:
        app = create_app(runtime, sealer)
        uvicorn.Server(serving.config(app, settings)).run(sockets=[sock])
    finally:
        runtime.close()
        sock.close()


def _open(settings: Settings) -> tuple[Runtime, Sealer]:
    """Private files, the secret key, the runtime, and the stored CA keys sealed with
    that key; a key that is missing or not the one they were sealed with is one line
    and exit 2 (nothing has been served)."""
    from shoal.services import certificates

    datadir.secure(settings)
    runtime = _runtime(settings)  # first: an unfinished copy is refused before a key is made
    try:
        sealer = keys.load(settings)
        certificates.seal_stored_keys(runtime.db, sealer)
    except (SettingsError, ShoalError) as exc:
        runtime.close()
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    return runtime, sealer


def _runtime(settings: Settings, *, with_conductor: bool | None = None) -> Runtime:
    """`build_runtime`; what the operator must fix first (an unfinished copy, a
    provider that cannot be opened: a libvirt domain template that is not domain
    XML, a clouds.yaml entry that does not exist) is one line and exit 2."""
    try:
        return build_runtime(settings, with_conductor=with_conductor)
    except SettingsError as exc:
        typer.echo(f"error: {logs.redact(str(exc))}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc


def _announce_auth(settings: Settings, runtime: Runtime, port: int) -> None:
    """Say how requests are authenticated; with Keystone, register shoal in its catalog
    (`container-infra`); on a fresh deployment in mode local, make the first admin
    token and print it this once (on the terminal, not in the log)."""
    if settings.auth == "none":
        log.warning(
            "authentication is OFF (SHOAL_AUTH=none): anyone who reaches this port is an "
            "admin of any project it names; use it for development only"
        )
        return
    if settings.auth == "keystone":
        log.info(
            "authenticating requests with Keystone (SHOAL_KEYSTONE_CLOUD=%s)",
            settings.keystone.cloud,
        )
        if settings.keystone.register:
            base = settings.public_url or f"http://{settings.host}:{port}"
            try:
                log.info("%s", runtime.auth.register(base.rstrip("/") + "/v1"))
            except ShoalError as exc:  # serve anyway: tokens work, the catalog does not
                log.error("%s", exc.message)
        return
    token = admin_token.ensure(settings, runtime.db)
    if token is None:
        return
    where = admin_token.path(settings)
    log.info("made the first admin token (project %s) in %s", settings.default_project, where)
    if sys.stderr.isatty():  # a person is watching: show it once; never into a log file
        typer.echo(
            f"The first admin token (project {settings.default_project}), shown this once and "
            f"saved in {where} (mode 0600; the shoal CLI reads it from there):\n  {token}",
            err=True,
        )


def _where(settings: Settings) -> str:
    """The database a process uses, as it may be shown (no password)."""
    return logs.mask_url(settings.db_url) if settings.database_url else str(settings.data_dir)


def conductor() -> None:
    """Run only the conductor (reconcilers) in this process.

    Example: SHOAL_DATABASE_URL=postgresql://postgres@127.0.0.1/shoal shoal conductor
    """
    settings = _settings()
    datadir.secure(settings)
    runtime = _runtime(settings, with_conductor=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    _settle_heap()
    runtime.start()
    log.info("shoal conductor running (data: %s); Ctrl-C to stop", _where(settings))
    try:
        stop.wait()
    finally:
        runtime.close()


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(conductor)
