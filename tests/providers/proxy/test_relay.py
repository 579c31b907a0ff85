"""The proxy's relay: byte for byte both ways, hop-by-hop headers, its own answers (the real-clock ones, each chunk
forwarded before the next is read and the client's leaving, are in tests/e2e/test_proxy_timing.py)."""

from __future__ import annotations

import asyncio
import gzip

import pytest
from proxying import SSE, Upstream1, chunked, exchange, proxied, sse_answer

from tokrace.providers.proxy import ProxyServer, Routes, Upstream
from tokrace.providers.proxy.http1 import BodyEnd, HeadError


async def test_a_chunked_sse_answer_arrives_byte_for_byte_and_hop_by_hop_headers_go() -> None:
    async with Upstream1(sse_answer) as up, proxied(up) as proxy:
        got = await exchange(proxy, b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: evil.example\r\n"
                                    b"x-api-key: k\r\nanthropic-beta: b1\r\nConnection: keep-alive, x-hop\r\n"
                                    b"x-hop: 1\r\ncontent-length: 2\r\n\r\n{}")
    head, _, body = got.partition(b"\r\n\r\n")
    assert body == b"".join(chunked(SSE[:40], SSE[40:]))
    assert b"keep-alive: timeout" not in head.lower() and b"x-request-id: req_1" in head
    sent = up.requests[0]
    assert sent.startswith(b"POST /v1/messages?beta=true HTTP/1.1\r\n")
    assert f"Host: {up.url.removeprefix('http://')}".encode() in sent  # never the client's Host
    assert b"x-api-key: k" in sent and b"anthropic-beta: b1" in sent and b"x-hop" not in sent
    assert sent.endswith(b"\r\n\r\n{}")


async def test_error_bodies_and_compressed_bodies_pass_unchanged() -> None:
    packed = gzip.compress(b'{"type":"error","error":{"type":"overloaded_error"}}')

    def answer(request: bytes) -> list[bytes]:
        return [b"HTTP/1.1 529 Overloaded\r\ncontent-encoding: gzip\r\ncontent-length: "
                + str(len(packed)).encode() + b"\r\nretry-after: 2\r\n\r\n" + packed]

    async with Upstream1(answer) as up, proxied(up) as proxy:
        got = await exchange(proxy, b"POST /v1/messages HTTP/1.1\r\ncontent-length: 0\r\n\r\n", until=packed)
    assert got.startswith(b"HTTP/1.1 529 Overloaded\r\n") and got.endswith(packed)
    assert b"retry-after: 2" in got


async def test_a_chunked_request_body_is_relayed_with_its_framing_and_the_next_request_follows() -> None:
    async with Upstream1(sse_answer) as up, proxied(up) as proxy:
        one = b"POST /v1/responses HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        for _ in range(2):  # the same connection, kept alive
            writer.write(one)
            got = b""
            while not got.endswith(b"0\r\n\r\n") or b"\r\n\r\n" not in got:
                got += await asyncio.wait_for(reader.read(65536), 5)
        writer.close()
    assert len(up.requests) == 2
    assert all(b"\r\n\r\nhello\r\n" in r for r in up.requests)


async def test_the_proxy_answers_health_probes_and_websocket_upgrades_itself() -> None:
    async with Upstream1(sse_answer) as up, proxied(up) as proxy:
        health = await exchange(proxy, b"HEAD / HTTP/1.1\r\n\r\n", until=b"\r\n\r\n")
        ws = await exchange(proxy, b"GET /v1/responses HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                                   b"Sec-WebSocket-Version: 13\r\n\r\n", until=b"}}")
        absolute = await exchange(proxy, b"GET http://example.com/ HTTP/1.1\r\n\r\n", until=b"}}")
    assert health.startswith(b"HTTP/1.1 200 ") and health.endswith(b"\r\n\r\n")
    assert ws.startswith(b"HTTP/1.1 426 ")
    assert absolute.startswith(b"HTTP/1.1 400 ")
    assert up.requests == []  # none of them reached the upstream


async def test_an_unreachable_upstream_is_a_502_saying_so() -> None:
    async with ProxyServer(Routes.single(Upstream.parse("http://127.0.0.1:9"))) as proxy:
        got = await exchange(proxy, b"POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}",
                             until=b"}}")
    assert got.startswith(b"HTTP/1.1 502 ") and b"cannot reach the upstream http://127.0.0.1:9" in got


def test_a_body_end_finds_a_chunked_end_however_the_bytes_are_split() -> None:
    data = b"4\r\nwiki\r\n5;ext=1\r\npedia\r\n0\r\nx-trailer: 1\r\n\r\nNEXT"
    for cut in range(1, len(data)):
        end = BodyEnd(None, True)
        used_a, a = end.feed(data[:cut])
        used_b, b = end.feed(data[cut:]) if not end.done else (0, [])
        assert end.done and used_a + used_b == len(data) - 4 and b"".join(a + b) == b"wikipedia"
    with pytest.raises(HeadError):
        BodyEnd(None, True).feed(b"zz\r\n")




async def test_an_upstream_with_its_own_key_replaces_the_clients_auth_headers() -> None:
    async with Upstream1(sse_answer) as up:
        routes = Routes.single(Upstream.parse(up.url, auth=(("x-api-key", "tier-key"),)))
        async with ProxyServer(routes) as proxy:
            await exchange(proxy, b"POST /v1/messages HTTP/1.1\r\nx-api-key: client-key\r\n"
                                  b"Authorization: Bearer client\r\ncontent-length: 0\r\n\r\n")
    sent = up.requests[0]
    assert b"x-api-key: tier-key" in sent and b"client" not in sent
