"""shoal.api.serving.bind: the listening socket `shoal serve` hands to uvicorn."""

from __future__ import annotations

import asyncio
import socket

import pytest

from shoal.api import serving


def test_accepted_connections_send_without_delay() -> None:
    """asyncio sets TCP_NODELAY on accepted connections only when the listening
    socket says TCP; without it every answer waited ~40 ms for a delayed ACK."""
    sock = serving.bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    seen: list[int] = []

    async def main() -> None:
        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            raw = writer.get_extra_info("socket")
            seen.append(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(main())
    assert seen and seen[0] != 0


def test_a_taken_port_names_the_address() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(serving.PortTaken, match=f"127.0.0.1:{port}"):
            serving.bind("127.0.0.1", port)
