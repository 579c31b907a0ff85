"""Socket-time stamps: an httpcore network backend whose streams know when their bytes reached the socket.

Each connection has a reader thread that sits in a blocking ``recvmsg`` (which holds no GIL), so bytes leave the
socket the moment they arrive, however busy the event loop is (a screen drawing in the same interpreter, other
lanes being parsed); where the kernel offers receive timestamps (Linux ``SO_TIMESTAMPNS``) each read carries the
moment its packet arrived, else the moment the read returned. Waiting a while before reading would not do: the
kernel merges packets queued on a TCP socket and keeps only the newest one's time. The event loop takes the
reads from a queue, each with its stamp; writes note when the request's last byte went to the socket.

Reads are paced when packets come fast: after :data:`PACE_AFTER` reads in a row each under :data:`FAST_READ_S` after
the one before (and once the response's reader allowed it: a provider does once the tokens its figures take their
moments from were read, see :meth:`StampedStream.allow_pacing`), the thread lets go of the socket
and the event loop's own timer reads whatever has queued every :data:`PACE_S` (one wake-up per look, not one per
packet, each of which costs 30-55 µs of CPU on a small VM); a look that finds nothing hands the socket back to a
thread, so a stall's end and a slow stream are stamped exactly again. A paced read is stamped with its newest
packet's arrival (the kernel keeps that one's): exact for the last token, late for the ones before it in the same
read, so the gaps between tokens are not measured while reads are paced (:attr:`StampedStream.paced_reads` says
when they were).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import math
import os
import queue
import socket
import ssl
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, Final

import httpcore

from ...timing.clock import COARSE_WAKE_S
from ...timing.stamps import SO_TIMESTAMPNS, TIMESPEC, SendStamps, packet_time

READ_SIZE: Final[int] = 64 * 1024
SMALL_WRITE: Final[int] = 64 * 1024
"""Writes up to this size go straight to the socket (its buffer takes them at once); bigger ones go through a
worker thread so that a slow peer never blocks the event loop."""


HAND_OVER_S: Final[float] = COARSE_WAKE_S / 2
"""After a connection's reads were handed over, the event loop looks for the next ones by itself about this much
later (16 ms, at the next point of a grid the process shares: :func:`next_look`) instead of being woken by the
reader thread per packet (each read keeps its own stamp, so no figure moves; a lane's text reaches the screen up
to 24 ms later, well within one 64 ms frame, and the live gauge allows for it: ``live.DELIVERY_LAG_S``). 4 ms cost
a lane at 750 tok/s about 1.5 % of a core more on a VM."""


def next_look(now: float, every: float) -> float:
    """When the event loop next looks at a connection's reads, looking every ``every`` (:data:`HAND_OVER_S`,
    :data:`PACE_S`): at the first multiple of ``every`` at least half of it after ``now``, so in a steady stream
    exactly ``every`` after the look before. The looks are on a grid the whole process shares (the loop's clock is
    ``perf_counter``'s, and the offline lanes, the screen's frames and the recorder's flushes wake on multiples of
    ``COARSE_WAKE_S``, two of these steps): they wake the process together, not each at a moment of its own (a
    wake-up costs about 0.2 ms of CPU on a VM)."""
    return math.ceil((now + every / 2) / every) * every


READ_SLICE_S: Final[float] = 0.002
"""A reader that keeps finding bytes already there (a stream faster than the loop parses it) still lets the event
loop run this often: the screen, the other lanes and timers are never held for a whole stream."""


PACE_S: Final[float] = COARSE_WAKE_S / 2
"""While reads are paced, the event loop looks for bytes this often (16 ms, on the grid of :func:`next_look`; a
screen draws every 64 ms)."""

FAST_READ_S: Final[float] = 0.002
PACE_AFTER: Final[int] = 16
"""Reads are paced after this many reads in a row, each stamped less than :data:`FAST_READ_S` after the one before:
packets keep coming faster than 500 a second (a slower stream, or a burst of a few packets, is read per packet). A
reader thread's wake-up per packet costs 30 to 60 µs of CPU on a small VM: at 750 packets a second (a server
sending each token of 750 tok/s on its own) that was 3 points of the screen's 10 % of a core."""

MSG_DONTWAIT: Final[int] = getattr(socket, "MSG_DONTWAIT", 0)
"""A read that returns at once when nothing has come (none on this platform: reads are never paced)."""


class ReaderThreads:
    """Parked reader threads, started before the race: ``Thread.start`` waits until the new thread runs, which
    on a busy machine put up to a few milliseconds into a first request's ``connect_s``. A connection hands its
    reading loop to a parked thread instead, and the thread parks again when the connection is closed.

    The pool is as big as the connections to come need: a session's backend reserves a thread per provider
    (:meth:`reserve`) and lets go of its reservations when closed (:meth:`release`); a thread done with its
    connection parks while fewer threads are parked than are reserved (at least one), and ends otherwise, so a
    process that sets providers up again and again keeps as many threads as it uses at once, not one more each
    time."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        """Threads parked, less the jobs (and ends) handed to them and not yet taken."""
        self._wanted = 0
        """Threads reserved for connections to come, by the backends still open."""
        self._threads = 0

    def reserve(self, count: int = 1) -> None:
        """Reserve ``count`` more threads for connections to come: start each one that no parked thread covers."""
        with self._lock:
            self._wanted += count
            missing = max(min(self._wanted - self._idle, count), 0)
            self._idle += missing
        for _ in range(missing):
            self._start()

    def release(self, count: int = 1) -> None:
        """Give back ``count`` reservations; parked threads beyond what is still reserved end."""
        with self._lock:
            self._wanted = max(self._wanted - count, 0)
            surplus = max(self._idle - self._keep(), 0)
            self._idle -= surplus
        for _ in range(surplus):
            self._jobs.put(None)

    def run(self, job: Callable[[], None]) -> None:
        """Run ``job`` on a parked thread (a new one when none is free)."""
        with self._lock:
            free = self._idle > 0
            if free:
                self._idle -= 1
        if not free:
            self._start()
        self._jobs.put(job)

    @property
    def idle(self) -> int:
        return self._idle

    @property
    def wanted(self) -> int:
        """Threads reserved by the backends still open."""
        return self._wanted

    @property
    def threads(self) -> int:
        """Reader threads alive (parked or reading)."""
        return self._threads

    def _keep(self) -> int:
        return max(self._wanted, 1)

    def _start(self) -> None:
        with self._lock:
            self._threads += 1
        threading.Thread(target=self._work, name="tokrace-socket-reader", daemon=True).start()

    def _work(self) -> None:
        try:
            while (job := self._jobs.get()) is not None:
                try:
                    job()
                finally:
                    with self._lock:
                        park = self._idle < self._keep()
                        if park:
                            self._idle += 1
                if not park:
                    return
        finally:
            with self._lock:
                self._threads -= 1


READERS: Final[ReaderThreads] = ReaderThreads()
"""The process's reader threads."""


class StampedStream(httpcore.AsyncNetworkStream):
    """A TCP connection read by its own thread; ``read_at`` and ``sent_at`` are ``time.perf_counter()`` values."""

    def __init__(self, sock: socket.socket, loop: asyncio.AbstractEventLoop, read_now: bool = True,
                 pace: bool = True) -> None:
        self.sock = sock
        self.loop = loop
        self.pace = pace and MSG_DONTWAIT != 0
        """Whether reads may be paced when packets come fast (``False``: every packet is read on its own)."""
        self.paced_reads = 0
        """How many reads the event loop's paced looks made (with bytes) on this connection so far."""
        self._pace_ok = False
        """The user allowed pacing for the response under way (:meth:`allow_pacing`); a new request withdraws it."""
        self._paced = False
        """The event loop reads the socket (paced looks) and no thread does; else a reader thread does, or nobody
        (not started yet, or the stream ended)."""
        self._fresh = False
        """The reader thread let go of the socket and no tick set a whole pace later has run yet (the first look
        waits for one)."""
        self.read_at: float | None = None
        """When the bytes of the latest read reached the socket."""
        self.sent_at: float | None = None
        """When the latest write went on the wire: when its last byte went to the network device, by the kernel's
        transmit stamp (Linux); else (or when the kernel has not stamped it by the time the call returns) as its one
        sending call began, for a write small enough that the socket's buffer takes it at once (the kernel sends it
        within that call: on loopback the peer has it before the call returns), or as the call returned, for a
        bigger one, which may have to wait for the network."""
        self.sends = SendStamps.on(sock)
        """The kernel's transmit stamps of what this connection sends (``None`` where there are none)."""
        self._reads: deque[tuple[bytes, float] | OSError] = deque()
        self._pending: list[bytes] = []
        """Bytes written but not yet sent: the rest of the request is on its way (see :meth:`write`)."""
        self._wake_due = False
        """A wake-up of the loop is scheduled and has not run: reads handed over meanwhile need no other (at
        thousands of packets a second, one self-pipe write and one callback per frame's worth, not per packet)."""
        self._pending_size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False
        self._reading = False
        self._ticking = False
        """The loop will look for reads by itself soon (a timer after a wake-up): reads need not wake it."""
        self._tick_handle: asyncio.TimerHandle | None = None
        self._yielded = time.perf_counter()
        """When a read last let the event loop run (waiting for bytes, or yielding after a slice of work)."""
        sock.setblocking(True)
        if read_now:
            self.start_reading()

    def start_reading(self) -> None:
        """Hand the socket to a reader thread (once). :class:`LeanTransport` does it after the request is on the
        wire: a reader thread woken before would take the GIL from the request's own ``sendall``."""
        if not self._reading:
            self._reading = True
            READERS.run(self._pump)

    @staticmethod
    def enable_kernel_stamps(sock: socket.socket) -> bool:
        """Ask the kernel to stamp every packet this socket receives (before any arrives)."""
        if sys.platform != "linux":
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        except OSError:
            return False
        return True

    @property
    def paced(self) -> bool:
        """Whether the event loop's paced looks read the socket now (no reader thread does)."""
        return self._paced

    def allow_pacing(self) -> None:
        """Let reads of the response under way be paced from now on, when packets come fast (a provider allows it
        once the tokens its figures take their moments from were read per packet: the first token, the first answer
        text, the first sentence's end). A new request on the connection withdraws it."""
        self._pace_ok = self.pace

    def _pump(self) -> None:
        """The reader thread: take bytes off the socket as they come, stamp them, hand them to the loop; when
        packets keep coming fast, hand the socket itself to the loop's paced looks and end."""
        space = socket.CMSG_SPACE(TIMESPEC.size)
        last, fast = -1.0, 0
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, space)
            except OSError as exc:
                self._hand_over(exc, at_once=True)
                return
            if not data:
                self._hand_over((data, _stamp(ancillary)), at_once=True)
                return
            stamp = packet_time(ancillary)
            if stamp is None:  # no kernel stamps: a late read would be stamped late, so reads are never paced
                self._hand_over((data, time.perf_counter()))
                continue
            fast = fast + 1 if stamp - last < FAST_READ_S else 0
            last = stamp
            if fast >= PACE_AFTER and self._pace_ok and not self._closed:
                self._fresh = True
                self._paced = True  # before the hand-over: the loop that takes this read finds the socket its own
                self._hand_over((data, stamp))
                return  # this thread touches the socket no more
            self._hand_over((data, stamp))

    def _hand_over(self, item: tuple[bytes, float] | OSError, at_once: bool = False) -> None:
        self._reads.append(item)
        if self._wake_due:  # the loop has not run the last wake-up yet: it will find this read too
            return
        if self._ticking and not at_once:  # the loop looks again by itself soon (:meth:`_tick`)
            return
        self._wake_due = True
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is reading any more
            self.loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        """On the loop: hand the reads over, and look again in :data:`HAND_OVER_S` rather than be woken by the reader
        thread for every packet (each read keeps its own stamp; waking the loop per packet cost a lane more than
        parsing it). The end of the stream, or a failure, still wakes the loop at once. While reads are paced the
        next look is the paced read itself, :data:`PACE_S` later."""
        self._wake_due = False  # before looking: a read handed over from now on wakes the loop again
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        if not self._ticking and not self._closed:
            delay = HAND_OVER_S
            if self._paced:
                delay, self._fresh = PACE_S, False  # (the first look is a whole pace after the hand-over)
            if delay > 0:
                self._ticking = True
                self._tick_handle = self.loop.call_at(next_look(self.loop.time(), delay), self._tick)

    def _tick(self) -> None:
        self._ticking = False  # before looking: a read handed over from now on wakes the loop itself
        self._tick_handle = None
        if self._paced and not self._closed:
            if self._fresh:  # the thread let go of the socket since this tick was set: it just read all there was
                self._fresh = False
            else:
                self._look()
        if self._reads or self._paced:  # (paced: the next look is due even when this one's bytes were taken)
            self._wake()

    def _look(self) -> None:
        """A paced read, on the loop: take what has queued (each read stamped with its newest packet); nothing there
        means packets no longer come fast: a reader thread reads per packet again (a stall's end, a slow stream,
        stamped exactly)."""
        space = socket.CMSG_SPACE(TIMESPEC.size)
        found = False
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, space, MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as exc:
                self._paced = False
                self._reads.append(exc)
                return
            self._reads.append((data, _stamp(ancillary)))
            if not data:  # the end: nobody reads any more
                self._paced = False
                return
            found = True
            self.paced_reads += 1
            if len(data) < READ_SIZE:  # all that had queued (what comes meanwhile waits for the next look)
                break
        if not found:
            self._to_thread()

    def _to_thread(self) -> None:
        """Hand the socket from the loop's paced looks back to a reader thread (on the loop)."""
        self._paced = False
        READERS.run(self._pump)

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._pending:  # whatever is still to send goes before we wait for an answer
            await self._send(timeout)
        if not self._reading:
            self.start_reading()
        if self._reads and time.perf_counter() - self._yielded > READ_SLICE_S:
            await asyncio.sleep(0)  # bytes keep coming faster than they are parsed: let the loop run a pass
            self._yielded = time.perf_counter()
        while not self._reads:
            if self._closed:
                return b""
            # The timeout is a timer on the waiter, not ``asyncio.timeout``: it belongs to no task (a request's
            # first step runs in the lane's task, the rest in a task of its own) and costs one timer, not three
            # objects, per wait.
            waiter = self._waiter = self.loop.create_future()
            timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
            self._yielded = time.perf_counter()
        return self.read_ready(max_bytes)

    def ready(self) -> bool:
        """Whether a read is handed over and not taken yet (bytes, or the end; not a failure): :meth:`read_ready`
        takes it at once, with no pass of the event loop."""
        reads = self._reads
        return bool(reads) and type(reads[0]) is tuple and not self._pending

    def read_ready(self, max_bytes: int) -> bytes:
        """:meth:`read` of a read already handed over (see :meth:`ready`), without waiting: several reads queued by
        one hand-over are taken in one step of the event loop (each keeps its own stamp: :attr:`read_at` after it)."""
        item = self._reads.popleft()
        if isinstance(item, OSError):
            self._reads.appendleft(item)  # every later read fails the same way
            if self._closed:
                return b""
            raise httpcore.ReadError(str(item) or type(item).__name__) from item
        data, stamp = item
        if not data:
            self._reads.appendleft(item)  # the end stays the end
        elif len(data) > max_bytes:
            self._reads.appendleft((data[max_bytes:], stamp))
            data = data[:max_bytes]
        self.read_at = stamp if self.read_at is None else max(stamp, self.read_at)
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        """Send, in one write per request: h11 hands over the head, the body and an empty end of the message one
        by one, and each write is a syscall that lets the reader threads take the GIL (and a packet of its own,
        with TCP_NODELAY), so the pieces wait here until the empty one (or a read, or 64 KiB) comes."""
        if buffer:
            self._pending.append(buffer)
            self._pending_size += len(buffer)
            if self._pending_size <= SMALL_WRITE:
                return
        await self._send(timeout)

    async def send(self, data: bytes, timeout: float | None = None) -> None:
        """Send ``data`` now, in one write (a request's head and body, as :class:`LeanTransport` gives them)."""
        if data:
            self._pending.append(data)
            self._pending_size += len(data)
        await self._send(timeout)

    async def _send(self, timeout: float | None) -> None:
        if not self._pending:
            return
        buffer = self._pending[0] if len(self._pending) == 1 else b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        self._pace_ok = False  # a new request: its answer's first reads are per packet, until allowed again
        try:
            if len(buffer) <= SMALL_WRITE:
                sent = time.perf_counter()
                self.sock.sendall(buffer)
            else:  # wait_for, not asyncio.timeout: bound to no task (see read)
                await asyncio.wait_for(self.loop.run_in_executor(None, self.sock.sendall, buffer), timeout)
                sent = time.perf_counter()
        except TimeoutError:
            raise httpcore.WriteTimeout("timed out") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc) or type(exc).__name__) from exc
        if self.sends is not None:
            # The kernel's own moment: a thread held inside the sending call (a busy core, an interrupt) would
            # otherwise count the time it was held as the request's trip to the server.
            self.sends.sent(len(buffer))
            went = self.sends.time_of(self.sends.total)
            if went is not None:
                sent = went
        self.sent_at = sent
        if self._paced and not self._closed:  # (a reused connection, still paced after the last answer)
            if self._tick_handle is not None:
                self._tick_handle.cancel()
                self._tick_handle = None
                self._ticking = False
            self._to_thread()

    async def aclose(self) -> None:
        self.close_now()

    def close_now(self) -> None:
        """Close the connection (at once: nothing is waited for)."""
        if self._closed:
            return
        self._closed = True
        if self._tick_handle is not None:
            self._tick_handle.cancel()
            self._tick_handle = None
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread, which then ends
        self.sock.close()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        tls = StampedTLSStream(self, ssl_context, server_hostname)
        try:
            await tls.handshake(timeout)
        except (ssl.SSLError, OSError) as exc:
            await self.aclose()
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
            return bool(self._reads) or self._closed  # for an idle connection: the server hung up
        return None


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(httpcore.ReadTimeout("timed out"))


def _stamp(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The kernel's arrival time of the packet just read, as a ``perf_counter()`` value; else now."""
    stamp = packet_time(ancillary)
    return time.perf_counter() if stamp is None else stamp


class StampedTLSStream(httpcore.AsyncNetworkStream):
    """TLS over a :class:`StampedStream` through memory BIOs: decrypted bytes keep the stamp of their read."""

    def __init__(self, raw: StampedStream, context: ssl.SSLContext, server_hostname: str | None) -> None:
        self.raw = raw
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
        record = await self.raw.read(READ_SIZE, timeout)
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

    async def send(self, data: bytes, timeout: float | None = None) -> None:
        """Encrypt ``data`` and send it now, in one write."""
        try:
            self.obj.write(data)
        except ssl.SSLError as exc:
            raise httpcore.WriteError(str(exc)) from exc
        await self.raw.send(self._outgoing.read(), timeout)

    def start_reading(self) -> None:
        self.raw.start_reading()

    def allow_pacing(self) -> None:
        self.raw.allow_pacing()

    @property
    def paced_reads(self) -> int:
        return self.raw.paced_reads

    def close_now(self) -> None:
        """Close at once, without the close_notify (for a connection given up mid-response)."""
        self.raw.close_now()

    async def aclose(self) -> None:
        with contextlib.suppress(ssl.SSLError):
            self.obj.unwrap()  # queues our close_notify; the peer's is not waited for
        with contextlib.suppress(OSError):
            self.raw.sock.send(self._outgoing.read(), socket.MSG_DONTWAIT)
        await self.raw.aclose()

    async def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("TLS inside TLS (an HTTPS proxy) is not supported")

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self.obj
        return self.raw.get_extra_info(info)


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
