"""libvirt's errors mapped to shoal's three classes, at the driver's edge.

Nothing above this package sees `libvirt.libvirtError`: every call to a host goes
through `Hosts.call`, which maps the error with `classify` and drops a connection that
is broken, so that the next call opens a new one. One table, as httpx maps its
transport's exceptions: a lost or refused connection and a busy daemon are transient,
a request libvirt cannot accept (bad XML, unsupported, a missing pool, volume or
network) is permanent. An error code not in the table is transient: the conductor
retries with backoff and shows the message, which is safer than failing a group on an
error libvirt may clear by itself.
"""

from __future__ import annotations

from typing import Any

from shoal.drivers.contract import DriverError, PermanentError, TransientError

# Codes (libvirt's virErrorNumber) by what the driver does about them.
CONNECTION = {
    5: "VIR_ERR_NO_CONNECT",
    6: "VIR_ERR_INVALID_CONN",
    38: "VIR_ERR_SYSTEM_ERROR",  # a socket or ssh error
    39: "VIR_ERR_RPC",
    45: "VIR_ERR_AUTH_FAILED",
    79: "VIR_ERR_AUTH_CANCELLED",
    94: "VIR_ERR_AUTH_UNAVAILABLE",
}
TRANSIENT = {
    1: "VIR_ERR_INTERNAL_ERROR",
    2: "VIR_ERR_NO_MEMORY",  # the daemon's own memory
    9: "VIR_ERR_OPERATION_FAILED",
    55: "VIR_ERR_OPERATION_INVALID",  # the domain is in the wrong state for it right now
    68: "VIR_ERR_OPERATION_TIMEOUT",
    78: "VIR_ERR_OPERATION_ABORTED",
    86: "VIR_ERR_AGENT_UNRESPONSIVE",
    87: "VIR_ERR_RESOURCE_BUSY",
}
PERMANENT = {
    3: "VIR_ERR_NO_SUPPORT",
    8: "VIR_ERR_INVALID_ARG",
    27: "VIR_ERR_XML_ERROR",
    28: "VIR_ERR_DOM_EXIST",  # another domain has that name
    29: "VIR_ERR_OPERATION_DENIED",
    35: "VIR_ERR_XML_DETAIL",
    43: "VIR_ERR_NO_NETWORK",
    49: "VIR_ERR_NO_STORAGE_POOL",
    50: "VIR_ERR_NO_STORAGE_VOL",
    67: "VIR_ERR_CONFIG_UNSUPPORTED",
    74: "VIR_ERR_ARGUMENT_UNSUPPORTED",
    84: "VIR_ERR_OPERATION_UNSUPPORTED",
}
NO_DOMAIN = 42  # VIR_ERR_NO_DOMAIN: "not found", which each caller decides about
NO_STORAGE_VOL = 50
STORAGE_VOL_EXIST = 90
NO_SUPPORT = 3

# Words of a start that failed because the host lacks memory: a full host, reported
# after the create (as Nova's "No valid host was found" is).
_NO_ROOM = (
    "cannot allocate memory",
    "out of memory",
    "failed to allocate",
    "cannot set up guest memory",
    "not enough memory",
)


def code(exc: Any) -> int:
    """The libvirt error code of `exc` (0 when it has none)."""
    get = getattr(exc, "get_error_code", None)
    return int(get() or 0) if callable(get) else 0


def message(exc: Any) -> str:
    get = getattr(exc, "get_error_message", None)
    text = get() if callable(get) else None
    return str(text or exc).strip()


def is_connection_error(exc: Any) -> bool:
    """Whether the connection that raised `exc` should be dropped and opened again."""
    return code(exc) in CONNECTION


def classify(exc: Any, host: str) -> DriverError:
    """`exc` (a libvirtError) as one of the three classes, its reason naming the host."""
    c = code(exc)
    name = CONNECTION.get(c) or TRANSIENT.get(c) or PERMANENT.get(c) or f"code {c}"
    reason = f"libvirt host {host}: {message(exc)} ({name})"
    if c in PERMANENT:
        return PermanentError(reason)
    return TransientError(reason)


def start_fault(exc: Any, host: str) -> tuple[str, bool]:
    """Why a domain could not start, as its fault, and whether that means the host has no
    room for it (then the fault reads as Nova's "No valid host was found")."""
    text = message(exc)
    if any(words in text.lower() for words in _NO_ROOM):
        return f"No valid host was found: host {host} cannot start it: {text}", True
    return f"libvirt host {host} could not start it: {text}", False
