"""``tokrace serve``: plans from profiles and recordings, timing taken from them exactly, faults, and routes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from paths import DATA
from serving import chunks, fast_source, stream_turn, tier

from tokrace.providers.adapters.synthetic import Profile, schedule
from tokrace.providers.model.events import Delta, Done, Error, Headers, Request, Segment, Usage
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.recording import Recorder
from tokrace.providers.serve import Fault, RecordingSource, Served, ServeError, ServeServer, SyntheticSource
from tokrace.providers.timing.clock import RealClock
from tokrace.tui.cli.serve import ServeOptions, build_server, serve_forever


class ScriptClock:
    """A clock that notes every deadline it is asked to wait for and jumps straight to it."""

    virtual = False

    def __init__(self) -> None:
        self.t = 100.0
        self.deadlines: list[float] = []

    def now(self) -> float:
        return self.t

    async def sleep_until(self, t: float) -> float:
        self.deadlines.append(t)
        self.t = max(self.t, t)
        await asyncio.sleep(0)
        return self.t


@pytest.mark.parametrize(("spec", "fault"), [
    ("reset", Fault("reset")),
    ("http=429,retry_after=0.5,times=2", Fault("http", status=429, retry_after=0.5, times=2)),
    ("stall=1.5 after=7", Fault("stall", stall_s=1.5, after=7)),
    ("error,after=0", Fault("error", after=0)),
])
def test_fault_specs_parse(spec: str, fault: Fault) -> None:
    assert Fault.parse(spec) == fault


@pytest.mark.parametrize("spec", ["explode", "http=200", "http=abc", "reset,when=3", ""])
def test_bad_fault_specs_say_what_is_expected(spec: str) -> None:
    with pytest.raises(ServeError):
        Fault.parse(spec)


async def test_pieces_are_written_at_their_planned_times_after_the_request_was_read() -> None:
    profile = Profile(ttft_ms=180, tok_s=750, jitter=0.1, seed=3, ttfb_ms=40)
    clock = ScriptClock()
    async with ServeServer(SyntheticSource(profile), clock=clock) as server:
        events = await stream_turn(tier(server, "openai"))
    record = server.served[0]
    planned = [100.0 + 0.04] + [100.0 + s.t for s in schedule(profile, 20, 0)]
    assert clock.deadlines[: len(planned)] == pytest.approx(planned)
    assert record.ttft_s == pytest.approx(planned[1] - 100.0)
    assert record.tokens == 20 and isinstance(events[-1], Done)


async def test_speed_divides_every_planned_time() -> None:
    clock = ScriptClock()
    async with ServeServer(SyntheticSource(Profile(ttft_ms=400, tok_s=100, ttfb_ms=0)), clock=clock,
                           speed=4.0) as server:
        await stream_turn(tier(server, "anthropic"), None)
    assert clock.deadlines[1] == pytest.approx(100.1)  # the first token, 400 ms / 4


def lane_recording(path: Path, error: Error | None = None, head_status: int = 200) -> Path:
    recorder = Recorder(path, "Hi", [TierSpec(name="recorded", provider="openai", model="gpt-rec")])
    events = [Request(t=1.0), Segment(t=1.05, seg="connect", start=1.0, end=1.05, label="new connection"),
              Headers(t=1.1, status=head_status)]
    if error is None or head_status == 200:
        events += [Delta(t=1.3, text="Hello"), Delta(t=1.4, text=" there")]
    events += [error] if error is not None else [Usage(t=1.5, input=3, output=2), Done(t=1.5)]
    for event in events:
        recorder(0, event)
    recorder.close()
    return path


def test_a_recorded_lane_is_planned_from_the_moment_the_request_was_on_the_wire(tmp_path: Path) -> None:
    source = RecordingSource(lane_recording(tmp_path / "r.jsonl"))
    plan = source.plan({}, 400, 0)
    assert source.model == "gpt-rec"
    assert plan.head_t == pytest.approx(0.05)
    assert [(round(p.t, 6), p.text) for p in plan.pieces] == [(0.25, "Hello"), (0.35, " there")]
    assert plan.output_tokens == 2 and plan.finish == "stop" and plan.error is None


def test_a_recorded_delta_joining_chunks_is_served_as_that_many_chunks_at_its_time(tmp_path: Path) -> None:
    """A delta that joined k chunks read together is sent as k pieces at its time, its tokens shared among them:
    a client counts the chunks the recording counts."""
    path = tmp_path / "r.jsonl"
    recorder = Recorder(path, "Hi", [TierSpec(name="recorded", provider="openai", model="gpt-rec")])
    for event in [Request(t=1.0), Headers(t=1.1), Delta(t=1.3, text="Hello"), Delta(1.4, " there, you", chunks=3),
                  Delta(1.5, "ab", "reasoning", tokens=5, chunks=2), Done(t=1.6)]:
        recorder(0, event)
    recorder.close()
    plan = RecordingSource(path).plan({}, 400, 0)
    assert [(round(p.t, 6), p.text, p.channel, p.tokens) for p in plan.pieces] == [
        (0.3, "Hello", "content", 1), (0.4, " th", "content", 1), (0.4, "ere,", "content", 1),
        (0.4, " you", "content", 1), (0.5, "a", "reasoning", 2), (0.5, "b", "reasoning", 3)]
    assert plan.output_tokens == 9


async def test_a_recorded_lane_streams_its_text_to_any_protocol(tmp_path: Path) -> None:
    async with ServeServer(RecordingSource(lane_recording(tmp_path / "r.jsonl")), speed=50) as server:
        for protocol in ("openai", "openai-responses", "anthropic"):
            events = await stream_turn(tier(server, protocol))
            assert "".join(e.text for e in events if isinstance(e, Delta)) == "Hello there"


async def test_a_recorded_failure_before_the_stream_is_served_as_that_http_error(tmp_path: Path) -> None:
    error = Error(t=1.2, error="rate_limit", message="slow down", status=429)
    path = lane_recording(tmp_path / "r.jsonl", error, head_status=429)
    async with ServeServer(RecordingSource(path), speed=50) as server:
        events = await stream_turn(tier(server, "openai", max_retries=0))
    assert isinstance(events[-1], Error) and events[-1].status == 429 and "slow down" in events[-1].message


async def test_a_recorded_failure_mid_stream_is_served_as_an_error_event(tmp_path: Path) -> None:
    error = Error(t=1.45, error="stream", message="upstream went away")
    async with ServeServer(RecordingSource(lane_recording(tmp_path / "r.jsonl", error)), speed=50) as server:
        events = await stream_turn(tier(server, "anthropic"))
    assert isinstance(events[-1], Error) and "upstream went away" in events[-1].message
    assert len(chunks(events)) == 2


async def test_a_fault_with_times_hits_only_that_many_requests() -> None:
    async with ServeServer(fast_source(), fault=Fault("http", status=503, times=1)) as server:
        first = await stream_turn(tier(server, "openai", max_retries=0))
        second = await stream_turn(tier(server, "openai", max_retries=0))
    assert isinstance(first[-1], Error) and isinstance(second[-1], Done)


async def test_routes_models_and_refusals() -> None:
    async with ServeServer(fast_source()) as server, httpx.AsyncClient(base_url=server.url) as client:
        models = await client.get("/v1/models")
        missing = await client.post("/v1/embeddings", json={})
        not_streaming = await client.post("/v1/messages", json={"model": "m"})
        not_json = await client.post("/v1/chat/completions", content=b"{oops")
    assert models.json()["data"][0]["id"] == "tokrace-serve"
    assert missing.status_code == 404 and "POST /v1/chat/completions" in missing.json()["error"]["message"]
    assert not_streaming.status_code == 400 and not_streaming.json()["error"]["type"] == "invalid_request_error"
    assert "only streams" in not_streaming.json()["error"]["message"]
    assert not_json.status_code == 400


async def test_usage_is_sent_on_chat_only_when_asked_for() -> None:
    body = {"model": "m", "stream": True, "max_tokens": 3, "messages": [{"role": "user", "content": "hi"}]}
    async with ServeServer(fast_source()) as server, httpx.AsyncClient(base_url=server.url) as client:
        without = (await client.post("/v1/chat/completions", json=body)).text
        asked = (await client.post("/v1/chat/completions",
                                   json={**body, "stream_options": {"include_usage": True}})).text
    assert '"usage"' not in without and '"completion_tokens":3' in asked
    assert without.rstrip().endswith("data: [DONE]")
    chunks = [json.loads(line[6:]) for line in asked.splitlines() if line.startswith("data: {")]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] == 1


def test_build_server_turns_bad_options_into_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ServeError, match="bad profile: tok_s"):
        build_server(ServeOptions(profile={"tok_s": 0}))
    with pytest.raises(ServeError, match="unknown fault"):
        build_server(ServeOptions(fault="boom"))
    with pytest.raises(ServeError, match="unknown flavor"):
        ServeServer(fast_source(), flavor="mystery")


async def test_a_busy_port_is_a_one_line_error_naming_it() -> None:
    async with ServeServer(fast_source()) as busy:
        server = build_server(ServeOptions(port=busy.port))
        with pytest.raises(ServeError, match=f"cannot listen on 127.0.0.1:{busy.port}"):
            await serve_forever(server, ServeOptions(port=busy.port), lambda line: None)


STAMP_SLACK_S = 0.001
"""How far a kernel stamp, made a ``perf_counter`` value, may be off the readings around it (the two clocks' offset
is read to within microseconds: ``timing.stamps.kernel_time``)."""


class _LateNotes(RealClock):
    """The real clock, read 300 ms late: a server held between writing a piece and noting when it wrote it (or
    between a request reaching its socket and its loop getting to it)."""

    def now(self) -> float:
        return time.perf_counter() + 0.3


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps (SO_TIMESTAMPNS) are Linux's")
async def test_a_new_connections_request_is_received_when_it_reached_the_socket_not_when_the_loop_got_to_it() -> None:
    """The server's truth starts at the request's arrival: a loop busy elsewhere while a new connection's request
    comes in (accepting it takes a few passes) does not move the moment the request counts as received (here the
    loop is held until the request is in, and its clock reads 300 ms late: a moment the loop noted would be that
    late)."""
    served: list[Served] = []
    server = ServeServer(fast_source(), clock=_LateNotes(), on_served=served.append)
    await server.start()
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()
    sending = sent = 0.0
    in_kernel = threading.Event()

    def client() -> bytes:
        nonlocal sending, sent
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sending = time.perf_counter()
            sock.sendall(head + body)
            sent = time.perf_counter()
            in_kernel.set()
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    thread = asyncio.get_running_loop().run_in_executor(None, client)
    assert in_kernel.wait(10)  # the loop is held until the request waits in the kernel, stamped when it came
    answer = await thread
    await server.close()
    assert b"[DONE]" in answer
    assert len(served) == 1
    # While the request was being sent (the loop noted it only after ``sent``: a moment 300 ms later than that).
    # Bounds, not a window: a busy box's scheduling between the client's readings only widens them.
    assert sending - STAMP_SLACK_S <= served[0].received <= sent + STAMP_SLACK_S


class _HeadThenBody:
    """A clock that reads 100 s until the server has noted the first bytes of a request, and 200 s after: a body
    that comes a long while after its head (as a 400 KB body comes a millisecond after it)."""

    virtual = False

    def __init__(self) -> None:
        self.t = 100.0
        self.read = threading.Event()

    def now(self) -> float:
        if not self.read.is_set():
            self.read.set()
            return 100.0
        self.t = max(self.t, 200.0)
        return self.t

    async def sleep_until(self, t: float) -> float:
        self.t = max(self.t, t)
        await asyncio.sleep(0)
        return self.t


async def test_a_request_is_received_when_its_first_bytes_came_not_its_bodys_end() -> None:
    """The plan runs from the request's arrival, which a client's time to first token starts before: a large body
    whose end comes later does not move it (before, it counted from the body's last byte, a millisecond late on a
    400 KB body)."""
    served: list[Served] = []
    clock = _HeadThenBody()
    server = ServeServer(fast_source(), clock=clock, on_served=served.append)
    await server.start()
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode()

    def client() -> bytes:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(head)
            assert clock.read.wait(10)  # the server has read the head: the body comes after
            sock.sendall(body)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks)

    answer = await asyncio.get_running_loop().run_in_executor(None, client)
    await server.close()
    assert b"[DONE]" in answer
    assert [record.received for record in served] == [100.0]


@pytest.mark.skipif(sys.platform != "linux", reason="kernel receive stamps (SO_TIMESTAMPNS) are Linux's")
@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_a_kept_alive_request_is_received_when_it_reached_the_socket_not_when_the_loop_got_to_it(
        tls: bool) -> None:
    """A connection's later requests too, over TLS as well: the loop is busy elsewhere when the second request
    comes in on the kept connection, and the server still counts it as received when its bytes reached the
    socket (its clock reads 300 ms late: a moment the loop noted would be that late)."""
    served: list[Served] = []
    server = ServeServer(fast_source(), clock=_LateNotes(), on_served=served.append)
    context: ssl.SSLContext | None = None
    if tls:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(DATA / "loopback-cert.pem", DATA / "loopback-key.pem")
    await server.start(tls=context)
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    first_done, go, second_in_kernel = threading.Event(), threading.Event(), threading.Event()
    sending = sent = 0.0

    def answer(sock: socket.socket) -> bytes:
        chunks = b""
        while not chunks.endswith(b"0\r\n\r\n"):
            chunk = sock.recv(65536)
            assert chunk, "the server closed the kept connection"
            chunks += chunk
        return chunks

    def client() -> bytes:
        nonlocal sending, sent
        with contextlib.ExitStack() as stack:
            sock = stack.enter_context(socket.create_connection(("127.0.0.1", server.port), timeout=10))
            if tls:
                client_context = ssl.create_default_context(cafile=str(DATA / "loopback-cert.pem"))
                sock = stack.enter_context(client_context.wrap_socket(sock, server_hostname="127.0.0.1"))
            sock.sendall(head + body)
            answer(sock)
            first_done.set()
            go.wait(10)
            sending = time.perf_counter()
            sock.sendall(head + body)
            sent = time.perf_counter()
            second_in_kernel.set()
            return answer(sock)

    thread = asyncio.get_running_loop().run_in_executor(None, client)
    await asyncio.to_thread(first_done.wait, 10)
    go.set()
    assert second_in_kernel.wait(10)  # the loop is held until the second request waits in the kernel
    second = await thread
    await server.close()
    assert b"[DONE]" in second
    assert len(served) == 2
    assert sending - STAMP_SLACK_S <= served[1].received <= sent + STAMP_SLACK_S  # (as above)


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's transmit stamps (SO_TIMESTAMPING) are Linux's")
@pytest.mark.parametrize("protocol", ["openai", "openai-responses", "anthropic"])
async def test_the_server_counts_a_piece_as_sent_when_it_went_out_not_when_it_got_to_noting_it(
        protocol: str) -> None:
    """The truth a client is held to: when the head, the first and the last token went out, by the kernel's transmit
    stamp of the bytes, however late the server gets to noting them (here its clock reads 300 ms late, as a server
    descheduled between its write and its note would; before, its truth was that much late)."""
    served: list[Served] = []
    before = time.perf_counter()
    async with ServeServer(fast_source(), clock=_LateNotes(), on_served=served.append) as server:
        events = await stream_turn(tier(server, protocol))
    after = time.perf_counter()
    assert any(isinstance(e, Done) for e in events)
    record = served[0]
    assert record.head is not None and record.first is not None and record.last is not None
    assert before <= record.received <= record.head <= record.first <= record.last <= after
    assert record.tokens == sum(d.tokens or 1 for d in chunks(events))


@pytest.mark.parametrize("protocol", ["openai", "openai-responses", "anthropic"])
async def test_an_answer_whose_end_is_due_with_its_last_piece_sends_them_in_one_write(
        protocol: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing comes between the last piece and the closing due at the same moment: a server held between two
    writes put a gap there (milliseconds on a busy box) that a client reading both at once took as the last token's
    lateness."""
    writes: list[bytes] = []
    write = asyncio.StreamWriter.write

    def spy(self: asyncio.StreamWriter, data: bytes) -> None:
        writes.append(bytes(data))
        write(self, data)

    monkeypatch.setattr(asyncio.StreamWriter, "write", spy)
    source = fast_source()
    plan = source.plan({}, 12, 0)
    piece = plan.pieces[-1]
    async with ServeServer(source, clock=ScriptClock()) as server:
        events = await stream_turn(tier(server, protocol), TurnRequest("Say hello.", max_tokens=12))
    text = "".join(d.text for d in chunks(events))
    assert any(isinstance(e, Done) for e in events) and text
    last, before = writes[-1], writes[-2]
    assert last.endswith(b"0\r\n\r\n")
    assert piece.text and json.dumps(piece.text)[1:-1].encode() in last
    assert not before.endswith(b"0\r\n\r\n")
    assert len(writes) == 1 + len(plan.pieces)  # the head, then one write per piece: the closing went with the last


async def test_a_piece_the_kernel_sends_later_than_it_was_written_counts_as_sent_when_it_went_out() -> None:
    """TCP may send a write after the call returned (holding it back while earlier bytes are below it; on a busy
    core until the kernel gets to it): the record keeps the note until the stamp is in, then takes the stamp, and
    the server waits for the stamps before it hands the record over."""
    from tokrace.providers.serve.served import Notes
    from tokrace.providers.timing.stamped_sockets import ArrivalReader

    class Sends:
        """Transmit stamps that come in when the test says: byte end -> when it went out."""

        def __init__(self) -> None:
            self.total = 0
            self.stamped: dict[int, float] = {}

        def time_of(self, end: int) -> float | None:
            return next((t for e, t in sorted(self.stamped.items()) if e >= end), None)

    class Transport(asyncio.WriteTransport):
        def get_write_buffer_size(self) -> int:
            return 0

    class Conn:
        sends = Sends()

    class Writer:
        transport = Transport()

    clock = ScriptClock()
    reader = ArrivalReader(clock)
    reader.conn = Conn()  # type: ignore[assignment]
    record = Served("1", "/v1/chat/completions", 200, received=100.0)
    notes = Notes(record, clock, reader, Writer())  # type: ignore[arg-type]
    sends = Conn.sends
    sends.total = 50
    sends.stamped[50] = 100.001
    assert notes.written("head") == 100.001  # stamped as the write returned
    clock.t = 100.2
    sends.total = 80
    assert notes.written("first", "last") == 100.2  # not stamped yet: the note, for now
    clock.t = 100.3
    sends.total = 95
    sends.stamped[80] = 100.25  # the first piece went out meanwhile, later than it was written
    assert notes.written("last") == 100.3
    assert (record.head, record.first, record.last) == (100.001, 100.25, 100.3)
    sends.stamped[95] = 100.31
    await notes.settled()
    assert (record.head, record.first, record.last) == (100.001, 100.25, 100.31)
    assert not notes.pending


@pytest.mark.skipif(sys.platform != "linux", reason="the kernel's transmit stamps (SO_TIMESTAMPING) are Linux's")
def test_a_stamped_connection_says_when_each_byte_went_out_and_none_for_bytes_not_sent_yet() -> None:
    from tokrace.providers.timing.stamped_sockets import StampedConnection

    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        plain, _ = listener.accept()
        conn = StampedConnection(plain.family, plain.type, plain.proto, fileno=plain.detach())
        with client, conn:
            assert conn.sent_time(1) is None  # nothing stamped: no stamps asked for yet
            assert conn.stamp_sends()
            times = []
            for size in (10, 5, 100):
                start = time.perf_counter()
                assert conn.send(b"x" * size) == size
                times.append((start, conn.sent_time(conn.sent), time.perf_counter()))
            assert conn.sent == 115
            for start, sent, end in times:
                assert sent is not None and start <= sent <= end
            assert [t for _, t, _ in times] == sorted(t for _, t, _ in times)
            assert conn.sent_time(116) is None  # a byte not written yet has no stamp
            assert client.recv(115, socket.MSG_WAITALL) == b"x" * 115


async def test_an_ipv6_server_says_its_url_with_the_address_in_brackets() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    server = ServeServer(fast_source())
    try:
        await server.start("::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    try:
        assert server.url == f"http://[::1]:{server.port}"
        events = await stream_turn(TierSpec(name="lane", provider="openai", model="m", base_url=server.url + "/v1"))
        assert isinstance(events[-1], Done)
    finally:
        await server.close()
