"""Helpers for the HTTP tests: a ``tokrace serve`` server on 127.0.0.1 (port 0) and lanes that stream from it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from tokrace.providers.adapters import FACTORIES, Provider
from tokrace.providers.adapters.http.backend import StampedBackend
from tokrace.providers.adapters.http.stamped_stream import StampedStream
from tokrace.providers.adapters.synthetic import Profile
from tokrace.providers.model.events import Delta, Event, Request
from tokrace.providers.model.messages import TurnRequest
from tokrace.providers.model.tiers import TierSpec
from tokrace.providers.serve import ServeServer, Source, SyntheticSource
from tokrace.providers.timing.clock import LaneClock, RealClock

PROTOCOLS = ("openai", "openai-responses", "anthropic")
"""The three wire protocols, by provider name."""

FAST = Profile(ttft_ms=0, tok_s=200_000, ttfb_ms=0)
"""A profile that streams at once: these tests are about what arrives, not when."""


def fast_source(**profile: Any) -> SyntheticSource:
    base = {"ttft_ms": 0, "tok_s": 200_000, "ttfb_ms": 0, **profile}
    return SyntheticSource(Profile(**base))


def base_url(server: ServeServer, protocol: str) -> str:
    """The base_url a tier of this protocol uses for the server (OpenAI's ends in /v1, Anthropic's is the host)."""
    return server.url if protocol == "anthropic" else server.url + "/v1"


def tier(server: ServeServer, protocol: str, name: str = "lane", fault: str | None = None,
         **options: Any) -> TierSpec:
    if fault is not None:
        options.setdefault("headers", {})["x-tokrace-fault"] = fault
    return TierSpec(name=name, provider=protocol, model="m", base_url=base_url(server, protocol), options=options)


def instant_backoff(retries: int) -> float:
    return 0.001


def provider(spec: TierSpec, **kwargs: Any) -> Provider:
    """A provider whose retry backoff takes a millisecond, so retry tests stay fast."""
    cls = type(FACTORIES[spec.provider](spec))
    return cls(spec, backoff=instant_backoff, **kwargs)  # type: ignore[call-arg]


async def stream_turn(spec: TierSpec, request: TurnRequest | None = None, **kwargs: Any) -> list[Event]:
    """Prepare a provider for the tier, stream one turn on the real clock, and close it."""
    prov = provider(spec, **kwargs)
    await prov.prepare()
    try:
        clock = RealClock()
        lane = LaneClock(clock, clock.now())
        return [e async for e in prov.stream(request or TurnRequest("Say hello.", max_tokens=20), lane)]
    finally:
        await prov.aclose()


async def stamped_connection(port: int, pace: bool = True) -> StampedStream:
    """A stamped connection to 127.0.0.1:``port`` from a backend closed once the connection is made: what the
    backend keeps for its session (the socket that holds the kernel's receive stamping on, a spare socket) is
    closed with it; the connection itself is the caller's to close."""
    backend = StampedBackend(pace=pace)
    try:
        stream = await backend.connect_tcp("127.0.0.1", port, timeout=5)
    finally:
        backend.close()
    assert isinstance(stream, StampedStream)
    return stream


class Taken:
    """What every stamped stream takes off its socket, told to the event loop as it happens: each read a reader
    thread hands over or a paced look takes (the end, or a failure, too), each read its reader takes from it, and
    each hand-back of the socket from the loop's paced looks to a thread. A test waits for these (:meth:`until`: the
    streams' own progress), never for a time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._bytes: dict[int, int] = {}
        self._ended: set[int] = set()
        self._streams: set[int] = set()
        self._to_thread: dict[int, int] = {}
        self._changed = asyncio.Event()
        hand_over, look, to_thread = StampedStream._hand_over, StampedStream._look, StampedStream._to_thread
        take = StampedStream.read_ready
        taken = self

        def handed_over(stream: StampedStream, item: tuple[bytes, float] | OSError, at_once: bool = False) -> None:
            hand_over(stream, item, at_once)  # on the reader thread
            taken._took(stream, [item])

        def looked(stream: StampedStream) -> None:  # on the loop
            before, backs = len(stream._reads), taken.handed_back(stream)
            look(stream)
            if taken.handed_back(stream) == backs:  # (else it found nothing, and a thread reads from now on)
                taken._took(stream, list(stream._reads)[before:])

        def handed_back(stream: StampedStream) -> None:  # on the loop
            to_thread(stream)
            key = id(stream)
            taken._to_thread[key] = taken._to_thread.get(key, 0) + 1
            taken._changed.set()

        def read_ready(stream: StampedStream, max_bytes: int) -> bytes:  # on the loop
            data = take(stream, max_bytes)
            taken._changed.set()
            return data

        monkeypatch.setattr(StampedStream, "_hand_over", handed_over)
        monkeypatch.setattr(StampedStream, "read_ready", read_ready)
        monkeypatch.setattr(StampedStream, "_look", looked)
        monkeypatch.setattr(StampedStream, "_to_thread", handed_back)

    def _took(self, stream: StampedStream, items: list[tuple[bytes, float] | OSError]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            stream.loop.call_soon_threadsafe(self._note, id(stream), items)

    def _note(self, key: int, items: list[tuple[bytes, float] | OSError]) -> None:
        """On the loop, so in order with what the stream itself asked of it (a wake-up) when it took them."""
        self._streams.add(key)
        for item in items:
            if isinstance(item, OSError) or not item[0]:
                self._ended.add(key)
            else:
                self._bytes[key] = self._bytes.get(key, 0) + len(item[0])
        self._changed.set()

    def bytes(self, stream: StampedStream | None = None) -> int:
        """The bytes ``stream`` (or every stream) took off its socket so far."""
        return self._bytes.get(id(stream), 0) if stream is not None else sum(self._bytes.values())

    def unread(self, stream: StampedStream) -> int:
        """How many reads ``stream`` has taken off its socket that its reader has not taken from it yet."""
        return len(stream._reads)

    def handed_back(self, stream: StampedStream) -> int:
        """How often ``stream``'s paced looks found nothing and handed the socket back to a thread."""
        return self._to_thread.get(id(stream), 0)

    def all_ended(self) -> bool:
        """Whether every stream that took anything off its socket has taken its end (or a failure) too."""
        return self._ended == self._streams

    async def until(self, condition: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
        """Until ``condition()`` holds, looking again each time a stream takes something; the time out is a hang
        guard only."""
        async def changes() -> None:
            while not condition():
                self._changed.clear()
                await self._changed.wait()

        try:
            await asyncio.wait_for(changes(), timeout)
        except TimeoutError:
            raise AssertionError(f"waited {timeout:g} s for {what}") from None


async def shut(server: asyncio.Server, *writers: asyncio.StreamWriter) -> None:
    """Close a test's loopback server and the server's side of its connections, and wait until they are closed:
    a transport still closing when the test's event loop ends is never closed (a ResourceWarning later, in
    whichever test is running when it is collected)."""
    for writer in writers:
        writer.close()
    server.close()
    for writer in writers:
        with contextlib.suppress(OSError):  # (ConnectionResetError and kin: closed is closed)
            await writer.wait_closed()


def text_of(events: Sequence[Event], channel: str = "content") -> str:
    return "".join(e.text for e in events if isinstance(e, Delta) and e.channel == channel)


def chunks(events: Sequence[Event]) -> list[Delta]:
    """The text deltas as the server's chunks: a delta joining k chunks (``Delta.chunks``) stands k times."""
    return [e for e in events if isinstance(e, Delta) for _ in range(e.chunks)]


def joined(events: Sequence[Event]) -> list[Event]:
    """The events with every run of same-time, same-channel text deltas without a provider count joined into one
    (``Delta.chunks``), a turn's first text delta alone: what the HTTP provider makes of chunks read together, so
    two readings of one stream compare equal however the reads fell."""
    out: list[Event] = []
    seen_text = run = False
    for e in events:
        if isinstance(e, Request):
            seen_text = False
        if isinstance(e, Delta) and e.text and e.tokens is None and seen_text:
            prev = out[-1]
            if run and isinstance(prev, Delta) and prev.t == e.t and prev.channel == e.channel:
                out[-1] = Delta(e.t, prev.text + e.text, e.channel, None, prev.chunks + e.chunks)
            else:
                out.append(e)
                run = True
            continue
        if isinstance(e, Delta) and e.text:
            seen_text = True
        out.append(e)
        run = False
    return out


@contextmanager
def serve_in_thread(source: Source | None = None, **kwargs: Any) -> Iterator[ServeServer]:
    """A server on its own event loop in a thread, for code that runs its own loop (the CLI's ``asyncio.run``)."""
    loop = asyncio.new_event_loop()
    server = ServeServer(source or fast_source(), **kwargs)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(5), "the test server did not start"
    try:
        yield server
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
