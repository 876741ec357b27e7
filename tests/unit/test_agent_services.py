"""The node agent's service supervisor, with real short-lived processes: start order
and readiness, restart with a bounded backoff, one-shot steps, a missing program,
stop / start / restart, and the manifest's rules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shoal.agent import services as s

DEADLINE_S = 30.0  # a bound on a stuck child: a fresh interpreter starts well within it


class Clock:
    """A clock the test moves (the supervisor's backoff is read from it)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def manifest(*entries: dict[str, Any]) -> s.Manifest:
    return s.parse({"version": 1, "services": list(entries)})


def until(sup: s.Supervisor, done: Callable[[], bool]) -> None:
    """Step `sup` until `done()` (bounded in time)."""
    end = time.monotonic() + DEADLINE_S
    while time.monotonic() < end:
        sup.step()
        if done():
            return
        time.sleep(0.02)
    raise AssertionError(f"not reached in {DEADLINE_S} s: {sup.report()}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "logs"


def test_a_service_starts_only_once_what_it_depends_on_is_ready(tmp_path: Path, logs: Path) -> None:
    flag = tmp_path / "a.ready"
    m = manifest(
        {
            "name": "a",
            "argv": ["sh", "-c", f"sleep 0.3; touch {flag}; exec sleep 30"],
            "ready": {"file": str(flag)},
        },
        {"name": "b", "argv": ["sleep", "30"], "depends_on": ["a"]},
    )
    sup = s.Supervisor(m, logs)
    try:
        sup.step()
        assert [r["state"] for r in sup.report()] == [s.STARTING, s.WAITING]
        assert sup.report()[1]["message"] == "waiting for a"
        until(sup, lambda: sup.state("b") == s.RUNNING)
        assert sup.state("a") == s.RUNNING and flag.exists()
        assert all(r["pid"] and alive(r["pid"]) for r in sup.report())
    finally:
        sup.close()
    assert [r["state"] for r in sup.report()] == [s.STOPPED, s.STOPPED]


def test_an_exiting_service_is_restarted_after_a_backoff_that_doubles_to_its_bound(
    logs: Path,
) -> None:
    clock = Clock()
    sup = s.Supervisor(
        manifest({"name": "bad", "argv": ["sh", "-c", "echo broken; exit 3"]}),
        logs,
        backoff=(1.0, 4.0),
        clock=clock,
    )
    delays = []
    for restarts in range(1, 5):
        until(sup, lambda n=restarts: sup.report()[0]["restarts"] == n)  # type: ignore[misc]
        run = sup.report()[0]
        assert run["state"] == s.BACKOFF and run["exit_code"] == 3 and run["pid"] is None
        sup.step()
        assert sup.state("bad") == s.BACKOFF  # not before its time
        delays.append(sup._runs["bad"].retry_at - clock.now)
        clock.now += delays[-1]
    assert delays == [1.0, 2.0, 4.0, 4.0]
    assert (logs / "bad.log").read_text().count("broken") == 4
    sup.close()


def test_a_run_that_lasted_resets_the_backoff(logs: Path) -> None:
    clock = Clock()
    sup = s.Supervisor(
        manifest({"name": "x", "argv": ["sh", "-c", "exit 1"]}),
        logs,
        backoff=(1.0, 8.0),
        stable_after=60.0,
        clock=clock,
    )
    until(sup, lambda: sup.report()[0]["restarts"] == 1)
    clock.now += 1.0
    sup.step()  # started again at now; it will "have run" 100 s when it is reaped
    clock.now += 100.0
    until(sup, lambda: sup.report()[0]["restarts"] == 2)
    assert sup._runs["x"].retry_at - clock.now == 1.0
    sup.close()


def test_a_oneshot_step_runs_until_it_succeeds_once(tmp_path: Path, logs: Path) -> None:
    marker, count = tmp_path / "tried", tmp_path / "count"
    script = f"echo x >> {count}; test -f {marker} || {{ touch {marker}; exit 1; }}"
    clock = Clock()
    sup = s.Supervisor(
        manifest({"name": "once", "argv": ["sh", "-c", script], "oneshot": True}),
        logs,
        clock=clock,
    )
    until(sup, lambda: sup.state("once") == s.BACKOFF)
    clock.now += 1.0
    until(sup, lambda: sup.state("once") == s.DONE)
    for _ in range(3):
        sup.step()
    assert count.read_text().count("x") == 2  # done is done: not run again
    assert sup.report()[0]["exit_code"] == 0
    sup.close()


def test_a_program_not_on_the_node_is_reported_missing_and_blocks_its_dependents(
    logs: Path,
) -> None:
    sup = s.Supervisor(
        manifest(
            {"name": "kubelet", "argv": ["shoal-no-such-kubelet", "--config=x"]},
            {"name": "after", "argv": ["sleep", "30"], "depends_on": ["kubelet"]},
        ),
        logs,
    )
    sup.step()
    first, second = sup.report()
    assert first["state"] == s.MISSING
    assert first["message"] == "shoal-no-such-kubelet is not on this node (not found on PATH)"
    assert second["state"] == s.WAITING and second["pid"] is None
    sup.close()


def test_stop_ends_the_whole_process_group_and_keeps_it_stopped_until_started(
    tmp_path: Path, logs: Path
) -> None:
    child_pid = tmp_path / "child.pid"
    sup = s.Supervisor(
        manifest({"name": "svc", "argv": ["sh", "-c", f"sleep 30 & echo $! > {child_pid}; wait"]}),
        logs,
    )
    until(sup, lambda: sup.state("svc") == s.RUNNING and child_pid.exists())
    until(sup, lambda: child_pid.read_text().strip() != "")
    parent, child = sup.report()[0]["pid"], int(child_pid.read_text())
    sup.stop(["svc"], grace=5.0)
    assert sup.state("svc") == s.STOPPED
    until(sup, lambda: not alive(parent) and not alive(child))
    sup.step()
    assert sup.state("svc") == s.STOPPED and sup.report()[0]["pid"] is None
    sup.start(["svc"])
    until(sup, lambda: sup.state("svc") == s.RUNNING)
    assert sup.report()[0]["pid"] != parent
    sup.close()


def test_restart_gives_a_new_process(logs: Path) -> None:
    sup = s.Supervisor(manifest({"name": "svc", "argv": ["sleep", "30"]}), logs)
    until(sup, lambda: sup.state("svc") == s.RUNNING)
    before = sup.report()[0]["pid"]
    sup.restart(["svc"], grace=5.0)
    after = sup.report()[0]["pid"]
    assert after is not None and after != before and not alive(before)
    with pytest.raises(KeyError, match="no such service: nope"):
        sup.restart(["nope"])
    sup.close()


def test_node_ip_is_filled_into_argv_and_env(tmp_path: Path, logs: Path) -> None:
    out = tmp_path / "out"
    m = manifest(
        {
            "name": "echo",
            "argv": ["sh", "-c", f'echo "$1 $IP" > {out}', "sh", "--ip=${node_ip}"],
            "env": {"IP": "${node_ip}"},
            "oneshot": True,
        }
    )
    sup = s.Supervisor(m, logs, facts={"node_ip": "192.0.2.7"})
    until(sup, lambda: sup.state("echo") == s.DONE)
    assert out.read_text() == "--ip=192.0.2.7 192.0.2.7\n"
    sup.close()


def test_the_node_ip_is_the_source_address_of_the_route() -> None:
    assert s.node_ip("127.0.0.1") == "127.0.0.1"


@pytest.mark.parametrize(
    ("ready", "expected"),
    [
        (None, True),
        ({"file": "/"}, True),
        ({"file": "/no/such/file"}, False),
        ({"command": ["true"]}, True),
        ({"command": ["false"]}, False),
        ({"command": ["shoal-no-such-program"]}, False),
        ({"tcp": "127.0.0.1:1"}, False),
    ],
)
def test_probes(ready: dict[str, Any] | None, expected: bool) -> None:
    assert s.probe(ready) is expected


BAD_MANIFESTS = [
    ({"services": []}, "version 1"),
    ({"version": 2, "services": []}, "version 1"),
    ({"version": 1, "services": {}}, "services must be a list"),
    ({"version": 1, "services": [{"argv": ["x"]}]}, r"services\[0\] needs a name"),
    ({"version": 1, "services": [{"name": "a", "argv": []}]}, "argv must be a non-empty list"),
    ({"version": 1, "services": [{"name": "a", "argv": "sleep"}]}, "argv must be"),
    (
        {"version": 1, "services": [{"name": "a", "argv": ["x"], "depends_on": ["b"]}]},
        r"depends on \['b'\], not listed before it",
    ),
    (
        {"version": 1, "services": [{"name": "a", "argv": ["x"]}, {"name": "a", "argv": ["y"]}]},
        "listed twice",
    ),
    (
        {"version": 1, "services": [{"name": "a", "argv": ["x"], "ready": {"http": "u"}}]},
        "ready must be one of",
    ),
    (
        {"version": 1, "services": [{"name": "a", "argv": ["x"], "env": {"A": 1}}]},
        "env must map names to strings",
    ),
]


@pytest.mark.parametrize(("doc", "message"), BAD_MANIFESTS)
def test_a_bad_manifest_is_refused_with_what_is_wrong(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        s.parse(doc)


def test_shoal_agent_runs_the_manifest_without_shoal_and_stops_it_on_sigterm(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "svc.pid"
    manifest_file = tmp_path / "services.json"
    manifest_file.write_text(
        json.dumps(
            {
                "version": 1,
                "services": [
                    {"name": "svc", "argv": ["sh", "-c", f"echo $$ > {pid_file}; exec sleep 30"]}
                ],
            }
        )
    )
    argv = [sys.executable, "-m", "shoal.agent.main", "--identity", str(tmp_path / "none.json")]
    argv += ["--services", str(manifest_file), "--state-dir", str(tmp_path / "state")]
    agent = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + DEADLINE_S
        while not (pid_file.exists() and pid_file.read_text().strip()):
            assert time.monotonic() < end and agent.poll() is None, "the service did not start"
            time.sleep(0.05)
        service_pid = int(pid_file.read_text())
        assert alive(service_pid)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=DEADLINE_S) == 0
        out = agent.stdout.read().decode() if agent.stdout else ""
        assert "cannot read the identity" in out
        end = time.monotonic() + DEADLINE_S
        while alive(service_pid):  # reaped by the agent: gone once it has exited
            assert time.monotonic() < end, "the service outlived the agent"
            time.sleep(0.05)
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait(timeout=DEADLINE_S)


def test_shoal_agent_refuses_a_bad_manifest(tmp_path: Path) -> None:
    manifest_file = tmp_path / "services.json"
    manifest_file.write_text('{"version": 1, "services": [{"name": "a"}]}')
    done = subprocess.run(
        [sys.executable, "-m", "shoal.agent.main", "--services", str(manifest_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"shoal-agent: cannot read the services {manifest_file}: "
        "service a: argv must be a non-empty list of strings"
    )
