"""The proxy on the real clock: each chunk forwarded before the next is read, the client's leaving closing the
upstream within 100 ms (and the call recorded as cancelled), and a read timeout that counts silence."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from proxying import SSE, Upstream1, anthropic_sse, chunked, exchange, proxied, sse_answer, sse_response

from tokrace.providers.model.events import Error
from tokrace.providers.proxy import ProxyServer, Routes, Upstream
from tokrace.providers.proxy.session import ProxySession
from tokrace.providers.recording import read_recording
from tokrace.providers.traces.read import read_file


async def test_each_piece_reaches_the_client_before_the_upstream_sends_the_next() -> None:
    def answer(request: bytes) -> list[bytes]:
        head, *pieces = sse_answer(request)
        return [head + pieces[0], *pieces[1:]]

    async with Upstream1(answer, gap=0.2) as up, proxied(up) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"POST /v1/messages HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        first = await asyncio.wait_for(reader.read(65536), 0.15)  # long before the next piece is sent
        writer.close()
    assert head.startswith(b"HTTP/1.1 200") and first == chunked(SSE[:40])[0]


@pytest.mark.parametrize("after_head", [False, True])
async def test_the_client_leaving_closes_the_upstream_within_100_ms(after_head: bool) -> None:
    def answer(request: bytes) -> list[bytes]:
        return sse_answer(request)[:2] if after_head else []

    async with Upstream1(answer) as up, proxied(up) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(b"POST /v1/messages HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
        if after_head:
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        else:
            for _ in range(100):
                if up.requests:
                    break
                await asyncio.sleep(0.01)
        writer.close()
        left = time.perf_counter()
        for _ in range(100):
            if up.closed_at is not None:
                break
            await asyncio.sleep(0.005)
    assert up.closed_at is not None and up.closed_at - left < 0.1


async def test_the_read_timeout_counts_silence_between_bytes_not_the_whole_answer() -> None:
    def answer(request: bytes) -> list[bytes]:
        head, *pieces = sse_answer(request)
        return [head, *pieces] if b"slow" in request else [head]  # the other never finishes

    async with Upstream1(answer, gap=0.15) as up, \
            ProxyServer(Routes.single(Upstream.parse(up.url)), read_timeout=0.4) as proxy:
        whole = await exchange(proxy, b"POST /slow HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
        cut = await exchange(proxy, b"POST /silent HTTP/1.1\r\ncontent-length: 0\r\n\r\n")
    assert whole.endswith(b"0\r\n\r\n")  # 0.6 s in all, never 0.4 s silent
    assert cut.startswith(b"HTTP/1.1 200") and not cut.endswith(b"0\r\n\r\n")  # cut off, and seen to be


async def test_a_call_the_client_leaves_mid_stream_is_recorded_as_cancelled(tmp_path: Path) -> None:
    path = tmp_path / "left.jsonl"

    def answer(request: bytes) -> list[bytes]:
        sse = anthropic_sse("end_turn")
        head = sse_response(b"")[0]
        return [head + chunked(sse[:200])[0], *chunked(sse[200:])]

    async with Upstream1(answer, gap=0.5) as up:
        session = ProxySession(Routes.single(Upstream.parse(up.url)), path)
        await session.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", session.server.port)
            writer.write(b"POST /v1/messages HTTP/1.1\r\ncontent-length: 27\r\n\r\n" + b'{"model":"m","stream":true}')
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            writer.close()
            await asyncio.sleep(0.05)
        finally:
            await session.close()
    events = read_recording(path).events[(0, 0)]
    assert [e.error for e in events if isinstance(e, Error)] == ["cancelled"]
    assert read_file(path).traces[0].steps[0].failed
