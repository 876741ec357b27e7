"""The driver contract's error classes, `check`, options and optional features
(docs/drivers.md, "Rules"), against every driver harness (conftest.py). A harness provokes
each error class its own way; a check of an error class its harness declares it cannot
provoke is not run against it (conftest.py); an optional feature is skipped only when
the driver does not declare it."""

from __future__ import annotations

import pytest

from shoal.drivers import contract
from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    Feature,
    GroupDriver,
    GroupRequest,
    MachineState,
    TransientError,
)
from shoal.drivers.harness import DriverHarness, Provocation, Unsupported


def provoked(harness: DriverHarness, kind: Provocation) -> contract.MachineSpec:
    if harness.provoke is None:
        pytest.skip(f"{harness.driver.name}: this harness cannot provoke errors")
    try:
        return harness.provoke(kind, harness.spec())
    except Unsupported as exc:
        pytest.skip(f"{harness.driver.name}: {exc}")


@pytest.mark.provokes(Provocation.QUOTA)
def test_quota_is_blocked_with_the_clouds_words(harness: DriverHarness) -> None:
    spec = provoked(harness, Provocation.QUOTA)
    with pytest.raises(BlockedError) as err:
        harness.driver.ensure_machine(spec)
    assert err.value.kind is BlockedKind.QUOTA and "quota" in err.value.reason.lower()
    assert harness.find(spec.machine_id) is None


@pytest.mark.provokes(Provocation.NO_VALID_HOST)
def test_no_valid_host_is_blocked_in_that_zone(harness: DriverHarness) -> None:
    spec = provoked(harness, Provocation.NO_VALID_HOST)
    with pytest.raises(BlockedError) as err:
        harness.driver.ensure_machine(spec)
    assert err.value.kind is BlockedKind.NO_VALID_HOST and err.value.az == spec.availability_zone
    assert harness.find(spec.machine_id) is None


@pytest.mark.provokes(Provocation.NO_VALID_HOST_ASYNC)
def test_asynchronous_no_valid_host_is_a_classified_fault(harness: DriverHarness) -> None:
    spec = provoked(harness, Provocation.NO_VALID_HOST_ASYNC)
    harness.driver.ensure_machine(spec)  # accepted: the cloud fails it later
    failed = harness.wait_for(spec.machine_id, MachineState.ERROR)
    assert failed is not None and failed.fault
    assert failed.fault_kind is BlockedKind.NO_VALID_HOST


@pytest.mark.provokes(Provocation.TRANSIENT)
def test_a_transient_refusal_carries_its_retry_after(harness: DriverHarness) -> None:
    spec = provoked(harness, Provocation.TRANSIENT)
    with pytest.raises(TransientError) as err:
        harness.driver.ensure_machine(spec)
    assert err.value.retry_after is not None and err.value.retry_after > 0
    assert harness.driver.ensure_machine(spec).machine_id == spec.machine_id  # then it works


def test_an_ordinary_failure_has_no_fault_kind(harness: DriverHarness) -> None:
    spec = harness.spec()
    m = harness.driver.ensure_machine(spec)
    assert m.fault_kind is None


def test_check_looks_at_the_provider_and_says_what_it_offers(harness: DriverHarness) -> None:
    caps = harness.driver.check()
    assert harness.flavor in caps.flavors and harness.image in caps.images
    assert harness.zone in caps.availability_zones


def test_validate_names_options_the_driver_does_not_know(harness: DriverHarness) -> None:
    bad = harness.spec(options={"no-such-option": "1"})
    problems = harness.driver.validate(bad)
    assert any("no-such-option" in p for p in problems), problems


def test_a_spec_with_everything_a_real_machine_needs_is_made(harness: DriverHarness) -> None:
    spec = harness.spec(
        user_data="#cloud-config\n{}\n",
        keypair=None,
        placement_group=contract.PlacementGroup(
            "shoal-contract", contract.PlacementPolicy.SOFT_ANTI_AFFINITY
        ),
    )
    assert harness.driver.validate(spec) == []
    harness.driver.ensure_machine(spec)
    assert harness.wait_for(spec.machine_id, MachineState.ACTIVE) is not None


def _group_driver(harness: DriverHarness) -> GroupDriver:
    if not harness.driver.capabilities().has(Feature.PER_GROUP):
        pytest.skip(f"{harness.driver.name} does not declare acting per group")
    assert isinstance(harness.driver, GroupDriver)
    return harness.driver


def test_a_per_group_driver_holds_exactly_the_members(harness: DriverHarness) -> None:
    driver = _group_driver(harness)
    group = "contract-stack"
    a, b, c = (harness.spec(nodegroup_id=group) for _ in range(3))

    def members() -> set[str]:
        listed = driver.list_machines({contract.TAG_NODEGROUP: group})
        return {m.machine_id for m in listed if m.state is not MachineState.DELETING}

    driver.apply_group(GroupRequest(group, a.project_id, a.cluster_id, (a, b)))
    driver.apply_group(GroupRequest(group, a.project_id, a.cluster_id, (a, b)))  # idempotent
    assert members() == {a.machine_id, b.machine_id}
    driver.apply_group(GroupRequest(group, a.project_id, a.cluster_id, (a, c)))
    assert members() == {a.machine_id, c.machine_id}  # b is going, exactly b
    driver.delete_group(group)
    driver.delete_group(group)  # idempotent
    assert members() == set()
    for spec in (a, b, c):
        assert harness.wait_for(spec.machine_id, None) is None
