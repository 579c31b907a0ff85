"""A lean HTTP/1.1 transport under httpx, over the socket-time streams of :mod:`.stamped_stream`.

httpx's own path to the socket (its transport, httpcore's pool and connection, h11) cost a first request about
0.5 ms between "send" and its bytes on the wire, and a streamed response four calls per chunk. This transport
writes a request's head and body in one ``sendall`` and decodes the response itself: the head once, then per
read of the socket one pass over the bytes (a length to count down, or chunked framing). It keeps what tokrace
relies on: httpx's ``trace`` extension (the names :class:`~.marks.AttemptMarks` listens to), the connection as
``network_stream`` in the response's extensions, keep-alive reuse, httpx's timeouts and exceptions, TLS through
:class:`~.stamped_stream.StampedTLSStream`. Proxies are not spoken here: behind one, the provider uses httpx's own.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final

import httpcore
import httpx

from .backend import StampedBackend
from .stamped_stream import READ_SIZE, StampedStream, StampedTLSStream

MAX_HEAD: Final[int] = 64 * 1024
"""A response head longer than this is not HTTP (h11's limit is the same)."""
MAX_CHUNK_LINE: Final[int] = 4096
"""A chunk-size line (or trailer line) longer than this is garbage, not a size."""
MAX_IDLE: Final[int] = 8
"""Idle connections kept per server."""
BATCH_READS: Final[int] = 32
"""At most this many reads handed over together are taken in one step (see :meth:`_Body.stamped`): a lane whose
reads piled up while the event loop was held still lets the loop run between steps."""

Stream = StampedStream | StampedTLSStream
Trace = Callable[[str, dict[str, Any]], Awaitable[None]]

_ERRORS: Final[dict[type[Exception], type[httpx.TransportError]]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.WriteError: httpx.WriteError,
}


def _httpx_error(exc: Exception, request: httpx.Request) -> httpx.TransportError:
    """httpx's exception for one the streams raised (httpcore's kinds, as httpx's own transport maps them)."""
    kind = _ERRORS.get(type(exc), httpx.ReadError if isinstance(exc, OSError) else httpx.TransportError)
    error = kind(str(exc) or type(exc).__name__, request=request)
    error.__cause__ = exc
    return error


class ChunkedDecoder:
    """Chunked transfer coding, fed whatever each read of the socket brought: returns the data in it, framing
    taken out. ``done`` once the last chunk and its trailer went by; ``extra`` is what came after (a server
    speaking out of turn: the connection is not reused)."""

    __slots__ = ("_left", "_line", "_state", "done", "extra")

    _SIZE, _DATA_END, _TRAILER = 0, 1, 2

    def __init__(self) -> None:
        self._left = 0
        """Bytes of the current chunk still to come."""
        self._line = b""
        """A size (or trailer) line cut by the end of a read."""
        self._state = self._SIZE
        self.done = False
        self.extra = b""

    def feed(self, data: bytes) -> bytes:
        """The data in ``data``; raises ``ValueError`` on bad framing."""
        if 0 < len(data) <= self._left:  # inside a big chunk: all data, no framing
            self._left -= len(data)
            if not self._left:
                self._state = self._DATA_END
            return data
        if self._state == self._SIZE and not self._left and not self._line:
            fast = self._whole_then_rest(data)
            if fast is not None:
                return fast
        return self._step(data, True)

    def _whole_then_rest(self, data: bytes) -> bytes | None:
        """At a chunk's start: the data of a read that begins with whole chunks, those in one split
        (:func:`_whole_chunks`) and what follows them (a chunk the read cut short) step by step; ``None`` for a read
        that does not (its first chunk cut, a line break in a chunk's data, the last chunk). A read cut inside a
        chunk (more bytes came than a read takes, 64 KB: a stream of 20,000 tok/s, or a look that came late) would
        otherwise go a chunk at a time, three times the work."""
        end = len(data) - 2 if data.endswith(b"\r\n") else data.rfind(b"\r\n")
        for _ in range(2):  # the end of the read's last whole chunk: its last line break, or the one before that
            if end < 0:      # (when the read ends inside a chunk's size line or data)
                return None
            whole = _whole_chunks(data[:end + 2])
            if whole is not None:
                rest = data[end + 2:]
                return whole + self._step(rest, False) if rest else whole
            end = data.rfind(b"\r\n", 0, end)
        return None

    def _step(self, data: bytes, whole_after: bool) -> bytes:
        """The data in ``data``, a line at a time; once a chunk the read began inside is over, the rest of the read
        through :meth:`_whole_then_rest` when ``whole_after``."""
        out: list[bytes] = []
        pos, size = 0, len(data)
        while pos < size:
            if self.done:
                self.extra += data[pos:]
                break
            if self._left:
                end = min(size, pos + self._left)
                out.append(data[pos:end])
                self._left -= end - pos
                pos = end
                if not self._left:
                    self._state = self._DATA_END
                continue
            newline = data.find(b"\n", pos)
            if newline < 0:
                self._line += data[pos:]
                if len(self._line) > MAX_CHUNK_LINE:
                    raise ValueError("a chunk-size line too long")
                break
            line = (self._line + data[pos:newline]) if self._line else data[pos:newline]
            self._line = b""
            pos = newline + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if len(line) > MAX_CHUNK_LINE:
                raise ValueError("a chunk-size line too long")
            if self._state == self._DATA_END:  # the line break after a chunk's data
                if line:
                    raise ValueError(f"chunk data longer than its size ({line[:20]!r}...)")
                self._state = self._SIZE
                if whole_after and pos < size:  # a chunk's start: the rest of the read may be whole chunks
                    whole_after = False
                    fast = self._whole_then_rest(data[pos:])
                    if fast is not None:
                        out.append(fast)
                        break
            elif self._state == self._SIZE:
                digits = line.split(b";", 1)[0].strip()
                if not digits or digits.lstrip(b"0123456789abcdefABCDEF"):
                    raise ValueError(f"a bad chunk size {line[:20]!r}")
                self._left = int(digits, 16)
                if not self._left:
                    self._state = self._TRAILER
            elif not line:  # the empty line that ends the trailer
                self.done = True
        return out[0] if len(out) == 1 else b"".join(out)


_HEX: Final[bytes] = b"0123456789abcdefABCDEF"


def _whole_chunks(data: bytes) -> bytes | None:
    """The data of a read made of whole chunks, none of them the last (how a server streams events: a chunk per
    event, a read of one or many), in one split instead of a step per chunk; ``None`` for any other read. Sound
    because a chunk whose data holds a line break (or a read cut inside one) makes its data part shorter than its
    size, and the sizes are checked to be plain hex digits, none zero."""
    parts = data.split(b"\r\n")
    if not len(parts) & 1:
        return None
    sizes, datas = parts[0:-1:2], parts[1::2]
    if b"" in sizes or b"".join(sizes).lstrip(_HEX):
        return None
    lengths = [int(size, 16) for size in sizes]
    if 0 in lengths or lengths != list(map(len, datas)):
        return None
    return datas[0] if len(datas) == 1 else b"".join(datas)


class _Connection:
    """One connection to a server, and whether it may carry another request."""

    __slots__ = ("key", "stream")

    def __init__(self, key: tuple[str, str, int], stream: Stream) -> None:
        self.key = key
        self.stream = stream


class LeanTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over :class:`StampedBackend` connections, one request per connection at a time, idle ones kept
    for the next request to the same server."""

    def __init__(self, backend: StampedBackend, ssl_context: ssl.SSLContext | None = None) -> None:
        self.backend = backend
        self.ssl_context = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._live: set[_Connection] = set()
        """Every connection not closed yet, idle or carrying a response (closing the transport closes them all:
        a response nobody read to its end included)."""
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        scheme = url.scheme
        if scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"the URL's scheme {scheme!r} is not http or https", request=request)
        host = url.host
        port = url.port or (443 if scheme == "https" else 80)
        key = (scheme, host, port)
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        trace: Trace | None = request.extensions.get("trace")
        try:
            body = request.content
        except httpx.RequestNotRead:
            body = await request.aread()
        connection = self._take(key)
        if connection is None:
            connection = await self._open(key, request, timeouts, trace)
        stream = connection.stream
        try:  # made once connected: a new connection's server is accepting it meanwhile
            message = _head(request, body)
        except httpx.LocalProtocolError:
            if not self.keep(connection):
                await self.drop(connection)
            raise
        try:
            if trace is not None:
                await trace("http11.send_request_body.started", {"request": request})
            await stream.send(message, timeouts.get("write"))
            if trace is not None:  # with the moment it went on the wire (perf_counter), which the loop can't tell
                await trace("http11.send_request_body.complete", {"request": request, "on_wire": stream.sent_at})
            stream.start_reading()
            if trace is not None:
                await trace("http11.receive_response_headers.started", {"request": request})
            status, reason, version, headers, rest = await _read_head(stream, read_timeout, request)
            if trace is not None:
                await trace("http11.receive_response_headers.complete",
                            {"request": request, "return_value": (version, status, reason, headers)})
        except BaseException as exc:
            await self.drop(connection)
            if isinstance(exc, httpx.TransportError):
                raise
            if isinstance(exc, httpcore.NetworkError | httpcore.TimeoutException | OSError):
                raise _httpx_error(exc, request) from exc
            raise
        body_stream = _Body(self, connection, request, status, headers, rest, read_timeout,
                            keep=version == b"HTTP/1.1" and not _says_close(headers))
        return httpx.Response(status, headers=headers, stream=body_stream, request=request,
                              extensions={"network_stream": stream, "http_version": version,
                                          "reason_phrase": reason})

    async def aclose(self) -> None:
        self._closed = True
        self._idle = {}
        for connection in list(self._live):
            await self.drop(connection)

    async def drop(self, connection: _Connection) -> None:
        """Close a connection (a TLS one says so to the server first)."""
        self._live.discard(connection)
        await connection.stream.aclose()

    def _take(self, key: tuple[str, str, int]) -> _Connection | None:
        """An idle connection to ``key`` that the server has not closed (nor sent anything on)."""
        connections = self._idle.get(key)
        while connections:
            connection = connections.pop()
            if not connection.stream.get_extra_info("is_readable"):
                return connection
            self._live.discard(connection)
            connection.stream.close_now()  # the server hung up: nothing to say to it
        return None

    def keep(self, connection: _Connection) -> bool:
        """A response read to its end: its connection goes back to the idle ones (False: there is no room)."""
        if self._closed:
            return False
        connections = self._idle.setdefault(connection.key, [])
        if len(connections) >= MAX_IDLE:
            return False
        connections.append(connection)
        return True

    async def _open(self, key: tuple[str, str, int], request: httpx.Request, timeouts: dict[str, float | None],
                    trace: Trace | None) -> _Connection:
        scheme, host, port = key
        connect_timeout = timeouts.get("connect")
        try:
            if trace is not None:
                await trace("connection.connect_tcp.started", {"host": host, "port": port})
            stream: Stream = await self.backend.connect_tcp(  # type: ignore[assignment]
                host, port, timeout=connect_timeout, read_now=False)
            if trace is not None:
                await trace("connection.connect_tcp.complete", {"return_value": stream})
            if scheme == "https":
                if trace is not None:
                    await trace("connection.start_tls.started", {"server_hostname": host})
                context = self.ssl_context or httpx.create_ssl_context()
                stream = await stream.start_tls(context, host, connect_timeout)  # type: ignore[assignment]
                if trace is not None:
                    await trace("connection.start_tls.complete", {"return_value": stream})
        except (httpcore.NetworkError, httpcore.TimeoutException) as exc:
            raise _httpx_error(exc, request) from exc
        connection = _Connection(key, stream)
        self._live.add(connection)
        return connection


def _head(request: httpx.Request, body: bytes) -> bytes:
    """The request's head and body, as one piece to send."""
    lines = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    chunked = False
    for name, value in request.headers.raw:
        if b"\r" in value or b"\n" in value or b"\0" in value or b"\r" in name or b"\n" in name or b":" in name:
            raise httpx.LocalProtocolError(f"header {name.decode('latin-1')!r} holds a line break or a colon",
                                           request=request)
        if name.lower() == b"transfer-encoding" and value.lower() == b"chunked":
            chunked = True
        lines += (name, b": ", value, b"\r\n")
    lines.append(b"\r\n")
    if chunked:
        lines += (b"%x\r\n" % len(body), body, b"\r\n0\r\n\r\n") if body else (b"0\r\n\r\n",)
    else:
        lines.append(body)
    return b"".join(lines)


async def _read_head(stream: Stream, timeout: float | None, request: httpx.Request
                     ) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]], bytes]:
    """(status, reason, version, headers, the bytes after the head) of the response; informational (1xx) heads
    are skipped."""
    buffer = b""
    while True:
        end = buffer.find(b"\r\n\r\n")
        while end < 0:
            if len(buffer) > MAX_HEAD:
                raise httpx.RemoteProtocolError("the response head is longer than 64 KiB", request=request)
            data = await stream.read(READ_SIZE, timeout)
            if not data:
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
            buffer += data
            end = buffer.find(b"\r\n\r\n", max(0, len(buffer) - len(data) - 3))
        head, buffer = buffer[:end], buffer[end + 4:]
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit() or len(parts[1]) != 3:
            raise httpx.RemoteProtocolError(f"not an HTTP/1.1 response ({lines[0][:40]!r})", request=request)
        status = int(parts[1])
        headers: list[tuple[bytes, bytes]] = []
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip():
                raise httpx.RemoteProtocolError(f"a malformed header line ({line[:40]!r})", request=request)
            headers.append((name, value.strip()))
        if status >= 200 or status == 101:
            return status, parts[2] if len(parts) > 2 else b"", parts[0], headers, buffer


def _says_close(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name.lower() == b"connection" and b"close" in value.lower() for name, value in headers)


class _Body(httpx.AsyncByteStream):
    """A response's body, one piece per read of the socket (framing taken out); the connection goes back to the
    transport when the body was read to its end, and is closed when it was not."""

    def __init__(self, transport: LeanTransport, connection: _Connection, request: httpx.Request, status: int,
                 headers: list[tuple[bytes, bytes]], first: bytes, timeout: float | None, keep: bool) -> None:
        self._transport = transport
        self._connection = connection
        self._request = request
        self._first = first
        self._timeout = timeout
        self._keep = keep
        self._over = False
        self._released = False
        self._chunked: ChunkedDecoder | None = None
        self._left: int | None = None
        """Bytes still to come of a body of known length; ``None``: chunked, or until the server closes."""
        for name, value in headers:
            lower = name.lower()
            if lower == b"transfer-encoding" and b"chunked" in value.lower():
                self._chunked = ChunkedDecoder()
            elif lower == b"content-length" and self._chunked is None:
                try:
                    self._left = int(value)
                except ValueError:
                    self._left = -1
        if self._left is not None and self._left < 0:
            self._keep, self._left = False, None  # a garbled length: read until the server closes
        if request.method == "HEAD" or status in (204, 304):
            self._chunked, self._left = None, 0
        if self._chunked is None and self._left is None:
            self._keep = False  # until the server closes: nothing follows on this connection

    async def __aiter__(self) -> AsyncIterator[bytes]:
        stream = self._connection.stream
        read = stream.read
        timeout = self._timeout
        data = self._first
        self._first = b""
        try:
            while not self._over:
                if not data:
                    if self._complete():
                        break
                    data = await read(READ_SIZE, timeout)
                piece = self._piece_of(data)
                data = b""
                if piece is None:
                    break
                if piece:
                    yield piece
        except (httpcore.NetworkError, httpcore.TimeoutException, OSError) as exc:
            self._keep = False
            raise _httpx_error(exc, self._request) from exc
        except BaseException:
            self._keep = False
            raise

    async def stamped(self) -> AsyncIterator[list[tuple[bytes, float]]]:
        """The pieces :meth:`__aiter__` gives, each with its read's stamp (the connection's ``read_at`` after it),
        a list at a time: the reads handed over together (at most :data:`BATCH_READS`), taken in one step of the
        event loop instead of one pass of every reader above per read. A failure comes after the pieces read
        before it. Only on a :class:`StampedStream` (see :func:`stamped_reads`)."""
        stream = self._connection.stream
        assert isinstance(stream, StampedStream)
        read, ready, read_ready = stream.read, stream.ready, stream.read_ready
        timeout = self._timeout
        data = self._first
        self._first = b""
        failure: BaseException | None = None
        while not self._over:
            batch: list[tuple[bytes, float]] = []
            try:
                if data:  # the bytes that came with the head, stamped as it
                    first = self._piece(data)
                    data = b""
                    if first:
                        batch.append((first, stream.read_at or 0.0))
                elif self._complete():
                    break
                else:
                    data = await read(READ_SIZE, timeout)
                    taken = 1
                    while True:
                        piece = self._piece_of(data)
                        data = b""
                        if piece is None:
                            break
                        if piece:
                            batch.append((piece, stream.read_at or 0.0))
                        if self._over or taken >= BATCH_READS or not ready():
                            break
                        data = read_ready(READ_SIZE)
                        taken += 1
            except (httpcore.NetworkError, httpcore.TimeoutException, OSError) as exc:
                self._keep = False
                failure = _httpx_error(exc, self._request)
            except BaseException as exc:
                self._keep = False
                failure = exc
            if batch:
                yield batch
            if failure is not None:
                raise failure

    def _piece_of(self, data: bytes) -> bytes | None:
        """The piece a read brought (see :meth:`_piece`); ``None`` when the read was the connection's end."""
        if not data:
            self._ended()
            return None
        return self._piece(data)

    def _complete(self) -> bool:
        """Whether the whole body was read (nothing more to read for it); marks it over when so."""
        if self._left == 0 or (self._chunked is not None and self._chunked.done):
            self._over = True
        return self._over

    def _ended(self) -> None:
        """The server closed the connection: the end of a body read until then, else a body cut short."""
        if self._chunked is None and self._left is None:
            self._over = True
            return
        raise httpx.RemoteProtocolError(
            "peer closed connection without sending complete message body: "
            + ("incomplete chunked read" if self._chunked is not None else
               f"received fewer bytes than the content-length ({self._left} short)"),
            request=self._request)

    def _piece(self, data: bytes) -> bytes:
        """The body's bytes in one read of the socket, framing taken out."""
        chunked = self._chunked
        if chunked is not None:
            try:
                piece = chunked.feed(data)
            except ValueError as exc:
                raise httpx.RemoteProtocolError(f"malformed chunked body: {exc}", request=self._request) from None
            if chunked.done:
                self._over = True
                if chunked.extra:
                    self._keep = False
            return piece
        if self._left is not None:
            piece = data[: self._left]
            if len(data) > self._left:
                self._keep = False
            self._left -= len(piece)
            self._over = not self._left
            return piece
        return data

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            if not (self._over and self._keep and self._transport.keep(self._connection)):
                await self._transport.drop(self._connection)


def stamped_reads(response: httpx.Response) -> AsyncIterator[list[tuple[bytes, float]]] | None:
    """A response's body from this transport on a plain stamped connection, read a hand-over at a time with each
    read's stamp (:meth:`_Body.stamped`), in place of ``aiter_raw``; ``None`` for any other response (TLS, another
    transport: read it with ``aiter_raw`` and the stream's ``read_at``)."""
    body = response.stream
    if type(body) is not _Body or type(body._connection.stream) is not StampedStream or response.is_stream_consumed:
        return None
    response.is_stream_consumed = True
    return body.stamped()
