"""A small, deterministic writer of single-layer OCI image archives.

`ctr images import` reads them: an `oci-layout` file, `index.json` and
`blobs/sha256/` (manifest, config, one uncompressed layer, so that the layer's
digest is also its diff_id), all in one tar. Every tar entry has mtime 0,
owner 0:0 and a sorted place, so the same inputs give the same digests.
containerd takes the image's full name from the `io.containerd.image.name`
annotation of the index; the manifest carries a linux/amd64 platform so that
ctr's default platform filter keeps it.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar"
DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Directories every container rootfs needs as mount points.
BASE_DIRS = ("dev", "etc", "proc", "sys", "tmp")


@dataclass(frozen=True)
class ImageSpec:
    ref: str  # the full name, e.g. "shoal.local/pause:3.4"
    entrypoint: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)  # path in image -> content (mode 0755)
    symlinks: dict[str, str] = field(default_factory=dict)  # path in image -> link target
    cmd: tuple[str, ...] = ()


@dataclass(frozen=True)
class WrittenImage:
    ref: str
    path: Path
    manifest_digest: str
    layer_size: int


def _entry(name: str, kind: bytes, mode: int, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, link
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    return info


def _tar(members: list[tuple[tarfile.TarInfo, bytes]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isfile() else None)
    return buf.getvalue()


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def layer_bytes(spec: ImageSpec) -> bytes:
    """The root filesystem as an uncompressed tar: directories first, then the rest, sorted."""
    files = {p.lstrip("/"): data for p, data in spec.files.items()}
    links = {p.lstrip("/"): target for p, target in spec.symlinks.items()}
    dirs = set(BASE_DIRS)
    for path in [*files, *links]:
        dirs.update(_parents(path))
    members = [
        (_entry(d, tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755), b"") for d in sorted(dirs)
    ]
    for path in sorted([*files, *links]):
        if path in files:
            members.append((_entry(path, tarfile.REGTYPE, 0o755, len(files[path])), files[path]))
        else:
            members.append((_entry(path, tarfile.SYMTYPE, 0o777, link=links[path]), b""))
    return _tar(members)


def _canonical(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def archive_bytes(spec: ImageSpec) -> tuple[bytes, str, int]:
    """(the archive, the manifest digest, the layer size) of one image."""
    layer = layer_bytes(spec)
    layer_digest = _digest(layer)
    container: dict[str, object] = {
        "Entrypoint": list(spec.entrypoint),
        "Env": [DEFAULT_PATH],
        "WorkingDir": "/",
    }
    if spec.cmd:
        container["Cmd"] = list(spec.cmd)
    config = _canonical(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": container,
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created_by": "shoal tests/harness/kubernetes/oci.py"}],
        }
    )
    manifest = _canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": CONFIG_TYPE, "digest": _digest(config), "size": len(config)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": len(layer)}],
        }
    )
    manifest_digest = _digest(manifest)
    tag = spec.ref.rsplit(":", 1)[1] if ":" in spec.ref.rsplit("/", 1)[-1] else "latest"
    index = _canonical(
        {
            "schemaVersion": 2,
            "manifests": [
                {
                    "mediaType": MANIFEST_TYPE,
                    "digest": manifest_digest,
                    "size": len(manifest),
                    "platform": {"architecture": "amd64", "os": "linux"},
                    "annotations": {
                        "io.containerd.image.name": spec.ref,
                        "org.opencontainers.image.ref.name": tag,
                    },
                }
            ],
        }
    )
    blobs = {_digest(b): b for b in (layer, config, manifest)}
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    for name, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)):
        members.append((_entry(name, tarfile.REGTYPE, 0o644, len(data)), data))
    members.append((_entry("blobs", tarfile.DIRTYPE, 0o755), b""))
    members.append((_entry("blobs/sha256", tarfile.DIRTYPE, 0o755), b""))
    for digest in sorted(blobs):
        data = blobs[digest]
        name = "blobs/sha256/" + digest.split(":", 1)[1]
        members.append((_entry(name, tarfile.REGTYPE, 0o644, len(data)), data))
    return _tar(members), manifest_digest, len(layer)


def write_image(spec: ImageSpec, out: Path) -> WrittenImage:
    data, manifest_digest, layer_size = archive_bytes(spec)
    out.write_bytes(data)
    return WrittenImage(spec.ref, out, manifest_digest, layer_size)
