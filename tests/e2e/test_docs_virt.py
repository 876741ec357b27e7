"""docs/virt.md's commands run as written: its JSON files written under the names the
page gives them, its shell blocks run in order by bash against a real `shoal serve`
(embedded default: the sim and its `vms` provider) with a temporary data dir."""

from __future__ import annotations

import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import httpx
import pytest

from tests.support.process import SHOAL, admin_headers, serving, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled, until

DOC = Path(__file__).resolve().parents[2] / "docs" / "virt.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)

pytestmark = [pytest.mark.slow]


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, body, the prose just before the block) for each fenced block."""
    out, end = [], 0
    for m in FENCE.finditer(text):
        out.append((m.group(1), m.group(2), text[end : m.start()]))
        end = m.end()
    return out


def files_and_scripts(text: str) -> tuple[dict[str, str], list[str]]:
    """The JSON files the page names (`with `X.json`` before the block) and its sh blocks."""
    files, scripts = {}, []
    for lang, body, before in blocks(text):
        if lang == "json":
            names = re.findall(r"`([\w.-]+\.json)`", before)
            assert names, f"a JSON block without a file name before it:\n{body}"
            files[names[-1]] = body
        elif lang == "sh":
            scripts.append(body)
    return files, scripts


def test_the_page_names_every_file_its_commands_read() -> None:
    files, scripts = files_and_scripts(DOC.read_text())
    read = set(re.findall(r"@([\w.-]+\.json)", "\n".join(scripts)))
    assert read and read <= set(files), f"read but never shown: {read - set(files)}"
    assert all("--vms" not in s for s in scripts)


def test_docs_virt_commands_run_as_written(tmp_path: Path) -> None:
    files, scripts = files_and_scripts(DOC.read_text())
    work = tmp_path / "work"
    work.mkdir()
    for name, body in files.items():
        (work / name).write_text(body)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = shoal_env(tmp_path / "data", SHOAL_SIM_TIME_SCALE="50", SHOAL_URL=url)
    env["PATH"] = f"{Path(SHOAL).parent}{os.pathsep}{env.get('PATH', '')}"
    with serving(env, port, tmp_path / "serve.log"):
        for script in scripts:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", script],
                cwd=work,
                env=env,
                capture_output=True,
                text=True,
                timeout=scaled(600),
                check=False,
            )
            assert done.returncode == 0, f"{script}\n---\n{done.stdout}{done.stderr}"
        with httpx.Client(base_url=f"{url}/v1", headers=admin_headers(env), timeout=30) as c:

            def status() -> str:
                return str(c.get("/clusters/edge").json()["status"])

            # the last `--wait` ends with its operation; the cluster's status follows
            until(lambda: status().endswith("COMPLETE"), progress=status, what="edge to settle",
                  idle=60)  # fmt: skip
            nodes = c.get("/clusters/edge/nodes").json()["nodes"]
    groups = Counter(n["nodegroup_name"] for n in nodes)
    assert groups == {"m": 3, "w": 2, "hosts": 3}
    hosts = {n["name"] for n in nodes if n["nodegroup_name"] == "hosts"}
    masters_on = Counter(n["availability_zone"] for n in nodes if n["nodegroup_name"] == "m")
    assert set(masters_on) == hosts, "the masters did not spread one per host"
