"""`python -m tests.harness.kubernetes build`: build (or find) the cached Kubernetes
binaries and print their bin dir; exit 1 with the reason when they cannot be had."""

from __future__ import annotations

import sys

from tests.harness.kubernetes.build import KubernetesUnavailable, ensure_binaries

USAGE = "usage: python -m tests.harness.kubernetes build"


def main(argv: list[str]) -> int:
    if argv != ["build"]:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        print(ensure_binaries())
    except KubernetesUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
