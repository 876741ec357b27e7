# ruff: noqa: E501  (the bad-input table reads best one case per line)
"""Bad input, error shape, microversions, pagination, project isolation and quota,
through real HTTP on SQLite and PostgreSQL. Every refusal is a 4xx in Magnum's
error shape and stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from tests.integration.api_support import Api, api_server, db_of, row_counts, seed_nodes
from tests.support.server import LiveServer


@pytest.fixture(scope="module")
def world(server: LiveServer) -> Api:
    """One project with a template `k8s`, a cluster `c1` (ng `gpu`, max 4) and nodes."""
    api = Api(server, project="errors", role="admin")  # the bad-input table has quota rows
    api.template(name="k8s")
    c = api.cluster(name="c1", cluster_template_id="k8s", node_count=2)
    api.ok("POST", "/clusters/c1/nodegroups", 202, json={
        "name": "gpu", "node_count": 1, "max_node_count": 4})  # fmt: skip
    seed_nodes(server, api.groups(c["uuid"])["default-worker"]["uuid"], 2)
    return api


def assert_magnum_error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["errors"][0]
    assert set(err) >= {"request_id", "code", "status", "title", "detail", "links"}
    assert err["status"] == status and err["code"] == ("server" if status >= 500 else "client")
    assert err["request_id"] == r.headers["X-OpenStack-Request-Id"]
    assert err["request_id"].startswith("req-") and err["title"]
    return dict(err)


CL = "/clusters"
NG = "/clusters/c1/nodegroups"
IMG = {"image_id": "fedora-coreos-40"}
RESIZE = "/clusters/c1/actions/resize"
HUGE = "99999999999999999999999"  # beyond INTEGER on SQLite (int64) and PostgreSQL (int4)
MANY_DIGITS = "1" * 5000  # past int()'s 4,300-digit limit
# Python-literal strings that overwhelm ast.literal_eval: RecursionError, MemoryError.
DEEP_SUM = "[" + "1+" * 100_000 + "1]"
DEEP_MINUS = "[" + "-" * 100_000 + "1]"


def _ng(**kw: Any) -> dict[str, Any]:
    return {
        "name": "bad",
        "node_groups": [{"name": "m", "role": "master"}, {"name": "w", **kw}],
        **IMG,
    }


BAD_INPUTS: list[tuple[str, str, str, Any, int, str]] = [
    # (id, method, path, json body, status, words the message must contain)
    ("wrong type image", "POST", CL, {"name": "x", "image_id": 5}, 400, "image_id must be a string"),
    ("wrong type count", "POST", CL, {"name": "x", "node_count": "three", **IMG}, 400, "node_count"),
    ("bool as count", "POST", CL, {"name": "x", "node_count": True, **IMG}, 400, "node_count"),
    ("unknown field", "POST", CL, {"name": "x", "foo": 1, **IMG}, 400, "Unknown attribute"),
    ("negative count", "POST", CL, {"name": "x", "node_count": -1, **IMG}, 400, ">= 0"),
    ("no master", "POST", CL, {"name": "x", "master_count": 0, **IMG}, 400, "master_count"),
    ("min > max", "POST", CL, _ng(min_node_count=3, max_node_count=2, node_count=2), 409, "max_node_count"),
    ("count > max", "POST", CL, _ng(node_count=5, max_node_count=2), 409, "node_count (5)"),
    ("count < min", "POST", CL, _ng(node_count=1, min_node_count=2), 409, "min_node_count (2)"),
    ("bad taint effect", "POST", CL, _ng(node_taints=[{"key": "a", "value": "b", "effect": "Never"}]), 400, "effect"),
    ("bad taint shape", "POST", CL, _ng(node_taints={"a": "b"}), 400, "node_taints"),
    ("name digit", "POST", CL, {"name": "1abc", **IMG}, 400, "name"),
    ("name space", "POST", CL, {"name": "a b", **IMG}, 400, "name"),
    ("name too long", "POST", CL, {"name": "a" * 243, **IMG}, 400, "242"),
    ("name empty", "POST", CL, {"name": "", **IMG}, 400, "name"),
    ("group name", "POST", CL, _ng(name="-w"), 400, "name"),
    ("dup group", "POST", CL, {"name": "x", "node_groups": [{"name": "a", "role": "master"}, {"name": "a"}], **IMG}, 409, "already exists"),
    ("unknown template", "POST", CL, {"name": "x", "cluster_template_id": "nope"}, 404, "nope"),
    ("unknown source", "POST", CL, {"name": "x", "from_cluster": "nope"}, 404, "nope"),
    ("both sources", "POST", CL, {"name": "x", "cluster_template_id": "k8s", "from_cluster": "c1"}, 400, "not both"),
    ("no image", "POST", CL, {"name": "x"}, 400, "image_id"),
    ("labels list", "POST", CL, {"name": "x", "labels": ["a"], **IMG}, 400, "labels"),
    ("azs not list", "POST", CL, _ng(availability_zones=5), 400, "availability_zones"),
    ("rollout zeros", "POST", CL, _ng(rollout={"max_surge": 0, "max_unavailable": 0}), 400, "both be 0"),
    ("rollout negative", "POST", CL, _ng(rollout={"max_surge": -1}), 400, "max_surge"),
    ("rollout unknown", "POST", CL, _ng(rollout={"speed": 1}), 400, "speed"),
    ("deletion policy", "POST", CL, _ng(deletion_policy="random"), 400, "deletion_policy"),
    ("health percent", "POST", CL, _ng(health_policy={"max_unhealthy_percent": 101}), 400, "100"),
    ("group unknown key", "POST", CL, _ng(colour="red"), 400, "colour"),
    ("timeout negative", "POST", CL, {"name": "x", "create_timeout": -5, **IMG}, 400, "create_timeout"),
    ("body is list", "POST", CL, [1], 400, "JSON object"),
    ("ct no image", "POST", "/clustertemplates", {"name": "t", "coe": "kubernetes"}, 400, "image_id"),
    ("ct bad coe", "POST", "/clustertemplates", {"name": "t", "coe": "swarm", **IMG}, 400, "coe"),
    ("ct bad driver", "POST", "/clustertemplates", {"name": "t", "network_driver": "x", **IMG}, 400, "network_driver"),
    ("ct unknown", "POST", "/clustertemplates", {"name": "t", "flavour": "x", **IMG}, 400, "flavour"),
    ("ngt negative", "POST", "/nodegrouptemplates", {"name": "t", "node_count": -2}, 400, "node_count"),
    ("ngt from unknown", "POST", "/nodegrouptemplates", {"from_nodegroup": "nope"}, 404, "nope"),
    ("ng master", "POST", NG, {"name": "m2", "role": "master"}, 400, "master"),
    ("ng duplicate", "POST", NG, {"name": "gpu"}, 409, "already exists"),
    ("ng no name", "POST", NG, {"node_count": 1}, 400, "name"),
    ("ng negative", "POST", NG, {"name": "n", "node_count": -1}, 400, "node_count"),
    ("ng unknown ngt", "POST", NG, {"name": "n", "nodegroup_template_id": "nope"}, 404, "nope"),
    ("ng unknown cluster", "POST", "/clusters/nope/nodegroups", {"name": "n"}, 404, "nope"),
    ("resize above max", "POST", "/clusters/c1/actions/resize", {"node_count": 5, "nodegroup": "gpu"}, 409, "max_node_count = 4"),
    ("resize no count", "POST", "/clusters/c1/actions/resize", {"nodegroup": "gpu"}, 400, "node_count"),
    ("resize unknown node", "POST", "/clusters/c1/actions/resize", {"node_count": 1, "nodes_to_remove": ["ghost"]}, 400, "ghost"),
    ("resize index out", "POST", "/clusters/c1/actions/resize", {"node_count": 1, "nodes_to_remove": ["7"]}, 400, "7"),
    ("resize last master", "POST", "/clusters/c1/actions/resize", {"node_count": 0, "nodegroup": "default-master"}, 400, "last master"),
    ("resize unknown group", "POST", "/clusters/c1/actions/resize", {"node_count": 1, "nodegroup": "nope"}, 404, "nope"),
    ("resize unknown key", "POST", "/clusters/c1/actions/resize", {"node_count": 1, "x": 1}, 400, "Unknown"),
    ("upgrade no template", "POST", "/clusters/c1/actions/upgrade", {"max_batch_size": 1}, 400, "cluster_template"),
    ("upgrade batch 0", "POST", "/clusters/c1/actions/upgrade", {"cluster_template": "k8s", "max_batch_size": 0}, 400, "max_batch_size"),
    ("patch name", "PATCH", "/clusters/c1", [{"op": "replace", "path": "/name", "value": "y"}], 400, "cannot change cluster property(ies) name"),
    ("patch uuid", "PATCH", "/clusters/c1", [{"op": "replace", "path": "/uuid", "value": "y"}], 400, "uuid"),
    ("patch op", "PATCH", "/clusters/c1", [{"op": "move", "path": "/node_count", "value": 3}], 400, "op"),
    ("patch object", "PATCH", "/clusters/c1", {"op": "replace"}, 400, "JSON list"),
    ("patch count > max", "PATCH", NG + "/gpu", [{"op": "replace", "path": "/max_node_count", "value": 0}], 409, "max_node_count"),
    ("patch ng count", "PATCH", NG + "/gpu", [{"op": "replace", "path": "/node_count", "value": 3}], 400, "node_count"),
    ("patch ng taints", "PATCH", NG + "/gpu", [{"op": "add", "path": "/node_taints", "value": "[{'key': 'a', 'effect': 'Bad'}]"}], 400, "effect"),
    ("patch ct coe", "PATCH", "/clustertemplates/k8s", [{"op": "replace", "path": "/coe", "value": "mesos"}], 400, "coe"),
    ("patch ct remove image", "PATCH", "/clustertemplates/k8s", [{"op": "remove", "path": "/image_id"}], 400, "image_id"),
    ("delete default ng", "DELETE", NG + "/default-worker", None, 400, "default"),
    ("unknown path", "GET", "/clusters/c1/nothing/here", None, 404, "not be found"),
    ("wrong method", "PUT", "/clusters/c1", {}, 405, "Method"),
    # Integers beyond what an INTEGER column holds: refused, never a database error.
    ("huge count", "POST", CL, {"name": "x", "node_count": 10**23, **IMG}, 400, "<= 2147483647"),
    ("huge volume", "POST", "/clustertemplates", {"name": "t", "docker_volume_size": 10**23, **IMG}, 400, "docker_volume_size"),
    ("ngt huge volume", "POST", "/nodegrouptemplates", {"name": "t", "docker_volume_size": 10**23}, 400, "docker_volume_size"),
    ("huge resize", "POST", "/clusters/c1/actions/resize", {"node_count": 10**23, "nodegroup": "gpu"}, 400, "node_count"),
    ("huge quota", "POST", "/quotas", {"project_id": "p", "resource": "Cluster", "hard_limit": 10**23}, 400, "hard_limit"),
    # Python-literal strings in JSON values that ast.literal_eval cannot take are plain strings.
    ("literal nested braces", "PATCH", NG + "/gpu", [{"op": "add", "path": "/node_taints", "value": "{'a': " * 5000}], 400, "node_taints"),
    ("literal deep sum", "PATCH", NG + "/gpu", [{"op": "add", "path": "/node_taints", "value": DEEP_SUM}], 400, "node_taints"),
    ("literal parser overflow", "PATCH", "/clusters/c1", [{"op": "add", "path": "/labels", "value": DEEP_MINUS}], 400, "labels"),
    ("literal deep labels", "POST", CL, {"name": "x", "labels": DEEP_SUM, **IMG}, 400, "labels"),
    ("literal deep removal", "POST", RESIZE, {"node_count": 1, "nodes_to_remove": DEEP_SUM}, 400, "nodes_to_remove"),
    ("literal deep source", "POST", NG, {"name": "n", "from_nodegroup": DEEP_SUM}, 404, "could not be found"),
    ("literal unhashable key", "POST", CL, {"name": "x", "labels": "{[1]: 2}", **IMG}, 400, "labels"),
    ("literal set", "POST", NG, {"name": "n", "vms": "[{'a': {1, 2}}]"}, 400, "vms"),
    ("literal bytes", "POST", NG, {"name": "n", "vms": "[{'a': b'x'}]"}, 400, "vms"),
    ("literal infinity", "POST", NG, {"name": "n", "vms": "[{'a': 1e999}]"}, 400, "vms"),
    # Only ASCII digits are integers: "١" and "²" pass str.isdigit(), and int("١") == 1.
    ("arabic digit group id", "GET", NG + "/\u0661", None, 404, "could not be found"),
    ("superscript group id", "GET", NG + "/\u00b2", None, 404, "could not be found"),
    ("arabic digit removal", "POST", RESIZE, {"node_count": 1, "nodes_to_remove": ["\u0661"]}, 400, "nodes_to_remove"),
    ("superscript removal", "POST", RESIZE, {"node_count": 1, "nodes_to_remove": ["\u00b2"]}, 400, "nodes_to_remove"),
    ("arabic digit count", "POST", CL, {"name": "x", "node_count": "\u0661", **IMG}, 400, "node_count"),
    ("arabic digit after", "GET", "/clusters/c1/events?after=\u0661", None, 400, "after"),
    # Integer ids beyond an INTEGER column, or beyond int(): not found, never a database error.
    ("huge group id", "GET", NG + "/" + HUGE, None, 404, HUGE),
    ("huge group patch", "PATCH", NG + "/" + HUGE, [{"op": "replace", "path": "/max_node_count", "value": 3}], 404, HUGE),
    ("huge group delete", "DELETE", NG + "/" + HUGE, None, 404, HUGE),
    ("huge resize group", "POST", RESIZE, {"node_count": 1, "nodegroup": HUGE}, 404, HUGE),
    ("huge resize group int", "POST", RESIZE, {"node_count": 1, "nodegroup": 10**23}, 404, "could not be found"),
    ("huge upgrade group", "POST", "/clusters/c1/actions/upgrade", {"cluster_template": "k8s", "nodegroup": HUGE}, 404, HUGE),
    ("huge source group", "POST", NG, {"name": "n", "from_nodegroup": HUGE}, 404, HUGE),
    ("huge source group int", "POST", NG, {"name": "n", "from_nodegroup": 10**23}, 404, "could not be found"),
    ("huge nodes filter", "GET", f"/clusters/c1/nodes?nodegroup={HUGE}", None, 404, HUGE),
    ("huge events after", "GET", f"/clusters/c1/events?after={HUGE}", None, 400, "after"),
    ("many-digit group id", "GET", NG + "/" + MANY_DIGITS, None, 404, "could not be found"),
    ("many-digit count", "POST", CL, {"name": "x", "node_count": MANY_DIGITS, **IMG}, 400, "node_count"),
    ("many-digit removal", "POST", RESIZE, {"node_count": 1, "nodes_to_remove": [MANY_DIGITS]}, 400, "nodes_to_remove"),
    # Strings longer than their columns (PostgreSQL refuses them; SQLite would store them).
    ("long quota project", "POST", "/quotas", {"project_id": "q" * 256, "resource": "Cluster", "hard_limit": 3}, 400, "project_id"),
    ("long quota path", "PATCH", "/quotas/" + "q" * 256 + "/Cluster", {"hard_limit": 3}, 400, "project_id"),
    ("long coe_version", "POST", CL, {"name": "x", "coe_version": "v" * 65, **IMG}, 400, "coe_version"),
    ("long group coe_version", "POST", NG, {"name": "n", "coe_version": "v" * 65}, 400, "coe_version"),
    ("long ct coe_version", "POST", "/clustertemplates", {"name": "t", "coe_version": "v" * 65, **IMG}, 400, "coe_version"),
    # NUL: PostgreSQL stores it in no text column.
    ("NUL in path", "GET", "/clusters/c%00", None, 400, "NUL"),
    ("NUL in query", "GET", NG + "?role=%00", None, 400, "NUL"),
    ("NUL in body", "POST", CL, {"name": "x", "image_id": "a\x00b"}, 400, "NUL"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "words"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_INPUTS],
)
def test_bad_input_is_refused_and_stores_nothing(
    server: LiveServer, world: Api, method: str, path: str, body: Any, status: int, words: str
) -> None:
    before = row_counts(server)
    c1_before = world.ok("GET", "/clusters/c1")
    r = world.request(method, path, json=body) if body is not None else world.request(method, path)
    err = assert_magnum_error(r, status)
    assert words.lower() in (err["title"] + err["detail"]).lower(), err
    assert row_counts(server) == before
    c1_after = world.ok("GET", "/clusters/c1")
    assert c1_after["generation"] == c1_before["generation"]
    assert world.groups("c1")["gpu"]["generation"] == 1


@pytest.mark.parametrize(
    ("content", "ctype", "status"),
    [
        (b'{"name": "x", ', "application/json", 400),
        (b"name=x", "application/x-www-form-urlencoded", 415),
        (b'{"name": "x"}', "text/plain", 415),
        (b"", "application/json", 400),
        (b"\xff\xfe", "application/json", 400),
        # Nested beyond the JSON parser's recursion limit, at the top or inside.
        (b"[" * 100_000 + b"]" * 100_000, "application/json", 400),
        (
            b'{"name": "x", "labels": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "application/json",
            400,
        ),
        # Not JSON any backend stores: NaN, an unpaired surrogate (in a value, or a key).
        (b'{"name": "x", "labels": {"a": NaN}, "image_id": "i"}', "application/json", 400),
        (b'{"name": "x", "from_cluster": "\\ud800"}', "application/json", 400),
        (b'{"name": "x", "\\udfff": 1, "image_id": "i"}', "application/json", 400),
    ],
)
def test_malformed_bodies(
    server: LiveServer, world: Api, content: bytes, ctype: str, status: int
) -> None:
    before = row_counts(server)
    r = world.post(CL, content=content, headers={"Content-Type": ctype})
    assert_magnum_error(r, status)
    assert row_counts(server) == before


def test_a_template_whose_version_is_too_long_is_refused(server: LiveServer) -> None:
    """The version an upgrade writes to node groups comes from a template's coe_version or
    kube_tag label; one longer than the column is no version shoal can install, so the
    template is refused at create (400 naming kube_tag and the supported versions) and
    no upgrade can ever reach for it; nothing is written."""
    api = Api(server)
    before = row_counts(server)
    err = assert_magnum_error(
        api.post(
            "/clustertemplates",
            json={
                "name": "long",
                "coe": "kubernetes",
                "image_id": "fedora-coreos-40",
                "labels": {"kube_tag": "v" * 65},
            },  # fmt: skip
        ),
        400,
    )
    assert "kube_tag" in err["title"] and "supported: v1.20.2" in err["title"], err
    assert row_counts(server) == before


def test_microversions(server: LiveServer, world: Api) -> None:
    bare = httpx.Client(base_url=server.v1, headers={"X-Auth-Token": world.token})
    r = bare.get("/clusters/c1")
    assert r.status_code == 200 and "stack_id" in r.json() and "cluster_id" not in r.json()
    assert r.headers["OpenStack-API-Version"] == "container-infra 1.1"
    assert r.headers["OpenStack-API-Minimum-Version"] == "container-infra 1.1"
    assert r.headers["OpenStack-API-Maximum-Version"] == "container-infra 1.14"
    assert r.headers["Vary"] == "OpenStack-API-Version"

    def at(v: str) -> httpx.Client:
        return httpx.Client(
            base_url=server.v1,
            headers={"X-Auth-Token": world.token, "OpenStack-API-Version": f"container-infra {v}"},
        )

    assert "cluster_id" in at("1.13").get("/clusters/c1").json()
    for v in ("1.15", "2.0", "0.9"):
        r = at(v).get("/clusters")
        err = r.json()["errors"][0]
        assert r.status_code == 406 and err["code"] == "magnum.microversion-unsupported"
        assert (err["min_version"], err["max_version"]) == ("1.1", "1.14")
    assert_magnum_error(at("one").get("/clusters"), 400)
    other = bare.get("/clusters", headers={"OpenStack-API-Version": "compute 2.1"})
    assert other.headers["OpenStack-API-Version"] == "container-infra 1.1"
    long_name = bare.get(
        "/clusters", headers={"OpenStack-API-Version": "container-infrastructure-management 1.9"}
    )
    assert long_name.headers["OpenStack-API-Version"] == "container-infra 1.9"
    assert_magnum_error(at("1.8").get("/clusters/c1/nodegroups"), 406)
    assert at("1.9").get("/clusters/c1/nodegroups").status_code == 200
    assert "node_labels" not in at("1.13").get("/clusters/c1/nodegroups/gpu").json()
    assert "node_labels" in at("1.14").get("/clusters/c1/nodegroups/gpu").json()
    before = row_counts(server)
    assert_magnum_error(at("1.13").post(NG, json={"name": "n", "node_labels": {"a": "b"}}), 400)
    assert_magnum_error(at("1.6").post("/clusters/c1/actions/resize", json={"node_count": 2}), 406)
    assert_magnum_error(
        at("1.7").post("/clusters/c1/actions/upgrade", json={"cluster_template": "k8s"}), 400
    )
    assert_magnum_error(
        at("1.9").post("/clusters/c1/actions/resize", json={"node_count": 0, "nodegroup": "gpu"}),
        400,
    )
    assert_magnum_error(at("1.9").post(CL, json={"name": "z", "node_count": 0, **IMG}), 400)
    assert row_counts(server) == before
    r = at("1.10").post("/clusters/c1/actions/resize", json={"node_count": 0, "nodegroup": "gpu"})
    assert r.status_code == 202 and r.json() == {"uuid": world.ok("GET", "/clusters/c1")["uuid"]}
    r = at("1.8").post("/clusters/c1/actions/upgrade", json={"cluster_template": "k8s"})
    assert r.status_code == 202


def test_paths_root_index_and_openapi(server: LiveServer) -> None:
    root = httpx.get(server.url + "/").json()
    assert root["versions"][0]["id"] == "v1" and root["versions"][0]["max_version"] == "1.14"
    index = httpx.get(server.url + "/v1/").json()
    assert "clusters" in index and index["clusters"][0]["rel"] == "self"
    token = {"X-Auth-Token": server.token()}
    assert httpx.get(server.url + "/clusters/", headers=token).status_code == 200  # /v1/clusters
    stats = httpx.get(server.url + "/v1/stats", headers={"X-Auth-Token": server.token("empty")})
    assert stats.json() == {"clusters": 0, "nodes": 0}
    assert httpx.get(server.url + "/v1/mservices", headers=token).json()["mservices"] == []
    doc = httpx.get(server.url + "/openapi.json").json()
    assert doc["openapi"].startswith("3.") and "/v1/clusters/{ident}/actions/resize" in doc["paths"]


def test_openapi_declares_the_errors_it_answers(server: LiveServer) -> None:
    """Bad input is a 400 in Magnum's shape, and the document says so (not 422)."""
    doc = httpx.get(server.url + "/openapi.json").json()
    ops = [op for item in doc["paths"].values() for op in item.values()]
    assert not [op["operationId"] for op in ops if "422" in op["responses"]]
    resize = doc["paths"]["/v1/clusters/{ident}/actions/resize"]["post"]["responses"]["400"]
    ref = resize["content"]["application/json"]["schema"]["$ref"]
    schema = doc["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    item = schema["properties"]["errors"]["items"]
    real = Api(server).client.post("/clusters", json={"name": 5})
    assert real.status_code == 400
    err = real.json()["errors"][0]
    assert set(item["required"]) <= set(err) and set(err) <= set(item["properties"])


def test_pagination(server: LiveServer) -> None:
    api = Api(server)
    made = [api.template(name=f"t{i}")["uuid"] for i in range(5)]
    first = api.ok("GET", "/clustertemplates?limit=2")
    assert [t["uuid"] for t in first["clustertemplates"]] == made[:2]
    assert "marker=" + made[1] in first["next"] and "limit=2" in first["next"]
    seen, url = [], "/clustertemplates?limit=2"
    while url:
        page = api.ok("GET", url)
        seen += [t["uuid"] for t in page["clustertemplates"]]
        url = page.get("next", "").replace(server.v1, "")
    assert seen == made
    desc = api.ok("GET", "/clustertemplates?sort_dir=desc&sort_key=name")["clustertemplates"]
    assert [t["name"] for t in desc] == ["t4", "t3", "t2", "t1", "t0"]
    assert "next" not in api.ok("GET", "/clustertemplates")
    after = api.ok("GET", f"/clustertemplates?marker={made[2]}&sort_key=name")
    assert [t["name"] for t in after["clustertemplates"]] == ["t3", "t4"]
    for bad in ("limit=0", "limit=-1", "limit=x", "sort_key=bogus", "sort_dir=up", "marker=nope"):
        assert_magnum_error(api.get(f"/clustertemplates?{bad}"), 400)
    for i in range(3):
        api.cluster(name=f"c{i}", **IMG)
    cl = api.ok("GET", "/clusters?limit=2")
    assert len(cl["clusters"]) == 2 and "next" in cl
    assert {"uuid", "name", "node_count", "master_count", "links"} <= set(cl["clusters"][0])
    assert "node_addresses" not in cl["clusters"][0]
    det = api.ok("GET", "/clusters/detail")["clusters"]
    assert len(det) == 3 and "node_addresses" in det[0]
    ngs = api.ok("GET", "/clusters/c0/nodegroups?limit=1")
    assert len(ngs["nodegroups"]) == 1 and "/clusters/c0/nodegroups?" in ngs["next"]
    assert [
        g["name"] for g in api.ok("GET", "/clusters/c0/nodegroups?role=master")["nodegroups"]
    ] == ["default-master"]
    # Query values are urlencoded in `next`, and the link round-trips.
    page1 = api.ok("GET", "/clustertemplates?limit=2&note=a%26b%3Dc+d%23e")
    nxt = httpx.URL(page1["next"])
    assert nxt.params["note"] == "a&b=c d#e" and nxt.params["marker"] == made[1]
    page2 = api.ok("GET", page1["next"].replace(server.v1, ""))
    assert [t["uuid"] for t in page2["clustertemplates"]] == made[2:4]


def test_project_isolation(server: LiveServer) -> None:
    a, b = Api(server), Api(server)
    a.template(name="tpl")
    c = a.cluster(name="mine", **IMG)
    ng = a.groups("mine")["default-worker"]
    before = row_counts(server)
    for method, path, body in [
        ("GET", "/clusters/mine", None),
        ("GET", f"/clusters/{c['uuid']}", None),
        ("DELETE", "/clusters/mine", None),
        ("PATCH", "/clusters/mine", [{"op": "replace", "path": "/node_count", "value": 3}]),
        ("POST", "/clusters/mine/actions/resize", {"node_count": 3}),
        ("GET", "/clusters/mine/nodegroups", None),
        ("GET", "/clusters/mine/nodes", None),
        ("GET", "/clusters/mine/events", None),
        ("GET", "/clustertemplates/tpl", None),
        ("POST", "/clusters", {"name": "x", "cluster_template_id": "tpl"}),
        ("POST", "/clusters", {"name": "x", "from_cluster": c["uuid"]}),
        ("POST", "/nodegrouptemplates", {"from_nodegroup": ng["uuid"]}),
        ("POST", "/clustertemplates", {"name": "x", "from_cluster": "mine"}),
    ]:
        r = b.request(method, path, json=body) if body is not None else b.request(method, path)
        assert_magnum_error(r, 404)
    assert row_counts(server) == before
    assert b.ok("GET", "/clusters")["clusters"] == []
    assert b.ok("GET", "/clustertemplates")["clustertemplates"] == []
    assert len(a.ok("GET", "/clusters")["clusters"]) == 1


def test_a_marker_names_a_row_of_the_callers_own_list(server: LiveServer) -> None:
    """Another project's uuid (or a row outside the filtered list) as a marker is
    refused like an unknown one; it used to page from where that row sorts among
    every project's rows."""
    a, b = Api(server), Api(server)
    tpl = a.template(name="tpl")
    c = a.cluster(name="mine", **IMG)
    ng = a.groups("mine")["default-worker"]
    node = seed_nodes(server, ng["uuid"], 1)[0]
    b.cluster(name="theirs", **IMG)
    master = b.groups("theirs")["default-master"]["uuid"]
    for path in [
        f"/clusters?marker={c['uuid']}",
        f"/clusters/detail?marker={c['uuid']}",
        f"/clustertemplates?marker={tpl['uuid']}",
        f"/clusters/theirs/nodegroups?marker={ng['uuid']}",
        f"/clusters/theirs/nodes?marker={node['uuid']}",
        f"/clusters/theirs/nodegroups?role=worker&marker={master}",
    ]:
        err = assert_magnum_error(b.get(path), 400)
        assert "marker" in err["title"], path
    assert b.ok("GET", f"/clusters/theirs/nodegroups?marker={master}")["nodegroups"]


def test_quota_and_ambiguous_names(server: LiveServer) -> None:
    api = Api(server)
    admin = Api(server, project=api.project, role="admin")  # a project may not set its quota
    q = admin.ok(
        "POST",
        "/quotas",
        201,
        json={"project_id": api.project, "resource": "Cluster", "hard_limit": 2},
    )
    assert q["hard_limit"] == 2
    api.cluster(name="same", **IMG)
    api.cluster(name="same", **IMG)
    before = row_counts(server)
    err = assert_magnum_error(api.post(CL, json={"name": "third", **IMG}), 403)
    assert "maximum clusters per project" in err["title"]
    assert row_counts(server) == before
    err = assert_magnum_error(api.get("/clusters/same"), 409)
    assert "Multiple clusters exist with same name" in err["title"]
    admin.ok("PATCH", f"/quotas/{api.project}/Cluster", 202, json={"hard_limit": 3})
    assert api.ok("GET", f"/quotas/{api.project}/Cluster")["hard_limit"] == 3
    api.cluster(name="third", **IMG)
    admin.ok("DELETE", f"/quotas/{api.project}/Cluster", 204)
    assert api.ok("GET", f"/quotas/{api.project}/Cluster")["hard_limit"] == 20
    assert api.ok("GET", "/stats") == {"clusters": 3, "nodes": 6}


def test_a_broken_database_is_a_500_in_magnums_shape_with_headers(tmp_path: Path) -> None:
    """The last resort: an unexpected failure (here the events table is gone under
    the running server) answers 500 in Magnum's error shape with a request id
    that the server log names, and the version headers; the server goes on."""
    with api_server("sqlite", tmp_path) as srv:
        api = Api(srv)
        api.ok("POST", "/clusters", 202, json={"name": "b1", **IMG})
        with db_of(srv).write() as s:
            s.execute(text("DROP TABLE events"))
        r = api.request("GET", "/clusters/b1/events")
        err = assert_magnum_error(r, 500)
        assert r.headers["X-OpenStack-Request-Id"] in err["detail"]
        assert r.headers["OpenStack-API-Version"] == "container-infra 1.14"
        assert api.request("GET", "/clusters/b1").status_code == 200
