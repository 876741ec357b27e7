"""Issue 26: the dashboard in a real browser (Debian's chromium) against a real
`shoal serve` on the sim: log in, watch a heterogeneous cluster come up live, remove a
named node, see a cloud's fault verbatim, a reader without buttons, another project's
cluster out of reach. SHOAL_UI_SCREENSHOTS=DIR saves the main views there (docs/ui/)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support import browser
from tests.support.browser import chromium
from tests.support.process import HEADERS, admin_headers, serving, shoal_env
from tests.support.server import free_port
from tests.support.waiting import scaled

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dashboard")]  # one server, one worker
POLL = 2.5  # a little more than the page's polling period
FAULT = "Build of instance aborted: PCI device 0000:3b:00.0 is not available (simulated)"
HETERO = {
    "name": "hetero",
    "image_id": "fedora-coreos-40",
    "flavor_id": "m1.small",
    "node_groups": [
        {"name": "masters", "role": "master", "flavor_id": "m1.medium", "node_count": 1},
        {"name": "gpu", "flavor_id": "g1.large", "node_count": 2,
         "availability_zones": ["az-1", "az-2"]},
        {"name": "ssd", "flavor_id": "s1.large", "node_count": 2},
    ],
}  # fmt: skip


class Shoal:
    """One `shoal serve` on the sim with its admin's API client."""

    def __init__(self, port: int, env: dict[str, str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.env = env
        self.log = log
        self.api = httpx.Client(base_url=self.url + "/v1", headers=admin_headers(env), timeout=30)

    def token(self, project: str, role: str) -> str:
        r = self.api.post("/tokens", json={"project_id": project, "role": role})
        assert r.status_code == 201, r.text
        return str(r.json()["token"])

    def status(self, cluster: str) -> str:
        return str(self.api.get(f"/clusters/{cluster}").json()["status"])

    def nodes(self, cluster: str, group: str) -> list[str]:
        r = self.api.get(f"/clusters/{cluster}/nodes", params={"nodegroup": group})
        return sorted(n["name"] for n in r.json()["nodes"])


@pytest.fixture(scope="module")
def shoal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shoal]:
    tmp = tmp_path_factory.mktemp("dashboard")
    # time scale 5: a 20 s simulated boot takes about 4 s, long enough to watch on a loaded machine
    # agents emulated on the sim: heartbeats, and operations with each node's output
    env = shoal_env(tmp / "data", SHOAL_SIM_TIME_SCALE="5", SHOAL_SIM_AGENTS="true")
    port = free_port()
    with serving(env, port, tmp / "serve.log"):
        yield Shoal(port, env, tmp / "serve.log")


def until(check: Callable[[], Any], timeout: float = 60, what: str = "") -> Any:
    deadline = time.monotonic() + scaled(timeout)  # stretched on a loaded machine
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def login(driver: Any, shoal: Shoal, token: str) -> None:
    browser.login(driver, shoal.url, token)


def screenshot(driver: Any, name: str) -> None:
    where = os.environ.get("SHOAL_UI_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(where) / f"{name}.png"))


def phases(driver: Any) -> dict[str, str]:
    """Every node row on screen: name -> phase."""
    got = driver.execute_script(
        "return [...document.querySelectorAll('tr[data-node]')]"
        ".map(r => [r.dataset.node, r.dataset.phase])"
    )
    return dict(got)


def text_of(driver: Any, css: str) -> str:
    return str(driver.execute_script(f"return document.querySelector({css!r})?.innerText || ''"))


def test_cluster_comes_up_live_and_a_named_node_goes(shoal: Shoal, tmp_path: Path) -> None:
    token = shoal.token("default", "member")
    with chromium(tmp_path) as driver:
        login(driver, shoal, token)
        assert driver.execute_script("return sessionStorage.length") == 1
        assert "token" not in driver.current_url.lower()
        r = shoal.api.post("/clusters", json=HETERO)
        assert r.status_code == 202, r.text
        uuid = r.json()["uuid"]
        until(lambda: driver.find_elements("css selector", f"tr[data-uuid='{uuid}']"), 20, "row")
        driver.find_element("link text", "hetero").click()
        driver.execute_script("window.__same_page = 1")  # a reload would lose it
        seen: dict[str, set[str]] = {}

        def all_ready() -> bool:
            now = phases(driver)
            for name, ph in now.items():
                seen.setdefault(name, set()).add(ph)
            return len(now) == 5 and set(now.values()) == {"ready"}

        until(all_ready, 90, "every node ready on screen")
        assert driver.execute_script("return window.__same_page") == 1
        # the rows changed on screen: nodes were seen before ready, without a reload
        assert any(len(p) > 1 for p in seen.values()), seen
        assert any(p & {"creating", "booting", "bootstrapping"} for p in seen.values()), seen
        until(lambda: "COMPLETE" in text_of(driver, "[data-field=status]"), 30, "status")
        screenshot(driver, "cluster")

        gpu = shoal.nodes("hetero", "gpu")
        victim, other = gpu[0], gpu[1]
        row = driver.find_element("css selector", f"tr[data-node='{victim}']")
        row.find_element("css selector", "button.remove").click()
        until(lambda: driver.find_element("id", "confirm").is_displayed(), 5, "the dialog")
        assert victim in text_of(driver, "#confirm-text")
        driver.find_element("id", "confirm-ok").click()
        until(lambda: victim not in phases(driver), 60, f"{victim} gone from the page")
        assert other in phases(driver)
        until(lambda: shoal.status("hetero").endswith("COMPLETE"), 60, "resize done")
        assert shoal.nodes("hetero", "gpu") == [other]
        assert set(phases(driver)) == {*shoal.nodes("hetero", "masters"), other,
                                       *shoal.nodes("hetero", "ssd")}  # fmt: skip
        driver.get(shoal.url + "/ui/#/")
        until(lambda: driver.find_elements("css selector", "#clusters tbody tr"), 20, "list")
        screenshot(driver, "clusters")
        # nothing the policy refused: no CSP violation, no script error, on any view
        severe = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert severe == [], severe
    assert token not in shoal.log.read_text()


def test_a_failing_group_shows_the_clouds_fault_verbatim(shoal: Shoal, tmp_path: Path) -> None:
    fault = {"kind": "server_error", "flavor": "g1.large", "message": FAULT}
    assert shoal.api.post("/sim/faults", json=fault).status_code == 201
    body = {**HETERO, "name": "faulty"}
    assert shoal.api.post("/clusters", json=body).status_code == 202
    try:
        with chromium(tmp_path) as driver:
            login(driver, shoal, shoal.token("default", "reader"))
            driver.get(shoal.url + "/ui/#/clusters/faulty")
            css = "section[data-group=gpu]"
            until(lambda: FAULT in text_of(driver, css), 90, "the fault in the gpu section")
            assert FAULT not in text_of(driver, "section[data-group=ssd]")
            screenshot(driver, "fault")
    finally:
        shoal.api.delete("/sim/faults")
        shoal.api.delete("/clusters/faulty")


def test_a_reader_sees_no_buttons_and_a_forced_action_gets_403(
    shoal: Shoal, tmp_path: Path
) -> None:
    body = {**HETERO, "name": "watched"}
    assert shoal.api.post("/clusters", json=body).status_code == 202
    until(lambda: shoal.status("watched").endswith("COMPLETE"), 90, "watched ready")
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("default", "reader"))
        assert not driver.find_elements("id", "nav-new")
        driver.get(shoal.url + "/ui/#/clusters/watched")
        until(lambda: len(phases(driver)) == 5, 30, "the nodes")
        assert driver.find_elements("css selector", "#groups button") == []
        assert driver.find_elements("css selector", "#cluster-actions button") == []
        # forced: the page's own action, called from the console
        driver.execute_async_script(
            "const done = arguments[0];"
            "import('/ui/js/actions.js').then(a => a.scale('watched', 'ssd', 5)).then(done)"
        )
        error = until(lambda: text_of(driver, "#error"), 10, "the refusal")
        assert "403" in error and "cluster:resize" in error, error
        assert len(shoal.nodes("watched", "ssd")) == 2


def test_another_projects_cluster_is_out_of_reach(shoal: Shoal, tmp_path: Path) -> None:
    body = {**HETERO, "name": "private", "node_groups": HETERO["node_groups"][:1]}
    r = shoal.api.post("/clusters", json=body)
    assert r.status_code == 202, r.text
    uuid = r.json()["uuid"]
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("team-b", "member"))
        assert not driver.find_elements("css selector", f"tr[data-uuid='{uuid}']")
        driver.get(shoal.url + f"/ui/#/clusters/{uuid}")
        error = until(lambda: text_of(driver, "#error"), 10, "the refusal")
        assert "404" in error and "could not be found" in error, error
        assert "private" not in text_of(driver, "main")


PHASE_TABLE = [
    ({"state": "PENDING"}, "creating", "-"),
    ({"state": "BUILDING"}, "booting", "-"),
    ({"state": "BUILDING", "address": "10.0.0.7"}, "bootstrapping", "-"),
    ({"state": "ACTIVE", "address": "10.0.0.7"}, "bootstrapping", "healthy"),
    ({"state": "ACTIVE", "ready_at": "2026-11-27T12:00:00+00:00"}, "ready", "healthy"),
    ({"state": "ACTIVE", "ready_at": "t", "reason": "its agent is silent"}, "ready", "unhealthy"),
    ({"state": "ACTIVE", "ready_at": "t", "repair_step": 1, "reason": "x"}, "ready", "repairing"),
    ({"state": "ERROR", "reason": "no valid host"}, "failed", "-"),
    ({"state": "DELETING"}, "deleting", "-"),
    ({"state": "ACTIVE", "ready_at": "t", "to_delete": True}, "deleting", "healthy"),
    ({"state": "SOMETHING-NEW"}, "unknown", "-"),
]


def test_phase_and_health_table_in_the_browser(shoal: Shoal, tmp_path: Path) -> None:
    """phase.js's rules on plain values, run by the browser's own module loader."""
    with chromium(tmp_path) as driver:
        driver.get(shoal.url + "/ui/")
        got = driver.execute_async_script(
            "const [rows, done] = arguments;"
            "import('/ui/js/phase.js').then(m => done(rows.map(r => [m.phase(r), m.health(r)])))",
            [node for node, _, _ in PHASE_TABLE],
        )
    assert [tuple(g) for g in got] == [(ph, hl) for _, ph, hl in PHASE_TABLE]


def test_a_virt_host_shows_its_vms_and_its_removal_warns_stronger(
    shoal: Shoal, tmp_path: Path
) -> None:
    body = {
        "name": "edge",
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "node_groups": [
            {"name": "m", "role": "master", "provider": "vms", "node_count": 1},
            {"name": "hosts", "role": "virt", "flavor_id": "bm.large", "node_count": 1,
             "vms": [{"id": "m0", "cpu": 2, "ram": 4, "nodegroup": "m"}]},
        ],
    }  # fmt: skip
    r = shoal.api.post("/clusters", json=body)
    assert r.status_code == 202, r.text
    until(lambda: shoal.status("edge").endswith("COMPLETE"), 90, "edge ready")
    (host,), (vm,) = shoal.nodes("edge", "hosts"), shoal.nodes("edge", "m")
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("default", "member"))
        driver.get(shoal.url + "/ui/#/clusters/edge")
        row = f"section[data-group=hosts] tr[data-node='{host}']"
        until(lambda: vm in text_of(driver, row + " .vms-on"), 30, "the host's VMs")
        # what its VM takes of the host's flavor (the sim's bm.large: 32 vCPU, 128 GiB)
        load = "2 of 32 vCPU, 4 of 128 GiB"
        until(lambda: load in text_of(driver, row + " .vms-on"), 30, "the host's load")
        assert '"nodegroup": "m"' in driver.execute_script(
            "return document.querySelector('section[data-group=hosts] pre.vms').textContent"
        )
        driver.find_element("css selector", row + " button.remove").click()
        until(lambda: driver.find_element("id", "confirm").is_displayed(), 5, "the dialog")
        warning = text_of(driver, "#confirm-strong")
        assert "virt host" in warning and vm in warning, warning
        assert not driver.find_element("id", "confirm-ok").is_enabled()
        driver.find_element("id", "confirm-type").send_keys(host)
        assert driver.find_element("id", "confirm-ok").is_enabled()
        screenshot(driver, "virt-host-warning")
        driver.find_element("id", "confirm-cancel").click()
        time.sleep(POLL)
        assert shoal.nodes("edge", "hosts") == [host]


def test_an_admin_switches_project(shoal: Shoal, tmp_path: Path) -> None:
    team_b = httpx.Client(
        base_url=shoal.url + "/v1",
        headers={**HEADERS, "X-Auth-Token": shoal.token("team-b", "member")},
    )
    body = {**HETERO, "name": "theirs", "node_groups": HETERO["node_groups"][:1]}
    r = team_b.post("/clusters", json=body)
    assert r.status_code == 202, r.text
    assert team_b.get("/clusters/theirs").json()["project_id"] == "team-b"
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("default", "admin"))
        theirs = "#clusters tr[data-name=theirs]"
        assert not driver.find_elements("css selector", theirs)
        until(lambda: driver.find_elements("css selector", "#project option[value=team-b]"), 10,
              "team-b offered")  # fmt: skip
        driver.find_element("css selector", "#project option[value=team-b]").click()
        until(lambda: driver.find_elements("css selector", theirs), 10, "team-b's cluster")
        assert not driver.find_elements("css selector", "#clusters tr[data-name=hetero]")
        driver.find_element("css selector", theirs + " a").click()
        until(lambda: "team-b" in text_of(driver, "[data-field=project_id]"), 10, "its page")


def test_an_operation_from_the_page_shows_each_nodes_output(shoal: Shoal, tmp_path: Path) -> None:
    body = {**HETERO, "name": "operated", "node_groups": HETERO["node_groups"][:1]}
    assert shoal.api.post("/clusters", json=body).status_code == 202
    until(lambda: shoal.status("operated").endswith("COMPLETE"), 90, "operated ready")
    (master,) = shoal.nodes("operated", "masters")
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("default", "member"))
        driver.get(shoal.url + "/ui/#/clusters/operated")
        until(lambda: phases(driver) == {master: "ready"}, 30, "the node")
        driver.find_element(
            "css selector", "#operation-kind option[value=restart-services]"
        ).click()
        driver.find_element("css selector", "#operation-group option[value=masters]").click()
        driver.find_element("id", "operation-start").click()
        row = "#operations-body tr"
        until(lambda: "SUCCEEDED" in text_of(driver, row), 60, "the operation done")
        assert "restart-services" in text_of(driver, row)
        assert "1 of 1 node(s) done" in text_of(driver, row)
        driver.find_element("css selector", row).click()
        until(lambda: master in text_of(driver, "#operation-detail"), 10, "its tasks")
        detail = text_of(driver, "#operation-detail tbody")
        assert "SUCCEEDED" in detail and "\t0\t" in detail, detail  # exit code 0
        until(lambda: "ago" in text_of(driver, f"tr[data-node='{master}']"), 30, "a heartbeat")
        screenshot(driver, "operation")


def test_create_from_a_template_scale_and_delete_from_the_page(
    shoal: Shoal, tmp_path: Path
) -> None:
    template = {
        "name": "small",
        "coe": "kubernetes",
        "image_id": "fedora-coreos-40",
        "flavor_id": "m1.small",
        "master_flavor_id": "m1.small",
        "external_network_id": "public",
    }
    member = httpx.Client(
        base_url=shoal.url + "/v1",
        headers={**HEADERS, "X-Auth-Token": shoal.token("default", "member")},
    )
    assert member.post("/clustertemplates", json=template).status_code == 201
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("default", "member"))
        driver.find_element("id", "nav-new").click()
        until(lambda: driver.find_elements("css selector", "#new-template option"), 10, "form")
        driver.find_element("id", "new-name").send_keys("made-here")
        driver.find_element("id", "new-workers").send_keys("1")
        driver.find_element("id", "create-submit").click()
        until(lambda: "made-here" in text_of(driver, "#cluster-name"), 20, "its page")
        until(lambda: set(phases(driver).values()) == {"ready"} and len(phases(driver)) == 2,
              60, "two nodes ready")  # fmt: skip
        assert shoal.api.get("/clusters/made-here").json()["cluster_template_id"]
        workers = "section[data-group=default-worker]"
        driver.find_element("css selector", workers + " button.scale-up").click()
        until(lambda: len(driver.find_elements("css selector", workers + " tr[data-node]")) == 2,
              30, "a second worker on screen")  # fmt: skip
        assert text_of(driver, workers + " .count") == "2"
        until(lambda: len(shoal.nodes("made-here", "default-worker")) == 2, 10, "two workers")
        driver.find_element("css selector", workers + " button.scale-down").click()
        until(lambda: len(driver.find_elements("css selector", workers + " tr[data-node]")) == 1,
              60, "back to one worker on screen")  # fmt: skip
        driver.find_element("id", "delete-cluster").click()
        until(lambda: driver.find_element("id", "confirm").is_displayed(), 5, "the dialog")
        driver.find_element("id", "confirm-type").send_keys("made-here")
        driver.find_element("id", "confirm-ok").click()
        until(lambda: driver.find_elements("id", "clusters"), 10, "back to the list")
        until(lambda: shoal.api.get("/clusters/made-here").status_code == 404, 60, "deleted")
        # the list's next refresh after the 404 takes the row away
        until(lambda: not driver.find_elements("css selector", "#clusters tr[data-name=made-here]"),
              15, "the deleted cluster's row gone from the list")  # fmt: skip
        assert text_of(driver, "#error") == ""


def test_upgrade_and_rollout_buttons_from_the_page(shoal: Shoal, tmp_path: Path) -> None:
    base = {"coe": "kubernetes", "flavor_id": "m1.small", "master_flavor_id": "m1.small",
            "external_network_id": "public"}  # fmt: skip
    for name, image in (("old40", "fedora-coreos-40"), ("new41", "fedora-coreos-41")):
        r = shoal.api.post("/clustertemplates", json={**base, "name": name, "image_id": image})
        assert r.status_code == 201, r.text
    body = {"name": "rolling", "cluster_template_id": "old40", "master_count": 1, "node_count": 1}
    assert shoal.api.post("/clusters", json=body).status_code == 202
    until(lambda: shoal.status("rolling").endswith("COMPLETE"), 90, "rolling ready")
    workers = "section[data-group=default-worker]"
    with chromium(tmp_path) as driver:
        login(driver, shoal, shoal.token("default", "member"))
        driver.get(shoal.url + "/ui/#/clusters/rolling")
        until(lambda: len(phases(driver)) == 2, 30, "the nodes")
        for verb in ("pause", "resume"):
            driver.find_element("id", f"rollout-{verb}").click()
            event = f"Rollout{verb.capitalize()}"
            until(lambda e=event: e in text_of(driver, "#events"), 20, f"the {verb} event")
        driver.find_element("id", "upgrade-template").send_keys("new41")
        driver.find_element("id", "upgrade").click()
        until(lambda: "fedora-coreos-41" in text_of(driver, workers + " [data-field=image_id]"),
              20, "the new image")  # fmt: skip
        until(lambda: shoal.status("rolling") == "UPDATE_COMPLETE", 120, "the upgrade done")
        until(lambda: text_of(driver, workers + " [data-field=rollout]") == "up to date",
              20, "the rollout done on screen")  # fmt: skip
    nodes = shoal.api.get("/clusters/rolling/nodes").json()["nodes"]
    assert {n["image_id"] for n in nodes} == {"fedora-coreos-41"}
