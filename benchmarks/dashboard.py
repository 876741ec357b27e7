"""The dashboard at scale (issue 26): how long the page of a 1,000-node cluster takes to
show every node, and what its live updates cost the server while nothing changes.

The cost is measured twice: with the page's own polls from a real chromium (when one
can be had: Debian's chromium + chromium-driver and selenium from the test extras),
and with the same requests made by a plain HTTP client at the page's rate, which
needs no browser. Both subtract the server's idle CPU over the same time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.harness import ZERO_LATENCY, Deployment, check, cluster_body, wait_status
from benchmarks.scenarios import Row

POLL_S = 2.0  # the page's polling period (src/shoal/web/static/js/main.js POLL_MS)
RENDER_TARGET_S = 2.0
CPU_TARGET = 0.05  # a share of one core


def _page_requests(c: httpx.Client, uid: str, after: int) -> None:
    """One poll of the cluster page while something moves: what cluster.js asks every
    POLL_S (while nothing moves it skips the node list but every fifth time)."""
    base = f"/clusters/{uid}"
    check(c.get(base), 200)
    check(c.get(f"{base}/nodegroups/detail"), 200)
    check(c.get(f"{base}/nodes", params={"limit": 1000}), 200)
    check(c.get(f"{base}/events", params={"after": after, "limit": 500}), 200)
    check(c.get(f"{base}/operations"), 200)


def _share(dep: Deployment, seconds: float, during: Any = None) -> float:
    """The deployment's CPU over `seconds` as a share of one core (`during` runs meanwhile)."""
    t0, cpu0 = time.monotonic(), dep.cpu_seconds()
    if during is None:
        time.sleep(seconds)
    else:
        during(seconds)
    return (dep.cpu_seconds() - cpu0) / (time.monotonic() - t0)


def dashboard(nodes: int = 1000, idle_s: float = 30.0) -> list[Row]:
    rows: list[Row] = []
    with Deployment(env_extra=ZERO_LATENCY) as dep, dep.client() as c:
        body = cluster_body("ui", 1, nodes - 3)
        uid = check(c.post("/clusters", json=body), 202)["uuid"]
        wait_status(c, [uid], "CREATE_COMPLETE", timeout=900)
        time.sleep(3)  # the last passes settle
        after = max([e["id"] for e in c.get(f"/clusters/{uid}/events").json()["events"]] or [0])
        idle = _share(dep, idle_s)

        def poll(seconds: float) -> None:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                t = time.monotonic()
                _page_requests(c, uid, after)
                time.sleep(max(0.0, POLL_S - (time.monotonic() - t)))

        polled = _share(dep, idle_s, poll) - idle
        rows.append(
            Row(
                "dashboard polls (HTTP)",
                nodes,
                idle_s,
                target=f"< {CPU_TARGET:.0%} of a core",
                ok=polled < CPU_TARGET,
                note=f"the page's requests every {POLL_S:g} s, the node list each time (its "
                f"rate while something moves): {polled:.1%} of a core over idle {idle:.1%}",
            )
        )
        rows += _in_browser(dep, uid, nodes, idle_s, idle)
    return rows


def _in_browser(dep: Deployment, uid: str, nodes: int, idle_s: float, idle: float) -> list[Row]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support
    try:
        from tests.support.browser import BrowserUnavailable, open_chromium
    except ImportError as exc:
        return [Row("dashboard page", nodes, 0.0, note=f"no browser: {exc}")]
    token = (dep.workdir / "data" / "admin-token").read_text().strip()
    try:
        with open_chromium(dep.workdir) as driver:
            driver.get(dep.url + "/ui/")
            driver.execute_script("sessionStorage.setItem('shoal.token', arguments[0])", token)
            t0 = time.monotonic()
            driver.get(f"{dep.url}/ui/#/clusters/{uid}")
            driver.refresh()  # the fragment alone does not reload the page
            count = "return document.querySelectorAll('tr[data-node]').length"
            while driver.execute_script(count) < nodes:
                if time.monotonic() - t0 > 60:
                    raise RuntimeError("the page did not show every node within 60 s")
                time.sleep(0.02)
            render = time.monotonic() - t0
            page = _share(dep, idle_s) - idle
    except BrowserUnavailable as exc:
        return [Row("dashboard page", nodes, 0.0, note=f"no browser: {exc}")]
    return [
        Row(
            "dashboard page render",
            nodes,
            render,
            target=f"< {RENDER_TARGET_S:g} s",
            ok=render < RENDER_TARGET_S,
            note="from loading the page to every node row on screen (headless chromium)",
        ),
        Row(
            "dashboard page idle",
            nodes,
            idle_s,
            target=f"< {CPU_TARGET:.0%} of a core",
            ok=page < CPU_TARGET,
            note=f"the open page's live updates: {page:.1%} of a core over idle {idle:.1%}",
        ),
    ]
