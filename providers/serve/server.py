"""The loopback server behind ``tokrace serve``: OpenAI Chat, Responses and Anthropic streaming with faithful timing,
on asyncio streams (not a web framework, so timing and faults are exact); tests use it as their real peer."""

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
from collections import deque
from collections.abc import Callable
from typing import Any, Final

from ..model.tiers import MAX_TOKENS_LIMIT
from ..timing.clock import Clock, RealClock
from ..timing.stamped_sockets import ArrivalProtocol, ArrivalReader, StampedListener
from ..timing.stamps import SO_TIMESTAMPNS
from .faults import FAULT_HEADER, Fault, ServeError
from .request import Limits, Refused, parse_json, read_request
from .served import Notes, Served
from .sources import Source, max_tokens_of, turn_of
from .wire import FLAVORS, AnthropicWire, ChatWire, Plan, ResponsesWire, Timing, Wire

ROUTES: Final[dict[str, type[Wire]]] = {
    "/v1/chat/completions": ChatWire, "/chat/completions": ChatWire,
    "/v1/responses": ResponsesWire, "/responses": ResponsesWire,
    "/v1/messages": AnthropicWire, "/messages": AnthropicWire,
}
"""The paths the server answers a POST on, and the protocol each speaks."""

LARGE_BODY: Final[int] = 64 * 1024
"""A request body above this many bytes is planned on a thread (counting its input tokens takes milliseconds)."""


class ServeServer:
    """An HTTP/1.1 server on asyncio streams that answers the three streaming protocols from a :class:`Source`."""

    def __init__(self, source: Source, *, fault: Fault | None = None, speed: float = 1.0, usage: bool = True,
                 flavor: str = "openai", report_tier: str | None = None, max_tokens: int = 400,
                 clock: Clock | None = None, on_served: Callable[[Served], None] | None = None,
                 limits: Limits | None = None) -> None:
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
        self.limits = limits or Limits()
        """The bounds every request is read within (``--max-body`` and the rest)."""
        self.served: deque[Served] = deque(maxlen=10_000)
        """The latest requests served, newest last."""
        self._server: asyncio.Server | None = None
        self._tls: ssl.SSLContext | None = None
        self._ids = itertools.count(1)
        self._fault_uses: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        """Listen (``port`` 0 picks a free one); with ``tls``, speak HTTPS.

        On Linux and the real clock, a host that is one address listens on a :class:`StampedListener`, so that
        every request counts as received when its first byte reached the socket (the kernel's stamp), however busy
        the loop was then; a name with several addresses listens on each, and stamps when the loop reads."""
        self._tls = tls
        loop = asyncio.get_running_loop()
        listener = await self._stamped_listener(host, port)

        def protocol() -> asyncio.StreamReaderProtocol:
            return ArrivalProtocol(ArrivalReader(self.clock), self._connection, listener)

        if listener is not None:
            self._server = await loop.create_server(protocol, sock=listener, ssl=tls)
        else:
            self._server = await loop.create_server(protocol, host, port, ssl=tls)

    async def _stamped_listener(self, host: str, port: int) -> StampedListener | None:
        if self.clock.virtual or not isinstance(self.clock, RealClock) or sys.platform != "linux":
            return None  # the kernel's stamps are on perf_counter's time line (see packet_time): the real clock's
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                              flags=socket.AI_PASSIVE)
        if len({info[4] for info in infos}) != 1:
            return None
        family, kind, proto, _, address = infos[0]
        listener = StampedListener(family, kind, proto)
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
        conn = reader.conn if isinstance(reader, ArrivalReader) else None
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
        if isinstance(reader, ArrivalReader):
            reader.expect_request()
        try:
            request = await read_request(reader, self.limits)
        except Refused as refused:  # a bound broken: said, and the connection closed (its rest is not read)
            rid = f"{next(self._ids):06d}"
            await self._json(writer, refused.status, ChatWire.error_body(refused.status, refused.message, rid), rid,
                             {"connection": "close"})
            return False
        if request is None:
            return False
        method, target, headers, body = request.method, request.target, request.headers, request.body
        # The plan runs from the request's arrival: its first bytes', not its body's end (a 400 KB body takes a
        # millisecond to come; the client's clock started before it sent the first byte; docs/serve.md).
        received = reader.began if isinstance(reader, ArrivalReader) and not self.clock.virtual \
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
            payload = parse_json(body)
        except Refused as refused:
            await self._json(writer, refused.status, wire_type.error_body(refused.status, refused.message, rid), rid)
            return keep
        if not isinstance(payload, dict) or payload.get("stream") is not True:
            why = "the body is not a JSON object" if not isinstance(payload, dict) else \
                "tokrace serve only streams: send \"stream\": true"
            await self._json(writer, 400, wire_type.error_body(400, why, rid), rid)
            return keep
        fault = self._fault_for(headers.get(FAULT_HEADER))
        return await self._stream(reader, writer, wire_type, payload, rid, path, received, fault, len(body)) \
            and keep

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
                      body: dict[str, Any], rid: str, path: str, received: float, fault: Fault | None,
                      size: int = 0) -> bool:
        """Stream one answer at its planned times; False when the connection must not be reused.

        The answer runs to the server's own length (``max_tokens``, 400 by default) and ends as a model's does
        (``stop``), unless the request's limit is lower: an agent asking for up to 32,000 tokens to "say hello"
        gets an answer, not 32,000 tokens cut at its limit. A large body's input tokens are counted on a thread:
        the plan's times run from the request's arrival, and the other streams go on meanwhile."""
        asked = max_tokens_of(body, MAX_TOKENS_LIMIT)
        limit = min(asked, self.max_tokens)
        turn = turn_of(body)
        if size > LARGE_BODY:
            plan = await asyncio.to_thread(self.source.plan, body, limit, turn)
        else:
            plan = self.source.plan(body, limit, turn)
        if limit < asked and plan.finish == "length" and plan.output_tokens >= limit:
            plan = dataclasses.replace(plan, finish="stop")
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
        notes = Notes(record, clock, reader, writer)
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
    431: "Request Header Fields Too Large",
    422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway",
    503: "Service Unavailable", 504: "Gateway Timeout", 529: "Overloaded",
}
