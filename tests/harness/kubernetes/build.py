"""Kubernetes binaries and test images, built once from Debian's source package and cached.

`ensure_binaries()` returns `${XDG_CACHE_HOME:-~/.cache}/shoal/kubernetes-<source
version>-<recipe hash>/bin`. A missing cache is built (as root on Debian 12 only):
apt installs the tools and runtimes (no packaged service starts: policy-rc.d),
build_kubernetes.sh fetches the source package through a private deb-src list
derived from the machine's own apt sources, applies the two fixes and builds each
binary, then this module writes the OCI image archives (oci.py). The build happens
in a temp dir that is renamed when complete, under a file lock, with a log beside
it; the Go build cache is kept in `kubernetes-gocache` so a recipe change rebuilds
in minutes, not ten.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.harness.kubernetes import apt_sources
from tests.harness.kubernetes.oci import ImageSpec, write_image

HERE = Path(__file__).resolve().parent
RECIPE = HERE / "build_kubernetes.sh"
OCI_WRITER = HERE / "oci.py"

SOURCE_VERSION = "1.20.5+really1.20.2-1.1+deb12u1"  # Debian 12's `kubernetes` source package
KUBE_VERSION = "v1.20.2"
KUBE_COMMIT = "faecb196815e248d3ecfb03c680a4507229c2a56"  # upstream's v1.20.2 tag
PAUSE_VERSION = "3.4"  # build/pause/Makefile's TAG in this tree
BINARIES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kubeadm",
    "kubectl",
    "kube-proxy",
)
APT_PACKAGES = (
    "golang-go",
    "etcd-server",
    "dpkg-dev",
    "containerd",
    "runc",
    "containernetworking-plugins",
    "busybox-static",
    "gcc",
    "libc6-dev",
    "iproute2",
    "util-linux",
    "cloud-init",  # runs the user data in the local driver's machines (shoal.drivers.local)
)
# Local names: containerd never pulls them (imagePullPolicy: Never; sandbox_image set).
PAUSE_IMAGE = f"shoal.local/pause:{PAUSE_VERSION}"
BUSYBOX_IMAGE = "shoal.local/busybox:1"
BUSYBOX = Path("/bin/busybox")  # busybox-static
BUSYBOX_APPLETS = ("sh", "sleep", "echo", "cat", "ls", "wget", "hostname", "ip", "httpd", "nc")
STAMP = "BUILD-INFO"
BUILD_TIMEOUT = 3600.0  # seconds for the whole build on a loaded 2-core machine
LOCK_TIMEOUT = 3900.0  # seconds to wait for another process's build
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")


class KubernetesUnavailable(RuntimeError):
    """The binaries are missing and cannot be built here (not root, not Debian 12, ...)."""


def note(msg: str) -> None:
    print(f"[shoal kubernetes harness] {msg}", file=sys.stderr, flush=True)


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shoal"


def recipe_hash() -> str:
    """Covers everything that decides the output: the recipe, the image writer, the pins."""
    h = hashlib.sha256()
    h.update(RECIPE.read_bytes())
    h.update(OCI_WRITER.read_bytes())
    pins = (SOURCE_VERSION, KUBE_VERSION, KUBE_COMMIT, PAUSE_VERSION, PAUSE_IMAGE, BUSYBOX_IMAGE)
    h.update(repr((pins, BINARIES, BUSYBOX_APPLETS)).encode())
    return h.hexdigest()[:12]


def cache_dir() -> Path:
    return cache_root() / f"kubernetes-{SOURCE_VERSION}-{recipe_hash()}"


def is_complete(root: Path) -> bool:
    needed = [root / STAMP, *(root / "bin" / b for b in (*BINARIES, "pause"))]
    return all(p.is_file() for p in needed) and all(p.is_file() for p in _image_paths(root))


def _image_paths(root: Path) -> list[Path]:
    return [root / "images" / _archive_name(ref) for ref in (PAUSE_IMAGE, BUSYBOX_IMAGE)]


def _archive_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1].replace(":", "-") + ".oci.tar"


def why_not_buildable(os_release: Path = Path("/etc/os-release"), euid: int | None = None) -> str:
    """Why this machine cannot build the cache, or "" when it can."""
    if (os.geteuid() if euid is None else euid) != 0:
        return "building Kubernetes needs root (apt-get install, then go build)"
    fields: dict[str, str] = {}
    if os_release.is_file():
        for line in os_release.read_text().splitlines():
            key, _, value = line.partition("=")
            fields[key] = value.strip().strip('"')
    if fields.get("ID") != "debian" or fields.get("VERSION_ID") != "12":
        return f"building Kubernetes needs Debian 12, not {fields.get('PRETTY_NAME', 'unknown')}"
    if shutil.which("apt-get") is None:
        return "building Kubernetes needs apt-get"
    return ""


def images() -> dict[str, Path]:
    """The test images, image reference -> OCI archive for `ctr images import`."""
    root = ensure_binaries().parent
    return {
        ref: path
        for ref, path in zip((PAUSE_IMAGE, BUSYBOX_IMAGE), _image_paths(root), strict=True)
    }


def ensure_binaries() -> Path:
    """The bin dir of a complete cache, built first when missing (see the module doc)."""
    final = cache_dir()
    if is_complete(final):
        if not why_not_buildable() and any(not _installed(p) for p in APT_PACKAGES):
            # A cache from before a package was added (cloud-init): install what is missing.
            log = cache_root() / f"{final.name}.packages.log"
            install_packages(log, time.monotonic() + BUILD_TIMEOUT)
        return final / "bin"
    reason = why_not_buildable()
    if reason:
        raise KubernetesUnavailable(f"{final} is missing and {reason}")
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{final.name}.lock", final):
        if not is_complete(final):  # another process may have built it meanwhile
            _build(final, root / f"{final.name}.build.log")
    return final / "bin"


@contextmanager
def _locked(lock_path: Path, what: Path) -> Iterator[None]:
    with lock_path.open("w") as lock:
        deadline = time.monotonic() + LOCK_TIMEOUT
        noted = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not noted:
                    note(f"waiting for another process to finish building {what}")
                    noted = True
                if time.monotonic() > deadline:
                    raise KubernetesUnavailable(
                        f"{lock_path} was held for more than {LOCK_TIMEOUT:.0f}s"
                    ) from None
                time.sleep(2.0)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _log_tail(log: Path, lines: int = 20) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _run_logged(argv: list[str], out: Path, env: dict[str, str], deadline: float) -> None:
    """Run argv with its output appended to the log; relay its "@@ " progress lines."""
    with out.open("a") as log:
        log.write(f"$ {' '.join(argv)}\n")
        log.flush()
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        assert proc.stdout is not None
        # A silent step (one long `go build`) is ended at the deadline all the same.
        watchdog = threading.Timer(max(deadline - time.monotonic(), 1.0), _kill_group, [proc])
        watchdog.start()
        try:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                if line.startswith("@@ "):
                    note(line[3:].rstrip())
            status = proc.wait()
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            watchdog.cancel()
    if time.monotonic() >= deadline:
        raise KubernetesUnavailable(
            f"the build took more than {BUILD_TIMEOUT:.0f}s and was stopped; see {out}"
        )
    if status != 0:
        raise KubernetesUnavailable(
            f"`{' '.join(argv[:3])}` failed (status {status}; log {out}):\n{_log_tail(out)}"
        )


def _kill_group(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextmanager
def _services_held_back() -> Iterator[None]:
    """policy-rc.d says "exit 101" so no package's service starts during apt-get install."""
    if POLICY_RC_D.exists():
        yield
        return
    POLICY_RC_D.write_text("#!/bin/sh\n# shoal kubernetes harness: no service starts\nexit 101\n")
    POLICY_RC_D.chmod(0o755)
    try:
        yield
    finally:
        POLICY_RC_D.unlink(missing_ok=True)


def install_packages(log: Path, deadline: float) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    missing = [p for p in APT_PACKAGES if not _installed(p)]
    if not missing:
        return
    note(f"apt-get install {' '.join(missing)}")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends"]
    install += ["-o", "DPkg::Lock::Timeout=600", *missing]
    with _services_held_back():
        try:
            _run_logged(install, log, env, deadline)
        except KubernetesUnavailable:  # stale package lists: refresh once and retry
            _run_logged(["apt-get", "update", "-q"], log, env, deadline)
            _run_logged(install, log, env, deadline)


def _installed(package: str) -> bool:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f", "${db:Status-Status}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() == "installed"


def write_images(out: Path) -> dict[str, Path]:
    """The pause image (the name containerd's sandbox_image uses) and a busybox image."""
    (out / "images").mkdir(parents=True, exist_ok=True)
    pause = ImageSpec(
        PAUSE_IMAGE, entrypoint=("/pause",), files={"/pause": (out / "bin" / "pause").read_bytes()}
    )
    busybox = ImageSpec(
        BUSYBOX_IMAGE,
        entrypoint=("/bin/sh",),
        files={"/bin/busybox": BUSYBOX.read_bytes()},
        symlinks={f"/bin/{applet}": "busybox" for applet in BUSYBOX_APPLETS},
    )
    written = {}
    for spec, path in zip((pause, busybox), _image_paths(out), strict=True):
        image = write_image(spec, path)
        note(f"image {image.ref} {image.manifest_digest[:19]} ({path.stat().st_size} bytes)")
        written[image.ref] = path
    return written


def _build(final: Path, log: Path) -> None:
    started = time.monotonic()
    deadline = started + BUILD_TIMEOUT
    log.write_text("")
    note(
        f"building Kubernetes {KUBE_VERSION} from Debian's source package {SOURCE_VERSION} "
        f"into {final} (once; about 5-15 min of CPU; log: {log})"
    )
    install_packages(log, deadline)
    src_list = apt_sources.deb_src_list(apt_sources.machine_sources(), apt_sources.os_codename())
    if not src_list:
        raise KubernetesUnavailable(
            "found no `deb` entry for this release in /etc/apt/sources.list(.d); "
            "add the Debian archive there so the harness can fetch the source package"
        )
    for stale in final.parent.glob(f"{final.name}.tmp-*"):  # a build that was killed
        shutil.rmtree(stale, ignore_errors=True)
    gocache = cache_root() / "kubernetes-gocache"
    gocache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{final.name}.tmp-", dir=final.parent) as tmp:
        work, out = Path(tmp) / "work", Path(tmp) / "out"
        work.mkdir()
        (work / "deb-src.list").write_text(src_list)
        env = dict(
            os.environ,
            SRC_LIST=str(work / "deb-src.list"),
            SOURCE_VERSION=SOURCE_VERSION,
            KUBE_VERSION=KUBE_VERSION,
            KUBE_COMMIT=KUBE_COMMIT,
            PAUSE_VERSION=PAUSE_VERSION,
            BINARIES=" ".join(BINARIES),
            GOCACHE=str(gocache),
            DEBIAN_FRONTEND="noninteractive",
        )
        argv = ["nice", "-n", "19", "bash", str(RECIPE), str(work), str(out)]
        _run_logged(argv, log, env, deadline)
        write_images(out)
        go = subprocess.run(["go", "version"], capture_output=True, text=True, check=False)
        elapsed = time.monotonic() - started
        (out / STAMP).write_text(
            f"Kubernetes {KUBE_VERSION} from Debian source {SOURCE_VERSION}, recipe "
            f"{recipe_hash()}, {go.stdout.strip()}, built in {elapsed:.0f}s\n"
        )
        if final.exists():  # a stale, incomplete copy (is_complete said no)
            shutil.rmtree(final)
        out.rename(final)
    note(f"Kubernetes binaries ready in {elapsed:.0f}s: {final / 'bin'}")
