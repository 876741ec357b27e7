"""The services' SQLite databases: made once per venv, then copied into each cloud.

Syncing the schemas takes nine `*-manage` runs (Nova's four alone import Nova
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

TEMPLATE_VERSION = 2  # 2: Heat's database
STEP_TIMEOUT = 180.0  # one *-manage run, on a loaded 2-core machine
# Where the template's services pretended to listen: only ever rewritten, never contacted.
TEMPLATE_PORTS = configs.Ports(keystone=1, glance=2, placement=3, nova=4)
FILES = {
    "keystone": ("keystone.db",),
    "glance": ("glance.db",),
    "placement": ("placement.db",),
    "nova": ("nova_api.db", "nova_cell0.db", "nova_cell1.db"),
    "heat": ("heat.db",),  # copied only into a cloud that starts Heat
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
        unused = dict.fromkeys(("glance", "placement", "nova", "heat"), "")  # no service runs here
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
        if service == "heat":
            continue  # install_heat(), when a test asks for Heat
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


def install_heat(template: Path, layout: configs.Layout) -> None:
    """Copy the template's Heat database into a cloud's work dir (it holds no URL)."""
    layout.dir("heat").mkdir(parents=True, exist_ok=True)
    for name in FILES["heat"]:
        shutil.copyfile(template / "heat" / name, layout.dir("heat") / name)


def _autoincrement(db: Path) -> None:
    """Give every table of Heat's SQLite database whose key is an integer `id`
    AUTOINCREMENT, so that SQLite never hands a freed id out again.

    Heat deletes rows (resource properties data) by id and may later write or delete
    through a stale id; SQLite, unlike MySQL or PostgreSQL, reuses a freed highest
    rowid, so the stale id hits another resource's row: the stack then stays
    *_IN_PROGRESS with null outputs."""
    with contextlib.closing(sqlite3.connect(db)) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        with conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
                )
            ]
            for table in tables:
                info = list(conn.execute(f"PRAGMA table_info({table})"))
                keys = [r for r in info if r[5]]
                if len(keys) != 1 or keys[0][1] != "id" or keys[0][2].upper() != "INTEGER":
                    continue
                (sql,) = conn.execute(
                    "SELECT sql FROM sqlite_master WHERE type='table' AND name=?", (table,)
                ).fetchone()
                if "AUTOINCREMENT" in sql:
                    continue
                new = sql.replace(f"CREATE TABLE {table}", f"CREATE TABLE {table}__new", 1)
                new = new.replace(
                    "\tid INTEGER NOT NULL,", "\tid INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,", 1
                )
                new = new.replace(", \n\tPRIMARY KEY (id)", "").replace(",\n\tPRIMARY KEY (id)", "")
                if "AUTOINCREMENT" not in new or "PRIMARY KEY (id)" in new:
                    raise CloudStartError(f"heat.db: cannot rewrite table {table}: {sql}")
                columns = ",".join(r[1] for r in info)
                indexes = [
                    r[0]
                    for r in conn.execute(
                        "SELECT sql FROM sqlite_master WHERE type='index' AND tbl_name=? "
                        "AND sql IS NOT NULL",
                        (table,),
                    )
                ]
                conn.execute(new)
                conn.execute(f"INSERT INTO {table}__new ({columns}) SELECT {columns} FROM {table}")
                conn.execute(f"DROP TABLE {table}")
                conn.execute(f"ALTER TABLE {table}__new RENAME TO {table}")
                for index in indexes:
                    conn.execute(index)


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
    """Every service's schema (and Keystone's bootstrap), the services in parallel."""
    conf = {
        "keystone": configs.keystone(layout),
        "glance": configs.glance(layout),
        "placement": configs.placement(layout),
        "nova": configs.nova(layout),
        "heat": configs.heat(layout),
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

    def heat() -> None:
        step("heat", "heat-manage", "db_sync")
        _autoincrement(layout.dir("heat") / "heat.db")

    for service in FILES:
        layout.dir(service).mkdir(parents=True, exist_ok=True)
    fernet_keys(layout.dir("keystone") / "fernet-keys")
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="os-dbsync") as pool:
        futures = [
            pool.submit(keystone),
            pool.submit(step, "glance", "glance-manage", "db_sync"),
            pool.submit(step, "placement", "placement-manage", "db", "sync"),
            pool.submit(nova),
            pool.submit(heat),
        ]
        for future in futures:
            future.result()
