"""The tiny test guest (Debian's cloud kernel + a busybox initramfs), built once and cached.

The cache lives in ``${XDG_CACHE_HOME:-~/.cache}/shoal/libvirt-guest/<key>/`` where the key names
the kernel package, its version and a hash of the files that go into the initramfs, so a new
kernel or a changed ``guest/init`` builds a new guest and an unchanged one is reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD_SCRIPT = HERE / "build_guest.sh"
# everything that shapes the initramfs: a change to any of them is a new cache key
INITRD_INPUTS = (BUILD_SCRIPT, HERE / "guest" / "init", HERE / "guest" / "udhcpc.sh")
KERNEL_META_PACKAGE = "linux-image-cloud-amd64"


class GuestBuildError(RuntimeError):
    """The guest kernel or initramfs could not be built; the message says why."""


@dataclass(frozen=True)
class GuestImage:
    """A built guest: the paths go into a domain's <kernel> and <initrd>."""

    kernel: Path
    initrd: Path
    key: str


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shoal" / "libvirt-guest"


def _run(cmd: list[str], timeout: float) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GuestBuildError(f"{' '.join(cmd)}: {exc}") from exc
    if done.returncode != 0:
        raise GuestBuildError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _kernel_package() -> tuple[str, str]:
    """The versioned kernel package behind linux-image-cloud-amd64 and its candidate version."""
    deps = _run(["apt-cache", "depends", KERNEL_META_PACKAGE], timeout=60)
    names = [
        line.split(":", 1)[1].strip()
        for line in deps.splitlines()
        if line.strip().startswith("Depends: linux-image-")
    ]
    if not names:
        raise GuestBuildError(f"apt knows no kernel behind {KERNEL_META_PACKAGE}")
    show = _run(["apt-cache", "show", "--no-all-versions", names[0]], timeout=60)
    versions = [
        line.split(":", 1)[1].strip() for line in show.splitlines() if line.startswith("Version:")
    ]
    if not versions:
        raise GuestBuildError(f"apt knows no version of {names[0]}")
    return names[0], versions[0]


def _inputs_hash() -> str:
    digest = hashlib.sha256()
    for path in INITRD_INPUTS:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def _newest_cached(root: Path, suffix: str) -> GuestImage | None:
    built = [d for d in root.glob(f"*_{suffix}") if (d / "initrd.gz").is_file()]
    if not built:
        return None
    newest = max(built, key=lambda d: d.stat().st_mtime)
    return GuestImage(newest / "vmlinuz", newest / "initrd.gz", newest.name)


def ensure_guest(root: Path | None = None) -> GuestImage:
    """Return the cached guest for the current kernel package, building it on first use.

    When apt has no package lists yet, runs ``apt-get update`` once (root only). When apt cannot
    answer at all, falls back to the newest guest already cached for the same initramfs inputs.
    Concurrent callers build it once (a lock file), and a half-built guest is never visible.
    """
    root = root or cache_root()
    root.mkdir(parents=True, exist_ok=True)
    suffix = _inputs_hash()
    try:
        package, version = _kernel_package()
    except GuestBuildError as first:
        if os.geteuid() == 0 and shutil.which("apt-get"):
            try:
                _run(["apt-get", "update", "-qq"], timeout=300)
                package, version = _kernel_package()
            except GuestBuildError as again:
                cached = _newest_cached(root, suffix)
                if cached is None:
                    raise again from first
                return cached
        else:
            cached = _newest_cached(root, suffix)
            if cached is None:
                raise
            return cached
    key = f"{package}_{version}_{suffix}".replace(":", "-").replace("/", "-")
    final = root / key
    image = GuestImage(final / "vmlinuz", final / "initrd.gz", key)
    if image.initrd.is_file():
        return image
    with open(root / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the other builder finishes first; then it is there
        if image.initrd.is_file():
            return image
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
        try:
            _run(["bash", str(BUILD_SCRIPT), package, str(staging)], timeout=600)
            staging.chmod(0o755)
            staging.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return image
