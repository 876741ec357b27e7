"""shoal.logs: the text and JSON formats, the id fields, and redaction of secrets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from shoal import logs
from shoal.settings import Settings, SettingsError


@pytest.fixture
def buf() -> Iterator[io.StringIO]:
    """A buffer to configure logging into; the root logger is restored afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    yield io.StringIO()
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in saved[0]:
        root.addHandler(h)
    root.setLevel(saved[1])


def test_json_lines_carry_the_ids_as_keys(buf: io.StringIO) -> None:
    logs.configure(Settings.from_env(env={"SHOAL_LOG_FORMAT": "json"}), stream=buf)
    log = logging.getLogger("shoal.test")
    glog = logs.bind(log, cluster="c-1", nodegroup="g-1")
    glog.info("node %s ready", "n1", extra=logs.ids(node="n-1"))
    log.debug("not at INFO")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("failed", extra={"attempt": 3})
    lines = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert len(lines) == 2
    first = lines[0]
    assert first["message"] == "node n1 ready" and first["level"] == "INFO"
    assert first["logger"] == "shoal.test" and first["time"].endswith("Z")
    assert (first["cluster_id"], first["nodegroup_id"], first["node_id"]) == ("c-1", "g-1", "n-1")
    assert lines[1]["attempt"] == 3 and "ValueError: boom" in lines[1]["exception"]


def test_text_lines_append_the_ids(buf: io.StringIO) -> None:
    logs.configure_from("DEBUG", "text", stream=buf)
    logging.getLogger("shoal.x").debug("pass done", extra=logs.ids(cluster="c-1"))
    logging.getLogger("uvicorn.access").info('127.0.0.1 - "GET / HTTP/1.1" 200')
    out = buf.getvalue().splitlines()
    assert out[0].endswith("DEBUG shoal.x: pass done cluster_id=c-1")
    assert "uvicorn.access" in out[1]


def test_passwords_never_reach_a_line(buf: io.StringIO) -> None:
    logs.configure_from("INFO", "json", stream=buf)
    log = logging.getLogger("shoal.db")
    log.warning("cannot connect to %s", "postgresql+psycopg://shoal:hunter2@db:5432/shoal")
    try:
        raise RuntimeError("dsn host=db password=hunter2 user=shoal")
    except RuntimeError:
        log.exception("failed")
    assert "hunter2" not in buf.getvalue()
    assert "shoal:***@db:5432" in buf.getvalue()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://user:pw@host/db", "postgresql://user:***@host/db"),
        ("postgresql://user:p@ss@host:5432/db", "postgresql://user:***@host:5432/db"),
        ("postgresql://user@host/db", "postgresql://user@host/db"),
        ("sqlite:////var/lib/shoal/shoal.db", "sqlite:////var/lib/shoal/shoal.db"),
        ("postgresql://host/db?password=pw&x=1", "postgresql://host/db?password=***&x=1"),
        ("http://127.0.0.1:9511/v1", "http://127.0.0.1:9511/v1"),
    ],
)
def test_mask_url(url: str, shown: str) -> None:
    assert logs.mask_url(url) == shown


def test_unknown_level_or_format_names_the_variable() -> None:
    with pytest.raises(SettingsError, match="SHOAL_LOG_LEVEL"):
        logs.configure_from("LOUD", "text")
    with pytest.raises(SettingsError, match="SHOAL_LOG_FORMAT"):
        logs.configure_from("INFO", "xml")
