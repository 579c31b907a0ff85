"""Reads handed over together, turned into events in one step (``HTTPProvider.stream_batched``, the lean body's
``stamped`` reads): the same events (kinds, times, texts, chunks, channels, order) as one read at a time, each
stamped with its own read's arrival; the turn's limits, failures mid-stream, the paced-reads ``extra`` and the
recording come out the same.

The reads are made up (a chunked event stream cut anywhere, each piece with a stamp) and handed to a stamped
stream's queue by hand, a group at a time, as its reader thread hands them over; the clocks are fixed (or tick by
a set step per reading), so every stamp is exactly comparable."""

from __future__ import annotations

import asyncio
import json
import random
import socket
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tokrace.providers.adapters.http import OpenAIChatProvider, marks, read_loop
from tokrace.providers.adapters.http import transport as lean
from tokrace.providers.adapters.http.read_loop import TurnLimits
from tokrace.providers.adapters.http.stamped_stream import StampedStream
from tokrace.providers.metrics.turn import PACED_SOURCE
from tokrace.providers.model.events import Delta, Done, Error, Event, Extra
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.race.live import LiveRace
from tokrace.providers.race.race import Race
from tokrace.providers.recording import Recorder
from tokrace.providers.timing.clock import LaneClock, RealClock

NOW = 1000.0
"""What the fixed clocks read (and the stream's ``perf_counter``): a read stamped ``s`` arrives at ``s`` exactly."""

HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"x-request-id: r1\r\n\r\n")
TIER = TierSpec(name="lane", provider="openai", model="m", base_url="http://127.0.0.1:9/v1")

Read = tuple[bytes, float] | OSError


class Fixed(RealClock):
    """A real (not virtual) clock that reads ``start``, plus ``step`` more at each reading."""

    def __init__(self, start: float = NOW, step: float = 0.0, first: float | None = None) -> None:
        super().__init__()
        self.at = start - step
        self.step = step
        self.first = first
        """What the first reading says instead (a race's start, before the made-up reads' stamps)."""

    def now(self) -> float:
        if self.first is not None:
            first, self.first = self.first, None
            return first
        self.at += self.step
        return self.at


@pytest.fixture(autouse=True)
def fixed_perf(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stream's conversion of a stamp to the lane's clock reads ``perf_counter`` = NOW."""
    for converting in (read_loop, marks):  # each read's stamp; the response head's and the request's (at_socket)
        monkeypatch.setattr(converting, "time", types.SimpleNamespace(perf_counter=lambda: NOW))


def _event(data: dict[str, Any] | str) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    return f"data: {text}\n\n".encode()


def _chunk(text: str, field: str = "content") -> bytes:
    return _event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "service_tier": "default",
                   "choices": [{"index": 0, "delta": {field: text}, "logprobs": None, "finish_reason": None}]})


def sse_body(rng: random.Random, count: int, reasoning: int = 0, end: bool = True,
             bad_at: int | None = None) -> list[bytes]:
    """An OpenAI Chat stream's events: a role chunk, ``reasoning`` thinking pieces, ``count`` answer pieces (a
    sentence's end early on, text with escapes and non-ASCII), then the finish, usage and [DONE]. ``bad_at``:
    the answer piece there is garbled JSON."""
    words = [" the", " quick", " brown", " fox", ".", " é", ' "q"', "\\n", " jumps", "\n", " 🦊"]
    events = [_event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "service_tier": "default",
                      "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                   "finish_reason": None}]})]
    events += [_chunk(rng.choice(words[:4]), "reasoning_content") for _ in range(reasoning)]
    for i in range(count):
        if i == bad_at:
            events.append(b'data: {"choices":[{"delta":{"content":"x"}\n\n')
        else:
            events.append(_chunk("Hi." if i == 1 else rng.choice(words)))
        if reasoning and rng.random() < 0.05:  # the model goes back to thinking now and then
            events.append(_chunk(" hmm", "reasoning_content"))
    if end:
        events.append(_event({"id": "c1", "object": "chat.completion.chunk", "model": "m",
                              "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
        events.append(_event({"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [],
                              "usage": {"prompt_tokens": 3, "completion_tokens": count + reasoning,
                                        "total_tokens": count + reasoning + 3}}))
        events.append(_event("[DONE]"))
    return events


def chunked(events: list[bytes], last: bool = True) -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events)
    return body + (b"0\r\n\r\n" if last else b"")


def cut(rng: random.Random, data: bytes, per_event: bool) -> list[bytes]:
    """``data`` (a chunked body) in reads: at random places, or (``per_event``) a read per chunk, now and then two
    or more chunks in one read (how a server's packets come)."""
    if per_event:
        frames = data.split(b"\r\n")  # size, data, size, data, ..., "0", "", "" (no event holds a CRLF)
        out: list[bytes] = []
        for size, part in zip(frames[0:-1:2], frames[1::2], strict=False):
            one = size + b"\r\n" + part + b"\r\n"
            if out and rng.random() < 0.2:
                out[-1] += one
            else:
                out.append(one)
        assert b"".join(out) == data
        return out
    out, at = [], 0
    while at < len(data):
        size = rng.choice([1, 3, 40, 200, 230, 700, 5000])
        out.append(data[at:at + size])
        at += size
    return out


def stamped(rng: random.Random, pieces: list[bytes], start: float = NOW - 10.0) -> list[Read]:
    """Each read with a stamp: mostly later than the one before, now and then equal or a little earlier (two
    conversions of one moment; the stream keeps the latest)."""
    out: list[Read] = []
    t = start
    for piece in pieces:
        t += rng.choice([0.0, 0.0004, 0.0013, 0.002, 0.3]) if rng.random() < 0.97 else -0.0002
        out.append((piece, t))
    return out


def groups_of(rng: random.Random, count: int) -> list[int]:
    """How many reads each hand-over brings (up to a lot more than one step takes)."""
    out, left = [], count
    while left > 0:
        size = min(left, rng.choice([1, 1, 2, 5, 12, 12, 13, 40, 70]))
        out.append(size)
        left -= size
    return out


class Feed:
    """A stamped stream whose reader thread is made up: :meth:`run` hands its reads over a group at a time, each
    once the stream waits for bytes (``paced_at``: before those groups, a paced look counted on the loop)."""

    def __init__(self, reads: list[Read], groups: list[int], paced_at: frozenset[int] = frozenset()) -> None:
        loop = asyncio.get_running_loop()
        self.sockets = socket.socketpair()
        self.stream = StampedStream(self.sockets[0], loop, read_now=False)
        self.stream._reading = True  # nobody reads the socket: the reads come from run()
        self.reads = [(HEAD, NOW - 10.5), *reads]
        self.groups = [1, *groups]
        self.paced_at = paced_at
        self.over = False

    async def run(self) -> None:
        stream, at = self.stream, 0
        for index, size in enumerate(self.groups):
            while stream._waiter is None or stream._waiter.done():
                if self.over:
                    return
                await asyncio.sleep(0)
            if index in self.paced_at:
                stream.paced_reads += 1
            stream._reads.extend(self.reads[at:at + size])
            at += size
            stream._waiter.set_result(None)

    async def response(self, request: httpx.Request, transport: lean.LeanTransport) -> httpx.Response:
        status, _, _, headers, rest = await lean._read_head(self.stream, None, request)
        connection = lean._Connection(("http", "127.0.0.1", 9), self.stream)
        body = lean._Body(transport, connection, request, status, headers, rest, None, True)
        return httpx.Response(status, headers=headers, stream=body, request=request,
                              extensions={"network_stream": self.stream})

    def close(self) -> None:
        self.over = True
        self.stream.close_now()
        self.sockets[1].close()


async def provider() -> OpenAIChatProvider:
    made = OpenAIChatProvider(TIER)
    await made.prepare()
    return made


async def feeding(feed: Feed, body: Callable[[], Awaitable[Any]]) -> Any:
    task = asyncio.ensure_future(feed.run())
    try:
        return await asyncio.wait_for(body(), 10)
    finally:
        feed.close()
        await task


async def read_events(reads: list[Read], groups: list[int], batched: bool, max_tokens: int = 10_000,
                      deadline: float = float("inf"), step: float = 0.0) -> tuple[list[Event], list[int]]:
    """Every event the read loop gives for the reads (flattened), and the size of each list among them."""
    made = await provider()
    feed = Feed(reads, groups)
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    assert made._lean is not None
    lanes = LaneClock(Fixed(NOW, step), 0.0)

    async def go() -> tuple[list[Event], list[int]]:
        response = await feed.response(request, made._lean)  # type: ignore[arg-type]
        events: list[Event] = []
        sizes: list[int] = []
        async for item in read_loop.read_events(made, response, lanes, feed.stream, NOW - 10.5,
                                                TurnLimits(deadline, max_tokens), batched):
            if isinstance(item, list):
                assert len(item) > 1 and all(type(d) is Delta for d in item)
                sizes.append(len(item))
                events.extend(item)
            else:
                events.append(item)
        return events, sizes

    try:
        return await feeding(feed, go)  # type: ignore[no-any-return]
    finally:
        await made.aclose()


async def both(reads: list[Read], groups: list[int], **kw: Any) -> tuple[list[Event], list[int]]:
    one, single = await read_events(reads, groups, False, **kw)
    many, sizes = await read_events(reads, groups, True, **kw)
    assert single == []
    assert many == one
    assert [e.t for e in many] == [e.t for e in one]  # (== on the events compares them too: said for the reader)
    return many, sizes


@pytest.mark.parametrize("seed", range(12))
async def test_reads_handed_over_together_give_the_events_they_give_one_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    body = chunked(sse_body(rng, rng.randint(20, 300), reasoning=rng.choice([0, 0, 30])))
    reads = stamped(rng, cut(rng, body, per_event=seed % 2 == 0))
    events, sizes = await both(reads, groups_of(rng, len(reads)))
    assert isinstance(events[-1], Done)
    assert sizes and max(sizes) > 1  # lists were given: the batched path was taken
    stamps = {t for _, t in reads}  # type: ignore[misc]
    assert all(d.t in stamps for d in events if type(d) is Delta)  # each its own read's arrival, exactly


async def test_each_delta_keeps_its_own_reads_stamp_and_every_read_is_its_own_delta() -> None:
    rng = random.Random(7)
    events = sse_body(rng, 60)
    body = chunked(events)
    pieces = [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]
    reads: list[Read] = [(p, NOW - 5.0 + i * 0.001) for i, p in enumerate(pieces)]
    assert b"".join(p for p, _ in reads) == body  # type: ignore[misc]
    got, sizes = await both(reads, [12] * 6)
    deltas = [e for e in got if type(e) is Delta]
    assert [d.t for d in deltas] == [NOW - 5.0 + i * 0.001 for i in range(1, 61)]
    assert sizes == [11] + [12] * 4  # the first text alone (its own delta), then a list per hand-over


@pytest.mark.parametrize("seed", range(4))
async def test_a_stream_of_two_channels_gives_the_same_runs(seed: int) -> None:
    rng = random.Random(100 + seed)
    body = chunked(sse_body(rng, 200, reasoning=80))
    reads = stamped(rng, cut(rng, body, per_event=False))
    events, _ = await both(reads, groups_of(rng, len(reads)))
    assert {e.channel for e in events if type(e) is Delta} == {"content", "reasoning"}


@pytest.mark.parametrize("max_tokens", [1, 5, 17, 40])
@pytest.mark.parametrize("seed", range(3))
async def test_the_runaway_limit_ends_the_turn_at_the_same_chunk(max_tokens: int, seed: int) -> None:
    rng = random.Random(seed)
    body = chunked(sse_body(rng, 4 * max_tokens + 300))
    reads = stamped(rng, cut(rng, body, per_event=seed == 0))
    events, _ = await both(reads, groups_of(rng, len(reads)), max_tokens=max_tokens)
    assert isinstance(events[-1], Error) and events[-1].error == "runaway"


@pytest.mark.parametrize("seed", range(4))
async def test_the_deadline_ends_the_turn_at_the_same_read(seed: int) -> None:
    rng = random.Random(seed)
    body = chunked(sse_body(rng, 200))
    reads = stamped(rng, cut(rng, body, per_event=True))
    # the lane's clock moves 1 ms a reading: the deadline passes as the read-th read comes
    events, _ = await both(reads, groups_of(rng, len(reads)), deadline=NOW + 0.001 * rng.randint(20, 120),
                           step=0.001)
    assert isinstance(events[-1], Error) and events[-1].error == "timeout"
    assert any(type(e) is Delta for e in events)


@pytest.mark.parametrize("fault", ["reset", "garbled", "not_utf8", "cut", "framing", "server_error"])
@pytest.mark.parametrize("seed", range(3))
async def test_a_failure_mid_stream_comes_after_the_same_events(fault: str, seed: int) -> None:
    rng = random.Random(seed)
    count = 120
    events = sse_body(rng, count, end=fault in ("reset", "framing"),
                      bad_at=rng.randint(30, 90) if fault == "garbled" else None)
    if fault == "server_error":
        events.insert(rng.randint(30, 90), _event({"error": {"message": "overloaded", "type": "server_error"}}))
    body = chunked(events, last=fault != "cut")
    if fault == "not_utf8":
        at = body.index(b"quick") if b"quick" in body else body.index(b"the")
        body = body[:at] + b"\xff" + body[at + 1:]
    if fault == "framing":
        at = body.index(b"\r\n", len(body) // 2) + 2
        body = body[:at] + b"zz\r\n" + body[at:]
    reads = stamped(rng, cut(rng, body, per_event=seed == 1 and fault != "framing"))
    if fault == "cut":
        reads.append((b"", NOW - 1.0))  # the server hangs up
    if fault == "reset":
        reads.insert(rng.randint(len(reads) // 3, 2 * len(reads) // 3), ConnectionResetError(104, "reset"))
    got, _ = await both(reads, groups_of(rng, len(reads)))
    assert isinstance(got[-1], Error)
    assert any(type(e) is Delta for e in got)


async def turn_events(reads: list[Read], groups: list[int], batched: bool,
                      paced_at: frozenset[int] = frozenset()) -> list[Event]:
    """Every event a whole turn gives (``stream`` or ``stream_batched``), flattened."""
    made = await provider()
    feed = Feed(reads, groups, paced_at)
    assert made._lean is not None
    transport = made._lean
    made._send = lambda client, req: asyncio.ensure_future(feed.response(req, transport))  # type: ignore[method-assign]
    clock = LaneClock(Fixed(), 0.0)
    request = TurnRequest("Why?", max_tokens=10_000)

    async def go() -> list[Event]:
        source = made.stream_batched(request, clock) if batched else made.stream(request, clock)
        out: list[Event] = []
        async for item in source:
            if isinstance(item, list):
                out.extend(item)
            else:
                out.append(item)
        return out

    try:
        return await feeding(feed, go)  # type: ignore[no-any-return]
    finally:
        await made.aclose()


@pytest.mark.parametrize("seed", range(8))
async def test_the_paced_reads_extra_comes_before_the_same_event(seed: int) -> None:
    rng = random.Random(seed)
    body = chunked(sse_body(rng, 300))
    reads = stamped(rng, cut(rng, body, per_event=seed % 2 == 0))
    groups = groups_of(rng, len(reads))
    paced = frozenset({rng.randint(1, len(groups))})  # a paced look on the loop, between two hand-overs
    one = await turn_events(reads, groups, False, paced)
    many = await turn_events(reads, groups, True, paced)
    assert many == one
    extras = [i for i, e in enumerate(one) if isinstance(e, Extra) and e.source == PACED_SOURCE]
    assert len(extras) == 1
    assert one[extras[0]].t == one[extras[0] + 1].t


async def test_without_a_paced_look_no_extra_and_the_same_turn() -> None:
    rng = random.Random(3)
    body = chunked(sse_body(rng, 200))
    reads = stamped(rng, cut(rng, body, per_event=True))
    groups = groups_of(rng, len(reads))
    one = await turn_events(reads, groups, False)
    assert await turn_events(reads, groups, True) == one
    assert not any(isinstance(e, Extra) and e.source == PACED_SOURCE for e in one)


@pytest.mark.parametrize("buffered", [False, True])
async def test_the_recording_and_the_live_lane_are_the_same(tmp_path: Path, buffered: bool) -> None:
    rng = random.Random(5)
    body = chunked(sse_body(rng, 400, reasoning=40))
    reads = stamped(rng, cut(rng, body, per_event=False))
    groups = groups_of(rng, len(reads))

    async def race(batched: bool) -> tuple[bytes, LiveRace]:
        made = await provider()
        feed = Feed(reads, groups, frozenset({len(groups) // 2}))
        assert made._lean is not None
        transport = made._lean
        made._send = lambda client, req: asyncio.ensure_future(  # type: ignore[method-assign]
            feed.response(req, transport))
        if not batched:
            made.stream_batched = None  # type: ignore[assignment,method-assign]  # the race streams event by event
        path = tmp_path / f"{batched}.jsonl"
        recorder = Recorder(path, "Why?", [TIER], buffered=buffered)
        live = LiveRace([TIER])
        lanes = Race([TIER], TurnRequest("Why?", max_tokens=10_000), Fixed(first=NOW - 11.0),
                     [live, recorder], providers=[made])
        try:
            await feeding(feed, lanes.run)
        finally:
            await made.aclose()
        recorder.close()
        lines = path.read_bytes().splitlines(keepends=True)
        return b"".join(lines[1:]), live  # (the header line holds the moment it was made)

    one, live_one = await race(False)
    many, live_many = await race(True)
    assert many == one
    assert one.count(b"\n") > 100
    a, b = live_one.lanes[0], live_many.lanes[0]
    assert (a.tokens, a.ttft, a.last_t, a.history, a.state, list(a._window)) == \
        (b.tokens, b.ttft, b.last_t, b.history, b.state, list(b._window))
    assert "".join(text for _, text in a.pieces) == "".join(text for _, text in b.pieces)


async def test_a_big_hand_over_is_taken_a_bounded_number_of_reads_at_a_time() -> None:
    rng = random.Random(9)
    events = sse_body(rng, 100)
    pieces = [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]
    reads: list[Read] = [(p, NOW - 5.0 + i * 0.001) for i, p in enumerate(pieces)]
    _, sizes = await both(reads, [len(reads)])  # every read queued at once (a loop held for a while)
    assert max(sizes) == lean.BATCH_READS  # the loop runs between steps of at most that many reads
    assert sum(sizes) == 100  # a delta per text read, every one of them in a list


@pytest.mark.parametrize("seed", range(4))
async def test_reads_cut_inside_events_still_take_their_whole_events_in_one_pass(
        monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Reads of a fixed size cut events in two (a read takes 64 KB: a stream of 20,000 tok/s, a look that came
    late): the part of a read that ends the event the read before cut goes to the parser, the whole events after it
    in one pass; the same texts, each delta stamped with its own read's arrival, the same chunks counted."""
    from tokrace.providers.adapters.http.text_events import TextEvents

    rng = random.Random(seed)
    count = 400
    events = sse_body(rng, count)
    body = chunked(events)
    size = rng.choice([1500, 2600, 4097])
    reads = stamped(rng, [body[at:at + size] for at in range(0, len(body), size)])
    in_one_pass: list[int] = []
    whole = TextEvents.whole

    def noted(frames: TextEvents, chunk: bytes) -> list[str] | None:
        found = whole(frames, chunk)
        in_one_pass.append(len(found) if found is not None else 0)
        return found

    monkeypatch.setattr(TextEvents, "whole", noted)
    got, _ = await read_events(reads, groups_of(rng, len(reads)), True)
    deltas = [e for e in got if type(e) is Delta]
    texts = [json.loads(e[len(b"data: "):])["choices"][0]["delta"].get("content") for e in events
             if e.startswith(b"data: {") and b'"content"' in e]
    assert "".join(d.text for d in deltas) == "".join(t for t in texts if t)
    assert sum(d.chunks for d in deltas) == sum(1 for t in texts if t)
    stamps = {t for _, t in reads}  # type: ignore[misc]
    assert all(d.t in stamps for d in deltas) and isinstance(got[-1], Done)
    assert sum(in_one_pass) >= 0.8 * count  # all but the events a cut falls in (and the turn's first)
