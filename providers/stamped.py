"""Socket-time stamps: an httpcore network backend whose streams know when their bytes reached the socket.

Where the kernel offers receive timestamps (Linux ``SO_TIMESTAMPNS``), every read carries the moment its last
packet arrived, however late the event loop gets to it (a screen drawing in the same interpreter, other lanes
being parsed). Reads take one wire unit at a time (a TLS record; on plain HTTP, the response head or one chunk),
so units that queued up while the loop was busy keep their own arrival times instead of the last one's. Without
kernel stamps, a read is stamped when the loop saw the socket become readable. Writes note when the request's
last byte went to the socket. Data is never altered: the units only decide how many bytes each read takes.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import select
import socket
import ssl
import struct
import sys
import time
from collections.abc import Iterable
from typing import Any, Final

import httpcore

SO_TIMESTAMPNS: Final[int] = 35
"""Linux's socket option (and control message type) for nanosecond receive timestamps (CLOCK_REALTIME)."""

PEEK: Final[int] = 17 * 1024
"""How far ahead a read looks for the end of its unit: more than a whole TLS record."""

_CHUNK: Final[re.Pattern[bytes]] = re.compile(rb"([0-9a-fA-F]{1,16})[^\r\n]*\r\n")
_TIMESPEC: Final[struct.Struct] = struct.Struct("@ll")


def _http_unit(view: bytes) -> int:
    """How many bytes of plain HTTP make the first whole unit: a response head, or one chunk of a chunked body."""
    if view.startswith(b"HTTP/"):
        end = view.find(b"\r\n\r\n")
        return end + 4 if end >= 0 else len(view)
    m = _CHUNK.match(view)
    if m is None:
        return len(view)
    size = int(m.group(1), 16)
    unit = m.end() + size + 2
    return min(unit, len(view))


def _tls_unit(view: bytes) -> int:
    """How many bytes make the first whole TLS record (its 5-byte header says)."""
    if len(view) < 5:
        return len(view)
    return min(5 + int.from_bytes(view[3:5], "big"), len(view))


class StampedStream(httpcore.AsyncNetworkStream):
    """A TCP connection on a non-blocking socket; ``read_at`` and ``sent_at`` are ``time.perf_counter()`` values."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.kernel_stamps = False
        if sys.platform == "linux":
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel_stamps = True
        self.read_at: float | None = None
        """When the bytes of the latest read reached the socket."""
        self.sent_at: float | None = None
        """When the latest write's last byte was handed to the socket."""
        self.units = _http_unit
        self._readable_at = 0.0

    async def _wait(self, writable: bool, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        fd = self.sock.fileno()

        def wake() -> None:
            self._readable_at = time.perf_counter()
            if not ready.done():
                ready.set_result(None)

        (loop.add_writer if writable else loop.add_reader)(fd, wake)
        try:
            async with asyncio.timeout(timeout):
                await ready
        except TimeoutError:
            raise (httpcore.WriteTimeout if writable else httpcore.ReadTimeout)("timed out") from None
        finally:
            (loop.remove_writer if writable else loop.remove_reader)(fd)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        waited = False
        while True:
            try:
                view = self.sock.recv(min(PEEK, max_bytes), socket.MSG_PEEK)
                if not view:
                    return b""
                data, ancillary, _, _ = self.sock.recvmsg(self.units(view), socket.CMSG_SPACE(_TIMESPEC.size))
            except BlockingIOError:
                await self._wait(False, timeout)
                waited = True
                continue
            except OSError as exc:
                raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc
            self.read_at = self._stamp(ancillary, waited)
            return data

    def _stamp(self, ancillary: list[tuple[int, int, bytes]], waited: bool) -> float:
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(raw)
                age = time.time() - (sec + nsec / 1e9)
                now = time.perf_counter()
                return now - max(age, 0.0)
        return self._readable_at if waited else time.perf_counter()

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        view = memoryview(buffer)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                await self._wait(True, timeout)
                continue
            except OSError as exc:
                raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc
            view = view[sent:]
        self.sent_at = time.perf_counter()

    async def aclose(self) -> None:
        self.sock.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        tls = StampedTLSStream(self, ssl_context, server_hostname)
        try:
            await tls.handshake(timeout)
        except (ssl.SSLError, OSError) as exc:
            self.sock.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        return tls

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self.sock
        if info == "client_addr":
            return self.sock.getsockname()
        if info == "server_addr":
            return self.sock.getpeername()
        if info == "is_readable":
            if self.sock.fileno() < 0:
                return True
            readable, _, _ = select.select([self.sock], [], [], 0)
            return bool(readable)
        return None


class StampedTLSStream(httpcore.AsyncNetworkStream):
    """TLS over a :class:`StampedStream` through memory BIOs, one record at a time, so each keeps its stamp."""

    def __init__(self, raw: StampedStream, context: ssl.SSLContext, server_hostname: str | None) -> None:
        self.raw = raw
        raw.units = _tls_unit
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self.obj = context.wrap_bio(self._incoming, self._outgoing, server_side=False,
                                    server_hostname=server_hostname)

    @property
    def read_at(self) -> float | None:
        return self.raw.read_at

    @property
    def sent_at(self) -> float | None:
        return self.raw.sent_at

    async def _flush(self, timeout: float | None) -> None:
        pending = self._outgoing.read()
        if pending:
            await self.raw.write(pending, timeout)

    async def _feed(self, timeout: float | None) -> None:
        record = await self.raw.read(PEEK, timeout)
        if record:
            self._incoming.write(record)
        else:
            self._incoming.write_eof()

    async def handshake(self, timeout: float | None) -> None:
        while True:
            try:
                self.obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush(timeout)
                await self._feed(timeout)
        await self._flush(timeout)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        while True:
            try:
                return self.obj.read(max_bytes)
            except ssl.SSLWantReadError:
                await self._flush(timeout)  # post-handshake messages may want an answer
                await self._feed(timeout)
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                return b""
            except ssl.SSLError as exc:
                raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self.obj.write(buffer)
        except ssl.SSLError as exc:
            raise httpcore.WriteError(str(exc)) from exc
        await self._flush(timeout)

    async def aclose(self) -> None:
        with contextlib.suppress(ssl.SSLError):
            self.obj.unwrap()
            with contextlib.suppress(OSError):
                self.raw.sock.send(self._outgoing.read())
        await self.raw.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("TLS inside TLS (an HTTPS proxy) is not supported")

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self.obj
        return self.raw.get_extra_info(info)


class StampedBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`StampedStream` connections (TCP_NODELAY, like httpcore's own backend)."""

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[tuple[int, int, int | bytes | None]] | None = None,
                          ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                failure: OSError | None = None
                for family, kind, proto, _, address in infos:
                    sock = socket.socket(family, kind, proto)
                    try:
                        sock.setblocking(False)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        for option in socket_options or ():
                            sock.setsockopt(*option)  # type: ignore[arg-type]
                        if local_address is not None:
                            sock.bind((local_address, 0))
                        await loop.sock_connect(sock, address)
                    except OSError as exc:
                        sock.close()
                        failure = exc
                        continue
                    return StampedStream(sock)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"[Errno {exc.errno}] {exc.strerror}: name resolution failed") from exc
        raise httpcore.ConnectError(str(failure) if failure else f"no address for {host}") from failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[tuple[int, int, int | bytes | None]] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.get_running_loop().sock_connect(sock, path)
        except TimeoutError:
            sock.close()
            raise httpcore.ConnectTimeout(f"connecting to {path} timed out") from None
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return StampedStream(sock)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
