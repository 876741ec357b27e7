"""A request line plus headers above SHOAL_MAX_HEADER_BYTES is refused, however it
arrives: whole in one read (the app's 431 in Magnum's shape) or growing past the
bound (h11's 400); within the bound it is served, and the server goes on."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from shoal.api import bodylimit
from tests.integration.cli_support import fast_settings
from tests.support.server import LiveServer, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    data: Path = tmp_path_factory.mktemp("header-limit")
    with live_server(fast_settings(data, conductor=False)) as srv:
        yield srv


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while len(b"".join(chunks)) < 65536:
            got = sock.recv(65536)
            if not got:
                break
            chunks.append(got)
            if b"\r\n\r\n" in b"".join(chunks) and b"}" in got:
                break
        return b"".join(chunks)


@pytest.mark.parametrize("pad", [200 * 1024, 40 * 1024])
def test_a_header_block_over_the_limit_is_431_in_magnums_shape(
    server: LiveServer, pad: int
) -> None:
    limit = server.runtime.settings.max_header_bytes
    token = {"X-Auth-Token": server.token()}
    try:
        r = httpx.get(f"{server.v1}/clusters", headers={**token, "X-Pad": "p" * pad})
    except httpx.TransportError:  # h11 answered 400 and closed while the client still sent
        r = None
    if r is not None:
        assert r.status_code in (431, 400), r.text
    if r is not None and r.status_code == 431:  # arrived whole: the app's answer
        err = r.json()["errors"][0]
        assert err["status"] == 431 and "SHOAL_MAX_HEADER_BYTES" in err["detail"]
        assert str(limit) in err["detail"]
    assert httpx.get(f"{server.v1}/clusters", headers=token).status_code == 200


def test_a_whole_block_just_over_the_limit_in_one_write_is_431(server: LiveServer) -> None:
    limit = server.runtime.settings.max_header_bytes
    head = b"GET /v1/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Pad: "
    pad = b"p" * (limit - len(head) - 4 + 100)
    answer = _raw(server.port, head + pad + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 431"), answer[:200]
    assert b'"status":431' in answer


def test_a_block_at_the_limit_is_served(server: LiveServer) -> None:
    limit = server.runtime.settings.max_header_bytes
    token = server.token().encode()
    head = b"GET /v1/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Auth-Token: "
    head += token + b"\r\nX-Pad: "
    pad = b"p" * (limit - len(head) - 4)
    request = head + pad + b"\r\n\r\n"
    assert len(request) == limit
    answer = _raw(server.port, request)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]


@pytest.mark.parametrize(
    ("scope", "size"),
    [
        ({"method": "GET", "raw_path": b"/v1", "headers": []}, len(b"GET /v1 HTTP/1.1\r\n\r\n")),
        (
            {"method": "GET", "raw_path": b"/v1", "query_string": b"a=1",
             "headers": [(b"host", b"x")]},
            len(b"GET /v1?a=1 HTTP/1.1\r\nhost: x\r\n\r\n"),
        ),
    ],
)  # fmt: skip
def test_header_block_size_counts_the_bytes_sent(scope: dict[str, object], size: int) -> None:
    assert bodylimit.header_block_size(scope) == size
