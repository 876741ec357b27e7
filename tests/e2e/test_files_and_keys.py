"""Secrets and files at rest, with real `shoal serve` processes: the data directory
0700 and its databases 0600 (tightened when found looser), the secret key made on
first start, plaintext CA keys sealed on start, and a wrong or missing key
refused in one line before anything is served."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import httpx
from sqlalchemy import select, update

from shoal.db.engine import Database
from shoal.db.tables import ClusterCARow
from shoal.domain import sealing
from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port

IMAGE = "fedora-coreos-40"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _cluster_with_ca(port: int, data: Path) -> str:
    c = httpx.Client(base_url=f"http://127.0.0.1:{port}/v1", headers=admin_headers(shoal_env(data)))
    uid = c.post("/clusters", json={"name": "c", "image_id": IMAGE}).json()["uuid"]
    assert c.get(f"/certificates/{uid}").status_code == 200
    return str(uid)


def _stored_key(data: Path) -> str:
    db = Database(f"sqlite:///{data / 'shoal.db'}")
    try:
        with db.read() as s:
            return str(s.scalars(select(ClusterCARow.key_pem)).one())
    finally:
        db.close()


def test_a_new_data_dir_is_private_and_its_ca_keys_sealed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    with serving(shoal_env(data), port, tmp_path / "serve.log"):
        _cluster_with_ca(port, data)
        assert _mode(data) == 0o700
        made = sorted(p.name for p in data.iterdir())
        names = {"shoal.db", "shoal.db-wal", "shoal.db-shm", "sim.db", "secret.key", "admin-token"}
        assert names <= set(made)
        for name in made:
            assert _mode(data / name) == 0o600, (name, oct(_mode(data / name)))
    key = _stored_key(data)
    assert sealing.is_sealed(key) and "PRIVATE KEY" not in key
    secret = (data / "secret.key").read_text()
    assert "PRIVATE KEY" in sealing.Sealer(secret).open(key)


def test_loose_files_are_tightened_and_plaintext_keys_sealed_on_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    with serving(shoal_env(data), port, tmp_path / "first.log"):
        uid = _cluster_with_ca(port, data)
    # As an older shoal left it: a world-readable directory and files, the key in clear.
    secret = (data / "secret.key").read_text()
    plain = sealing.Sealer(secret).open(_stored_key(data))
    db = Database(f"sqlite:///{data / 'shoal.db'}")
    with db.write() as s:
        s.execute(update(ClusterCARow).values(key_pem=plain))
    db.close()
    data.chmod(0o755)
    for p in data.iterdir():
        p.chmod(0o644)
    port = free_port()
    with serving(shoal_env(data), port, tmp_path / "second.log"):
        assert _mode(data) == 0o700
        assert all(_mode(p) == 0o600 for p in data.iterdir()), [
            (p.name, oct(_mode(p))) for p in data.iterdir()
        ]
        key = _stored_key(data)
        assert sealing.is_sealed(key) and sealing.Sealer(secret).open(key) == plain
        # The CA still signs (same key, now sealed).
        r = httpx.patch(
            f"http://127.0.0.1:{port}/v1/certificates/{uid}",
            headers=admin_headers(shoal_env(data)),
        )
        assert r.status_code == 202


def test_a_wrong_or_missing_key_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    with serving(shoal_env(data), port, tmp_path / "serve.log"):
        _cluster_with_ca(port, data)
    for extra, words in [
        ({"SHOAL_SECRET_KEY": "w" * 40}, ("encrypted with secret key", "SHOAL_SECRET_KEY_FILE")),
        ({"SHOAL_SECRET_KEY_FILE": str(tmp_path / "nowhere")}, ("cannot be read", "nowhere")),
        ({"SHOAL_SECRET_KEY": "short"}, ("at least 32 characters",)),
    ]:
        done = subprocess.run(
            [SHOAL, "serve", "--port", str(free_port())],
            env=shoal_env(data, **extra),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, (extra, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
        assert all(w in lines[0] for w in words), lines[0]
        assert "serving on" not in done.stderr and "Traceback" not in done.stderr
    # The right key, given as a file elsewhere, works.
    moved = tmp_path / "operator.key"
    (data / "secret.key").rename(moved)
    port = free_port()
    env = shoal_env(data, SHOAL_SECRET_KEY_FILE=str(moved))
    with serving(env, port, tmp_path / "again.log"):
        r = httpx.get(f"http://127.0.0.1:{port}/v1/clusters/c", headers=admin_headers(env))
        assert r.status_code == 200
    assert not (data / "secret.key").exists()
