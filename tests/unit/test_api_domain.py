"""Pure rules behind the API: field validation, creation-path merges, JSON patch."""

from __future__ import annotations

import pytest

from shoal.domain import jsonpatch, merge, specs
from shoal.domain import model as m
from shoal.domain import validation as v
from shoal.domain.errors import Conflict, Invalid


@pytest.mark.parametrize("name", ["a", "k8s-prod_1.x", "A" * 242])
def test_good_names(name: str) -> None:
    assert v.name("name", name, v.CLUSTER_NAME_MAX) == name


@pytest.mark.parametrize("name", ["", "1a", "-a", "a b", "a/b", "A" * 243, 5, None])
def test_bad_names(name: object) -> None:
    with pytest.raises(Invalid) as exc:
        v.name("name", name, v.CLUSTER_NAME_MAX)
    assert exc.value.field == "name"


@pytest.mark.parametrize("ident", ["a", " a ", "3f2a9c", "0e1d7c2a-6f", "x" * 255])
def test_required_ids(ident: str) -> None:
    assert v.required_id("cluster_id", ident) == ident


@pytest.mark.parametrize("ident", [None, "", " ", "\t\n", "\u00a0", "x" * 256, 5, ["a"]])
def test_required_ids_refused(ident: object) -> None:
    with pytest.raises(Invalid) as err:
        v.required_id("cluster_id", ident, "see shoal orphan list")
    assert err.value.field == "cluster_id"


def test_labels_accept_python_literals_and_stringify() -> None:
    assert v.str_dict("labels", "{'a': 'b', 'n': 1}") == {"a": "b", "n": "1"}
    assert v.str_dict("labels", {"x": True}) == {"x": "true"}
    with pytest.raises(Invalid):
        v.str_dict("labels", "{'a': {'nested': 1}}")


def test_taints_from_objects_and_text() -> None:
    got = v.taints("node_taints", ["gpu=yes:NoSchedule", {"key": "k", "effect": "NoExecute"}])
    assert got == (m.Taint("gpu", "yes", "NoSchedule"), m.Taint("k", "", "NoExecute"))
    for bad in (["gpu=yes:Sometimes"], [{"key": "", "effect": "NoSchedule"}], 5):
        with pytest.raises(Invalid, match="node_taints"):
            v.taints("node_taints", bad)


def test_integers_and_booleans() -> None:
    assert v.integer("n", "7", lo=0) == 7
    for bad in (True, 1.5, "x", None, -1):
        with pytest.raises(Invalid):
            v.integer("n", bad, lo=0)
    assert v.boolean("b", "true") is True
    with pytest.raises(Invalid):
        v.boolean("b", 1)


def test_integers_are_ascii_digits_and_bounded_before_int() -> None:
    assert v.integer("n", " 0012 ", lo=0) == 12
    for bad in ("\u0661", "\u00b2", "1" * 5000, "-" + "1" * 5000, str(v.INT_MAX + 1)):
        with pytest.raises(Invalid, match="^n must"):
            v.integer("n", bad, lo=0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("42", 42), (str(v.INT_MAX), v.INT_MAX), ("0" * 30 + "7", 7)],
)
def test_decimal_ids(text: str, expected: int) -> None:
    assert v.decimal_id(text) == expected


@pytest.mark.parametrize(
    "text", ["", "-1", " 1", "\u0661", "\u00b2", str(v.INT_MAX + 1), "9" * 23, "1" * 5000]
)
def test_not_decimal_ids(text: str) -> None:
    assert v.decimal_id(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "{'a': " * 5000,  # SyntaxError: too many nested parentheses
        "[" + "1+" * 100_000 + "1]",  # RecursionError
        "[" + "-" * 100_000 + "1]",  # MemoryError from the parser
        "{[1]: 2}",  # TypeError: unhashable
        "[{'a': {1, 2}}]",  # a set
        "[b'x']",
        "[1j]",
        "[1e999]",
        "[{1: 'a'}]",
        "['\\ud800']",  # an unpaired surrogate once evaluated
    ],
)
def test_literals_that_are_no_json_stay_strings(text: str) -> None:
    assert v.literal(text) == text


def test_json_problems() -> None:
    assert v.json_problem({"a": [1, 2.5, "x", None, True, {"b": []}]}) is None
    deep: list[object] = []
    for _ in range(100_000):  # walked without recursion
        deep = [deep]
    assert v.json_problem(deep) is None
    assert "NUL" in (v.json_problem({"a": ["x\x00"]}) or "")
    assert "surrogate" in (v.json_problem({"\udfff": 1}) or "")
    assert "finite" in (v.json_problem([float("nan")]) or "")
    assert "finite" in (v.json_problem({"a": float("-inf")}) or "")
    assert "keys" in (v.json_problem({1: "a"}) or "")
    assert "set" in (v.json_problem([{1}]) or "")


def test_rollout_and_health_policies() -> None:
    assert v.rollout("rollout", {"max_surge": 2}) == m.RolloutPolicy(2, 0)
    with pytest.raises(Invalid, match="both be 0"):
        v.rollout("rollout", {"max_surge": 0})
    with pytest.raises(Invalid, match="100"):
        v.health("health_policy", {"max_unhealthy_percent": 150})


@pytest.mark.parametrize(
    ("count", "lo", "hi", "error"),
    [(1, 2, None, Conflict), (5, 0, 4, Conflict), (2, 3, 2, Conflict), (-1, 0, None, Invalid)],
)
def test_count_bounds(count: int, lo: int, hi: int | None, error: type[Exception]) -> None:
    with pytest.raises(error):
        v.counts(m.NodeGroupSpec(node_count=count, min_node_count=lo, max_node_count=hi))


def test_zero_nodes_only_when_allowed() -> None:
    v.counts(m.NodeGroupSpec(node_count=0))
    with pytest.raises(Invalid):
        v.counts(m.NodeGroupSpec(node_count=0), allow_zero=False)


def test_cluster_attrs_request_wins_and_label_bookkeeping() -> None:
    base = merge.template_to_cluster_attrs(
        {"image_id": "i1", "keypair_id": "kp", "labels": {"a": "1", "b": "2"}, "public": True}
    )
    assert base == {"image_id": "i1", "keypair": "kp", "labels": {"a": "1", "b": "2"}}
    out = merge.cluster_attrs(base, {"image_id": "i2", "labels": {"b": "3"}, "node_count": 4})
    assert out["image_id"] == "i2" and out["labels"] == {"b": "3"} and "node_count" not in out
    assert out["labels_overridden"] == {"b": "2"} and out["labels_skipped"] == {"a": "1"}
    merged = merge.cluster_attrs(base, {"labels": {"c": "4"}, "merge_labels": True})
    assert merged["labels"] == {"a": "1", "b": "2", "c": "4"}


def test_plan_default_groups_with_counts() -> None:
    attrs = merge.cluster_attrs(None, {"image_id": "img", "flavor_id": "m1.large"})
    plans = merge.plan_groups(attrs, {"master_count": 3, "node_count": 0})
    assert [(p.name, p.spec.role, p.spec.node_count, p.is_default) for p in plans] == [
        ("default-master", "master", 3, True),
        ("default-worker", "worker", 0, True),
    ]
    assert all(p.spec.image_id == "img" for p in plans)
    assert plans[1].spec.flavor_id == "m1.large"


def test_plan_from_source_marks_first_groups_default_and_checks() -> None:
    source = [
        merge.GroupPlan("gpu", m.NodeGroupSpec(role="gpu", node_count=2, image_id="x")),
        merge.GroupPlan("cp", m.NodeGroupSpec(role="master", node_count=3)),
        merge.GroupPlan("ssd", m.NodeGroupSpec(node_count=1)),
    ]
    plans = merge.plan_groups({"image_id": "img"}, {"node_count": 5}, source)
    assert [(p.name, p.is_default, p.spec.node_count) for p in plans] == [
        ("gpu", True, 5),
        ("cp", True, 3),
        ("ssd", False, 1),
    ]
    assert plans[0].spec.image_id == "x" and plans[2].spec.image_id == "img"
    with pytest.raises(Invalid, match="image_id"):
        merge.plan_groups({}, {}, source)
    with pytest.raises(Invalid, match="master"):
        merge.plan_groups({"image_id": "i"}, {}, [source[0]])
    with pytest.raises(Conflict):
        merge.plan_groups({"image_id": "i"}, {}, [source[1], source[1]])


def test_cluster_to_template_attrs() -> None:
    attrs = {"image_id": "i", "keypair": "kp", "create_timeout": 60, "labels_added": {"x": "1"}}
    assert merge.cluster_to_template_attrs(attrs) == {
        "image_id": "i",
        "keypair_id": "kp",
        "coe": "kubernetes",
    }


def test_ng_attrs_roundtrip() -> None:
    spec = specs.apply_ng_attrs(
        m.NodeGroupSpec(),
        {"role": "gpu", "availability_zones": "az-1,az-2", "deletion_policy": "az-balanced"},
    )
    assert spec.availability_zones == ("az-1", "az-2")
    assert spec.deletion_policy is m.DeletionPolicy.AZ_BALANCED
    assert specs.apply_ng_attrs(m.NodeGroupSpec(), specs.spec_as_attrs(spec)) == spec


def test_jsonpatch_subset() -> None:
    current = {"labels": {"a": "1"}}
    changes = jsonpatch.apply(
        current,
        [
            {"op": "add", "path": "/labels/b", "value": "2"},
            {"op": "remove", "path": "/labels/a"},
            {"op": "replace", "path": "/node_count", "value": 3},
        ],
        {"labels", "node_count"},
    )
    assert changes == {"labels": {"b": "2"}, "node_count": 3}
    assert jsonpatch.apply(
        {}, [{"op": "replace", "path": "/labels", "value": "{'x': 'y'}"}], {"labels"}
    ) == {"labels": {"x": "y"}}
    with pytest.raises(Invalid, match="cannot change cluster property"):
        jsonpatch.apply({}, [{"op": "replace", "path": "/name", "value": "n"}], {"labels"})
    with pytest.raises(Invalid, match="internal attribute"):
        jsonpatch.apply({}, [{"op": "replace", "path": "/uuid", "value": "n"}], {"uuid"})
    for bad in ({}, [{"op": "copy", "path": "/labels"}], [{"op": "add", "path": "/labels"}], [5]):
        with pytest.raises(Invalid):
            jsonpatch.apply({}, bad, {"labels"})
