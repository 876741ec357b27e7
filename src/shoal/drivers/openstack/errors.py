"""The driver's edge: every openstacksdk and keystoneauth exception becomes one of the
contract's three classes, in the cloud's own words (docs/drivers.md, "The openstack
driver", has the table).

`classify` is the rule on plain values (an HTTP status, the cloud's message, its
Retry-After), so it is tested without a cloud; `mapped` reads those values off
whatever the SDK raised; `edge` wraps a block of SDK calls.
"""

from __future__ import annotations

import contextlib
import email.utils
import time
from collections.abc import Iterator, Mapping

import requests
from keystoneauth1 import exceptions as ks_exceptions
from openstack import exceptions as sdk_exceptions

from shoal.drivers.contract import (
    BlockedError,
    BlockedKind,
    DriverError,
    PermanentError,
    TransientError,
)

# A 429 that does not say when to come back: come back after this long.
DEFAULT_RETRY_AFTER_S = 1.0
MAX_RETRY_AFTER_S = 3600.0
# Nova's words for a scheduling failure, synchronous or as a server's fault
# (MaxRetriesExceeded is a NoValidHost in Nova: every host tried failed the build).
NO_VALID_HOST_WORDS = ("no valid host", "exceeded maximum number of retries")
# "Quota exceeded for cores: ...", "Quota exceeded, too many servers in group",
# Neutron's "Maximum number of ports exceeded" as Nova passes it on.
QUOTA_WORDS = ("quota", "maximum number of")


def classify(
    status: int | None, text: str, retry_after: float | None = None, az: str | None = None
) -> DriverError:
    """The error class of an HTTP answer `status` whose message is `text` (None: no
    answer at all: a timeout, a refused or reset connection). `az` is the zone the
    request asked for, named by a "no valid host" refusal."""
    said = text.strip() or "no message"
    lower = said.lower()
    if status is None:
        return TransientError(f"cannot reach the cloud: {said}")
    where = f"{said} (HTTP {status})"
    if status in (400, 409) and any(w in lower for w in NO_VALID_HOST_WORDS):
        return BlockedError(where, BlockedKind.NO_VALID_HOST, az=az)
    if status in (403, 413) and any(w in lower for w in QUOTA_WORDS):
        return BlockedError(where, BlockedKind.QUOTA)
    if status == 401:
        return TransientError(f"the cloud refused the provider's credentials: {where}")
    if status in (413, 429):
        return TransientError(where, retry_after=retry_after or DEFAULT_RETRY_AFTER_S)
    if status >= 500 or status in (408, 409):
        # 409: the server is busy with another task (a reboot, a delete): later.
        return TransientError(where, retry_after=retry_after)
    return PermanentError(where)


def fault_kind(code: int | None, message: str | None) -> BlockedKind | None:
    """Why Nova failed a server (its `fault`), when that is a refusal: the racy
    quota recheck fails with code 413, scheduling with "No valid host was found"."""
    lower = (message or "").lower()
    if any(w in lower for w in NO_VALID_HOST_WORDS):
        return BlockedKind.NO_VALID_HOST
    if code == 413 or any(w in lower for w in QUOTA_WORDS):
        return BlockedKind.QUOTA
    return None


def retry_after_of(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header (a number, or an HTTP date), bounded."""
    raw = (headers or {}).get("Retry-After") or (headers or {}).get("retry-after")
    if not raw:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw).timestamp()
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when - (time.time() if now is None else now)
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an SDK or keystoneauth exception carries (None: no answer)."""
    if isinstance(exc, sdk_exceptions.HttpException):
        return exc.status_code
    if isinstance(exc, ks_exceptions.HttpError):
        return int(exc.http_status) if exc.http_status else None
    return None


def mapped(exc: BaseException, az: str | None = None) -> DriverError:
    """`exc`, raised by openstacksdk or keystoneauth, as a contract error."""
    if isinstance(exc, DriverError):
        return exc
    if isinstance(exc, sdk_exceptions.HttpException):
        response = exc.response
        headers = response.headers if response is not None else None
        text = str(exc.details or exc.message or exc)
        return classify(exc.status_code, text, retry_after_of(headers), az)
    if isinstance(exc, ks_exceptions.HttpError):
        response = exc.response
        headers = response.headers if response is not None else None
        text = str(exc.details or exc.message)
        status = int(exc.http_status) if exc.http_status else None
        hint = retry_after_of(headers) or getattr(exc, "retry_after", None)
        return classify(status, text, hint, az)
    if isinstance(exc, ks_exceptions.ConnectionError | requests.RequestException):
        return classify(None, f"{type(exc).__name__}: {exc}")
    # Anything else of the SDK's or keystoneauth's (no catalog entry for compute, a
    # failed discovery, an auth plugin that cannot authenticate): the configuration
    # or the cloud may change; say what happened and retry with backoff.
    return TransientError(f"{type(exc).__name__}: {exc}")


HANDLED = (
    sdk_exceptions.SDKException,
    ks_exceptions.ClientException,
    requests.RequestException,
)


@contextlib.contextmanager
def edge(az: str | None = None) -> Iterator[None]:
    """Map what the SDK raises inside the block (see `mapped`)."""
    try:
        yield
    except HANDLED as exc:
        raise mapped(exc, az) from exc
