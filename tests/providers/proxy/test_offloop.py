"""A streamed answer's body relayed on a thread once its head went: byte for byte, each chunk's copy and kernel stamp
handed to the measuring, the thread ending with the body (done, upstream failure, client gone, stopped), none
left behind after many calls (the real-clock ones, cancellation within 100 ms, are in tests/e2e)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from proxying import SSE, Upstream1, chunked, proxied, sse_answer

from tokrace.providers.proxy import ProxyServer, Routes, Upstream, offloop
from tokrace.providers.proxy.http1 import Head
from tokrace.providers.proxy.offloop import IDLE_KEPT, RelayThreads

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the relay threads are Linux's (poll, eventfd)")


class Seen:
    """An observer that notes what the relay handed on, and when."""

    def __init__(self) -> None:
        self.pieces: list[tuple[float, bytes]] = []
        self.ends: list[tuple[str, str]] = []
        self.head_at = 0.0

    def request(self, head: Head, arrived: float, upstream: object) -> None:
        pass

    def request_body(self, piece: bytes) -> None:
        pass

    def sent(self, t: float, fresh_connection: bool, connected: float | None) -> None:
        pass

    def response_head(self, t: float, head: Head) -> None:
        self.head_at = t

    def response_body(self, t: float, pieces: list[bytes]) -> None:
        self.pieces.extend((t, piece) for piece in pieces)

    def ended(self, t: float, outcome: str, detail: str = "") -> None:
        self.ends.append((outcome, detail))


@pytest.fixture
def handed() -> Iterator[list[object]]:
    """The streams handed to relay threads during the test."""
    streams: list[object] = []
    run = RelayThreads.run

    def noting(self: RelayThreads, stream: offloop.Stream) -> None:
        streams.append(stream)
        run(self, stream)

    RelayThreads.run = noting  # type: ignore[method-assign]
    yield streams
    RelayThreads.run = run  # type: ignore[method-assign]


def relay_threads() -> int:
    return sum(thread.name == "tokrace proxy relay" for thread in threading.enumerate())


async def call(proxy: ProxyServer, request: bytes, until: bytes = b"0\r\n\r\n", *,
               connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None) -> bytes:
    reader, writer = connection or await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(request)
    got = b""
    while not got.endswith(until):
        more = await asyncio.wait_for(reader.read(65536), 5)
        if not more:
            break
        got += more
    if connection is None:
        writer.close()
    return got


POST = b"POST /v1/messages HTTP/1.1\r\ncontent-length: 0\r\n\r\n"


async def closing_call(pieces: list[bytes], seen: Seen, until: bytes = b"0\r\n\r\n") -> bytes:
    """One call through a proxy to an upstream that writes ``pieces`` 10 ms apart and closes; what the client got,
    once the call ended."""
    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        for piece in pieces:
            writer.write(piece)
            await asyncio.sleep(0.01)
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    async with ProxyServer(Routes.single(Upstream.parse(url)), lambda m, p: seen) as proxy:
        got = await call(proxy, POST, until=until)
        for _ in range(100):
            if seen.ends:
                break
            await asyncio.sleep(0.01)
    server.close()
    return got


async def test_a_body_after_its_head_goes_on_a_thread_byte_for_byte_and_each_chunk_is_measured_with_its_stamp(
        handed: list[object]) -> None:
    seen = Seen()
    pieces = [SSE[i:i + 17] for i in range(0, len(SSE), 17)]

    def answer(request: bytes) -> list[bytes]:
        return [sse_answer(request)[0], *chunked(*pieces)]

    async with Upstream1(answer, gap=0.01) as up, \
            ProxyServer(Routes.single(Upstream.parse(up.url)), lambda m, p: seen) as proxy:
        sent = time.perf_counter()
        got = await call(proxy, POST)
        await asyncio.sleep(0.05)
    assert len(handed) == 1
    assert got.partition(b"\r\n\r\n")[2] == b"".join(chunked(*pieces))
    assert b"".join(p for _, p in seen.pieces) == SSE and [p for _, p in seen.pieces] == pieces
    times = [t for t, _ in seen.pieces]
    assert sent < seen.head_at < times[0] and times == sorted(times)  # the kernel's stamps, one per read
    assert seen.ends == [("done", "")]


async def test_a_length_body_on_a_thread_ends_at_its_length_and_the_upstream_connection_is_used_again(
        handed: list[object]) -> None:
    body = b'{"type":"message","content":[]}'

    def answer(request: bytes) -> list[bytes]:
        return [b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(body)).encode() + b"\r\n\r\n", body[:9], body[9:]]

    async with Upstream1(answer, gap=0.01) as up, proxied(up) as proxy:
        connection = await asyncio.open_connection("127.0.0.1", proxy.port)
        first = await call(proxy, POST, until=body, connection=connection)
        second = await call(proxy, POST, until=body, connection=connection)
        connection[1].close()
    assert first.endswith(b"\r\n\r\n" + body) and second.endswith(b"\r\n\r\n" + body)
    assert len(handed) == 2 and up.connections == 1


async def test_a_body_that_runs_to_the_upstreams_close_ends_done_on_its_thread(handed: list[object]) -> None:
    seen = Seen()
    got = await closing_call([b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n", SSE[:30], SSE[30:]],
                             seen, until=b"(read to the close)")
    assert len(handed) == 1 and got.endswith(b"connection: close\r\n\r\n" + SSE)
    assert b"".join(p for _, p in seen.pieces) == SSE and seen.ends == [("done", "")]


async def test_a_slow_client_gets_every_byte_the_thread_relays_in_order(handed: list[object]) -> None:
    big = [os.urandom(200_000).hex().encode() for _ in range(6)]  # 2.4 MB: the client's socket fills

    def answer(request: bytes) -> list[bytes]:
        return [sse_answer(request)[0], *chunked(*big)]

    async with Upstream1(answer, gap=0.005) as up, proxied(up) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port, limit=1 << 24)
        writer.write(POST)
        await asyncio.sleep(0.3)  # reading nothing meanwhile
        got = b""
        while not got.endswith(b"0\r\n\r\n"):
            got += await asyncio.wait_for(reader.read(1 << 20), 5)
        writer.close()
    assert len(handed) == 1 and got.partition(b"\r\n\r\n")[2] == b"".join(chunked(*big))


@pytest.mark.parametrize("fault, why", [
    (b"", "the upstream closed the connection in the middle of the answer"),
    (b"zz\r\n", "the upstream sent a malformed chunk size"),
])
async def test_an_upstream_failing_mid_body_on_a_thread_ends_the_call_and_cuts_the_clients_answer(
        handed: list[object], fault: bytes, why: str) -> None:
    seen = Seen()
    head, first, *_ = sse_answer(POST)
    got = await closing_call([head, first, fault], seen)
    assert len(handed) == 1
    assert got.startswith(b"HTTP/1.1 200") and not got.endswith(b"0\r\n\r\n")  # cut off, and seen to be
    assert seen.ends and seen.ends[0][0] == "upstream" and seen.ends[0][1].startswith(why)


async def test_a_thousand_calls_leave_no_thread_and_no_descriptor_behind(handed: list[object]) -> None:
    def answer(request: bytes) -> list[bytes]:
        head, *pieces = sse_answer(request)
        return [head, b"".join(pieces)]

    before_fds = len(os.listdir("/proc/self/fd"))
    async with Upstream1(answer, gap=0.001) as up, proxied(up) as proxy:
        async def agent() -> None:
            connection = await asyncio.open_connection("127.0.0.1", proxy.port)
            for _ in range(100):
                got = await call(proxy, POST, connection=connection)
                assert got.endswith(b"".join(chunked(SSE[:40], SSE[40:])))
            connection[1].close()

        await asyncio.gather(*(agent() for _ in range(10)))
        assert proxy.threads is not None and relay_threads() <= 10
        await asyncio.sleep(0.05)
        kept = proxy.threads.alive
    assert len(handed) == 1000 and kept <= IDLE_KEPT
    assert relay_threads() == 0
    for _ in range(100):  # (the transports close on the loop's next turns)
        if len(os.listdir("/proc/self/fd")) <= before_fds:
            break
        await asyncio.sleep(0.01)
    assert len(os.listdir("/proc/self/fd")) <= before_fds


async def test_the_proxy_closing_stops_a_thread_waiting_on_a_silent_upstream(handed: list[object]) -> None:
    def answer(request: bytes) -> list[bytes]:
        return [sse_answer(request)[0]]  # then silence

    async with Upstream1(answer) as up:
        proxy = ProxyServer(Routes.single(Upstream.parse(up.url)))
        await proxy.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
        writer.write(POST)
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        for _ in range(100):
            if handed:
                break
            await asyncio.sleep(0.01)
        await asyncio.wait_for(proxy.close(), 2)
        writer.close()
    assert len(handed) == 1 and relay_threads() == 0


def test_a_waiting_relay_thread_takes_the_next_stream_and_ends_after_its_idle_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offloop, "IDLE_S", 0.05)
    ran: list[int] = []

    class Job:
        def __init__(self, n: int) -> None:
            self.n = n

        def run(self) -> None:
            ran.append(self.n)

    threads = RelayThreads()
    threads.run(Job(1))  # type: ignore[arg-type]
    for _ in range(100):
        if threads._idle:
            break
        time.sleep(0.001)
    threads.run(Job(2))  # type: ignore[arg-type]
    for _ in range(200):
        if threads.alive == 0:
            break
        time.sleep(0.005)
    assert ran == [1, 2] and threads.alive == 0


def test_the_switch_interval_is_short_while_on_and_as_it_was_after() -> None:
    was = sys.getswitchinterval()
    switching = offloop.SwitchInterval()
    switching.start()
    during: Any = sys.getswitchinterval()
    switching.stop()
    assert during == pytest.approx(offloop.SWITCH_S) and sys.getswitchinterval() == was
