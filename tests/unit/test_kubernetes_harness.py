"""The Kubernetes harness's plain rules: reading apt sources, the OCI writer, when it can build."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import time
from pathlib import Path

import pytest

from tests.harness.kubernetes import apt_sources
from tests.harness.kubernetes.apt_sources import AptSource
from tests.harness.kubernetes.build import KubernetesUnavailable, _run_logged, why_not_buildable
from tests.harness.kubernetes.oci import ImageSpec, archive_bytes, layer_bytes

KEY = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEB822 = f"""\
Types: deb
# a comment inside the stanza
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main contrib
Signed-By: {KEY}

Types: deb-src
URIs: http://mirror.example/debian
Suites: bookworm
Components: main

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Enabled: no
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("# deb http://m/debian bookworm main\n", []),
        ("deb-src http://m/debian bookworm main\n", []),
        (
            "deb http://m/debian bookworm main\n",
            [AptSource("http://m/debian", "bookworm", ("main",))],
        ),
        (
            "deb [arch=amd64 signed-by=/k.gpg] http://m/d bookworm main non-free  # tail\n",
            [AptSource("http://m/d", "bookworm", ("main", "non-free"), "/k.gpg")],
        ),
        ("deb http://m/flat ./\n", []),  # a flat repository has no suite
    ],
)
def test_one_line_sources(text: str, expected: list[AptSource]) -> None:
    assert apt_sources.parse_one_line(text) == expected


def test_deb822_sources_expand_uris_and_suites_and_skip_disabled_and_src() -> None:
    assert apt_sources.parse_deb822(DEB822) == [
        AptSource("http://mirror.example/debian", "bookworm", ("main", "contrib"), KEY),
        AptSource("http://mirror.example/debian", "bookworm-updates", ("main", "contrib"), KEY),
    ]


@pytest.mark.parametrize(
    ("codename", "expected_suites"),
    [
        ("bookworm", ["bookworm", "bookworm-updates", "bookworm-security"]),
        ("trixie", []),
    ],
)
def test_deb_src_list_keeps_the_release_suites(codename: str, expected_suites: list[str]) -> None:
    sources = [
        AptSource("http://m/debian", "bookworm", ("main",), KEY),
        AptSource("http://m/debian", "bookworm", ("main",), KEY),  # listed twice: once out
        AptSource("http://m/debian", "bookworm-updates", ("main",)),
        AptSource("http://m/debian-security", "bookworm-security", ("main",)),
        AptSource("http://other/debian", "bullseye", ("main",)),
    ]
    text = apt_sources.deb_src_list(sources, codename)
    lines = text.splitlines()
    assert [line.split()[-2] for line in lines] == expected_suites
    assert all(line.startswith("deb-src ") for line in lines)
    if lines:
        assert lines[0] == f"deb-src [signed-by={KEY}] http://m/debian bookworm main"


def test_os_codename(tmp_path: Path) -> None:
    release = tmp_path / "os-release"
    release.write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_CODENAME=bookworm\n')
    assert apt_sources.os_codename(release) == "bookworm"
    assert apt_sources.os_codename(tmp_path / "missing") == ""


@pytest.mark.parametrize(
    ("euid", "os_release", "verdict"),
    [
        (0, 'ID=debian\nVERSION_ID="12"\n', ""),
        (1000, 'ID=debian\nVERSION_ID="12"\n', "needs root"),
        (
            0,
            'ID=debian\nVERSION_ID="11"\nPRETTY_NAME="Debian 11"\n',
            "needs Debian 12, not Debian 11",
        ),
        (0, 'ID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu"\n', "needs Debian 12, not Ubuntu"),
    ],
)
def test_why_not_buildable(tmp_path: Path, euid: int, os_release: str, verdict: str) -> None:
    path = tmp_path / "os-release"
    path.write_text(os_release)
    reason = why_not_buildable(path, euid=euid)
    assert (verdict in reason) if verdict else reason == ""


SPEC = ImageSpec(
    "shoal.local/tool:1",
    entrypoint=("/bin/tool",),
    files={"/bin/tool": b"#!tool\n", "/etc/motd": b"hi\n"},
    symlinks={"/bin/alias": "tool"},
    cmd=("--help",),
)


def _members(data: bytes) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {
            m.name: (m, tar.extractfile(m).read() if m.isfile() else b"")  # type: ignore[union-attr]
            for m in tar.getmembers()
        }


def test_layer_holds_the_files_links_and_base_dirs_with_zeroed_metadata() -> None:
    members = _members(layer_bytes(SPEC))
    assert list(members) == [
        "bin", "dev", "etc", "proc", "sys", "tmp", "bin/alias", "bin/tool", "etc/motd"
    ]  # fmt: skip
    assert members["bin/tool"][1] == b"#!tool\n"
    assert members["bin/alias"][0].linkname == "tool"
    assert members["tmp"][0].mode == 0o1777
    assert {(m.mtime, m.uid, m.gid, m.uname) for m, _ in members.values()} == {(0, 0, 0, "")}


def test_archive_is_deterministic_and_its_digests_check_out() -> None:
    data, manifest_digest, layer_size = archive_bytes(SPEC)
    assert archive_bytes(SPEC)[0] == data  # same inputs, same bytes
    members = _members(data)
    blobs = {
        name.rsplit("/", 1)[1]: body for name, (_, body) in members.items() if "sha256/" in name
    }
    assert all(hashlib.sha256(body).hexdigest() == name for name, body in blobs.items())
    index = json.loads(members["index.json"][1])
    (desc,) = index["manifests"]
    assert desc["digest"] == manifest_digest
    assert desc["annotations"]["io.containerd.image.name"] == "shoal.local/tool:1"
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == "1"
    manifest = json.loads(blobs[manifest_digest.split(":")[1]])
    (layer,) = manifest["layers"]
    assert layer["size"] == layer_size == len(layer_bytes(SPEC))
    config = json.loads(blobs[manifest["config"]["digest"].split(":")[1]])
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]  # uncompressed: digest is diff_id
    assert config["config"]["Entrypoint"] == ["/bin/tool"]
    assert config["config"]["Cmd"] == ["--help"]


def test_a_changed_file_changes_the_manifest_digest() -> None:
    other = ImageSpec(SPEC.ref, SPEC.entrypoint, {**SPEC.files, "/etc/motd": b"bye\n"})
    assert archive_bytes(other)[1] != archive_bytes(SPEC)[1]


def test_a_failed_build_step_reports_its_status_and_log_tail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "build.log"
    step = ["sh", "-c", "echo '@@ step one done'; echo 'go: no such package' >&2; exit 3"]
    with pytest.raises(KubernetesUnavailable) as caught:
        _run_logged(step, log, {"PATH": "/usr/bin:/bin"}, time.monotonic() + 30)
    assert "(status 3; log " in str(caught.value)
    assert str(caught.value).endswith("go: no such package")
    assert "[shoal kubernetes harness] step one done" in capsys.readouterr().err
    assert log.read_text().startswith("$ sh -c")


def test_a_silent_step_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(KubernetesUnavailable, match="was stopped"):
        _run_logged(["sleep", "30"], tmp_path / "log", {"PATH": "/usr/bin:/bin"}, started + 0.5)
    assert time.monotonic() - started < 10
