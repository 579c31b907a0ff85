"""Sockets that take the kernel's receive stamp of every read and, on request, the transmit stamp of every send:
accepted ones (`tokrace serve`, the proxy), connected ones (the proxy's upstream), and the reader noting arrivals."""

from __future__ import annotations

import asyncio
import socket
import weakref
from collections.abc import Iterable
from typing import Any, Final, SupportsIndex

from .clock import Clock
from .stamps import TIMESPEC, SendStamps, packet_time

_STAMP_SPACE: Final[int] = socket.CMSG_SPACE(TIMESPEC.size) + socket.CMSG_SPACE(3 * TIMESPEC.size)
"""Room for the kernel's receive stamp (``SO_TIMESTAMPNS``) beside a read, and for the ``SO_TIMESTAMPING`` copy of it
that a connection whose sends are stamped gets too."""


class StampedConnection(socket.socket):
    """An accepted connection whose every read also takes the kernel's receive stamp of the bytes it brings: asyncio's
    transport reads through :meth:`recv`, and hands what it read to the protocol at once, so ``stamp`` is when the
    newest of exactly those bytes reached the socket (``None`` when the kernel sent no stamp).

    Once :meth:`stamp_sends` is on, it also counts the bytes asyncio's transport sends through :meth:`send` and takes
    the kernel's transmit stamp of each send off the socket's error queue, so :meth:`sent_time` says when a byte
    really went out, whenever the server got to noting it."""

    __slots__ = ("_ancillary", "_stamp", "sends")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._stamp: float | None = None
        self._ancillary: list[tuple[int, int, bytes]] | None = None
        """The last read's control messages, until :attr:`stamp` is asked for: turning the kernel's stamp into a
        ``perf_counter`` value takes a few clock readings, which the proxy does after a chunk went on, not before."""
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
    def stamp(self) -> float | None:
        """When the newest bytes of the last read reached the socket (the kernel's stamp), ``None`` when the read
        brought nothing or the kernel sent no stamp."""
        ancillary = self._ancillary
        if ancillary is not None:
            self._stamp, self._ancillary = packet_time(ancillary), None
        return self._stamp

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
        self._stamp, self._ancillary = None, ancillary if data else None
        return data

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        """(How the transport reads under TLS: into the TLS layer's buffer, which decrypts and hands on at once.)"""
        view = memoryview(buffer)
        size, ancillary, _, _ = self.recvmsg_into([view[:nbytes] if nbytes else view], _STAMP_SPACE, flags)
        self._stamp, self._ancillary = None, ancillary if size else None
        return size


class StampedListener(socket.socket):
    """A listening socket whose accepted connections are :class:`StampedConnection` (asyncio's server accepts
    through :meth:`accept`); ``accepted`` finds a connection by its file descriptor, for its protocol."""

    __slots__ = ("accepted",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted: weakref.WeakValueDictionary[int, StampedConnection] = weakref.WeakValueDictionary()

    def accept(self) -> tuple[socket.socket, Any]:
        plain, address = super().accept()
        conn = StampedConnection(plain.family, plain.type, plain.proto, fileno=plain.detach())
        self.accepted[conn.fileno()] = conn
        return conn, address


class ArrivalReader(asyncio.StreamReader):
    """A stream reader that notes when the bytes it is fed reached the server: the kernel's receive stamp of them
    when the connection is a :class:`StampedConnection`, else the moment the event loop read them (the handler
    may get to them only after other requests' handlers have run, and the loop to the socket only after whatever
    else it was doing when they came)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.arrived = 0.0
        """When the newest bytes fed reached the server."""
        self.began = 0.0
        """When the first bytes of the request asked for by :meth:`expect_request` reached the server."""
        self._awaiting = False
        self.conn: StampedConnection | None = None

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        stamp = self.conn.stamp if self.conn is not None else None
        self.arrived = stamp if stamp is not None else self.clock.now()
        if self._awaiting:
            self.began, self._awaiting = self.arrived, False
        super().feed_data(data)

    def expect_request(self) -> None:
        """Mark that a new request is to be read: :attr:`began` becomes when its first bytes arrived (bytes already
        waiting for it count from when the newest of them did), not when its last did (a large body takes a while
        to come, and the request's clock runs from its arrival)."""
        if getattr(self, "_buffer", None):  # (asyncio's buffer of bytes fed and not yet read)
            self.began = self.arrived
        else:
            self._awaiting = True


class ArrivalProtocol(asyncio.StreamReaderProtocol):
    """Hands a new connection's :class:`StampedConnection` (when the listener made one) to its reader."""

    def __init__(self, reader: ArrivalReader, handler: Any, listener: StampedListener | None) -> None:
        super().__init__(reader, handler)
        self._arrival = reader
        self._listener = listener

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        if self._listener is not None and sock is not None:
            self._arrival.conn = self._listener.accepted.pop(sock.fileno(), None)
        super().connection_made(transport)
