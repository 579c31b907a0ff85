"""Helpers for the proxy's tests: a loopback upstream that answers with exact bytes, and exchanges through a proxy."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from tokrace.providers.model.events import Event
from tokrace.providers.proxy import ProxyServer, Routes, Upstream
from tokrace.providers.proxy.demo import demo_session


class Upstream1:
    """A loopback upstream that records what it was sent and answers with raw bytes a test gives, piece by piece
    (each piece after the previous one was read by the proxy's client, when ``step`` says so)."""

    def __init__(self, answer: Callable[[bytes], list[bytes]], gap: float = 0.0) -> None:
        self.answer = answer
        self.gap = gap
        self.requests: list[bytes] = []
        self.closed_at: float | None = None
        self.server: asyncio.Server | None = None
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if b"transfer-encoding: chunked" in head.lower():
                    while True:
                        size = int((await reader.readline()).strip(), 16)
                        body += await reader.readexactly(size + 2)
                        if size == 0:
                            break
                self.requests.append(head + body)
                for piece in self.answer(head + body):
                    writer.write(piece)
                    await writer.drain()
                    if self.gap:
                        await asyncio.sleep(self.gap)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            self.closed_at = time.perf_counter()
            writer.close()

    async def __aenter__(self) -> Upstream1:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()



@asynccontextmanager
async def proxied(upstream: Upstream1) -> AsyncIterator[ProxyServer]:
    async with ProxyServer(Routes.single(Upstream.parse(upstream.url))) as proxy:
        yield proxy


async def exchange(proxy: ProxyServer, request: bytes, until: bytes = b"0\r\n\r\n") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(request)
    await writer.drain()
    got = b""
    while until not in got:
        more = await asyncio.wait_for(reader.read(65536), 5)
        if not more:
            break
        got += more
    writer.close()
    return got


SSE = (b'event: message_start\ndata: {"type":"message_start"}\n\n: a comment\n\n'
       b'event: content_block_delta\r\ndata: {"type":"content_block_delta","delta":{"text":"h\\u00e9"}}\r\n\r\n')


def chunked(*parts: bytes) -> list[bytes]:
    return [f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts] + [b"0\r\n\r\n"]


def sse_answer(request: bytes) -> list[bytes]:
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
            b"connection: keep-alive\r\nkeep-alive: timeout=5\r\nx-request-id: req_1\r\n\r\n")
    return [head, *chunked(SSE[:40], SSE[40:])]


def anthropic_sse(stop: str, text: str = "ok") -> bytes:
    events = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 7, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return b"".join(f"event: {k}\ndata: {json.dumps(v)}\n\n".encode() for k, v in events)


def sse_response(body: bytes) -> list[bytes]:
    return [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
            *chunked(body)]


def scripted_session(until: float) -> list[tuple[int, Event]]:
    """The demo session (:func:`demo_session`) with a key in the agent's text that must never show."""
    return demo_session(until, "Reading the failing test sk-canary-abcdef123456")
