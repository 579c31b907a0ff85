"""The read loop: one response's event stream turned into events, each stamped when its bytes reached the socket,
the text of one read joined, and a turn that will not end cut off."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Final, Protocol

import httpx

from ...model.events import Delta, Done, Error, Event
from ...timing.clock import Clock
from .decoder import StreamDecoder, StreamProblem, decode
from .error_text import error_body
from .sse import MAX_EVENT_BYTES, EventTooLarge, SSEParser
from .text_events import TextEvents
from .transport import stamped_reads

RUNAWAY_FACTOR: Final[int] = 4
RUNAWAY_SLACK: Final[int] = 256
"""A turn that streams more text chunks than 4 × max_tokens + 256 is ended: a token is at least a chunk on every
server seen, so that is a server ignoring the limit, never a long answer."""

_OPENING: Final[int] = 2048
"""How much of a body is kept to say what it was when it held no event."""

_FINAL: Final[tuple[type[Event], ...]] = (Done, Error)
"""The events that end a turn (a tuple: ``isinstance`` takes it faster than ``Done | Error``)."""


class StreamingProvider(Protocol):
    """What the read loop asks of the provider whose response it reads (:class:`~.provider.HTTPProvider`)."""

    read_timeout: float
    turn_timeout: float

    @property
    def host(self) -> str: ...

    def decoder(self) -> StreamDecoder:
        """A fresh decoder for one response."""

    def clean(self, text: str) -> str:
        """A message safe to show."""

    def drain(self, response: httpx.Response, chunks: AsyncIterator[Any]) -> None:
        """Read what follows the final event in the background, then close the response."""


class TurnLimits:
    """What ends a turn that will not end by itself: its deadline (``turn_timeout_s``), and text far past
    ``max_tokens`` (more text chunks than :data:`RUNAWAY_FACTOR` × ``max_tokens`` + :data:`RUNAWAY_SLACK`)."""

    __slots__ = ("deadline", "max_chunks", "max_tokens")

    def __init__(self, deadline: float, max_tokens: int) -> None:
        self.deadline = deadline
        self.max_tokens = max_tokens
        self.max_chunks = RUNAWAY_FACTOR * max_tokens + RUNAWAY_SLACK

    def late(self, provider: StreamingProvider, t: float, now: float, deltas: int) -> Error | None:
        """The error for a turn past its deadline at ``now`` (checked as each chunk of bytes arrives)."""
        if now <= self.deadline:
            return None
        return Error(t=t, error="timeout", message=(
            f"the turn was still streaming after {provider.turn_timeout:g} s ({deltas} text chunks); ended "
            "it there: raise turn_timeout_s for longer answers"))

    def runaway(self, t: float, deltas: int) -> Error:
        """The error for a turn past :attr:`max_chunks`."""
        return Error(t=t, error="runaway", message=(
            f"the server kept streaming far past max_tokens ({deltas} text chunks for max_tokens "
            f"{self.max_tokens}); ended the lane there: the server ignores the limit, check the model and "
            "its max_tokens_field"))


async def read_events(provider: StreamingProvider, response: httpx.Response, clock: Clock, stream: Any, head: float,
                      limits: TurnLimits | None = None,
                      batched: bool = False) -> AsyncGenerator[Event | list[Delta], None]:
    """Decode the stream, stamping every event with the moment its bytes reached the socket (never before
    the event ahead of it: two conversions of the same moment may differ by a few nanoseconds). ``batched``:
    on a stamped connection, the reads handed over together are decoded in one step, and their text deltas
    given as one list (a lone delta as itself); the events are the same, in the same order."""
    decoder = provider.decoder()
    parser = SSEParser()
    shapes = TextEvents(decoder.text_keys)
    encoded = response.headers.get("content-encoding", "identity").lower() not in ("", "identity")
    stamped = stream is not None and hasattr(stream, "read_at") and not clock.virtual
    reads = stamped_reads(response) if batched and stamped and not encoded else None
    chunks: AsyncIterator[Any] = reads if reads is not None else (
        response.aiter_bytes() if encoded else response.aiter_raw())
    t = head
    final: list[Event] = []
    opening, seen = b"", False  # the first bytes (to say what came if it was no event stream); any event?
    deadline = limits.deadline if limits is not None else math.inf
    max_chunks = limits.max_chunks if limits is not None else sys.maxsize
    joining = False  # whether text deltas are joined: after the turn's first (its count is not in the decode rate)
    out: list[Event] = []  # the events of the reads taken in one step
    add = out.append
    text: str | None = None
    one: Event | None = None
    try:
        while True:
            try:
                got = await anext(chunks)
            except StopAsyncIteration:
                final = decoder.end(t) if seen or _sse_like(opening) else [_no_events(provider, response, opening, t)]
                break
            # each read with its stamp: a hand-over's reads together, else the one read (and the stream's stamp)
            batch = got if reads is not None else ((got, stream.read_at if stamped else None),)
            at = 0
            while at < len(batch):
                chunk, read_at = batch[at]
                at += 1
                now = clock.now()
                # as marks.at_socket(), on the one reading of the clock
                arrived = now if read_at is None else now - max(time.perf_counter() - read_at, 0.0)
                if arrived > t:
                    t = arrived
                if now > deadline and limits is not None and (late := limits.late(provider, t, now, decoder.deltas)):
                    final = [late]
                    break
                if not seen and len(opening) < _OPENING:  # only a body without events needs its opening
                    opening += chunk[: _OPENING - len(opening)]
                if joining and not parser.clean:  # a read that ends an event the one before cut (a read takes
                    end = chunk.find(b"\n\n") + 2  # 64 KB): that part alone to the parser, and what follows
                    if 1 < end < len(chunk):        # as a read of its own (same stamp), from an event's start
                        batch = [*batch[:at], (chunk[end:], read_at), *batch[at:]]
                        chunk = chunk[:end]
                # A read of text events in the kept frame (up to the start of an event the next read completes):
                # parsed in one pass, one delta; what follows the last whole event goes to the parser.
                cut = chunk.rfind(b"\n\n") + 2 if joining and parser.clean else 0
                if cut > 1 and (texts := shapes.whole(chunk if cut == len(chunk) else chunk[:cut])) is not None:
                    seen = True
                    room = max_chunks - decoder.deltas
                    if len(texts) > room and limits is not None:  # as event by event: the one past the limit
                        texts = texts[:room]                     # ends the turn instead
                        final = [limits.runaway(t, max_chunks + 1)]
                    decoder.deltas += len(texts)
                    if texts:
                        add(Delta(t, "".join(texts), shapes.channel, None, len(texts)))  # type: ignore[arg-type]
                    if final:
                        decoder.deltas += 1
                        break
                    chunk = chunk[cut:]
                    if not chunk:
                        continue
                try:
                    sses = parser.feed(chunk)
                    if sses:
                        seen = True
                except EventTooLarge:
                    final = [Error(t=t, error="protocol", message=(
                        f"the server sent one event larger than {MAX_EVENT_BYTES // (1024 * 1024)} MB after "
                        f"{decoder.deltas} text chunks (a line that never ends?); the stream is garbled, try "
                        "again"))]
                    break
                # The text deltas of one read (one stamp) that follow each other in one channel are joined into
                # one delta (``Delta.chunks``); the turn's first stays alone.
                parts: list[str] = []
                channel = ""
                for sse in sses:
                    if not sse.valid_utf8:
                        final = [Error(t=t, error="encoding", message=provider.clean(
                            f"the server sent bytes that are not UTF-8 after {decoder.deltas} text chunks; "
                            "the stream is garbled, try again"))]
                        break
                    text = shapes.text(sse)
                    events: list[Event]
                    if text is not None:
                        if joining and decoder.deltas < max_chunks:  # its delta would join: only its text is kept
                            if parts and channel != shapes.channel:
                                add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                                parts = []
                            decoder.deltas += 1
                            parts.append(text)
                            channel = shapes.channel
                            continue
                        events = [decoder.delta(t, text, shapes.channel)]
                    else:
                        try:
                            events = decode(decoder, sse, t)
                        except StreamProblem as problem:
                            events = [Error(t=t, error=problem.kind, message=problem.message)]
                        shapes.learn(sse, events)
                    if decoder.deltas > max_chunks and limits is not None:
                        events = [limits.runaway(t, decoder.deltas)]
                    if events and isinstance(events[-1], _FINAL):
                        final = events
                        break
                    for one in events:
                        if type(one) is Delta and one.text:
                            if joining and one.tokens is None:
                                if parts and channel != one.channel:
                                    add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                                    parts = []
                                parts.append(one.text)
                                channel = one.channel
                                continue
                            joining = True
                        if parts:
                            add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                            parts = []
                        add(one)
                if parts:
                    add(Delta(t, "".join(parts), channel, None, len(parts)))  # type: ignore[arg-type]
                if sses:  # the parsed events go before the read's are handed on: one huge event held twice is
                    del sse  # twice its size through every listener; and none of them waits here for the next
                    sses = []  # read (a huge one held beside the next one, as it is parsed)
                    text, events, one = None, [], None
                if final:
                    break
            if out:
                if reads is None:
                    for event in out:
                        yield event
                    del event
                else:
                    for item in _grouped(out):
                        yield item
                    del item
                out.clear()
            if final:
                break
    except httpx.TransportError as exc:
        final = [_stream_error(provider, exc, clock.now(), decoder.deltas)]
    finally:
        if final and isinstance(final[-1], Done):
            provider.drain(response, chunks)
        else:
            await response.aclose()
    for event in final:
        if isinstance(event, Error):
            event = Error(t=event.t, error=event.error, message=provider.clean(event.message),
                          status=event.status, retry_after=event.retry_after)
        yield event


def _no_events(provider: StreamingProvider, response: httpx.Response, opening: bytes, t: float) -> Error:
    """A body that ended without one event: what it began with (and a JSON error's message) instead of "the
    stream ended without its final event"."""
    _, said = error_body(opening)
    kind = response.headers.get("content-type") or "no content type"
    return Error(t=t, error="protocol", status=response.status_code, message=provider.clean(
        f"HTTP {response.status_code} from {provider.host} ({kind}) was not an event stream: {said}; check "
        "base_url and that the server streams"))


def _stream_error(provider: StreamingProvider, exc: httpx.TransportError, t: float, deltas: int) -> Error:
    """A failure while the stream was being read: what came before stays."""
    if isinstance(exc, httpx.TimeoutException):
        return Error(t=t, error="stall", message=provider.clean(
            f"the stream stalled: no data for {provider.read_timeout:g} s after {deltas} text chunks; "
            "try again, or raise read_timeout_s"))
    text = str(exc).lower()
    if isinstance(exc, httpx.ReadError) and ("reset" in text or "errno 104" in text or not text):
        return Error(t=t, error="reset", message=provider.clean(
            f"the connection was reset mid-stream after {deltas} text chunks; try again"))
    return Error(t=t, error="closed", message=provider.clean(
        f"the server closed the connection mid-stream after {deltas} text chunks "
        f"({str(exc) or type(exc).__name__}); try again"))


def _sse_like(opening: bytes) -> bool:
    """Whether a body's first bytes could be an event stream (or are nothing at all)."""
    start = opening.removeprefix(b"\xef\xbb\xbf").lstrip()
    return not start or start.startswith((b"data", b"event", b":", b"id", b"retry"))


def _grouped(events: list[Event]) -> list[Event | list[Delta]]:
    """The events of reads taken together, each run of text deltas as one list (a lone delta as itself)."""
    if len(events) == 1:
        return events  # type: ignore[return-value]
    out: list[Event | list[Delta]] = []
    run: list[Delta] = []
    for event in events:
        if type(event) is Delta:
            run.append(event)
            continue
        if run:
            out.append(alone_or_list(run))
            run = []
        out.append(event)
    if run:
        out.append(alone_or_list(run))
    return out


def alone_or_list(deltas: list[Delta]) -> Delta | list[Delta]:
    """Deltas to hand over together: a lone one as itself."""
    return deltas[0] if len(deltas) == 1 else deltas


