"""The services' SQLite databases: made once per venv, then copied into each cloud.

Syncing the schemas takes eight `*-manage` runs (Nova's four alone import Nova
four times): 12-30 s of a 2-core machine. Their result does not depend on the
cloud, except for two things, fixed after the copy:

* Nova's cell mappings hold the paths of the cell databases;
* Keystone's bootstrap wrote its own URL as the identity endpoint.

Keystone's admin password is the template's (a throwaway made with it and kept
beside it, readable by its owner only): every cloud of the venv shares it.

So the first cloud of a venv syncs them in a scratch dir and keeps the result as
a template inside the venv (`shoal-db-template-v<N>`); every cloud copies it
(a few milliseconds). Bump TEMPLATE_VERSION when the steps below change.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.harness.openstack import configs, processes
from tests.harness.openstack.processes import CloudStartError

TEMPLATE_VERSION = 1
STEP_TIMEOUT = 180.0  # one *-manage run, on a loaded 2-core machine
# Where the template's services pretended to listen: only ever rewritten, never contacted.
TEMPLATE_PORTS = configs.Ports(keystone=1, glance=2, placement=3, nova=4)
FILES = {
    "keystone": ("keystone.db",),
    "glance": ("glance.db",),
    "placement": ("placement.db",),
    "nova": ("nova_api.db", "nova_cell0.db", "nova_cell1.db"),
}
ADMIN_PASSWORD_FILE = "admin-password"


def template_dir(venv: Path) -> Path:
    return venv / f"shoal-db-template-v{TEMPLATE_VERSION}"


def ensure_template(venv: Path, note: Callable[[str], None]) -> Path:
    """The venv's database template, made now when missing (safe against a concurrent maker)."""
    final = template_dir(venv)
    if (final / ADMIN_PASSWORD_FILE).is_file():
        return final
    started = time.monotonic()
    note(f"syncing the OpenStack databases once for {venv.name} (about 15-30 s)")
    scratch = Path(tempfile.mkdtemp(prefix="shoal-openstack-dbsync-"))
    try:
        password = secrets.token_urlsafe(16)
        unused = dict.fromkeys(("glance", "placement", "nova"), "")  # no service runs here
        _sync(configs.Layout(scratch, venv, TEMPLATE_PORTS, {"admin": password, **unused}))
        staged = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=venv))
        for service, names in FILES.items():
            (staged / service).mkdir()
            for name in names:
                shutil.copy2(scratch / service / name, staged / service / name)
        (staged / "scratch-dir").write_text(str(scratch))
        pw_file = staged / ADMIN_PASSWORD_FILE
        pw_file.write_text(password)
        pw_file.chmod(0o600)
        try:
            staged.rename(final)
        except OSError:  # another process made it meanwhile: use theirs
            shutil.rmtree(staged, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    note(f"OpenStack databases synced in {time.monotonic() - started:.0f}s")
    return final


def install(template: Path, layout: configs.Layout) -> str:
    """Copy the template's databases into a cloud's work dir and point them at it.

    Returns Keystone's admin password."""
    old_dir = Path((template / "scratch-dir").read_text())
    for service, names in FILES.items():
        layout.dir(service).mkdir(parents=True, exist_ok=True)
        for name in names:
            shutil.copyfile(template / service / name, layout.dir(service) / name)
    old_url = configs.Layout(old_dir, layout.venv, TEMPLATE_PORTS, {}).keystone_url  # its URL
    _rewrite(
        layout.dir("keystone") / "keystone.db",
        "UPDATE endpoint SET url = ? WHERE url = ?",
        (layout.keystone_url, old_url),
        expected=3,  # public, internal, admin
    )
    _rewrite(
        layout.dir("nova") / "nova_api.db",
        "UPDATE cell_mappings SET database_connection = replace(database_connection, ?, ?)",
        (f"sqlite:///{old_dir}/nova/", f"sqlite:///{layout.dir('nova')}/"),
        expected=2,  # cell0, cell1
    )
    return (template / ADMIN_PASSWORD_FILE).read_text()


def fernet_keys(repo: Path) -> None:
    """What `keystone-manage fernet_setup` writes (a staged key 0, a primary key 1),
    without starting a process for it."""
    from cryptography.fernet import Fernet

    repo.mkdir(mode=0o700, parents=True)
    for index in (0, 1):
        key = repo / str(index)
        key.write_bytes(Fernet.generate_key())
        key.chmod(0o600)


def _rewrite(db: Path, sql: str, params: tuple[str, str], expected: int) -> None:
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        changed = conn.execute(sql, params).rowcount
    if changed != expected:
        raise CloudStartError(f"{db.name}: {sql!r} changed {changed} rows, not {expected}")


def _sync(layout: configs.Layout) -> None:
    """Every service's schema (and Keystone's bootstrap), the four services in parallel."""
    conf = {
        "keystone": configs.keystone(layout),
        "glance": configs.glance(layout),
        "placement": configs.placement(layout),
        "nova": configs.nova(layout),
    }
    bin_dir = layout.venv / "bin"

    def step(service: str, *argv: str, **env: str) -> None:
        d = layout.dir(service)
        processes.run_step(
            " ".join(argv),
            [str(bin_dir / argv[0]), "--config-file", str(conf[service]), *argv[1:]],
            cwd=d,
            env=processes.service_env(layout.venv, **env),
            log=d / "setup.log",
            timeout=STEP_TIMEOUT,
        )

    def keystone() -> None:
        url = layout.keystone_url
        step("keystone", "keystone-manage", "db_sync")
        step(
            "keystone", "keystone-manage", "bootstrap",
            "--bootstrap-region-id", configs.REGION,
            "--bootstrap-admin-url", url,
            "--bootstrap-internal-url", url,
            "--bootstrap-public-url", url,
            OS_BOOTSTRAP_PASSWORD=layout.passwords["admin"],  # never on a command line
        )  # fmt: skip

    def nova() -> None:
        step("nova", "nova-manage", "api_db", "sync")
        cell0 = f"sqlite:///{layout.dir('nova')}/nova_cell0.db"
        step("nova", "nova-manage", "cell_v2", "map_cell0", "--database_connection", cell0)
        step("nova", "nova-manage", "cell_v2", "create_cell", "--name", "cell1")
        step("nova", "nova-manage", "db", "sync")

    for service in FILES:
        layout.dir(service).mkdir(parents=True, exist_ok=True)
    fernet_keys(layout.dir("keystone") / "fernet-keys")
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="os-dbsync") as pool:
        futures = [
            pool.submit(keystone),
            pool.submit(step, "glance", "glance-manage", "db_sync"),
            pool.submit(step, "placement", "placement-manage", "db", "sync"),
            pool.submit(nova),
        ]
        for future in futures:
            future.result()
