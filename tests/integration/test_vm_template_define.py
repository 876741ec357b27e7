"""Defence in depth: a virt group's template that reached the database without the
allow-list (one stored before the check existed) is checked again when a VM is to be
made, and the real conductor fails the group with the reason: the VM is never made."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from shoal.db.repo import nodegroups
from shoal.db.types import utcnow
from shoal.domain import vmtemplate
from tests.integration.conductor_support import Env, make_env

HOSTDEV = vmtemplate.DEFAULT.replace(
    "<devices>", "<devices>\n<hostdev mode='subsystem' type='pci'/>"
)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from make_env(f"sqlite:///{tmp_path / 'shoal.db'}", vms=True)


def test_a_stored_template_that_reaches_the_host_fails_the_group_and_makes_no_vm(
    env: Env,
) -> None:
    hosts = {"name": "hosts", "role": "virt", "flavor_id": "bm.large", "node_count": 1,
             "vms": [{"id": "v0", "cpu": 1, "ram": 1}]}  # fmt: skip
    workers = {"name": "w", "role": "worker", "provider": "vms", "node_count": 1}
    masters = {"name": "m", "role": "master", "node_count": 1}
    cid = env.create("old", [masters, hosts, workers], flavor_id="m1.small")
    with env.db.write() as s:  # as a database from before the check would hold it
        group = nodegroups.find(s, cid, "hosts", for_update=True)
        spec = dataclasses.replace(group.spec, vm_template=HOSTDEV)
        nodegroups.write_spec(s, group.uuid, spec, "CREATE_IN_PROGRESS", utcnow())
    env.step_until(lambda: env.group(cid, "w").status == "CREATE_FAILED", timeout=60)
    reason = env.group(cid, "w").status_reason or ""
    assert "<hostdev> is not allowed" in reason and "line 17" in reason, reason
    assert all(env.world.domain_xml(n.uuid) is None for n in env.nodes(cid, "w"))
    (host,) = env.nodes(cid, "hosts")
    assert env.world.vms_on(host.uuid) == []  # no VM on the host
