"""Paced reads: when packets keep coming fast the event loop reads the socket every PACE_S by itself instead of a
reader thread waking per packet; a look that finds nothing hands the socket back to a thread; only one of them
ever reads it. A turn read paced says so (an ``extra`` event) and reports no inter-token gaps; its first token is
always read on its own.

The pace is made deterministic here: every read counts as fast (FAST_READ_S is huge), so what paces is only the
number of reads in a row and whether the reader's user allowed it; waits are for conditions, never for times."""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpcore
import pytest
from paths import DATA
from serving import Taken, provider, shut, stamped_connection

from tokrace.providers.adapters.http import backend, pacing, stamped_stream
from tokrace.providers.adapters.http.stamped_stream import StampedStream, StampedTLSStream
from tokrace.providers.metrics.loop import loop_metrics
from tokrace.providers.metrics.turn import turn_metrics
from tokrace.providers.model.events import Delta, Done, Event, Extra
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.timing.clock import LaneClock, RealClock


@pytest.fixture(autouse=True)
def fast_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every read counts as fast; two in a row pace the next one; a paced look every 3 ms."""
    monkeypatch.setattr(stamped_stream, "FAST_READ_S", 1e9)
    monkeypatch.setattr(stamped_stream, "PACE_AFTER", 2)
    monkeypatch.setattr(stamped_stream, "PACE_S", 0.003)
    monkeypatch.setattr(pacing, "PACE_S", 0.003)  # the pace a turn says its reads were paced at


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> Taken:
    """What the streams take off their sockets, as they take it (see :class:`serving.Taken`)."""
    return Taken(monkeypatch)


async def pair(pace: bool = True) -> tuple[StampedStream, asyncio.StreamWriter, asyncio.Server]:
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)
        await reader.read()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    stream = await stamped_connection(server.sockets[0].getsockname()[1], pace=pace)
    return stream, await accepted.get(), server


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


async def read_per_packet(stream: StampedStream, writer: asyncio.StreamWriter, count: int) -> None:
    """``count`` packets, each written once the one before was read: a thread's reads, one per packet."""
    for i in range(count):
        await send(writer, f"p{i}".encode())
        assert await stream.read(1024, timeout=5) == f"p{i}".encode()


async def paced(stream: StampedStream, writer: asyncio.StreamWriter) -> None:
    """Bring ``stream`` to paced reads: allowed, then enough reads in a row (paced from the read that ended the
    run of reads until a look finds nothing: that look runs after the reading task has seen the read). A run of
    reads counts only while the reader thread keeps up, which a busy machine can break: a few runs' worth of
    reads are allowed before the pacing is called missing."""
    stream.allow_pacing()
    for i in range(4 * (stamped_stream.PACE_AFTER + 1)):
        await send(writer, f"q{i}".encode())
        assert await stream.read(1024, timeout=5) == f"q{i}".encode()
        if stream.paced:
            return
    raise AssertionError("not paced")


async def test_reads_are_paced_only_once_allowed_and_a_look_that_finds_nothing_hands_back_to_a_thread(
        taken: Taken) -> None:
    stream, writer, server = await pair()
    try:
        await read_per_packet(stream, writer, 5)
        assert not stream.paced and stream.paced_reads == 0  # fast, but not allowed: every packet on its own
        stream.allow_pacing()
        await send(writer, b"b0")
        assert await stream.read(1024, timeout=5) == b"b0"  # read by the thread, which then let go of the socket
        assert stream.paced and stream.paced_reads == 0
        writer.write(b"c0")
        writer.write(b"c1")  # both queue before the loop's next look: one read, one stamp
        await writer.drain()
        assert await stream.read(1024, timeout=5) == b"c0c1"
        assert stream.paced_reads == 1
        await taken.until(lambda: not stream.paced, "a look that finds nothing")
        await send(writer, b"d0")
        assert await stream.read(1024, timeout=5) == b"d0"
        assert stream.paced_reads == 1 and not stream.paced  # a thread's read again; a new run of reads to pace
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_a_tick_while_the_thread_lets_go_of_the_socket_looks_only_a_pace_after_its_last_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tick of the loop due just as the reader thread lets go of the socket (the thread has taken the socket's
    bytes and the paced state, its read not handed over yet) is not a look: the first look is a whole pace after
    that read is in. Before, such a tick counted the pace from before the read, the next look found nothing the
    thread had not taken already and handed the socket straight back to a thread (a busy box's GIL switch there
    made the test above fail now and then). Here the thread is held there until the loop has run the tick due."""
    monkeypatch.setattr(stamped_stream, "PACE_AFTER", 0)  # the first read lets go of the socket
    ticked = threading.Event()
    hand_over = StampedStream._hand_over

    def tick_now(stream: StampedStream) -> None:  # on the loop: a tick due now (one set by earlier reads) runs
        stream._tick()
        stream.loop.call_soon(ticked.set)  # once the read it woke has looked (and found nothing yet)

    def held(stream: StampedStream, item: tuple[bytes, float] | OSError, at_once: bool = False) -> None:
        if stream.paced and not ticked.is_set():  # the thread's last read: the socket is the loop's already
            stream.loop.call_soon_threadsafe(tick_now, stream)
            # Fixed, the tick waits for this hand-over, so this wait ends only with its time out: a bound on how
            # long the tick is given to run in between, not a time anything is measured by.
            ticked.wait(0.2)
        hand_over(stream, item, at_once)

    monkeypatch.setattr(StampedStream, "_hand_over", held)
    stream, writer, server = await pair()
    try:
        stream.allow_pacing()
        await send(writer, b"b0")
        assert await stream.read(1024, timeout=5) == b"b0"
        assert stream.paced and stream.paced_reads == 0  # no look has found the socket empty and handed it back
        await send(writer, b"c0")
        assert await stream.read(1024, timeout=5) == b"c0"
        assert stream.paced_reads == 1  # read by a look
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_no_byte_is_lost_doubled_or_reordered_across_many_hand_overs(taken: Taken) -> None:
    stream, writer, server = await pair()
    rng = random.Random(12)
    pieces = [f"<{i}>".encode() for i in range(400)]
    got = bytearray()

    async def reader() -> None:
        while len(got) < sum(map(len, pieces)):
            got.extend(await stream.read(7, timeout=5))  # small reads: pieces split and queued

    try:
        stream.allow_pacing()
        task = asyncio.create_task(reader())
        written = 0
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            written += len(piece)
            pause = rng.choice(("burst", "burst", "burst", "read", "quiet"))
            if pause != "burst":  # until what was written is off the socket (a thread's read, or a paced look's)
                await taken.until(lambda written=written: taken.bytes(stream) == written, "the pieces read")
            if pause == "quiet" and stream.paced:  # quiet until a look finds nothing and hands back to a thread
                backs = taken.handed_back(stream)
                await taken.until(lambda backs=backs: taken.handed_back(stream) > backs, "a look that finds nothing")
        await asyncio.wait_for(task, 10)
        assert bytes(got) == b"".join(pieces)
        assert stream.paced_reads > 0 and taken.handed_back(stream) > 0
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_the_end_of_the_stream_while_paced_is_the_end() -> None:
    stream, writer, server = await pair()
    try:
        await paced(stream, writer)
        await send(writer, b"last")
        writer.close()
        got = b""
        while data := await stream.read(1024, timeout=5):
            got += data
        assert got == b"last"
        assert await stream.read(1024, timeout=5) == b""  # the end stays the end
        assert not stream.paced
        assert stream.get_extra_info("is_readable")
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_a_reset_while_paced_fails_the_read() -> None:
    import socket
    import struct

    stream, writer, server = await pair()
    try:
        await paced(stream, writer)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        writer.transport.abort()
        with pytest.raises(httpcore.ReadError):
            while await stream.read(1024, timeout=5):
                pass
        with pytest.raises(httpcore.ReadError):  # every later read fails the same way
            await stream.read(1024, timeout=5)
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_closing_while_paced_stops_the_looks() -> None:
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
    stream, writer, server = await pair()
    try:
        await paced(stream, writer)
        before = stream.paced_reads
        stream.close_now()
        assert stream._tick_handle is None
        assert await stream.read(1024, timeout=5) == b""
        await send(writer, b"after")
        await asyncio.sleep(0)  # what the stream asked of the loop before it was closed (a wake-up) runs now
        loop = asyncio.get_running_loop()
        looks = [timer for timer in loop._scheduled  # type: ignore[attr-defined]
                 if not timer.cancelled() and getattr(timer._callback, "__self__", None) is stream]
        assert looks == []  # no look at the closed socket to come, however many paces go by
        assert errors == [] and stream.paced_reads == before
    finally:
        await shut(server, writer)


async def test_a_new_request_on_a_paced_connection_is_read_per_packet_until_allowed_again() -> None:
    stream, writer, server = await pair()
    try:
        await paced(stream, writer)
        await stream.send(b"GET / HTTP/1.1\r\n\r\n")
        assert not stream.paced  # handed back to a thread at once: the answer's first bytes are stamped exactly
        before = stream.paced_reads
        await read_per_packet(stream, writer, 6)
        assert not stream.paced and stream.paced_reads == before
        stream.allow_pacing()
        await read_per_packet(stream, writer, 1)
        assert stream.paced
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_a_stream_made_not_to_pace_reads_every_packet() -> None:
    stream, writer, server = await pair(pace=False)
    try:
        stream.allow_pacing()
        await read_per_packet(stream, writer, 10)
        assert not stream.paced and stream.paced_reads == 0
    finally:
        await stream.aclose()
        await shut(server, writer)


async def test_tls_reads_are_paced_under_the_decryption() -> None:
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(DATA / "loopback-cert.pem", DATA / "loopback-key.pem")
    client_context = ssl.create_default_context(cafile=DATA / "loopback-cert.pem")
    accepted: asyncio.Queue[asyncio.StreamWriter] = asyncio.Queue()

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(writer)
        await reader.read()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, ssl=server_context)
    raw = await stamped_connection(server.sockets[0].getsockname()[1])
    tls = await raw.start_tls(client_context, "127.0.0.1", timeout=5)
    assert isinstance(tls, StampedTLSStream)
    await tls.send(b"hello")  # (the handshake's last flight goes with the first write)
    writer = await asyncio.wait_for(accepted.get(), 5)
    try:
        tls.allow_pacing()
        for i in range(4):
            await send(writer, f"t{i}".encode())
            assert await tls.read(1024, timeout=5) == f"t{i}".encode()
        assert raw.paced
        writer.write(b"u0")
        writer.write(b"u1")
        await writer.drain()
        got = b""
        while got != b"u0u1":
            got += await tls.read(1024, timeout=5)
        assert tls.paced_reads >= 1
    finally:
        await tls.aclose()
        await shut(server, writer)


# -- a provider's turn ------------------------------------------------------------------------------------


def chunk(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode() + b"\n\n"


class ChatServer:
    """An OpenAI Chat stream written by hand: ``preamble`` events without text, then tokens one by one (each once
    the client has read the one before; the third ends the answer's first sentence unless ``sentence`` is False)
    until the client's stream is paced (or ``per_packet`` of them), a burst, and the end."""

    def __init__(self, streams: list[StampedStream], taken: Taken, preamble: int = 0, per_packet: int = 200,
                 sentence: bool = True) -> None:
        self.streams = streams
        self.taken = taken
        self.preamble = preamble
        self.per_packet = per_packet
        self.sentence = sentence
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        await reader.readuntil(b"\r\n\r\n")
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        await send(writer, head)
        sent = len(head)

        async def read(data: bytes) -> None:
            """Write ``data``, then wait until the client has read it: a packet of its own, read on its own."""
            nonlocal sent
            await send(writer, data)
            sent += len(data)
            stream, taken = self.streams[0], self.taken
            await taken.until(lambda: taken.bytes(stream) == sent and not taken.unread(stream), "the client's read")

        role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        for _ in range(self.preamble):
            await read(role)
        for i in range(self.per_packet):
            await read(chunk(f"a{i}. " if i == 2 and self.sentence else f"a{i} "))
            if self.streams[0].paced:
                break
        for i in range(5):
            writer.write(chunk(f"b{i} "))
        writer.write(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    async def __aenter__(self) -> ChatServer:
        self.server = await asyncio.start_server(self.serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        for writer in self.writers:
            writer.close()
        self.server.close()
        await self.server.wait_closed()

    def tier(self, **options: Any) -> TierSpec:
        assert self.server is not None
        port = self.server.sockets[0].getsockname()[1]
        return TierSpec(name="lane", provider="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1",
                        options=options)


@pytest.fixture()
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[StampedStream]]:
    """The stamped streams the backend opens."""
    made: list[StampedStream] = []

    class Captured(StampedStream):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(backend, "StampedStream", Captured)
    yield made


async def turn(spec: TierSpec, on_delta: Callable[[Delta], None] = lambda delta: None) -> list[Event]:
    prov = provider(spec)
    await prov.prepare()
    events: list[Event] = []
    try:
        clock = RealClock()
        async for e in prov.stream(TurnRequest("hi", max_tokens=1000), LaneClock(clock, clock.now())):
            if isinstance(e, Delta):
                on_delta(e)
            events.append(e)
    finally:
        await prov.aclose()
    return events


async def test_a_paced_turn_says_so_once_and_reports_only_the_mean_inter_token_gap(captured: list[StampedStream],
                                                                       taken: Taken) -> None:
    async with ChatServer(captured, taken) as chat:
        events = await turn(chat.tier())
    assert isinstance(events[-1], Done)
    assert captured[0].paced_reads > 0
    said = [i for i, e in enumerate(events) if isinstance(e, Extra) and e.source == "reads"]
    first = next(i for i, e in enumerate(events) if isinstance(e, Delta))
    assert len(said) == 1 and said[0] > first
    extra = events[said[0]]
    assert isinstance(extra, Extra) and extra.data == {"paced_ms": 3.0}
    assert "".join(e.text for e in events if isinstance(e, Delta)).endswith("b0 b1 b2 b3 b4 ")
    m = turn_metrics(events)
    assert m.itl_ms is not None and set(m.itl_ms) == {"mean"} and m.reads_paced_ms == 3.0
    assert m.ttft_s is not None and m.decode_tok_s is not None and m.e2e_s is not None  # still measured
    out = m.to_json()
    assert set(out["itl_ms"]) == {"mean"} and out["reads_paced_ms"] == 3.0 and "reads" not in out["provider_timing"]
    loop = loop_metrics(events)
    assert loop.itl_ms is not None and set(loop.itl_ms) == {"mean"} and loop.reads_paced_ms == 3.0


async def test_exact_reads_read_every_packet_and_measure_the_gaps(captured: list[StampedStream],
                                                                 taken: Taken) -> None:
    async with ChatServer(captured, taken, per_packet=12) as chat:
        events = await turn(chat.tier(exact_reads=True))
    assert isinstance(events[-1], Done)
    assert captured[0].paced_reads == 0
    assert not any(isinstance(e, Extra) and e.source == "reads" for e in events)
    m = turn_metrics(events)
    assert m.itl_ms is not None and m.reads_paced_ms is None
    assert m.to_json()["reads_paced_ms"] is None


async def test_no_token_a_figure_is_taken_from_is_read_paced(captured: list[StampedStream], taken: Taken,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Events without text came fast enough to pace long before the first token: pacing waits for the first
    token, the first answer text and the end of the answer's first sentence (TTFT, ttfa_s, ttfs_s)."""
    monkeypatch.setattr(stamped_stream, "PACE_AFTER", 0)
    seen: list[tuple[str, int]] = []
    async with ChatServer(captured, taken, preamble=8) as chat:
        events = await turn(chat.tier(), lambda delta: seen.append((delta.text, captured[0].paced_reads)))
    assert isinstance(events[-1], Done)
    # A busy loop may find two of them in one read (then joined in one delta): what counts is that all three
    # were read before any paced read.
    assert "".join(text for text, paced in seen if paced == 0).startswith("a0 a1 a2. ")
    assert captured[0].paced_reads > 0  # and after them, reads were paced
    m = turn_metrics(events)
    deltas = [e for e in events if isinstance(e, Delta)]
    ends = [d for k, d in enumerate(deltas) if "a2. " in "".join(x.text for x in deltas[: k + 1])]
    assert m.ttft_s == m.ttfa_s and m.ttfs_s is not None and m.ttfs_s + m.start == ends[0].t


async def test_an_answer_that_never_ends_a_sentence_is_never_paced(captured: list[StampedStream],
                                                                  taken: Taken) -> None:
    async with ChatServer(captured, taken, per_packet=12, sentence=False) as chat:
        events = await turn(chat.tier())
    assert isinstance(events[-1], Done)
    assert captured[0].paced_reads == 0 and turn_metrics(events).itl_ms is not None


class FakeStream:
    paced_reads = 0
    allowed = False

    def allow_pacing(self) -> None:
        self.allowed = True


def test_thinking_and_tool_arguments_do_not_allow_pacing_and_the_pace_is_said_once() -> None:
    from tokrace.providers.adapters.http.pacing import Pacing

    stream = FakeStream()
    pacing = Pacing(stream)
    for event in (Delta(t=0.1, text="Let me think. Yes. ", channel="reasoning"),
                  Delta(t=0.2, text='{"a": 1}. ', channel="tool_args"), Delta(t=0.3, text="  ", channel="content"),
                  Delta(t=0.4, text="Sure", channel="content")):
        assert pacing.see(event) is None
        assert not stream.allowed
    assert pacing.see(Delta(t=0.5, text="! Here", channel="content")) is None
    assert stream.allowed  # the first sentence ended: from the next read on reads may be paced
    assert pacing.see(Delta(t=0.6, text=" it", channel="content")) is None  # no paced read yet
    stream.paced_reads = 1
    said = pacing.see(Delta(t=0.7, text=" is", channel="content"))
    assert said == Extra(t=0.7, source="reads", data={"paced_ms": 3.0})
