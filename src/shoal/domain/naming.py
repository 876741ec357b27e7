"""Node names: `<cluster>-<node group>-<5 lowercase alnum>`, at most 63 characters."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Collection

MAX_LEN = 63
SUFFIX_LEN = 5
_ALPHABET = string.ascii_lowercase + string.digits
_BAD = re.compile(r"[^a-z0-9-]+")


def clean(part: str) -> str:
    """`part` as it appears in node names (lowercase letters, digits, dashes)."""
    return _clean(part)


def _clean(part: str) -> str:
    return _BAD.sub("-", part.lower()).strip("-") or "x"


def node_name(
    cluster: str,
    nodegroup: str,
    taken: Collection[str] = (),
    rng: Callable[[], float] = random.random,
) -> str:
    """A DNS-label-safe node name not in `taken` (the prefix is cut so the suffix fits)."""
    prefix = f"{_clean(cluster)}-{_clean(nodegroup)}"[: MAX_LEN - SUFFIX_LEN - 1].rstrip("-")
    while True:
        suffix = "".join(_ALPHABET[int(rng() * len(_ALPHABET))] for _ in range(SUFFIX_LEN))
        name = f"{prefix}-{suffix}"
        if name not in taken:
            return name
