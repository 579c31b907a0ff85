"""The socket-time transport: bytes are stamped when they reach the socket, not when the event loop gets to them;
plain HTTP and TLS both; connections are reused between turns."""

from __future__ import annotations

import asyncio
import itertools
import os
import ssl
import sys
import threading
import time

import pytest
from paths import DATA
from serving import Taken, fast_source, shut, stamped_connection, stream_turn, text_of, tier

from tokrace.providers.adapters import create_provider
from tokrace.providers.adapters.http.clients import stamped_transport
from tokrace.providers.adapters.http.stamped_stream import StampedStream
from tokrace.providers.model.events import Delta, Done, Segment
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.serve import ServeServer
from tokrace.providers.timing.clock import LaneClock, RealClock

"""A self-signed certificate for 127.0.0.1 (valid until 2126), made for these tests only."""


async def pair() -> tuple[StampedStream, asyncio.StreamWriter, asyncio.Server]:
    """A stamped client stream connected to a loopback server whose writer the test holds."""
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)
        await reader.read()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stream = await stamped_connection(port)
    return stream, await accepted.get(), server


async def test_bytes_keep_their_arrival_time_while_the_event_loop_is_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    stream, writer, server = await pair()
    try:
        writer.write(b"first")
        await writer.drain()
        sent = time.perf_counter()
        loop_thread, on_time = threading.get_ident(), time.perf_counter

        def busy_loop() -> float:
            """``perf_counter`` as the event loop's thread reads it after being away 200 ms (other threads: on time)."""
            return on_time() + (0.2 if threading.get_ident() == loop_thread else 0.0)

        with monkeypatch.context() as busy:
            busy.setattr(time, "perf_counter", busy_loop)
            data = await stream.read(1024, timeout=5)
        assert data == b"first"
        assert stream.read_at is not None and stream.read_at - sent < 0.1  # not the 200 ms the loop was away
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_a_read_larger_than_asked_is_handed_out_in_pieces_with_one_stamp() -> None:
    stream, writer, server = await pair()
    try:
        writer.write(b"abcdef")
        await writer.drain()
        assert await stream.read(4, timeout=5) == b"abcd"
        first = stream.read_at
        assert await stream.read(4, timeout=5) == b"ef"
        assert stream.read_at == first
        writer.close()
        assert await stream.read(4, timeout=5) == b""
        assert stream.get_extra_info("is_readable")
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_a_read_with_nothing_coming_times_out() -> None:
    import httpcore

    stream, writer, server = await pair()
    try:
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(10, timeout=0.02)
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_writes_note_when_the_last_byte_went_to_the_socket() -> None:
    stream, writer, server = await pair()
    try:
        before = time.perf_counter()
        await stream.write(b"GET / HTTP/1.1\r\n\r\n")
        await stream.write(b"")  # h11's end of the message
        assert stream.sent_at is not None and stream.sent_at >= before
    finally:
        await stream.aclose()
        await shut(server, writer)


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's transmit stamps (SO_TIMESTAMPING) are Linux's")
async def test_a_request_is_on_the_wire_when_the_kernel_sent_it_not_when_the_call_to_send_it_began(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The moment a request went on the wire is the kernel's transmit stamp of its last byte: a thread held inside
    the sending call (here: a clock that has the call begin a whole second early) put that time into the request's
    trip to the server."""
    from tokrace.providers.adapters.http import stamped_stream

    class Early:
        """``time`` with ``perf_counter`` read a second early."""

        def __getattr__(self, name: str) -> object:
            return getattr(time, name)

        @staticmethod
        def perf_counter() -> float:
            return time.perf_counter() - 1.0

    stream, writer, server = await pair()
    try:
        monkeypatch.setattr(stamped_stream, "time", Early())
        before = time.perf_counter()
        await stream.write(b"GET / HTTP/1.1\r\n\r\n")
        await stream.write(b"")
        monkeypatch.undo()
        assert stream.sent_at is not None and before <= stream.sent_at <= time.perf_counter()
        await stream.write(b"GET /again HTTP/1.1\r\n\r\n")  # the next request: its own stamp, not the first's
        await stream.write(b"")
        assert stream.sent_at is not None and stream.sent_at > before
        assert stream.sends is not None and stream.sends.total == 2 * len(b"GET / HTTP/1.1\r\n\r\n") + 5
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_a_request_goes_to_the_socket_in_one_write_at_its_end() -> None:
    reads: asyncio.Queue[bytes] = asyncio.Queue()
    writers: list[asyncio.StreamWriter] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        while data := await reader.read(1000):
            await reads.put(data)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    stream = await stamped_connection(server.sockets[0].getsockname()[1])
    try:
        await stream.write(b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n")
        await stream.write(b"{}")
        assert stream.sent_at is None  # held until the message ends
        await stream.write(b"")
        assert stream.sent_at is not None
        got = await asyncio.wait_for(reads.get(), 5)
        assert got == b"POST / HTTP/1.1\r\ncontent-length: 2\r\n\r\n{}"
    finally:
        await stream.aclose()
        await shut(server, *writers)


async def test_connections_are_reused_between_turns() -> None:
    async with ServeServer(fast_source()) as server:
        prov = create_provider(tier(server, "openai"))
        await prov.prepare()
        try:
            labels = []
            for _ in range(3):
                clock = RealClock()
                events = [e async for e in prov.stream(TurnRequest("hi", max_tokens=5), LaneClock(clock, clock.now()))]
                assert isinstance(events[-1], Done)
                labels.append(next(e.label for e in events if isinstance(e, Segment) and e.seg == "connect"))
                await asyncio.gather(*prov._drains)  # type: ignore[attr-defined]  # the finished response drains
        finally:
            await prov.aclose()
    assert labels == ["new connection", "reused connection", "reused connection"]


async def test_tls_streams_are_stamped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(DATA / "loopback-cert.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(DATA / "loopback-cert.pem", DATA / "loopback-key.pem")
    server = ServeServer(fast_source())
    await server.start(tls=context)
    try:
        assert server.url.startswith("https://127.0.0.1:")
        for protocol in ("openai", "anthropic"):
            events = await stream_turn(tier(server, protocol))
            assert isinstance(events[-1], Done) and text_of(events)
            assert all(e.t >= 0 for e in events if isinstance(e, Delta))
    finally:
        await server.close()


def test_the_transport_steps_aside_behind_a_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    assert stamped_transport() is not None
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:3128")
    assert stamped_transport() is None


async def test_a_reader_that_always_finds_bytes_waiting_still_lets_the_event_loop_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream faster than its parsing: every read finds bytes already there, so without a yield the lane's task
    would hold the loop (the screen, the other lanes, timers) for the whole stream."""
    from tokrace.providers.adapters.http import stamped_stream

    monkeypatch.setattr(stamped_stream, "READ_SLICE_S", 0.0)
    taken = Taken(monkeypatch)
    stream, writer, server = await pair()
    try:
        for i in range(50):  # separate packets, each its own read: each written once the one before was read
            writer.write(b"x" * 10)
            await writer.drain()
            await taken.until(lambda i=i: taken.bytes(stream) == 10 * (i + 1), f"packet {i} read")
        queued = len(stream._reads)
        assert queued >= 5
        passes = 0

        async def count() -> None:
            nonlocal passes
            while True:
                passes += 1
                await asyncio.sleep(0)

        counter = asyncio.create_task(count())
        await asyncio.sleep(0)
        before = passes
        for _ in range(queued):
            await stream.read(1024, timeout=5)
        assert passes - before >= queued - 1  # the other task ran between the reads
        counter.cancel()
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_reads_soon_after_a_wake_up_wait_in_the_queue_with_their_own_stamps_until_the_time_is_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader thread takes every packet at once (its stamp is its own), but after a wake-up the loop looks for
    the next reads by itself HAND_OVER_S later: packets meanwhile do not wake it one by one; the end does at once."""
    from tokrace.providers.adapters.http import stamped_stream

    monkeypatch.setattr(stamped_stream, "HAND_OVER_S", 60.0)
    taken = Taken(monkeypatch)
    stream, writer, server = await pair()
    wakes = 0
    wake = stream._wake

    def counted() -> None:
        nonlocal wakes
        wakes += 1
        wake()

    monkeypatch.setattr(stream, "_wake", counted)
    try:
        writer.write(b"first")
        await writer.drain()
        assert await stream.read(1024, timeout=5) == b"first"  # the first read after a long quiet: at once
        # the read may have found the bytes before the wake-up it scheduled ran: that comes before the word of it
        await taken.until(lambda: taken.bytes(stream) == 5, "the first read told")
        assert wakes == 1
        for i in range(5):  # each packet once the thread has read the one before: never merged in the socket
            writer.write(f"p{i}".encode())
            await writer.drain()
            await taken.until(lambda i=i: len(stream._reads) == i + 1, f"packet p{i} read")
        assert [data for data, _ in stream._reads] == [b"p0", b"p1", b"p2", b"p3", b"p4"]
        stamps = [stamp for _, stamp in stream._reads]
        assert stamps == sorted(stamps) and len(set(stamps)) == 5  # each packet its own time
        assert wakes == 1  # held: the loop was not woken for them
        writer.close()
        got = b"".join([await stream.read(1024, timeout=5) for _ in range(5)])
        assert got == b"p0p1p2p3p4"
        assert await stream.read(1024, timeout=5) == b""  # the end is handed over at once
    finally:
        await stream.aclose()
        await shut(server, writer)


def test_the_loops_looks_at_a_connection_are_on_a_grid_the_lanes_frames_and_flushes_share() -> None:
    """A look comes at the first multiple of its step at least half a step ahead: a steady stream's looks are
    exactly a step apart, and every coarse grid point (where offline lanes, frames and flushes wake) is one of them."""
    from tokrace.providers.adapters.http.stamped_stream import HAND_OVER_S, PACE_S, next_look
    from tokrace.providers.timing.clock import COARSE_WAKE_S

    for every in (HAND_OVER_S, PACE_S):
        assert every == COARSE_WAKE_S  # the looks wake the process with the frames, not between them
        for now in (1000.0, 1000.0001, 1000.0079, 1000.0081, 1000.0159):
            look = next_look(now, every)
            assert now + every / 2 <= look < now + 1.5 * every
            assert round(look / every) * every == look
        steady = [next_look(1000.0 + 0.0004, every)]
        for _ in range(5):
            steady.append(next_look(steady[-1] + 0.0007, every))  # woken 0.7 ms late each time
        assert [round(b - a, 9) for a, b in itertools.pairwise(steady)] == [every] * 5
