"""The relay behind ``tokrace proxy``: every request and answer passed through byte for byte, each upstream read
written to the client before the next read, the client's leaving cancelling the upstream at once; what passes is
handed to an observer after it was forwarded, never before (docs/design.md §13)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from ..timing.clock import RealClock
from ..timing.stamped_sockets import ArrivalProtocol, ArrivalReader, StampedConnection, StampedListener
from ..timing.stamps import SO_TIMESTAMPNS
from .http1 import MAX_HEAD_BYTES, BodyEnd, Head, HeadError, body_end, encode_head, parse_head, read_head
from .routes import Routes, Upstream

READ_TIMEOUT_S: Final[float] = 900.0
"""How long the proxy waits for the upstream's next byte: thinking models are silent for minutes (≥ 600 s)."""

CONNECT_TIMEOUT_S: Final[float] = 30.0
HIGH_WATER: Final[int] = 1 << 20
"""Bytes waiting for a slow client above which the proxy stops reading the upstream (until they drain)."""

IDLE_KEPT: Final[int] = 8
"""Idle upstream connections kept per upstream for the next request."""


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


class _Upstreaming(asyncio.Protocol):
    """One upstream connection: its bytes go straight to the exchange that owns it, in the loop's callback."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sock: StampedConnection | None = None
        self.exchange: _Exchange | None = None
        self.closed = asyncio.get_running_loop().create_future()
        self._writable = asyncio.Event()
        self._writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.exchange is not None:
            self.exchange.upstream_data(data, self)

    def arrived(self, read_at: float) -> float:
        """When the bytes just read reached the socket: the kernel's stamp, worked out after they went on (else
        ``read_at``, when the loop read them)."""
        sock = self.sock
        stamp = sock.stamp if sock is not None else None
        return stamp if stamp is not None else read_at

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


def _when(source: _Upstreaming | float, read_at: float) -> float:
    """When a read's bytes reached the proxy: ``source``'s kernel stamp (asked once they went on), or ``source``."""
    return source if isinstance(source, float) else source.arrived(read_at)


@dataclass(slots=True)
class _Exchange:
    """One request's answer on its way from the upstream to the client."""

    client: asyncio.Transport
    method: str
    observer: Observer | None
    head_buffer: bytearray = field(default_factory=bytearray)
    head: Head | None = None
    end: BodyEnd | None = None
    finished: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    upstream: _Upstreaming | None = None
    reusable: bool = False
    close_client: bool = False
    last_byte: float = field(default_factory=time.perf_counter)
    """When the upstream last sent a byte (or the request went out): the read timeout counts from it."""
    resuming: asyncio.Future[None] | None = None
    """The wait for a slow client to drain before the upstream is read again."""

    def upstream_data(self, data: bytes, source: _Upstreaming | float) -> None:
        """Forward what the upstream sent; ``source`` tells when it came (asked after forwarding), or is that time."""
        self.last_byte = read_at = time.perf_counter()
        if self.finished.done():
            return
        if self.head is not None:
            self._body(data, source, None, read_at)
            return
        t = _when(source, read_at)
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
            return
        self._body(data, t, head, read_at)  # the body's first bytes go on before the head is read

    def _body(self, data: bytes, source: _Upstreaming | float, new_head: Head | None, read_at: float) -> None:
        """Forward a read of the body, then hand it (after ``new_head``, read with it) to the observer with when it
        came (``source``'s stamp, asked after the write)."""
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
                self.observer.response_head(_when(source, read_at), new_head)
            self._fail(f"the upstream sent {exc}")
            return
        if not body.chunked:  # (a length's end is one subtraction away: nothing past it goes on)
            self.client.write(data if used == len(data) else data[:used])
        elif used != len(data):  # bytes after the answer's end, already gone on: this connection ends with it
            self.close_client = True
        t = _when(source, read_at)
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


class _Nowhere:
    """Where a shadow's answer goes once measured: nowhere (no client waits for it)."""

    def write(self, data: bytes) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


class _ClientProtocol(ArrivalProtocol):
    """A client connection that says at once when the client went away."""

    def __init__(self, reader: ArrivalReader, handler: object, listener: StampedListener | None) -> None:
        super().__init__(reader, handler, listener)
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)
        super().connection_lost(exc)

    def eof_received(self) -> bool:
        # An HTTP client does not half-close while it waits for an answer: its FIN means it has gone.
        if not self.lost.done():
            self.lost.set_result(None)
        super().eof_received()
        return False


class ProxyServer:
    """Listens on one address and relays each request to its upstream (:class:`Routes`)."""

    def __init__(self, routes: Routes, observe: ObserverFactory | None = None,
                 tls: ssl.SSLContext | None = None, read_timeout: float = READ_TIMEOUT_S) -> None:
        self.routes = routes
        self.read_timeout = read_timeout
        """Seconds of the upstream's silence (between bytes, not in all) after which a call fails."""
        self.observe = observe
        self._tls = tls or ssl.create_default_context()
        self._server: asyncio.Server | None = None
        self._idle: dict[Upstream, list[_Upstreaming]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._clock = RealClock()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        loop = asyncio.get_running_loop()
        listener = self._listener(host, port) if sys.platform == "linux" else None
        lost: dict[int, _ClientProtocol] = {}

        def protocol() -> asyncio.StreamReaderProtocol:
            reader = ArrivalReader(self._clock)
            proto = _ClientProtocol(reader, self._connection, listener)
            lost[id(reader)] = proto
            return proto

        self._protocols = lost
        if listener is not None:
            self._server = await loop.create_server(protocol, sock=listener)
        else:
            self._server = await loop.create_server(protocol, host, port)

    def _listener(self, host: str, port: int) -> StampedListener | None:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except OSError:
            return None
        if len({info[4] for info in infos}) != 1:
            return None
        family, kind, proto, _, address = infos[0]
        listener = StampedListener(family, kind, proto)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            listener.bind(address)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        return listener

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        assert self._server is not None and self._server.sockets
        host = str(self._server.sockets[0].getsockname()[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        for conns in self._idle.values():
            for conn in conns:
                if conn.transport is not None:
                    conn.transport.close()
        self._idle.clear()

    async def __aenter__(self) -> ProxyServer:
        if self._server is None:
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the client's side ---------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        proto = self._protocols.pop(id(reader), None)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = writer.get_extra_info("peername")
        try:
            while proto is not None and await self._one(reader, writer, proto, peer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, HeadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proto: _ClientProtocol,
                   peer: object) -> bool:
        """Relay one request and its answer; False when the client's connection is to close."""
        if isinstance(reader, ArrivalReader):
            reader.expect_request()
        try:
            head = await read_head(reader)
        except HeadError as exc:
            await self._answer(writer, 400, f"tokrace proxy: the request had {exc}")
            return False
        if head is None:
            return False
        arrived = reader.began if isinstance(reader, ArrivalReader) else time.perf_counter()
        method, target = head.first[0].upper(), head.first[1]
        keep = head.keep_alive
        if not target.startswith("/"):
            await self._answer(writer, 400, "tokrace proxy forwards only to its configured upstreams: send "
                                            "origin-form requests (a path), not a URL or CONNECT")
            return False
        path = target.split("?", 1)[0]
        if path.rstrip("/") == "" and method in ("HEAD", "GET"):
            await self._answer(writer, 200, "tokrace proxy is up", head_only=method == "HEAD")
            return keep
        if "websocket" in head.tokens("upgrade"):
            # Codex asks for a websocket on /v1/responses first; 426 tells it at once to use HTTP (POST + SSE).
            await self._answer(writer, 426, "tokrace proxy relays HTTP only: use POST with stream=true",
                               extra=[("upgrade", "HTTP/1.1")])
            return keep
        try:
            request_end = body_end(head)
        except HeadError as exc:
            await self._answer(writer, 400, f"tokrace proxy: the request had {exc}")
            return False
        upstream = self.routes.pick(path, head)
        observer = self.observe(method, peer if isinstance(peer, tuple) else None) if self.observe else None
        if observer is not None:
            observer.request(head, arrived, upstream)
        try:
            conn, fresh, connected = await self._connect(upstream)
        except OSError as exc:
            why = f"cannot reach the upstream {upstream.public()} ({exc.strerror or exc})"
            if observer is not None:
                observer.ended(time.perf_counter(), "upstream", why)
            await self._skip_body(reader, request_end)
            await self._answer(writer, 502, f"tokrace proxy: {why}")
            return keep
        assert conn.transport is not None
        exchange = _Exchange(writer.transport, method, observer)  # type: ignore[arg-type]
        exchange.upstream = conn
        conn.exchange = exchange
        headers = [(k, v) for k, v in head.forwarded(frozenset({"host"}))
                   if not (upstream.auth and k.lower() in ("authorization", "x-api-key"))]
        conn.transport.write(encode_head((method, upstream.target(target), "HTTP/1.1"),
                                         [("Host", upstream.authority), *headers, *upstream.auth]))
        try:
            await self._relay_body(reader, conn, request_end, observer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, HeadError):
            conn.transport.abort()
            if observer is not None:
                observer.ended(time.perf_counter(), "cancelled", "the client went away while sending its request")
            return False
        exchange.last_byte = time.perf_counter()
        if observer is not None:
            sock = conn.sock
            went = sock.sent_time(sock.sent) if sock is not None else None
            observer.sent(went if went is not None else time.perf_counter(), fresh, connected)
        outcome = await self._await_answer(exchange, proto)
        conn.exchange = None
        if outcome == "cancelled":
            conn.transport.abort()
            if observer is not None:
                observer.ended(time.perf_counter(), "cancelled", "the client went away before the answer ended")
            return False
        if outcome != "done":
            conn.transport.abort()
            if exchange.head is None:
                await self._answer(writer, 502, f"tokrace proxy: {outcome}")
                return keep
            writer.transport.abort()  # the answer was cut: the client must see it cut, not complete
            return False
        if exchange.reusable and not conn.transport.is_closing():
            idle = self._idle.setdefault(upstream, [])
            if len(idle) < IDLE_KEPT:
                idle.append(conn)
            else:
                conn.transport.close()
        else:
            conn.transport.close()
        await writer.drain()
        return keep and not exchange.close_client

    async def _await_answer(self, exchange: _Exchange, proto: _ClientProtocol | None) -> str:
        """The exchange's outcome: ``done``, ``cancelled`` (the client left), or why the upstream failed."""
        lost: asyncio.Future[None] = proto.lost if proto is not None else asyncio.get_running_loop().create_future()
        while True:
            waiting: set[asyncio.Future[object]] = {exchange.finished, lost}  # type: ignore[arg-type]
            idle = time.perf_counter() - exchange.last_byte
            done, _ = await asyncio.wait(waiting, timeout=max(self.read_timeout - idle, 0.0),
                                         return_when=asyncio.FIRST_COMPLETED)
            if exchange.finished in done:
                return exchange.finished.result()
            if lost in done:
                return "cancelled"
            if time.perf_counter() - exchange.last_byte >= self.read_timeout:  # silent that long: not between bytes
                exchange._fail(f"the upstream sent nothing for {self.read_timeout:g} s")

    async def send(self, upstream: Upstream, head: Head, body: bytes, observer: Observer) -> str:
        """Send a request of the proxy's own (a shadow's copy of a call) to ``upstream`` and read its answer
        through the same stamped path as a relayed one, the answer's bytes going nowhere; its outcome."""
        observer.request(head, time.perf_counter(), upstream)
        observer.request_body(body)
        try:
            conn, fresh, connected = await self._connect(upstream)
        except OSError as exc:
            why = f"cannot reach the upstream {upstream.public()} ({exc.strerror or exc})"
            observer.ended(time.perf_counter(), "upstream", why)
            return why
        assert conn.transport is not None
        exchange = _Exchange(_Nowhere(), head.first[0], observer)  # type: ignore[arg-type]
        exchange.upstream = conn
        conn.exchange = exchange
        conn.transport.write(encode_head((head.first[0], upstream.target(head.first[1]), "HTTP/1.1"),
                                         [("Host", upstream.authority), *head.headers, *upstream.auth]) + body)
        exchange.last_byte = time.perf_counter()
        sock = conn.sock
        went = sock.sent_time(sock.sent) if sock is not None else None
        observer.sent(went if went is not None else time.perf_counter(), fresh, connected)
        try:
            outcome = await self._await_answer(exchange, None)
        except asyncio.CancelledError:
            conn.transport.abort()
            observer.ended(time.perf_counter(), "cancelled", "the proxy stopped before the answer ended")
            raise
        conn.exchange = None
        if outcome == "done" and exchange.reusable and not conn.transport.is_closing():
            idle = self._idle.setdefault(upstream, [])
            if len(idle) < IDLE_KEPT:
                idle.append(conn)
                return outcome
        conn.transport.abort() if outcome != "done" else conn.transport.close()
        return outcome

    async def _relay_body(self, reader: asyncio.StreamReader, conn: _Upstreaming, end: BodyEnd,
                          observer: Observer | None) -> None:
        """Pass the request's body on as it comes (its chunk framing too)."""
        assert conn.transport is not None
        while not end.done:
            wants = end.wants  # never read past this body's end (the next request may follow it)
            data = await reader.read(min(256 * 1024, wants)) if wants else await reader.readuntil(b"\n")
            if not data:
                raise ConnectionError("the client closed before its request body ended")
            _, pieces = end.feed(data)
            conn.transport.write(data)
            if observer is not None:
                for piece in pieces:
                    observer.request_body(piece)
            await conn.drain()

    async def _skip_body(self, reader: asyncio.StreamReader, end: BodyEnd) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, HeadError):
            while not end.done:
                wants = end.wants
                data = await reader.read(min(256 * 1024, wants)) if wants else await reader.readuntil(b"\n")
                if not data:
                    return
                end.feed(data)

    async def _connect(self, upstream: Upstream) -> tuple[_Upstreaming, bool, float | None]:
        """An idle connection to the upstream, or a new one: (it, whether new, when it was connected)."""
        idle = self._idle.get(upstream)
        while idle:
            conn = idle.pop()
            if conn.transport is not None and not conn.transport.is_closing() and not conn.closed.done():
                return conn, False, None
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(upstream.host, upstream.port, type=socket.SOCK_STREAM)
        if not infos:
            raise OSError(f"no address for {upstream.host}")
        family, kind, proto, _, address = infos[0]
        sock = StampedConnection(family, kind, proto)
        try:
            sock.setblocking(False)
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            await asyncio.wait_for(loop.sock_connect(sock, address), CONNECT_TIMEOUT_S)
            if not upstream.tls:
                sock.stamp_sends()
            conn = _Upstreaming()
            conn.sock = sock
            await asyncio.wait_for(loop.create_connection(
                lambda: conn, sock=sock, ssl=self._tls if upstream.tls else None,
                server_hostname=upstream.host if upstream.tls else None), CONNECT_TIMEOUT_S)
        except TimeoutError:
            sock.close()
            raise OSError(f"no answer in {CONNECT_TIMEOUT_S:.0f} s") from None
        except (OSError, ssl.SSLError):
            sock.close()
            raise
        return conn, True, time.perf_counter()

    async def _answer(self, writer: asyncio.StreamWriter, status: int, message: str, *, head_only: bool = False,
                      extra: list[tuple[str, str]] | None = None) -> None:
        """The proxy's own answer, as a JSON error both SDKs read (or a plain note for a health probe)."""
        if status == 200:
            body = (message + "\n").encode()
            kind = "text/plain; charset=utf-8"
        else:
            body = json.dumps({"type": "error", "error": {"type": "proxy_error", "message": message}}).encode()
            kind = "application/json"
        head = encode_head(("HTTP/1.1", str(status), _REASONS.get(status, "Error")),
                           [("content-type", kind), ("content-length", str(len(body))), *(extra or [])])
        writer.write(head if head_only else head + body)
        await writer.drain()


_REASONS: Final[dict[int, str]] = {200: "OK", 400: "Bad Request", 426: "Upgrade Required", 502: "Bad Gateway"}
