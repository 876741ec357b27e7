"""Provider options through real HTTP: a value the group's provider does not offer (the
heat driver's `template`, given as a provider option or as the label `heat_template` a
cluster template carries) is a 400 naming the values offered, as soon as a conductor
has recorded the provider's offer; a label that sets an option cannot change later."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shoal.db import providers
from tests.integration.api_support import Api, db_of
from tests.support.server import LiveServer

OFFER = {
    "availability_zones": [],
    "option_choices": {"template": ["default", "gpu"]},
    "option_labels": {"heat_template": "template"},
}


@pytest.fixture
def api(server: LiveServer) -> Api:
    """A project on a server whose provider `sim` offers what a heat provider with the
    operator's template `gpu` offers (the check a conductor records)."""
    check = providers.Check("sim", "sim", True, None, OFFER, datetime.now(UTC), "test")
    providers.record(db_of(server), check)
    return Api(server)


def test_a_cluster_templates_label_must_name_an_offered_template(api: Api) -> None:
    api.template("bad-tpl", labels={"heat_template": "gpux"})
    r = api.post("/clusters", json={"name": "c1", "cluster_template_id": "bad-tpl"})
    assert r.status_code == 400, r.text
    said = r.json()["errors"][0]["detail"]
    assert "template 'gpux' (label heat_template)" in said, said
    assert "its templates: default, gpu" in said
    api.template("gpu-tpl", labels={"heat_template": "gpu"})
    c = api.cluster(name="c2", cluster_template_id="gpu-tpl")
    assert {g["labels"].get("heat_template") for g in api.groups(c["uuid"]).values()} == {"gpu"}


def test_a_groups_own_option_is_checked_and_wins_over_the_label(api: Api) -> None:
    api.template("t", labels={"heat_template": "gpu"})
    c = api.cluster(name="c3", cluster_template_id="t")
    path = f"/clusters/{c['uuid']}/nodegroups"
    r = api.post(path, json={"name": "w2", "provider_options": {"template": "nope"}})
    assert r.status_code == 400, r.text
    said = r.json()["errors"][0]["detail"]
    assert "node group w2: template 'nope' (provider_options)" in said and "default, gpu" in said
    own = {"name": "w3", "labels": {"heat_template": "gpux"},
           "provider_options": {"template": "default"}}  # fmt: skip
    api.ok("POST", path, 202, json=own)


def test_a_label_that_set_an_option_cannot_change(api: Api) -> None:
    api.template("t2", labels={"heat_template": "gpu"})
    c = api.cluster(name="c4", cluster_template_id="t2")
    g = api.groups(c["uuid"])["default-worker"]
    path = f"/clusters/{c['uuid']}/nodegroups/{g['uuid']}"
    change = [{"op": "replace", "path": "/labels", "value": {"heat_template": "default"}}]
    r = api.patch(path, json=change)
    assert r.status_code == 400, r.text
    said = r.json()["errors"][0]["detail"]
    assert "the label heat_template sets the provider option template" in said, said
    keep = [{"op": "replace", "path": "/labels", "value": {"heat_template": "gpu", "x": "1"}}]
    api.ok("PATCH", path, 202, json=keep)


def test_the_provider_shows_what_a_group_may_choose(api: Api) -> None:
    seen = api.ok("GET", "/providers/sim")
    assert seen["option_choices"] == {"template": ["default", "gpu"]}
    assert seen["option_labels"] == {"heat_template": "template"}
