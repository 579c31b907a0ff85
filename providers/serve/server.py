"""The loopback server behind ``tokrace serve``: OpenAI Chat, Responses and Anthropic streaming with faithful timing.

It streams a synthetic profile or a recorded lane, each piece at its planned time after the request was read, and
injects faults on demand (HTTP errors, an error event, a reset, a cut-off stream, bad JSON, bad bytes, a stall).
Built on asyncio streams, not a web framework, so timing and faults are exact. Tests use it as their real peer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import socket
import ssl
import struct
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, SupportsIndex

from ..adapters.synthetic import Profile, pieces, schedule
from ..metrics.turn import split_turns
from ..model.errors import ConfigError, TokraceError
from ..model.events import Delta, Done, Error, Headers, Request, Segment, ToolCall, Usage
from ..model.tiers import MAX_TOKENS_LIMIT
from ..timing.clock import Clock, RealClock
from ..timing.stamps import SO_TIMESTAMPNS, TIMESPEC, SendStamps, packet_time
from .wire import FLAVORS, AnthropicWire, Call, ChatWire, Piece, Plan, ResponsesWire, Timing, Wire

FAULT_KINDS: Final[dict[str, str]] = {
    "http": "answer with this HTTP status and the protocol's JSON error (http=429)",
    "error": "send the protocol's error event mid-stream",
    "reset": "reset the connection mid-stream",
    "truncate": "end the stream cleanly but without its final event",
    "malformed": "send a frame whose JSON is cut off",
    "non-utf8": "send a frame with bytes that are not UTF-8",
    "stall": "stop sending mid-stream: pause for stall=S seconds and go on with the answer, or (no S) until the "
             "client gives up",
}
"""The faults ``--fault`` can inject, with what each does."""

FAULT_HEADER: Final[str] = "x-tokrace-fault"
"""A request header that asks for a fault on that request only (same syntax as ``--fault``)."""

ROUTES: Final[dict[str, type[Wire]]] = {
    "/v1/chat/completions": ChatWire, "/chat/completions": ChatWire,
    "/v1/responses": ResponsesWire, "/responses": ResponsesWire,
    "/v1/messages": AnthropicWire, "/messages": AnthropicWire,
}


class ServeError(TokraceError):
    """``tokrace serve`` was asked for something it cannot do."""


@dataclass(frozen=True, slots=True)
class Fault:
    """A fault to inject: ``kind``, after how many pieces of text, on how many requests."""

    kind: str
    status: int = 500
    after: int = 3
    times: int | None = None
    """Only the first ``times`` requests that ask for this fault get it (``None``: all of them)."""
    retry_after: float | None = None
    stall_s: float | None = None

    @classmethod
    def parse(cls, spec: str) -> Fault:
        """``kind[=value][,after=N][,times=N][,retry_after=S]``, e.g. ``http=429,retry_after=0.5,times=1``."""
        parts = [p.strip() for p in spec.replace(" ", ",").split(",") if p.strip()]
        if not parts:
            raise ServeError("empty fault spec")
        kind, _, value = parts[0].partition("=")
        if kind not in FAULT_KINDS:
            raise ServeError(f"unknown fault {kind!r} (known: {', '.join(FAULT_KINDS)})")
        args: dict[str, Any] = {"kind": kind}
        try:
            if kind == "http":
                args["status"] = int(value or 500)
                if not 400 <= args["status"] <= 599:
                    raise ValueError
            elif kind == "stall" and value:
                args["stall_s"] = float(value)
            for part in parts[1:]:
                key, _, val = part.partition("=")
                if key in ("after", "times"):
                    args[key] = int(val)
                elif key == "retry_after":
                    args[key] = float(val)
                else:
                    raise ServeError(f"unknown fault option {key!r} in {spec!r} (after, times, retry_after)")
        except ValueError:
            raise ServeError(f"bad fault spec {spec!r}: expected e.g. http=429,retry_after=0.5 or "
                             "reset,after=10 (http takes a status from 400 to 599)") from None
        return cls(**args)


@dataclass(slots=True)
class Served:
    """What the server did for one request, on its own clock: the ground truth a client's numbers are held to."""

    request_id: str
    path: str
    status: int
    received: float
    """When the request's last byte was read."""
    head: float | None = None
    first: float | None = None
    """When the first piece of generated text was written."""
    last: float | None = None
    pieces: int = 0
    tokens: int = 0
    first_tokens: int = 0
    fault: str | None = None

    @property
    def ttft_s(self) -> float | None:
        return None if self.first is None else self.first - self.received

    @property
    def decode_tok_s(self) -> float | None:
        if self.first is None or self.last is None or self.last <= self.first:
            return None
        return (self.tokens - self.first_tokens) / (self.last - self.first)


class Source:
    """What to stream: a plan for each request."""

    model: str = "tokrace-serve"

    def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


class SyntheticSource(Source):
    """A synthetic profile's schedule, answer by answer (a turn's seed follows the conversation's length)."""

    def __init__(self, profile: Profile, model: str = "tokrace-serve") -> None:
        self.profile = profile
        self.model = model
        self._plans: dict[tuple[int, int], Plan] = {}
        """Plans already made: the schedule is computed once, not while other answers are being timed."""

    def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
        made = self._plans.get((max_tokens, turn))
        if made is None:
            made = self._plans[(max_tokens, turn)] = self._make(max_tokens, turn)
        return dataclasses.replace(made, input_tokens=_input_tokens(body))

    def _make(self, max_tokens: int, turn: int) -> Plan:
        steps = list(schedule(self.profile, max_tokens, turn))
        head = self.profile.ttfb_ms / 1000.0 if self.profile.ttfb_ms is not None else min(
            0.02, self.profile.ttft_ms / 1000.0)
        if steps:
            head = min(head, steps[0].t)
        reasoning = sum(s.tokens for s in steps if s.channel == "reasoning")
        produced = sum(s.tokens for s in steps)
        return Plan(head_t=head, pieces=[Piece(s.t, s.text, s.channel, s.tokens) for s in steps],
                    end_t=steps[-1].t if steps else head, output_tokens=produced, reasoning_tokens=reasoning,
                    finish="length" if produced >= max_tokens else "stop")

    def describe(self) -> str:
        p = self.profile
        return f"a synthetic profile (ttft {p.ttft_ms:g} ms, {p.tok_s:g} tok/s, {p.tokens_per_event} per event)"


class RecordingSource(Source):
    """A recorded lane: turn k of the lane answers a conversation with k assistant messages in it."""

    def __init__(self, path: Path, lane: int | str = 0, run: int = 0) -> None:
        from ..recording.file import read_recording

        recording = read_recording(path)
        index = recording.lane_index(lane)
        if not 0 <= run < recording.runs:
            raise ServeError(f"{path}: no run {run} (it has {recording.runs})")
        self.path = path
        # A scenario's lane may open with a person or a tool before its first request: only requests are turns.
        self.turns = [t for t in split_turns(recording.lane_events(index, run)) if isinstance(t[0], Request)]
        if not self.turns:
            raise ServeError(f"{path}: lane {lane} of run {run} has no events to serve")
        tiers = recording.tiers
        self.model = str(tiers[index].get("model") or "tokrace-serve") if index < len(tiers) else "tokrace-serve"

    def plan(self, body: dict[str, Any], max_tokens: int, turn: int) -> Plan:
        events = self.turns[turn % len(self.turns)]
        request = next((e for e in events if isinstance(e, Request)), None)
        origin = request.t if request is not None else events[0].t
        for e in events:  # the server's clock starts when the request reached it, after connecting
            if isinstance(e, Segment) and e.seg == "connect":
                origin = e.end
        plan = Plan(head_t=0.0, pieces=[], end_t=0.0, input_tokens=_input_tokens(body))
        pending: list[Delta] = []
        head: Headers | None = None
        for e in events:
            t = max(e.t - origin, 0.0)
            if isinstance(e, Headers) and head is None:
                head, plan.head_t = e, t
            elif isinstance(e, Delta) and e.text:
                if e.channel == "tool_args":
                    pending.append(e)
                else:
                    plan.pieces.extend(Piece(t, text, e.channel, tokens) for text, tokens in _chunk_parts(e))
            elif isinstance(e, ToolCall):
                plan.calls.append(Call(e.id, e.name))
                index = len(plan.calls) - 1
                parts = pending or [Delta(t=e.t, text=e.arguments, channel="tool_args")]
                plan.pieces.extend(Piece(max(d.t - origin, 0.0), text, "tool_args", tokens, index)
                                   for d in parts for text, tokens in _chunk_parts(d))
                pending = []
            elif isinstance(e, Usage):
                plan.output_tokens, plan.reasoning_tokens = e.output, e.reasoning
            elif isinstance(e, Done):
                plan.finish, plan.end_t = e.finish_reason, t
                break  # what follows a turn's end (a scenario's tools, people, its end) is not the answer
            elif isinstance(e, Error) and plan.error is None:
                failed_early = head is None or head.status >= 400
                plan.error = ((e.status or (head.status if head else 500)) if failed_early else 200, e.message)
                plan.end_t = t
        plan.pieces.sort(key=lambda p: p.t)
        if not plan.output_tokens:
            plan.output_tokens = sum(p.tokens for p in plan.pieces)
        plan.end_t = max(plan.end_t, plan.pieces[-1].t if plan.pieces else plan.head_t)
        return plan

    def describe(self) -> str:
        return f"{self.path} ({len(self.turns)} turn{'s' if len(self.turns) != 1 else ''})"


def _chunk_parts(delta: Delta) -> list[tuple[str, int]]:
    """A recorded delta as the chunks it joined (``Delta.chunks``), each with its tokens: its text cut into that
    many parts, all sent at its time, so a client counts the chunks (and the gaps of zero between them) the
    recording counts; its tokens (1 per chunk when it has no count) shared among them."""
    k, text = delta.chunks, delta.text
    tokens = delta.tokens if delta.tokens is not None else k
    if k == 1:
        return [(text, delta.tokens or 1)]
    size = len(text)
    return [(text[i * size // k:(i + 1) * size // k], tokens * (i + 1) // k - tokens * i // k) for i in range(k)]


def _input_tokens(body: dict[str, Any]) -> int:
    texts: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for key in ("content", "text", "input", "system", "instructions", "output", "arguments"):
                if key in value:
                    walk(value[key])

    for key in ("messages", "input", "system", "instructions"):
        walk(body.get(key))
    return sum(len(pieces(t)) for t in texts)


def _turn_of(body: dict[str, Any]) -> int:
    """How many answers the conversation already holds: runs of assistant items (in the Responses API a turn
    that only called tools is ``function_call`` items, with no assistant message)."""
    items = body.get("messages") if isinstance(body.get("messages"), list) else body.get("input")
    if not isinstance(items, list):
        return 0
    turns, inside = 0, False
    for m in items:
        answer = isinstance(m, dict) and (m.get("role") == "assistant" or m.get("type") == "function_call")
        turns += answer and not inside
        inside = answer
    return turns


def _max_tokens(body: dict[str, Any], default: int) -> int:
    for key in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return min(value, MAX_TOKENS_LIMIT)  # a client asking for a billion tokens gets the cap's worth
    return default


_STAMP_SPACE: Final[int] = socket.CMSG_SPACE(TIMESPEC.size) + socket.CMSG_SPACE(3 * TIMESPEC.size)
"""Room for the kernel's receive stamp (``SO_TIMESTAMPNS``) beside a read, and for the ``SO_TIMESTAMPING`` copy of it
that a connection whose sends are stamped gets too."""

class _StampedConnection(socket.socket):
    """An accepted connection whose every read also takes the kernel's receive stamp of the bytes it brings: asyncio's
    transport reads through :meth:`recv`, and hands what it read to the protocol at once, so ``stamp`` is when the
    newest of exactly those bytes reached the socket (``None`` when the kernel sent no stamp).

    Once :meth:`stamp_sends` is on, it also counts the bytes asyncio's transport sends through :meth:`send` and takes
    the kernel's transmit stamp of each send off the socket's error queue, so :meth:`sent_time` says when a byte
    really went out, whenever the server got to noting it."""

    __slots__ = ("sends", "stamp")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stamp: float | None = None
        self.sends: SendStamps | None = None
        """The kernel's transmit stamps of what is sent (once :meth:`stamp_sends` is on)."""

    def stamp_sends(self) -> bool:
        """Ask the kernel for a transmit stamp of every send from now on (before anything was sent)."""
        self.sends = SendStamps.on(self)
        return self.sends is not None

    def send(self, data: Any, flags: int = 0) -> int:
        sent = super().send(data, flags)
        if self.sends is not None:
            self.sends.sent(sent)
        return sent

    def sent_time(self, end: int) -> float | None:
        """When the byte before offset ``end`` (``end`` bytes written in all) went to the network device, by the
        kernel's transmit stamp of the send that carried it; ``None`` when the kernel has not stamped it yet (or
        sends are not stamped)."""
        return None if self.sends is None else self.sends.time_of(end)

    @property
    def sent(self) -> int:
        """Bytes sent on this connection so far (counted once :meth:`stamp_sends` is on)."""
        return 0 if self.sends is None else self.sends.total

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        try:
            data, ancillary, _, _ = self.recvmsg(bufsize, _STAMP_SPACE, flags)
        except BlockingIOError:
            # A transmit stamp that came after its send returned makes the socket report an error (the loop calls
            # this): take it off the queue, or the loop would call again at once, pass after pass.
            if self.sends is not None:
                self.sends.collect()
            raise
        self.stamp = packet_time(ancillary) if data else None
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        """(How the transport reads under TLS: into the TLS layer's buffer, which decrypts and hands on at once.)"""
        view = memoryview(buffer)
        size, ancillary, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], _STAMP_SPACE, flags)
        self.stamp = packet_time(ancillary) if size else None
        return size


class _StampedListener(socket.socket):
    """A listening socket whose accepted connections are :class:`_StampedConnection` (asyncio's server accepts
    through :meth:`accept`); ``accepted`` finds a connection by its file descriptor, for its protocol."""

    __slots__ = ("accepted",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted: weakref.WeakValueDictionary[int, _StampedConnection] = weakref.WeakValueDictionary()

    def accept(self) -> tuple[socket.socket, Any]:
        plain, address = super().accept()
        conn = _StampedConnection(plain.family, plain.type, plain.proto, fileno=plain.detach())
        self.accepted[conn.fileno()] = conn
        return conn, address


class _ArrivalReader(asyncio.StreamReader):
    """A stream reader that notes when the bytes it is fed reached the server: the kernel's receive stamp of them
    when the connection is a :class:`_StampedConnection`, else the moment the event loop read them (the handler
    may get to them only after other requests' handlers have run, and the loop to the socket only after whatever
    else it was doing when they came)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.arrived = 0.0
        self.conn: _StampedConnection | None = None

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        stamp = self.conn.stamp if self.conn is not None else None
        self.arrived = stamp if stamp is not None else self.clock.now()
        super().feed_data(data)


class _ArrivalProtocol(asyncio.StreamReaderProtocol):
    """Hands a new connection's :class:`_StampedConnection` (when the listener made one) to its reader."""

    def __init__(self, reader: _ArrivalReader, handler: Any, listener: _StampedListener | None) -> None:
        super().__init__(reader, handler)
        self._arrival = reader
        self._listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if self._listener is not None and sock is not None:
            self._arrival.conn = self._listener.accepted.pop(sock.fileno(), None)
        super().connection_made(transport)


class _Notes:
    """When the server wrote what a :class:`Served` record holds (``head``, ``first``, ``last``): each noted as it is
    written, then made the kernel's transmit stamp of its last byte once that is in (where the connection's sends
    are stamped). On loopback the stamp is there as the write returns; TCP may send later than that (holding bytes
    back while earlier ones are still below it, on a busy core until the kernel gets to them), and then the bytes
    went out later than they were written."""

    __slots__ = ("clock", "pending", "record", "sends", "transport")

    def __init__(self, record: Served, clock: Clock, reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
        conn = reader.conn if isinstance(reader, _ArrivalReader) else None
        self.record = record
        self.clock = clock
        self.sends = conn.sends if conn is not None and not clock.virtual else None
        self.transport = writer.transport
        self.pending: dict[str, int] = {}
        """The fields still waiting for their stamp: how many bytes had been written in all when each was noted."""

    def written(self, *fields: str) -> float:
        """Note ``fields`` as written now (what was just written); the moment it went out, as known so far."""
        now = self.clock.now()
        sends = self.sends
        if sends is None:
            for name in fields:
                setattr(self.record, name, now)
            return now
        queued = self.transport.get_write_buffer_size() if isinstance(self.transport, asyncio.WriteTransport) else 0
        end = sends.total + queued
        self.settle()  # the earlier ones first: stamps are looked up in the order of the bytes
        went = sends.time_of(end)
        for name in fields:
            setattr(self.record, name, now if went is None else went)
            if went is None:
                self.pending[name] = end
            else:
                self.pending.pop(name, None)
        return now if went is None else went

    def settle(self) -> None:
        """Put in the stamps that came since."""
        if self.sends is None:
            return
        for name, end in sorted(self.pending.items(), key=lambda item: item[1]):
            went = self.sends.time_of(end)
            if went is None:
                break
            setattr(self.record, name, went)
            del self.pending[name]

    async def settled(self, wait: float = 0.05) -> None:
        """Wait (up to ``wait`` seconds) until every field has its stamp; a field without one keeps its note."""
        deadline = time.perf_counter() + wait
        self.settle()
        while self.pending and time.perf_counter() < deadline:
            await asyncio.sleep(0.001)
            self.settle()


class ServeServer:
    """An HTTP/1.1 server on asyncio streams that answers the three streaming protocols from a :class:`Source`."""

    def __init__(self, source: Source, *, fault: Fault | None = None, speed: float = 1.0, usage: bool = True,
                 flavor: str = "openai", report_tier: str | None = None, max_tokens: int = 400,
                 clock: Clock | None = None, on_served: Callable[[Served], None] | None = None) -> None:
        if flavor not in FLAVORS:
            raise ServeError(f"unknown flavor {flavor!r} (known: {', '.join(FLAVORS)})")
        if speed <= 0:
            raise ServeError("speed must be above 0")
        self.source = source
        self.fault = fault
        self.speed = speed
        self.usage = usage
        self.flavor = flavor
        self.report_tier = report_tier
        self.max_tokens = max_tokens
        self.clock: Clock = clock or RealClock()
        self.on_served = on_served
        self.served: deque[Served] = deque(maxlen=10_000)
        """The latest requests served, newest last."""
        self._server: asyncio.Server | None = None
        self._tls: ssl.SSLContext | None = None
        self._ids = itertools.count(1)
        self._fault_uses: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        """Listen (``port`` 0 picks a free one); with ``tls``, speak HTTPS.

        On Linux and the real clock, a host that is one address listens on a :class:`_StampedListener`, so that
        every request counts as received when its last byte reached the socket (the kernel's stamp), however busy
        the loop was then; a name with several addresses listens on each, and stamps when the loop reads."""
        self._tls = tls
        loop = asyncio.get_running_loop()
        listener = await self._stamped_listener(host, port)

        def protocol() -> asyncio.StreamReaderProtocol:
            return _ArrivalProtocol(_ArrivalReader(self.clock), self._connection, listener)

        if listener is not None:
            self._server = await loop.create_server(protocol, sock=listener, ssl=tls)
        else:
            self._server = await loop.create_server(protocol, host, port, ssl=tls)

    async def _stamped_listener(self, host: str, port: int) -> _StampedListener | None:
        if self.clock.virtual or not isinstance(self.clock, RealClock) or sys.platform != "linux":
            return None  # the kernel's stamps are on perf_counter's time line (see packet_time): the real clock's
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)
        if len({info[4] for info in infos}) != 1:
            return None
        family, kind, proto, _, address = infos[0]
        listener = _StampedListener(family, kind, proto)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # accepted connections inherit it
            listener.bind(address)
            listener.listen(100)
        except OSError:
            listener.close()
            raise
        return listener

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def host(self) -> str:
        assert self._server is not None and self._server.sockets
        return str(self._server.sockets[0].getsockname()[0])

    @property
    def url(self) -> str:
        """The server's root: the Anthropic base_url; the OpenAI one is this plus ``/v1``."""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address goes in brackets
        return f"{'https' if self._tls is not None else 'http'}://{host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> ServeServer:
        if self._server is None:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- HTTP ------------------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = reader.conn if isinstance(reader, _ArrivalReader) else None
        if conn is not None and self._tls is None:  # (under TLS the bytes sent are not the bytes written)
            conn.stamp_sends()
        try:
            while await self._one_request(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        except asyncio.CancelledError:
            pass  # the server is closing; ending quietly keeps asyncio from logging the cancelled handler
        finally:
            if task is not None:
                self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is to close."""
        line = await reader.readline()
        if not line.strip():
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while size := int((await reader.readline()).split(b";")[0].strip() or b"0", 16):
                body += await reader.readexactly(size)
                await reader.readexactly(2)
            await reader.readline()
        else:
            body = await reader.readexactly(int(headers.get("content-length") or 0))
        received = reader.arrived if isinstance(reader, _ArrivalReader) and not self.clock.virtual \
            else self.clock.now()
        keep = headers.get("connection", "").lower() != "close"
        path = target.split("?", 1)[0].rstrip("/")
        rid = f"{next(self._ids):06d}"
        if method == "GET" and path in ("/v1/models", "/models"):
            await self._json(writer, 200, {"object": "list", "data": [
                {"id": self.source.model, "object": "model", "owned_by": "tokrace"}]}, rid)
            return keep
        wire_type = ROUTES.get(path) if method == "POST" else None
        if wire_type is None:
            await self._json(writer, 404, ChatWire.error_body(404, f"tokrace serve has no {method} {path}; "
                             "it answers POST /v1/chat/completions, /v1/responses and /v1/messages", rid), rid)
            return keep
        try:
            payload = json.loads(body or b"{}")
        except json.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict) or payload.get("stream") is not True:
            why = "the body is not a JSON object" if not isinstance(payload, dict) else \
                "tokrace serve only streams: send \"stream\": true"
            await self._json(writer, 400, wire_type.error_body(400, why, rid), rid)
            return keep
        fault = self._fault_for(headers.get(FAULT_HEADER))
        return await self._stream(reader, writer, wire_type, payload, rid, path, received, fault) and keep

    def _fault_for(self, asked: str | None) -> Fault | None:
        spec = asked
        fault = self.fault
        if asked is not None:
            try:
                fault = Fault.parse(asked)
            except ServeError:
                return None
        if fault is None:
            return None
        key = spec or repr(fault)
        used = self._fault_uses.get(key, 0)
        if fault.times is not None and used >= fault.times:
            return None
        self._fault_uses[key] = used + 1
        return fault

    async def _json(self, writer: asyncio.StreamWriter, status: int, obj: dict[str, Any], rid: str,
                    extra: dict[str, str] | None = None) -> None:
        data = json.dumps(obj).encode()
        head = {"content-type": "application/json", "content-length": str(len(data)), "x-request-id": rid,
                "request-id": rid, **(extra or {})}
        writer.write(_head(status, head) + data)
        await writer.drain()

    async def _stream(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire_type: type[Wire],
                      body: dict[str, Any], rid: str, path: str, received: float, fault: Fault | None) -> bool:
        """Stream one answer at its planned times; False when the connection must not be reused."""
        plan = self.source.plan(body, _max_tokens(body, self.max_tokens), _turn_of(body))
        record = Served(rid, path, 200, received, fault=fault.kind if fault else None)
        self.served.append(record)
        try:
            return await self._play(reader, writer, wire_type, body, plan, record, fault)
        finally:
            if self.on_served is not None:
                self.on_served(record)

    async def _play(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire_type: type[Wire],
                    body: dict[str, Any], plan: Plan, record: Served, fault: Fault | None) -> bool:
        clock, speed, start = self.clock, self.speed, record.received
        notes = _Notes(record, clock, reader, writer)
        asked = body.get("service_tier")
        tier = self.report_tier or (asked if isinstance(asked, str) and asked != "auto" else "default")
        wire = wire_type(body, record.request_id, str(body.get("model") or self.source.model), tier, self.usage,
                         self.flavor)
        await clock.sleep_until(start + plan.head_t / speed)
        failure: tuple[int, str] | None = None
        if fault is not None and fault.kind == "http":
            failure = (fault.status, f"injected by tokrace serve: HTTP {fault.status}")
        elif plan.error is not None and plan.error[0] >= 400:
            failure = plan.error
        if failure is not None:
            status, message = failure
            record.status = status
            extra = {}
            if fault is not None and fault.retry_after is not None:
                extra["retry-after"] = f"{fault.retry_after:g}"
            await self._json(writer, status, wire_type.error_body(status, message, record.request_id),
                             record.request_id, extra)
            notes.written("head")
            await notes.settled()
            return True
        writer.write(_head(200, {"content-type": "text/event-stream", "cache-control": "no-cache",
                                 "transfer-encoding": "chunked", "x-request-id": record.request_id,
                                 "request-id": record.request_id}) + _chunk(wire.opening(plan)))
        notes.written("head")
        await writer.drain()
        timing = Timing(start)
        paused = False
        ends = len(plan.pieces) - 1 if fault is None and plan.error is None and plan.pieces \
            and plan.end_t <= plan.pieces[-1].t else -1
        """The piece the answer ends with (its closing is due with it), if any."""
        for index, piece in enumerate(plan.pieces):
            if fault is not None and fault.kind != "http" and record.pieces >= fault.after and not paused:
                if fault.kind != "stall" or fault.stall_s is None:
                    return await self._inject(reader, writer, wire, plan, fault)
                # A timed stall is a pause: the rest of the answer follows, each piece as much later.
                await writer.drain()
                await clock.sleep_until(clock.now() + fault.stall_s)
                start += fault.stall_s
                paused = True
            await clock.sleep_until(start + piece.t / speed)
            data = _chunk(wire.piece(plan, piece))
            if index == ends:
                # Due together: one write, so that nothing comes between them (a server held between two writes
                # would put a gap there that its schedule does not have, and a client reading both at once would
                # take the last token as late as the closing).
                now = clock.now()
                first = timing.first if timing.first is not None or not piece.text else now
                ending = Timing(timing.received, first, now if piece.text else timing.last)
                data += _chunk(wire.closing(plan, ending)) + b"0\r\n\r\n"
            writer.write(data)
            if piece.text:
                if record.first is None:
                    record.first_tokens = piece.tokens
                    timing.first = timing.last = notes.written("first", "last")
                else:
                    timing.last = notes.written("last")
                record.pieces += 1
                record.tokens += piece.tokens
            await writer.drain()
        if ends >= 0:
            await notes.settled()
            return True
        if fault is not None and fault.kind != "http" and not paused:
            return await self._inject(reader, writer, wire, plan, fault)
        await clock.sleep_until(start + plan.end_t / speed)
        if plan.error is not None:
            writer.write(_chunk(wire.error_event(plan.error[1])) + b"0\r\n\r\n")
        else:
            writer.write(_chunk(wire.closing(plan, timing)) + b"0\r\n\r\n")
        await writer.drain()
        await notes.settled()
        return True

    async def _inject(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, wire: Wire, plan: Plan,
                      fault: Fault) -> bool:
        kind = fault.kind
        if kind == "error":
            writer.write(_chunk(wire.error_event("injected by tokrace serve: the server had an error")))
            writer.write(b"0\r\n\r\n")
        elif kind == "truncate":
            writer.write(b"0\r\n\r\n")
        elif kind == "malformed":
            writer.write(_chunk(wire.malformed()) + b"0\r\n\r\n")
        elif kind == "non-utf8":
            writer.write(_chunk(wire.non_utf8(plan)) + b"0\r\n\r\n")
        elif kind == "reset":
            sock = writer.get_extra_info("socket")
            if sock is not None:  # linger 0: closing sends RST, not FIN
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        elif kind == "stall":
            await writer.drain()
            if fault.stall_s is None:
                await reader.read()  # until the client gives up and closes the connection
                return False
            await asyncio.sleep(fault.stall_s)
            writer.write(_chunk(wire.closing(plan, Timing(self.clock.now()))) + b"0\r\n\r\n")
        await writer.drain()
        return False


def _head(status: int, headers: dict[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}"]
    lines.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n" if data else b""


_REASONS: Final[dict[int, str]] = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
    404: "Not Found", 408: "Request Timeout", 409: "Conflict", 413: "Payload Too Large",
    422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout", 529: "Overloaded",
}


@dataclass(slots=True)
class ServeOptions:
    """``tokrace serve``'s settings, gathered by the CLI."""

    host: str = "127.0.0.1"
    port: int = 8000
    recording: Path | None = None
    lane: int | str = 0
    run: int = 0
    profile: dict[str, Any] = field(default_factory=dict)
    model: str = "tokrace-serve"
    speed: float = 1.0
    fault: str | None = None
    usage: bool = True
    flavor: str = "openai"
    report_tier: str | None = None


def build_server(opts: ServeOptions, on_served: Callable[[Served], None] | None = None) -> ServeServer:
    """A server for the options (not yet listening); bad options are one-line errors."""
    if opts.recording is not None:
        source: Source = RecordingSource(opts.recording, opts.lane, opts.run)
    else:
        try:
            source = SyntheticSource(Profile.from_options(opts.profile), opts.model)
        except ConfigError as exc:
            raise ServeError(f"bad profile: {exc}") from None
    fault = Fault.parse(opts.fault) if opts.fault else None
    return ServeServer(source, fault=fault, speed=opts.speed, usage=opts.usage, flavor=opts.flavor,
                       report_tier=opts.report_tier, on_served=on_served)


async def serve_forever(server: ServeServer, opts: ServeOptions, say: Callable[[str], None]) -> None:
    """Listen until cancelled (Ctrl-C), saying where, and one line per request served."""
    try:
        await server.start(opts.host, opts.port)
    except OSError as exc:
        raise ServeError(f"cannot listen on {opts.host}:{opts.port} ({exc.strerror}); "
                         "pick another --port") from None
    say(f"tokrace serve: streaming {server.source.describe()}")
    say(f"  OpenAI base_url    {server.url}/v1   (provider openai or openai-responses)")
    say(f"  Anthropic base_url {server.url}      (provider anthropic)")
    say("  Ctrl-C stops")
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()
