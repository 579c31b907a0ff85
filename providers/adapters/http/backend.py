"""The httpcore network backend that opens stamped connections: names looked up before the race, a socket made
ready for each server, a handshake that completes inside ``connect`` taken with no pass of the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
from collections.abc import Iterable
from typing import Any, Final

import httpcore

from .reader_threads import READERS
from .stamped_stream import StampedStream

AddrInfo = list[tuple[Any, Any, int, str, Any]]

_UNDER_WAY: Final[frozenset[int]] = frozenset({errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK, errno.EALREADY})


def _new_socket(family: int, kind: int, proto: int) -> socket.socket:
    """A TCP socket set up for a stamped connection: kernel receive stamps, non-blocking, TCP_NODELAY."""
    sock = socket.socket(family, kind, proto)
    try:
        StampedStream.enable_kernel_stamps(sock)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        sock.close()
        raise
    return sock


def connected_now(sock: socket.socket) -> bool:
    """Whether ``sock``'s connection is established at this moment (``getpeername`` answers only then: cheaper
    than a poll that does not wait)."""
    try:
        sock.getpeername()
    except OSError:
        return False
    return True


async def _connect(loop: asyncio.AbstractEventLoop, sock: socket.socket, address: Any,
                   deadline: float | None) -> None:
    """Connect the non-blocking ``sock``: a handshake done by the time ``connect`` returns (loopback's is) costs
    no pass of the event loop; else wait until the socket is writable, or ``deadline`` (``TimeoutError``)."""
    err = sock.connect_ex(address)
    if err in _UNDER_WAY:
        if not connected_now(sock):
            done: asyncio.Future[None] = loop.create_future()
            fd = sock.fileno()
            loop.add_writer(fd, _settle_done, done)
            timer = None if deadline is None else loop.call_at(deadline, _time_out, done)
            try:
                await done
            finally:
                loop.remove_writer(fd)
                if timer is not None:
                    timer.cancel()
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, os.strerror(err))


def _settle_done(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _time_out(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_exception(TimeoutError())


def _stamping_socket(family: int) -> socket.socket | None:
    """A socket that asks for kernel receive stamps, kept open for the session. Linux switches receive stamping
    on for the whole system when the first such socket appears (and off again when the last one closes), which
    cost a first connection 2–8 ms here: with this one open, every connection of the race finds it on."""
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        return None
    if not StampedStream.enable_kernel_stamps(sock):
        sock.close()
        return None
    return sock


class StampedBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`StampedStream` connections (TCP_NODELAY, like httpcore's own backend).

    Names are looked up before the race (:meth:`resolve`, from a provider's ``prepare``) and kept for the session,
    so that a first request's ``connect_s`` is the TCP (and TLS) handshake and the sending, not a name lookup; a
    literal address is never looked up at all (no resolver thread)."""

    def __init__(self, pace: bool = True) -> None:
        self.pace = pace
        """Whether its connections may pace their reads when packets come fast (see :class:`StampedStream`)."""
        self._addresses: dict[tuple[str, int], AddrInfo] = {}
        self._stamping: socket.socket | None = None
        self._readers = 0
        """Reader threads this backend reserved (:meth:`reserve_reader`), given back when it is closed."""
        self._spares: dict[tuple[str, int], socket.socket] = {}
        """A socket made (and set up) for each server looked up, for its first connection: creating one is set-up,
        not connecting, and sits before the ``connect`` call a server waits for."""

    async def resolve(self, host: str, port: int) -> AddrInfo:
        """The addresses of ``host`` (looked up once per session; a literal address without a lookup)."""
        key = (host, port)
        infos = self._addresses.get(key)
        if infos is None:
            try:
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
            except socket.gaierror:  # a name, not an address: ask the resolver, off the event loop
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            self._addresses[key] = infos
            if infos and self._stamping is None:
                self._stamping = _stamping_socket(infos[0][0])
            if infos and key not in self._spares:
                with contextlib.suppress(OSError):
                    self._spares[key] = _new_socket(*infos[0][:3])
        return infos

    def rearm(self) -> None:
        """Make again, before a run, the ready socket :meth:`resolve` made for each server and a connection used
        since (the receive-stamping socket stays open all along)."""
        for key, infos in self._addresses.items():
            if infos and key not in self._spares:
                with contextlib.suppress(OSError):
                    self._spares[key] = _new_socket(*infos[0][:3])

    def reserve_reader(self) -> None:
        """Park a reader thread for a connection to come (a provider's ``prepare``), until this backend is closed."""
        self._readers += 1
        READERS.reserve()

    def close(self) -> None:
        """Let go of what :meth:`resolve` and :meth:`reserve_reader` kept for the session."""
        readers, self._readers = self._readers, 0
        if readers:
            READERS.release(readers)
        if self._stamping is not None:
            self._stamping.close()
            self._stamping = None
        spares, self._spares = self._spares, {}
        for sock in spares.values():
            sock.close()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                          *, read_now: bool = True) -> httpcore.AsyncNetworkStream:
        """A connection to ``host``; a loopback (or any) handshake that completes inside the ``connect`` call is
        taken at once, with no pass of the event loop; only one still under way waits for the socket to be
        writable. No ``asyncio.timeout``: the wait belongs to no task (see :meth:`StampedStream.read`)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        spare: socket.socket | None = None
        try:
            infos = self._addresses.get((host, port))
            if infos is None:
                infos = await asyncio.wait_for(self.resolve(host, port), timeout)
            failure: OSError | None = None
            spare = self._spares.pop((host, port), None)
            for family, kind, proto, _, address in infos:
                if spare is not None and spare.family == family:
                    sock, spare = spare, None
                else:
                    sock = _new_socket(family, kind, proto)
                try:
                    for option in socket_options or ():
                        sock.setsockopt(*option)
                    if local_address is not None:
                        sock.bind((local_address, 0))
                    await _connect(loop, sock, address, deadline)
                except OSError as exc:
                    sock.close()
                    failure = exc
                    continue
                except BaseException:  # timed out or cancelled mid-connect: the socket is nobody's now
                    sock.close()
                    raise
                return StampedStream(sock, loop, read_now=read_now, pace=self.pace)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except socket.gaierror as exc:
            raise httpcore.ConnectError(f"[Errno {exc.errno}] {exc.strerror}: name resolution failed") from exc
        finally:
            if spare is not None:  # made for an address family this connection did not use
                spare.close()
        if failure is None:
            raise httpcore.ConnectError(f"no address for {host}")
        why = os.strerror(failure.errno) if failure.errno else str(failure)  # "Connection refused", ...
        raise httpcore.ConnectError(f"{why} ({host}:{port})") from failure

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
                                  ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout):
                await loop.sock_connect(sock, path)
        except TimeoutError:
            sock.close()
            raise httpcore.ConnectTimeout(f"connecting to {path} timed out") from None
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        return StampedStream(sock, loop, pace=self.pace)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
