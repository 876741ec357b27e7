"""pytest side of the Kubernetes harness (tests/harness/kubernetes): the cached binaries,
and when to skip.

Tests that need real Kubernetes binaries take the session-scoped `kubernetes_bin` fixture
(registered in tests/e2e/conftest.py) and carry `KUBERNETES_MARKS`. A missing cache is
built on first use (root on Debian 12 only; 5-15 min once, then instant). When the
binaries are absent and cannot be built here (not root, not Debian 12, no network for
the source package, ...), the tests skip with the reason; under CI=true they fail
instead, like the OpenStack cloud's tests.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tests.harness.kubernetes.build import KubernetesUnavailable, ensure_binaries
from tests.harness.kubernetes.machine import missing_prerequisites

KUBERNETES_GROUP = "kubernetes"
KUBERNETES_MARKS = [pytest.mark.kubernetes, pytest.mark.xdist_group(KUBERNETES_GROUP)]


def kubernetes_unavailable(reason: str) -> None:
    """Skip, or under CI=true fail: the same rule as the OpenStack test cloud's."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI needs the Kubernetes harness: {reason}", pytrace=False)
    pytest.skip(f"Kubernetes harness unavailable: {reason}")


@pytest.fixture(scope="session")
def kubernetes_bin(request: pytest.FixtureRequest) -> Path:
    """The dir of the cached kube-apiserver, kubelet, kubectl, ... (built when missing)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    # Uncaptured, so that the progress lines of a first build reach the terminal.
    uncaptured = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
    try:
        with uncaptured:
            return ensure_binaries()
    except KubernetesUnavailable as exc:
        kubernetes_unavailable(str(exc))
        raise  # unreachable: skip and fail raise


def require_namespace_machines() -> None:
    """Skip (or fail under CI) unless namespace machines can run here."""
    missing = missing_prerequisites()
    if missing:
        kubernetes_unavailable(missing)
