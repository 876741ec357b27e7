"""The real OpenStack test cloud (tests/harness/openstack) as a pytest fixture.

One cloud per test session and xdist worker, started on first use. Mark the
tests that use it with `OPENSTACK_MARKS` so that, under
`pytest -n 2 --dist loadgroup`, they all run on one worker and only one cloud
starts:

    pytestmark = OPENSTACK_MARKS

    def test_x(openstack_cloud: OpenStackCloud) -> None: ...

When the cloud cannot start (its venv cannot be built without a network, a
service dies, ...) the tests skip with the reason; under CI=true they fail
instead. A test that needs Heat asks for `openstack_heat` (the same cloud, with
Heat started on first use). SHOAL_TEST_OPENSTACK_KEEP=1 keeps the cloud's work dir (configs, logs,
databases) after the session for a post-mortem.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.harness.openstack.cloud import OpenStackCloud

OPENSTACK_GROUP = "openstack"
OPENSTACK_MARKS = [pytest.mark.openstack, pytest.mark.xdist_group(OPENSTACK_GROUP)]


def cloud_unavailable(reason: str) -> None:
    """Skip, or under CI=true fail: the same rule as require_postgres."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs the OpenStack test cloud: {reason}", pytrace=False)
    pytest.skip(f"OpenStack test cloud unavailable: {reason}")


@pytest.fixture(scope="session")
def openstack_cloud(request: pytest.FixtureRequest) -> Iterator[OpenStackCloud]:
    """A started OpenStackCloud, shared by the session's tests on this worker."""
    # Imported here: a worker that runs no OpenStack test never imports openstacksdk.
    from tests.harness.openstack.cloud import CloudStartError, OpenStackCloud, VenvUnavailable

    cloud = OpenStackCloud(keep=os.environ.get("SHOAL_TEST_OPENSTACK_KEEP") == "1")
    capture = request.config.pluginmanager.getplugin("capturemanager")
    # Uncaptured, so that the one-line note of a first venv build reaches the terminal.
    uncaptured = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    try:
        with uncaptured:
            cloud.start()
    except (VenvUnavailable, CloudStartError) as exc:
        cloud_unavailable(f"{exc.__class__.__name__}: {exc}")
    timings = ", ".join(f"{k} {v:.1f}s" for k, v in cloud.timings.items())
    print(f"\n[openstack test cloud] up: {timings}", file=sys.stderr)
    try:
        yield cloud
    finally:
        cloud.stop()
        if cloud.keep:
            print(f"\n[openstack test cloud] kept {cloud.work_dir}", file=sys.stderr)


@pytest.fixture(scope="session")
def openstack_heat(openstack_cloud: OpenStackCloud) -> OpenStackCloud:
    """The session's cloud with Heat running and in its catalog (started on first use)."""
    from tests.harness.openstack.cloud import CloudStartError

    try:
        openstack_cloud.start_heat()
    except CloudStartError as exc:
        cloud_unavailable(f"Heat did not start: {exc}")
    print(
        f"\n[openstack test cloud] heat up in {openstack_cloud.timings['heat']:.1f}s",
        file=sys.stderr,
    )
    return openstack_cloud
