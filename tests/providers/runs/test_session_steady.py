"""Every run of a session starts as the first did: the last run's connection back in the pool (never a second
connection because the first was still being read to its end), and a ready socket for a run that must connect
anew."""

from __future__ import annotations

import asyncio
import json
import socket

from tokrace.providers.adapters.http.backend import StampedBackend
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.runs.session import run_session

END_DELAY_S = 0.15
"""How long the server holds the end of its chunked body after the final event (the drain is then still reading
when the next run would start)."""


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


class SlowEndServer:
    """Answers every Chat Completions request with two tokens and ``[DONE]``, then the body's end only after
    :data:`END_DELAY_S`; counts the connections it accepted."""

    def __init__(self) -> None:
        self.connections = 0
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")
                for text in ("one", " two"):
                    writer.write(chunk(sse({"choices": [{"index": 0, "delta": {"content": text}}]})))
                writer.write(chunk(sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})))
                writer.write(chunk(sse(b"[DONE]")))
                await writer.drain()
                await asyncio.sleep(END_DELAY_S)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()


async def test_each_run_reuses_the_connection_the_run_before_read_to_its_end() -> None:
    server = SlowEndServer()
    port = await server.start()
    tier = TierSpec(name="lane", provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1")
    try:
        result = await run_session([tier], TurnRequest("hi", max_tokens=5), runs=3)
    finally:
        await server.close()
    assert result.all_ok
    assert server.connections == 1  # (before: a new one for each run, connect_s 0.8–2 ms under load)


async def test_a_socket_is_made_ready_again_for_a_connection_to_come() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    backend = StampedBackend()
    try:
        await backend.resolve("127.0.0.1", port)
        spare = backend._spares[("127.0.0.1", port)]
        stream = await backend.connect_tcp("127.0.0.1", port)
        assert ("127.0.0.1", port) not in backend._spares  # the first connection took it
        backend.rearm()
        again = backend._spares[("127.0.0.1", port)]
        assert again is not spare and again.fileno() >= 0
        await stream.aclose()
    finally:
        backend.close()
        listener.close()
    assert not backend._spares
