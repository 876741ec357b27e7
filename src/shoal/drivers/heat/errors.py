"""The driver's edge: an HTTP answer of Heat, Nova or Glance (or none at all) becomes one
of the contract's three classes, in the cloud's own words."""

from __future__ import annotations

import json
from typing import Any

from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    DriverError,
    PermanentError,
    TransientError,
)

DEFAULT_RETRY_AFTER_S = 1.0
MAX_RETRY_AFTER_S = 3600.0


def message_of(body: str) -> str:
    """The cloud's message in an error body (Heat: error.message and explanation)."""
    try:
        data: Any = json.loads(body)
    except ValueError:
        return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):
            said = str(err.get("message") or "").strip()
            return said or str(data.get("explanation") or body)[:500]
        for value in data.values():  # Nova: {"badRequest": {"message": ...}}
            if isinstance(value, dict) and value.get("message"):
                return str(value["message"])
        if data.get("explanation"):
            return str(data["explanation"])
    return body.strip()[:500]


def classify(status: int | None, text: str, retry_after: float | None = None) -> DriverError:
    """The error class of an answer `status` (None: no answer) whose message is `text`."""
    said = text.strip() or "no message"
    if status is None:
        return TransientError(f"cannot reach the cloud: {said}")
    where = f"{said} (HTTP {status})"
    lower = said.lower()
    if status in (403, 413) and "quota" in lower:
        return BlockedError(where, BlockedKind.QUOTA)
    if status == 401:
        return TransientError(f"the cloud refused the provider's credentials: {where}")
    if status in (413, 429):
        return TransientError(where, retry_after=retry_after or DEFAULT_RETRY_AFTER_S)
    if status >= 500 or status in (408, 409):
        # 409: the stack is busy with another action (Heat): later.
        return TransientError(where, retry_after=retry_after)
    return PermanentError(where)


def retry_after_of(raw: str | None) -> float | None:
    if not raw:
        return None
    try:
        return min(max(float(raw), 0.0), MAX_RETRY_AFTER_S)
    except ValueError:
        return None
