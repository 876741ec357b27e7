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
    (identity_file,) = doc["write_files"]
    assert identity_file["path"] == bootstrap.IDENTITY_PATH
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
