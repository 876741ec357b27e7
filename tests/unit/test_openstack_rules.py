"""The openstack driver's rules on plain values, no cloud: how an HTTP answer is
classified, how a Nova server reads as a machine, how tags fit Nova's limits, what
`validate` refuses. The same rules meet the real Nova in tests/contract and
tests/e2e/test_openstack_driver.py."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    MachineSpec,
    MachineState,
    PermanentError,
    TransientError,
)
from shoal.drivers.openstack import boot, catalog, errors, servers
from shoal.drivers.openstack.identity import Scope
from shoal.drivers.openstack.ledger import Ledger

NVH = "No valid host was found. There are not enough hosts available."


@pytest.mark.parametrize(
    ("status", "text", "cls", "kind"),
    [
        (403, "Quota exceeded for instances: Requested 1, but already used 2 of 2 instances",
         BlockedError, BlockedKind.QUOTA),
        (403, "Quota exceeded, too many servers in group", BlockedError, BlockedKind.QUOTA),
        (403, "Maximum number of ports exceeded", BlockedError, BlockedKind.QUOTA),
        (413, "Quota exceeded for cores", BlockedError, BlockedKind.QUOTA),
        (400, NVH, BlockedError, BlockedKind.NO_VALID_HOST),
        (409, NVH, BlockedError, BlockedKind.NO_VALID_HOST),
        (403, "Policy doesn't allow os_compute_api:servers:create:forced_host",
         PermanentError, None),
        (400, "Flavor nope could not be found.", PermanentError, None),
        (400, "Can not find requested image", PermanentError, None),
        (400, "The requested availability zone is not available", PermanentError, None),
        (400, "Invalid key_name provided.", PermanentError, None),
        (404, "Instance x could not be found.", PermanentError, None),
        (401, "The request you have made requires authentication.", TransientError, None),
        (409, "Cannot 'reboot' instance while it is in task_state deleting", TransientError,
         None),
        (500, "Unexpected API Error.", TransientError, None),
        (503, "Service Unavailable", TransientError, None),
        (429, "Too many requests", TransientError, None),
        (None, "ConnectFailure: Unable to establish connection", TransientError, None),
    ],
)  # fmt: skip
def test_an_answer_is_classified_in_the_clouds_words(
    status: int | None, text: str, cls: type, kind: BlockedKind | None
) -> None:
    err = errors.classify(status, text, az="az1")
    assert type(err) is cls, err
    assert text in err.reason
    if kind is not None:
        assert isinstance(err, BlockedError) and err.kind is kind
        assert err.az == ("az1" if kind is BlockedKind.NO_VALID_HOST else None)


def test_a_429_always_says_when_to_come_back() -> None:
    hinted = errors.classify(429, "slow down", retry_after=7)
    assert isinstance(hinted, TransientError) and hinted.retry_after == 7
    bare = errors.classify(429, "slow down")
    assert isinstance(bare, TransientError) and bare.retry_after == errors.DEFAULT_RETRY_AFTER_S


def test_retry_after_is_seconds_or_an_http_date() -> None:
    assert errors.retry_after_of({"Retry-After": "3"}) == 3.0
    assert errors.retry_after_of({"retry-after": "1e9"}) == errors.MAX_RETRY_AFTER_S
    date = "Wed, 21 Oct 2015 07:28:10 GMT"
    assert errors.retry_after_of({"Retry-After": date}, now=1445412480.0) == 10.0
    assert errors.retry_after_of({"Retry-After": "soon"}) is None
    assert errors.retry_after_of({}) is None


@pytest.mark.parametrize(
    ("code", "message", "kind"),
    [
        (500, "No valid host was found. ", BlockedKind.NO_VALID_HOST),
        (500, "Exceeded maximum number of retries. Exhausted all hosts available for retrying "
         "build failures for instance x.", BlockedKind.NO_VALID_HOST),
        (413, "Quota exceeded for instances: Requested 1, but already used 2 of 2 instances",
         BlockedKind.QUOTA),
        (413, "Over the limit", BlockedKind.QUOTA),
        (500, "Build of instance x aborted: Image y is unacceptable", None),
        (None, None, None),
    ],
)  # fmt: skip
def test_a_servers_fault_names_a_refusal(
    code: int | None, message: str | None, kind: BlockedKind | None
) -> None:
    assert errors.fault_kind(code, message) is kind


def server(**attrs: Any) -> dict[str, Any]:
    """One server's JSON as Nova's `GET /servers/detail` gives it (microversion 2.100)."""
    base: dict[str, Any] = {
        "id": "s-1",
        "name": "n0",
        "status": "ACTIVE",
        "OS-EXT-STS:task_state": None,
        "metadata": {"shoal-node": "node-1", "shoal-deployment": "d", "shoal-image": "img"},
        "created": "2026-01-01T00:00:00Z",
    }
    return {**base, **attrs}


@pytest.mark.parametrize(
    ("status", "task_state", "state"),
    [
        ("BUILD", "scheduling", MachineState.BUILDING),
        ("ACTIVE", None, MachineState.ACTIVE),
        ("REBOOT", "reboot_started", MachineState.BUILDING),
        ("REBUILD", "rebuilding", MachineState.BUILDING),
        ("ACTIVE", "deleting", MachineState.DELETING),  # stuck deleting: observed as going
        ("ERROR", "deleting", MachineState.DELETING),
        ("SOFT_DELETED", None, MachineState.DELETING),
        ("ERROR", None, MachineState.ERROR),
        ("SHUTOFF", None, MachineState.ERROR),
        ("UNKNOWN", None, MachineState.ERROR),
    ],
)
def test_a_nova_status_is_a_machine_state(
    status: str, task_state: str | None, state: MachineState
) -> None:
    assert (
        servers.state_of(server(status=status, **{"OS-EXT-STS:task_state": task_state}))[0] is state
    )


def test_a_failed_server_says_why_as_nova_said_it() -> None:
    m = servers.machine(server(status="ERROR", fault={"code": 500, "message": NVH}))
    assert m.state is MachineState.ERROR and m.fault == NVH
    assert m.fault_kind is BlockedKind.NO_VALID_HOST
    off = servers.machine(server(status="SHUTOFF"))
    assert off.fault == "Nova reports the server SHUTOFF" and off.fault_kind is None


def test_a_machine_carries_shoals_names_and_the_servers_first_fixed_ipv4() -> None:
    addresses = {
        "public": [{"version": 6, "addr": "2001:db8::5"}],
        "private": [
            {"version": 4, "addr": "203.0.113.9", "OS-EXT-IPS:type": "floating"},
            {"version": 4, "addr": "192.168.0.3", "OS-EXT-IPS:type": "fixed"},
        ],
    }
    m = servers.machine(server(addresses=addresses, flavor={"original_name": "m1.small"}))
    assert (m.machine_id, m.provider_id, m.address) == ("node-1", "s-1", "192.168.0.3")
    assert (m.image_id, m.flavor_id) == ("img", "m1.small")
    assert m.tags == {"shoal-node": "node-1", "shoal-deployment": "d"}
    assert servers.address({"v6": [{"version": 6, "addr": "2001:db8::5"}]}) == "2001:db8::5"
    assert servers.address(None) is None


def test_tags_fit_nova_and_a_listing_matches_the_exact_values() -> None:
    short = servers.nova_tag("shoal-node", "0f8fad5b-d9cb-469f-a165-70867728950e")
    assert short == "shoal-node=0f8fad5b-d9cb-469f-a165-70867728950e"
    odd = servers.nova_tag("shoal-project", "a,b/c" + "x" * 80)
    assert len(odd) <= servers.NOVA_TAG_MAX and "," not in odd and "/" not in odd
    assert odd == servers.nova_tag("shoal-project", "a,b/c" + "x" * 80)  # stable
    q = servers.query("prod", {"shoal-nodegroup": "g", "shoal-cluster": "c"})
    assert q == "shoal-deployment=prod,shoal-cluster=c,shoal-nodegroup=g"
    s = server(metadata={"shoal-deployment": "prod", "shoal-cluster": "c", "shoal-node": "n"})
    assert servers.matches(s, "prod", {"shoal-cluster": "c"})
    assert not servers.matches(s, "other", {"shoal-cluster": "c"})
    assert not servers.matches(s, "prod", {"shoal-cluster": "c2"})


def test_of_two_servers_of_one_node_every_process_keeps_the_same() -> None:
    old = server(id="b", created="2026-01-01T00:00:00Z")
    new = server(id="a", created="2026-01-01T00:00:05Z")
    going = server(id="c", created="2025-12-31T00:00:00Z", **{"OS-EXT-STS:task_state": "deleting"})
    assert servers.canonical([new, going, old]) == (old, [new, going])
    twin = server(id="a", created=old["created"])
    assert servers.canonical([old, twin])[0] is twin  # same second: the smaller id


def spec(**over: Any) -> MachineSpec:
    values: dict[str, Any] = dict(
        machine_id="m", name="n", project_id="p", cluster_id="c", nodegroup_id="g",
        role="worker", flavor_id="m1.small", image_id="tiny-raw", availability_zone="az1",
    )  # fmt: skip
    return MachineSpec(**{**values, **over})


def test_validate_refuses_what_the_driver_cannot_do_and_says_what_to_change() -> None:
    assert boot.problems(spec()) == []
    said = boot.problems(
        spec(
            boot_volume_size=20,
            docker_volume_size=10,
            options={"config_drive": "maybe", "colour": "red"},
            user_data="x" * 60_000,
        )
    )
    text = " ".join(said)
    assert len(said) == 5, said
    assert "boot_volume_size is 20 GB" in text and "docker_volume_size is 10 GB" in text
    assert "option 'colour' is not an option" in text and "config_drive='maybe'" in text
    assert "more than Nova's 65535" in text


def test_the_catalog_names_what_is_unknown_and_has_no_opinion_before_its_first_look() -> None:
    assert catalog.Catalog().problems("x", "y", "z") == []
    cat = catalog.Catalog(
        zones=("az1", "az2"),
        flavors={"m1.small": "f1", "f1": "f1"},
        flavor_names=("m1.small",),
        images={"tiny": "i1", "i1": "i1", "i2": "i2", "i3": "i3", "dup": None},
        image_names=("dup", "tiny"),
        loaded_at=0.0,
    )
    assert cat.problems("m1.small", "tiny", "az2") == []
    assert cat.problems("f1", "i1", None) == []
    said = cat.problems("m9", "nope", "az9")
    assert len(said) == 3 and "(flavors: m1.small)" in said[0] and "(zones: az1, az2)" in said[2]
    assert "names several images" in cat.problems("m1.small", "dup", "az1")[0]


def test_a_recent_listing_that_did_not_show_a_machine_spares_its_lookup() -> None:
    now = [100.0]
    ledger = Ledger(clock=lambda: now[0])
    tags = {"shoal-project": "p", "shoal-cluster": "c", "shoal-nodegroup": "g", "shoal-node": "m1"}
    assert not ledger.absent("m1", tags, 30)  # never listed: look it up
    ledger.listed({"shoal-nodegroup": "g"}, 100.0, ["m0"])
    assert ledger.absent("m1", tags, 30)
    assert not ledger.absent("m0", {**tags, "shoal-node": "m0"}, 30)  # it was shown
    other = {**tags, "shoal-nodegroup": "h"}
    assert not ledger.absent("m1", other, 30)  # that listing does not cover group h
    ledger.remember("m1", "server-1", Scope("p", "c"))
    assert not ledger.absent("m1", tags, 30)  # made by this process since
    ledger.forget("m1")
    ledger.lost("m1")
    assert not ledger.absent("m1", tags, 30)  # a create whose answer was lost
    assert ledger.unsettled("m1", 10) == 0.0
    now[0] = 111.0
    assert ledger.unsettled("m1", 10) is None  # settled: it may be created again
    assert ledger.absent("m1", tags, 30)
    now[0] = 131.0
    assert not ledger.absent("m1", tags, 30)  # the listing is too old to prove anything


def test_a_machine_keeps_its_address_while_nova_drops_it_during_deletion() -> None:
    ledger = Ledger()
    scope = Scope("p", "c")
    assert ledger.remember("m", "s", scope, None) is None  # building: no address yet
    assert ledger.remember("m", "s", scope, "192.168.0.3") == "192.168.0.3"
    assert ledger.remember("m", "s", scope, None) == "192.168.0.3"  # deleting
    assert ledger.remember("m", "other-server", scope, None) is None  # another server
