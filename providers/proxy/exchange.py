"""One request's answer on its way from the upstream's connection to the client: the head read and passed on, the
body forwarded as it comes (on the event loop, or on a relay thread once the head went), and what passed handed to
an observer after it was forwarded (docs/design.md §13)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from ..timing.stamped_sockets import StampedConnection
from .http1 import MAX_HEAD_BYTES, BodyEnd, Head, HeadError, body_end, encode_head, parse_head
from .offloop import Ending, RelayThreads, Stream
from .routes import Upstream

HIGH_WATER: Final[int] = 1 << 20
"""Bytes waiting for a slow client above which the proxy stops reading the upstream (until they drain)."""

class Observer(Protocol):
    """What the relay tells about one exchange, each after the bytes concerned were forwarded. Calls must be quick
    and must not raise (the measuring happens later, off the relay's path)."""

    def request(self, head: Head, arrived: float, upstream: Upstream) -> None: ...
    def request_body(self, piece: bytes) -> None: ...
    def sent(self, t: float, fresh_connection: bool, connected: float | None) -> None: ...
    def response_head(self, t: float, head: Head) -> None: ...
    def response_body(self, t: float, pieces: list[bytes]) -> None: ...
    def ended(self, t: float, outcome: str, detail: str = "") -> None: ...


ObserverFactory = Callable[[str, tuple[str, int] | None], Observer | None]
"""Makes an observer for a request on ``(method, peer)``, or ``None`` to only relay."""


class Upstreaming(asyncio.Protocol):
    """One upstream connection: its bytes go straight to the exchange that owns it, in the loop's callback."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sock: StampedConnection | None = None
        self.exchange: Exchange | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        sock = self.sock
        stamp = sock.stamp if sock is not None else None
        t = stamp if stamp is not None else time.perf_counter()
        if self.exchange is not None:
            self.exchange.upstream_data(data, t)

    def eof_received(self) -> bool | None:
        return None  # close

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)
        self._writable.set()  # a request body waiting to be written on goes no further: nothing waits for ever
        if self.exchange is not None:
            self.exchange.upstream_closed(time.perf_counter())

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()

    async def drain(self) -> None:
        await self._writable.wait()


@dataclass(slots=True)
class Exchange:
    """One request's answer on its way from the upstream to the client."""

    client: asyncio.Transport
    method: str
    observer: Observer | None
    head_buffer: bytearray = field(default_factory=bytearray)
    head: Head | None = None
    end: BodyEnd | None = None
    finished: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    upstream: Upstreaming | None = None
    reusable: bool = False
    close_client: bool = False
    last_byte: float = field(default_factory=time.perf_counter)
    """When the upstream last sent a byte (or the request went out): the read timeout counts from it."""
    resuming: asyncio.Future[None] | None = None
    """The wait for a slow client to drain before the upstream is read again."""
    threads: RelayThreads | None = None
    """Where the body goes on once the head went (a plain upstream's, to a client's socket); ``None``: on the loop."""
    request_sent: bool = False
    stream: Stream | None = None
    """The body's relay on a thread, once handed over."""
    halted: bool = False
    """The thread's relay was stopped before the body's end: the upstream connection is not kept."""

    def upstream_data(self, data: bytes, t: float) -> None:
        self.last_byte = time.perf_counter()
        if self.finished.done():
            return
        if self.head is None:
            self.head_buffer += data
            cut = self.head_buffer.find(b"\r\n\r\n")
            if cut < 0:
                if len(self.head_buffer) > MAX_HEAD_BYTES:
                    self._fail("the upstream sent a response head over 64 KB")
                return
            raw, rest = bytes(self.head_buffer[:cut + 4]), bytes(self.head_buffer[cut + 4:])
            self.head_buffer = bytearray()
            try:
                head = parse_head(raw)
                if head.first[1] == "100":  # an interim answer: pass it on, the real head follows
                    self.client.write(raw)
                    if rest:
                        self.upstream_data(rest, t)
                    return
                end = body_end(head, response_to=self.method)
            except HeadError as exc:
                self._fail(f"the upstream sent {exc}")
                return
            self.head = head
            self.end = end
            headers = head.forwarded()
            if end.until_close:
                headers.append(("connection", "close"))
                self.close_client = True
            self.client.write(encode_head(("HTTP/1.1", head.first[1], head.first[2]), headers))
            data = rest
            if end.done or not data:
                if self.observer is not None:
                    self.observer.response_head(t, head)
                if end.done:
                    self._finish(t, head.keep_alive)
                else:
                    self._hand_off()
                return
            self._body(data, t, head)  # the body's first bytes go on before the head is read
            return
        self._body(data, t, None)

    def _body(self, data: bytes, t: float, new_head: Head | None) -> None:
        """Forward a read of the body, then hand it (after ``new_head``, read with it) to the observer."""
        body = self.end
        assert body is not None
        if body.chunked:  # forwarded first: finding the chunks' ends is Python work, done after the write
            self.client.write(data)
        try:
            used, pieces = body.feed(data)
        except HeadError as exc:
            if not body.chunked:
                self.client.write(data)
            if self.observer is not None and new_head is not None:
                self.observer.response_head(t, new_head)
            self._fail(f"the upstream sent {exc}")
            return
        if not body.chunked:  # (a length's end is one subtraction away: nothing past it goes on)
            self.client.write(data if used == len(data) else data[:used])
        elif used != len(data):  # bytes after the answer's end, already gone on: this connection ends with it
            self.close_client = True
        if self.observer is not None:
            if new_head is not None:
                self.observer.response_head(t, new_head)
            if pieces:
                self.observer.response_body(t, pieces)
        if body.done:
            assert self.head is not None
            self._finish(t, self.head.keep_alive and used == len(data))
        elif self.client.get_write_buffer_size() > HIGH_WATER and self.upstream is not None \
                and self.upstream.transport is not None:
            self.upstream.transport.pause_reading()
            self.resuming = asyncio.ensure_future(self._resume_when_drained())
        else:
            self._hand_off()

    def _hand_off(self) -> None:
        """Relay the rest of the body on a thread (docs/design.md §13): once the request went and the head is on,
        nothing then sits between a chunk's arrival and its forwarding but the syscalls."""
        up = self.upstream
        if self.threads is None or self.threads.closed or not self.request_sent or self.finished.done() \
                or up is None or up.sock is None or up.transport is None or up.transport.get_write_buffer_size() \
                or self.client.get_write_buffer_size() or self.client.is_closing():
            return
        client = self.client.get_extra_info("socket")
        if client is None or client.fileno() < 0 or self.end is None:
            return
        try:
            stream = Stream(up.sock.fileno(), client.fileno(), self.end, self)
        except OSError:  # (out of descriptors: the loop relays it)
            return
        up.transport.pause_reading()
        self.stream = stream
        self.threads.run(stream)

    def relayed(self, t: float, pieces: list[bytes]) -> None:
        """Pieces of the body the thread forwarded (the loop's side of :class:`~.offloop.Stream`)."""
        if self.observer is not None and not self.finished.done():
            self.observer.response_body(t, pieces)

    def relay_ended(self, ending: Ending) -> None:
        if self.finished.done() or ending.outcome == "stopped":
            return
        if ending.outcome == "done":
            assert self.head is not None and self.upstream is not None and self.upstream.transport is not None
            self.close_client = self.close_client or ending.past_end
            if self.head.keep_alive and not ending.past_end:
                self.upstream.transport.resume_reading()
            self._finish(ending.t, self.head.keep_alive and not ending.past_end)
        elif ending.outcome == "closed":
            self.upstream_closed(ending.t)
        elif ending.outcome == "client":
            self.finished.set_result("cancelled")
        else:
            self._fail(ending.detail)

    def halt(self) -> None:
        """Stop the thread's relay now, and the upstream's connection with it (the loop closes it after)."""
        stream = self.stream
        if stream is None or stream.over.done():
            return
        self.halted = True
        stream.stop()

    async def settle(self, outcome: str) -> str:
        """The outcome once the thread (if one relays the body) has stopped: a body whose end the thread had
        already forwarded when the client left is done, not cancelled."""
        stream = self.stream
        if stream is None or stream.over.done():
            return outcome
        self.halt()
        try:
            await asyncio.wait_for(asyncio.shield(stream.over), 1.0)
        except TimeoutError:
            return outcome
        if outcome == "cancelled" and self.finished.done() and self.finished.result() == "done":
            return "done"
        return outcome

    async def _resume_when_drained(self) -> None:
        while self.client.get_write_buffer_size() > HIGH_WATER // 2 and not self.client.is_closing():
            await asyncio.sleep(0.001)
        if self.upstream is not None and self.upstream.transport is not None and not self.finished.done():
            self.upstream.transport.resume_reading()

    def upstream_closed(self, t: float) -> None:
        if self.finished.done():
            return
        if self.end is not None and self.end.until_close:
            self._finish(t, False)
        elif self.head is None:
            self._fail("the upstream closed the connection before answering")
        else:
            self._fail("the upstream closed the connection in the middle of the answer")

    def _finish(self, t: float, reusable: bool) -> None:
        self.reusable = reusable
        if self.observer is not None:
            self.observer.ended(t, "done")
        self.finished.set_result("done")

    def _fail(self, why: str) -> None:
        if self.finished.done():
            return
        if self.observer is not None:
            self.observer.ended(time.perf_counter(), "upstream", why)
        self.finished.set_result(why)


class Nowhere:
    """Where a shadow's answer goes once measured: nowhere (no client waits for it)."""

    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False
