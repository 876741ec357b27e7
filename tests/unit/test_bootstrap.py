"""The bootstrap data shoal renders per node is a cloud-config cloud-init reads."""

from __future__ import annotations

import json

import yaml

from shoal.domain import bootstrap


def test_user_data_is_cloud_config_with_the_node_identity() -> None:
    who = bootstrap.NodeIdentity("u-1", "demo-gpu-ab12c", "c-1", "g-1", "p-1", "worker")
    text = bootstrap.user_data(who, "https://shoal.example:9511")
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)  # YAML, as cloud-init reads it
    assert doc["hostname"] == "demo-gpu-ab12c"
    identity_file, unit = doc["write_files"]
    assert identity_file["path"] == bootstrap.IDENTITY_PATH
    assert identity_file["permissions"] == "0600"  # it may carry the agent's token
    assert "ExecStart=" in unit["content"] and "shoal-agent" in unit["content"]
    assert doc["runcmd"] == [["sh", "-c", bootstrap.START_AGENT]]
    identity = json.loads(identity_file["content"])
    assert identity == {
        "node": "u-1",
        "name": "demo-gpu-ab12c",
        "cluster": "c-1",
        "nodegroup": "g-1",
        "project": "p-1",
        "role": "worker",
        "shoal_url": "https://shoal.example:9511",
        "bootstrap_version": bootstrap.VERSION,
    }


def test_the_agent_token_is_in_the_identity_file_only_when_given() -> None:
    who = bootstrap.NodeIdentity("u-1", "n", "c-1", "g-1", "p-1", "master")
    with_token = yaml.safe_load(bootstrap.user_data(who, "http://s", agent_token="t0k"))
    without = yaml.safe_load(bootstrap.user_data(who, "http://s"))
    assert json.loads(with_token["write_files"][0]["content"])["agent_token"] == "t0k"
    assert "agent_token" not in json.loads(without["write_files"][0]["content"])


def test_the_agent_token_can_be_taken_out_and_nothing_else_changes() -> None:
    who = bootstrap.NodeIdentity("u-1", "n", "c-1", "g-1", "p-1", "master")
    with_token = bootstrap.user_data(who, "http://s", agent_token="t0k-secret")
    stripped = bootstrap.without_agent_token(with_token)
    assert "t0k-secret" not in stripped
    assert stripped == bootstrap.user_data(who, "http://s")  # the same data, token aside
    for other in ("#!/bin/sh\necho agent_token\n", "#cloud-config\n{agent_token: [", ""):
        assert bootstrap.without_agent_token(other) == other  # not shoal's: unchanged
