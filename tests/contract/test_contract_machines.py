"""The driver contract (docs/drivers.md), checked against every driver harness (conftest.py)."""

from __future__ import annotations

import time

import pytest

from shoal.drivers import contract
from shoal.drivers.contract import Feature, MachineState, PermanentError
from shoal.drivers.harness import DriverHarness


def test_is_a_driver(driver: contract.Driver) -> None:
    assert isinstance(driver, contract.Driver)
    assert driver.name


def test_capabilities_name_what_the_suite_uses(harness: DriverHarness) -> None:
    caps = harness.driver.capabilities()
    assert harness.flavor in caps.flavors
    assert harness.image in caps.images
    assert harness.zone in caps.availability_zones


def test_ensure_creates_a_tagged_machine_that_becomes_active(harness: DriverHarness) -> None:
    spec = harness.spec()
    m = harness.driver.ensure_machine(spec)
    assert m.machine_id == spec.machine_id
    assert m.name == spec.name
    assert dict(m.tags).items() >= spec.tags.items()
    assert m.state in (MachineState.BUILDING, MachineState.ACTIVE)
    up = harness.wait_for(spec.machine_id, MachineState.ACTIVE)
    assert up is not None
    assert up.address, "an ACTIVE machine reports its address"
    assert up.availability_zone == harness.zone
    assert up.image_id == harness.image and up.flavor_id == harness.flavor


def test_ensure_is_idempotent(harness: DriverHarness) -> None:
    spec = harness.spec()
    first = harness.driver.ensure_machine(spec)
    again = harness.driver.ensure_machine(spec)  # still building: same machine
    assert again.machine_id == first.machine_id
    harness.wait_for(spec.machine_id, MachineState.ACTIVE)
    harness.driver.ensure_machine(spec)
    mine = harness.driver.list_machines({contract.TAG_NODE: spec.machine_id})
    assert len(mine) == 1


def test_list_by_tag_subset(harness: DriverHarness) -> None:
    a1 = harness.spec(nodegroup_id="ng-a")
    a2 = harness.spec(nodegroup_id="ng-a")
    b1 = harness.spec(nodegroup_id="ng-b", cluster_id="other-cluster")
    for s in (a1, a2, b1):
        harness.driver.ensure_machine(s)

    def ids(tags: dict[str, str]) -> set[str]:
        return {m.machine_id for m in harness.driver.list_machines(tags)}

    assert ids({contract.TAG_NODEGROUP: "ng-a"}) == {a1.machine_id, a2.machine_id}
    assert ids({contract.TAG_CLUSTER: "contract-cluster"}) == {a1.machine_id, a2.machine_id}
    assert ids({contract.TAG_CLUSTER: "other-cluster", contract.TAG_NODEGROUP: "ng-b"}) == {
        b1.machine_id
    }
    assert ids({contract.TAG_CLUSTER: "contract-cluster", contract.TAG_NODEGROUP: "ng-b"}) == set()
    assert ids({contract.TAG_NODEGROUP: "no-such-group"}) == set()
    assert ids({"some-other-tag": "x"}) == set()
    assert ids({contract.TAG_PROJECT: "contract-project"}) >= {
        a1.machine_id,
        a2.machine_id,
        b1.machine_id,
    }


def test_delete_is_idempotent_and_unknown_is_done(harness: DriverHarness) -> None:
    spec = harness.spec()
    harness.driver.ensure_machine(spec)
    harness.wait_for(spec.machine_id, MachineState.ACTIVE)
    harness.driver.delete_machine(spec.machine_id)
    harness.driver.delete_machine(spec.machine_id)  # again while going: fine
    m = harness.find(spec.machine_id)
    assert m is None or m.state is MachineState.DELETING
    assert harness.wait_for(spec.machine_id, None) is None
    harness.driver.delete_machine(spec.machine_id)  # gone: still fine
    harness.driver.delete_machine("never-existed-0000")


def test_delete_while_building(harness: DriverHarness) -> None:
    spec = harness.spec()
    harness.driver.ensure_machine(spec)
    harness.driver.delete_machine(spec.machine_id)
    assert harness.wait_for(spec.machine_id, None) is None


def test_reboot_and_rebuild_keep_identity_or_are_refused(harness: DriverHarness) -> None:
    """Declared (features REBOOT and REBUILD): both keep the machine's id, name and
    address; not declared: a reboot is refused as permanent."""
    caps = harness.driver.capabilities()
    spec = harness.spec()
    harness.driver.ensure_machine(spec)
    if not (caps.has(Feature.REBOOT) and caps.has(Feature.REBUILD)):
        with pytest.raises(PermanentError):
            harness.driver.reboot_machine(spec.machine_id)
        return
    before = harness.wait_for(spec.machine_id, MachineState.ACTIVE)
    assert before is not None
    harness.driver.reboot_machine(spec.machine_id)
    harness.driver.reboot_machine(spec.machine_id)  # idempotent
    after = harness.wait_for(spec.machine_id, MachineState.ACTIVE)
    assert after is not None and after.address == before.address
    harness.driver.rebuild_machine(spec.machine_id, harness.other_image)
    harness.driver.rebuild_machine(spec.machine_id, harness.other_image)  # idempotent
    rebuilt = harness.wait_for(spec.machine_id, MachineState.ACTIVE)
    assert rebuilt is not None
    assert (rebuilt.machine_id, rebuilt.name, rebuilt.address) == (
        before.machine_id,
        before.name,
        before.address,
    )
    assert rebuilt.image_id == harness.other_image


def test_reboot_or_rebuild_of_unknown_machine_is_permanent(harness: DriverHarness) -> None:
    """Mandatory: a driver without the features refuses with PermanentError too."""
    with pytest.raises(PermanentError):
        harness.driver.reboot_machine("never-existed-0000")
    with pytest.raises(PermanentError):
        harness.driver.rebuild_machine("never-existed-0000", harness.image)


def test_unknown_flavor_image_or_zone_is_permanent(harness: DriverHarness) -> None:
    for bad in (
        harness.spec(flavor_id="no-such-flavor"),
        harness.spec(image_id="no-such-image"),
        harness.spec(availability_zone="no-such-zone"),
    ):
        with pytest.raises(PermanentError) as err:
            harness.driver.ensure_machine(bad)
        assert err.value.reason
        assert harness.find(bad.machine_id) is None


def test_validate_is_cheap_and_names_each_problem(harness: DriverHarness) -> None:
    d = harness.driver
    assert d.validate(harness.spec()) == []
    bad = harness.spec(flavor_id="nope-f", image_id="nope-i", availability_zone="nope-z")
    d.validate(bad)  # warm any cache
    rounds = []
    for _ in range(5):  # the best of 5 rounds of 10: a loaded machine's pause cannot flake it
        start = time.perf_counter()
        for _ in range(10):
            problems = d.validate(bad)
        rounds.append((time.perf_counter() - start) / 10)
    # A remote call per validate would cost far more.
    assert min(rounds) < 0.005, f"validate must not do remote I/O: {min(rounds) * 1000:.1f} ms"
    text = " ".join(problems)
    assert len(problems) == 3
    assert "nope-f" in text and "nope-i" in text and "nope-z" in text
