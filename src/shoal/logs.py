"""Logging of shoal's processes: configured once, at the entry point.

`shoal serve`, `shoal conductor` and `shoal demo` call `configure(settings)`;
every module logs through the standard `logging` module with a logger named for
it (`logging.getLogger(__name__)`). uvicorn's error and access logs propagate to
the same root handler (see `shoal.api.serving`). Output goes to stderr:

- `SHOAL_LOG_FORMAT=text` (default): `2026-11-24T07:08:16.736Z INFO shoal.conductor.loop:
  message cluster_id=... nodegroup_id=...`
- `SHOAL_LOG_FORMAT=json`: one JSON object a line with `time`, `level`, `logger`,
  `message`, every structured field, and `exception` (the traceback) when there is one.
- `SHOAL_LOG_LEVEL`: DEBUG, INFO (default), WARNING or ERROR.

**Structured fields.** A record about a resource names it with these keys, given
through `extra=` (or a `LoggerAdapter` that adds them to every record):

    log.info("node group scaled %d -> %d", old, new,
             extra=logs.ids(cluster=c.uuid, nodegroup=g.uuid))
    glog = logs.bind(log, cluster=c.uuid, nodegroup=g.uuid)   # a LoggerAdapter
    glog.info("node %s ready", n.name, extra=logs.ids(node=n.uuid))

Keys are `cluster_id`, `nodegroup_id`, `node_id` (`FIELDS`); any other `extra=`
key a record carries is emitted as well (JSON keys, or `key=value` in text).
Values should be ids and short words, never secrets.

**Secrets.** Both formats pass the message and the traceback through `redact`,
which masks the password of any `scheme://user:password@host` URL and any
`password=...` pair, so that a database URL cannot reach a log line whole.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from shoal.settings import Settings, SettingsError

FIELDS = ("cluster_id", "nodegroup_id", "node_id")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")
# Attributes every LogRecord has; anything else on a record came through `extra=`.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message",
    "asctime",
    "color_message",  # uvicorn's colored copy of the message
    "taskName",
}
_URL_PASSWORD = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)([^\s/]+)@")
_KV_PASSWORD = re.compile(r"(?i)\b(password|passwd|pwd|secret_key|token)=([^\s&;,'\"]+)")
_HANDLER_NAME = "shoal"
# Loggers that are chatty at INFO about what is not an operator's business.
_QUIET = ("alembic", "sqlalchemy", "httpx", "httpcore", "multipart")


def redact(text: str) -> str:
    """`text` with URL passwords and `password=...` values replaced by `***`."""
    text = _URL_PASSWORD.sub(r"\1***@", text)
    return _KV_PASSWORD.sub(r"\1=***", text)


def mask_url(url: str | None) -> str:
    """A database URL to show: `postgresql://user:***@host/db` (no password)."""
    return redact(url or "")


def ids(
    *, cluster: str | None = None, nodegroup: str | None = None, node: str | None = None
) -> dict[str, str]:
    """The `extra=` mapping naming a cluster, node group and node (those given)."""
    given = zip(FIELDS, (cluster, nodegroup, node), strict=True)
    return {key: value for key, value in given if value is not None}


class _Bound(logging.LoggerAdapter[logging.Logger]):
    """Adds its ids to every record, merged with the record's own `extra=`."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **(kwargs.get("extra") or {})}
        return msg, kwargs


def bind(
    logger: logging.Logger,
    *,
    cluster: str | None = None,
    nodegroup: str | None = None,
    node: str | None = None,
) -> logging.LoggerAdapter[logging.Logger]:
    """A LoggerAdapter that names the given ids on every record it logs."""
    return _Bound(logger, ids(cluster=cluster, nodegroup=nodegroup, node=node))


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The structured fields of a record (what came through `extra=`), ids first."""
    extra = {k: v for k, v in record.__dict__.items() if k not in _STANDARD}
    ordered = {k: extra.pop(k) for k in FIELDS if k in extra}
    return {**ordered, **extra}


def _time(record: logging.LogRecord) -> str:
    stamp = datetime.fromtimestamp(record.created, UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """`time LEVEL logger: message key=value ...`, one line (a traceback follows)."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_time(record)} {record.levelname} {record.name}: {record.getMessage()}"
        fields = fields_of(record)
        if fields:
            line += " " + " ".join(f"{k}={_scalar(v)}" for k, v in fields.items())
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        elif record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return redact(line)


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        for key, value in fields_of(record).items():
            out.setdefault(key, value if _is_json(value) else str(value))
        if record.exc_info:
            out["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False, default=str)


def _scalar(value: Any) -> str:
    text = str(value)
    return json.dumps(text) if (not text or any(c.isspace() for c in text)) else text


def _is_json(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


def configure_from(level: str, fmt: str, stream: TextIO | None = None) -> logging.Handler:
    """Install shoal's handler on the root logger (replacing the one a previous call
    installed); SettingsError naming the variable for an unknown level or format."""
    level_name = str(level).upper()
    if level_name not in LEVELS:
        raise SettingsError(f"SHOAL_LOG_LEVEL={level!r} is not a level: use {', '.join(LEVELS)}")
    if fmt not in FORMATS:
        raise SettingsError(f"SHOAL_LOG_FORMAT={fmt!r} is not a format: use text or json")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_name)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    quiet = logging.DEBUG if level_name == "DEBUG" else logging.WARNING
    for name in _QUIET:
        logging.getLogger(name).setLevel(quiet)
    return handler


def configure(settings: Settings, stream: TextIO | None = None) -> logging.Handler:
    """Configure logging from `settings.log_level` and `settings.log_format`."""
    return configure_from(settings.log_level, settings.log_format, stream)
