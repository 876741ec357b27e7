"""cloud-init's own JSON schema for `#cloud-config`, from Debian's cloud-init package.

`validator()` returns a validator of cloud-config documents the way `cloud-init
schema` checks them (JSON Schema draft 4; bytes count as strings). The schema is
extracted from the package's .deb, downloaded once with `apt-get download` into
`${XDG_CACHE_HOME:-~/.cache}/shoal/cloud-init/` (nothing is installed). Skips when
the package cannot be had, fails instead under CI=true.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest

MEMBER = "cloudinit/config/schemas/schema-cloud-config-v1.json"
TIMEOUT_S = 180


def _cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shoal" / "cloud-init"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs cloud-init's schema (apt-get download cloud-init): {reason}")
    pytest.skip(f"cloud-init's schema cannot be had here: {reason}")


def schema_path() -> Path:
    """The schema file, fetched and extracted on first use."""
    cache = _cache()
    target = cache / "schema-cloud-config-v1.json"
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    debs = sorted(cache.glob("cloud-init_*.deb"))
    if not debs:
        try:
            done = subprocess.run(
                ["apt-get", "download", "cloud-init"],
                cwd=cache,
                capture_output=True,
                text=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _unavailable(f"apt-get download cloud-init: {exc}")
        debs = sorted(cache.glob("cloud-init_*.deb"))
        if not debs:
            _unavailable(f"apt-get download cloud-init: {done.stderr.strip()[-300:]}")
    try:
        data = subprocess.run(
            ["dpkg-deb", "--fsys-tarfile", str(debs[-1])],
            capture_output=True,
            timeout=TIMEOUT_S,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        _unavailable(f"dpkg-deb --fsys-tarfile {debs[-1].name}: {exc}")
    tmp = target.with_suffix(".tmp")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = next((m for m in tar.getmembers() if m.name.endswith(MEMBER)), None)
        if member is None:
            _unavailable(f"{debs[-1].name} has no {MEMBER}")
        extracted = tar.extractfile(member) if member is not None else None
        if extracted is None:
            _unavailable(f"{MEMBER} is not a file in {debs[-1].name}")
        tmp.write_bytes(extracted.read() if extracted is not None else b"")
    tmp.replace(target)
    return target


def validator() -> Any:
    """A draft-4 validator of cloud-init's schema, as `cloud-init schema` checks."""
    try:
        import jsonschema
    except ImportError as exc:  # the test extra pins it
        _unavailable(f"jsonschema is not installed ({exc}); pip install -e .[test]")
    schema = json.loads(schema_path().read_text())
    checker = jsonschema.Draft4Validator.TYPE_CHECKER.redefine(
        "string", lambda _c, v: isinstance(v, str | bytes)
    )
    cls = jsonschema.validators.extend(jsonschema.Draft4Validator, type_checker=checker)
    return cls(schema, format_checker=jsonschema.FormatChecker())
