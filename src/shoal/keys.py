"""The operator's secret key, which seals secrets at rest (cluster CA private keys).

Where it comes from, first match wins:

1. `SHOAL_SECRET_KEY`: the key itself (at least 32 characters of random text);
2. `SHOAL_SECRET_KEY_FILE`: a file holding it (made by the operator, e.g.
   `openssl rand -base64 32 > /etc/shoal/secret.key; chmod 600 ...`);
3. `secret.key` in the data directory: the embedded default, made on first start
   (0600) when it does not exist.

Every process that reads or writes cluster CAs (`shoal serve`) must have the
same key; the database alone does not open them, and neither does a backup
of it. Lose the key and the CAs must be rotated.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from shoal.domain import sealing
from shoal.settings import Settings, SettingsError

KEY_FILE = "secret.key"
log = logging.getLogger(__name__)


def default_path(settings: Settings) -> Path:
    return settings.data_dir / KEY_FILE


def source(settings: Settings) -> str:
    """Where the key comes from, as an operator names it (no secret in it)."""
    if settings.secret_key:
        return "SHOAL_SECRET_KEY"
    if settings.secret_key_file:
        return f"SHOAL_SECRET_KEY_FILE={settings.secret_key_file}"
    return str(default_path(settings))


def load(settings: Settings, *, create: bool = True) -> sealing.Sealer:
    """The sealer for the configured key; the default key file is made when absent
    and `create`. SettingsError with one sentence on what to do otherwise."""
    if settings.secret_key:
        secret = settings.secret_key
    elif settings.secret_key_file:
        secret = _read(Path(settings.secret_key_file), "SHOAL_SECRET_KEY_FILE")
    else:
        path = default_path(settings)
        if not path.exists():
            if not create:
                raise SettingsError(
                    f"no secret key at {path}: set SHOAL_SECRET_KEY_FILE to the key file "
                    "the cluster CA keys were sealed with"
                )
            _create(path)
        else:
            _tighten(path)
        secret = _read(path, "the default key file")
    try:
        return sealing.Sealer(secret)
    except sealing.WeakSecret as exc:
        raise SettingsError(f"{source(settings)}: {exc}") from None


def _read(path: Path, what: str) -> str:
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise SettingsError(
            f"{what} {path} cannot be read ({exc.strerror}): point SHOAL_SECRET_KEY_FILE at "
            "the key file, or give the key in SHOAL_SECRET_KEY"
        ) from None
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        log.warning("secret key file %s is readable by others (mode %o): chmod 600 it", path, mode)
    return text


def _create(path: Path) -> None:
    """Write a fresh key to `path` (0600), unless another process wrote one first:
    the key is written to a temporary file and linked into place, which fails
    when the name exists, so every process ends with the same key."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(sealing.new_secret() + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return
        log.info(
            "made a secret key for cluster CA keys at %s: back it up apart from the database",
            path,
        )
    finally:
        tmp.unlink(missing_ok=True)


def _tighten(path: Path) -> None:
    """The default key file is shoal's own: 0600 whatever it was."""
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        path.chmod(0o600)
