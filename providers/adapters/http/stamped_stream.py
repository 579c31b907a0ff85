"""A connection whose reads carry the moment their bytes reached the socket: a reader thread per connection (the
kernel's receive stamps where it offers them), paced reads when packets come fast, and TLS over it
(docs/internals.md)."""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import ssl
import sys
import threading
import time
from collections import deque
from typing import Any, Final

import httpcore

from ...timing.clock import COARSE_WAKE_S
from ...timing.stamps import SO_TIMESTAMPNS, TIMESPEC, SendStamps, packet_time
from .reader_threads import READERS

READ_SIZE: Final[int] = 64 * 1024
QUEUE_BYTES: Final[int] = 1024 * 1024
"""The most bytes read off the socket and not yet taken by the loop: beyond it the reader (thread or paced look)
waits, and the server's bytes wait in the kernel (as TCP means them to). A server sending 240 MB faster than the
lane parses it had it all read into memory. While the loop parses what it took, as much again is read ahead: 1 MB
(16 reads) keeps the two within 2 MB, part of what one huge event may cost (docs/performance.md#hostile-input;
2 MB made it 4 MB, more than one 3 MB event), and is far more than any paced lane has waiting (32 ms of a stream
of 60 MB/s). Its packets keep the kernel's stamps of their arrival, so waiting changes no figure."""
SMALL_WRITE: Final[int] = 64 * 1024
"""Writes up to this size go straight to the socket (its buffer takes them at once); bigger ones go through a
worker thread so that a slow peer never blocks the event loop."""


HAND_OVER_S: Final[float] = COARSE_WAKE_S
"""After a connection's reads were handed over, the event loop looks for the next ones by itself about this much
later (32 ms, at the next point of a grid the process shares: :func:`next_look`) instead of being woken by the
reader thread per packet (each read keeps its own stamp, so no figure moves; a lane's text reaches the screen up
to 48 ms later, within one 64 ms frame, and the live gauge allows for it: ``live.DELIVERY_LAG_S``). 4 ms cost
a lane at 750 tok/s about 1.5 % of a core more on a VM; 16 ms (half the grid of the frames) woke the process
twice as often as a synthetic lane, and cost one HTTP lane at 3,000 tok/s about 2 points of a core more than 32
ms (docs/performance.md)."""


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


PACE_S: Final[float] = COARSE_WAKE_S
"""While reads are paced, the event loop looks for bytes this often (32 ms, on the grid of :func:`next_look`; a
screen draws every 64 ms)."""

FAST_READ_S: Final[float] = 0.002
PACE_AFTER: Final[int] = 16
"""Reads are paced once this many reads in a row came within this many :data:`FAST_READ_S` (the newest stamped at
most 32 ms after the one before them): packets keep coming faster than 500 a second (a slower stream, or a burst
of a few packets, is read per packet). A rate over the last reads, not every gap under 2 ms: a server's jitter
(750 tok/s ± 10 %, its writes a millisecond late now and then) put gaps over 2 ms into a steady stream, and each
started the count again: at 16 streams a request was read per packet for 135 reads instead of 68. A reader thread's
wake-up per packet costs 30 to 60 µs of CPU on a small VM: at 750 packets a second (a server sending each token
of 750 tok/s on its own) that was 3 points of the screen's 10 % of a core."""



def comes_fast(stamps: deque[float]) -> bool:
    """Whether the reads stamped ``stamps`` (the latest :data:`PACE_AFTER` + 1 at most, oldest first) say packets
    keep coming fast enough to pace: that many in a row, the newest at most ``PACE_AFTER × FAST_READ_S`` after the
    first."""
    return len(stamps) > PACE_AFTER and stamps[-1] - stamps[0] <= PACE_AFTER * FAST_READ_S


MSG_DONTWAIT: Final[int] = getattr(socket, "MSG_DONTWAIT", 0)
"""A read that returns at once when nothing has come (none on this platform: reads are never paced)."""


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
        self._letting_go = threading.Lock()
        """Held by a reader thread while it lets go of the socket (from taking the paced state to handing over its
        last read), and by the loop while it decides on a look: a tick or wake-up that ran between the two would
        count its pace from before that read was in, look, find nothing the thread had not taken already, and hand
        the socket straight back to a new thread."""
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
        self._read_in = 0
        """Bytes handed over so far (written by whoever reads the socket: the thread, or the paced looks)."""
        self._read_out = 0
        """Bytes taken by the loop so far (written on the loop only): ``_read_in - _read_out`` wait in ``_reads``."""
        self._room = threading.Condition()
        """What a reader thread waits on while :data:`QUEUE_BYTES` wait to be taken."""
        self._full = False
        """A reader thread waits for room."""
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
        recent: deque[float] = deque(maxlen=PACE_AFTER + 1)
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
            recent.append(stamp)
            if comes_fast(recent) and self._pace_ok and not self._closed:
                with self._letting_go:
                    self._fresh = True
                    self._paced = True  # before the hand-over: the loop that takes this read finds the socket its own
                    self._hand_over((data, stamp))
                return  # this thread touches the socket no more
            self._hand_over((data, stamp))
            if self._read_in - self._read_out > QUEUE_BYTES:
                self._wait_for_room()

    def _wait_for_room(self) -> None:
        """On the reader thread: wait until the loop has taken enough of what is queued (or the stream closed)."""
        with self._room:
            self._full = True
            while self._read_in - self._read_out > QUEUE_BYTES and not self._closed:
                self._room.wait(0.05)
            self._full = False

    def _hand_over(self, item: tuple[bytes, float] | OSError, at_once: bool = False) -> None:
        if type(item) is tuple:
            self._read_in += len(item[0])
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
            with self._letting_go:  # (a thread letting go of the socket now: from after its last read is in)
                if self._paced:
                    delay, self._fresh = PACE_S, False  # (the first look is a whole pace after the hand-over)
            if delay > 0:
                self._ticking = True
                self._tick_handle = self.loop.call_at(next_look(self.loop.time(), delay), self._tick)

    def _tick(self) -> None:
        self._ticking = False  # before looking: a read handed over from now on wakes the loop itself
        self._tick_handle = None
        with self._letting_go:  # (a thread letting go of the socket now: its last read is in before any look)
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
            if self._read_in - self._read_out > QUEUE_BYTES:  # the loop has not taken the last looks' yet
                found = True
                break
            try:
                data, ancillary, _, _ = self.sock.recvmsg(READ_SIZE, space, MSG_DONTWAIT)
            except BlockingIOError:
                break
            except OSError as exc:
                self._paced = False
                self._reads.append(exc)
                return
            self._reads.append((data, _stamp(ancillary)))
            self._read_in += len(data)
            if not data:  # the end: nobody reads any more
                self._paced = False
                return
            found = True
            self.paced_reads += 1
            if len(data) < READ_SIZE or self._read_in - self._read_out > QUEUE_BYTES:
                break  # all that had queued, or enough for now (the rest waits for the next look)
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
        self._read_out += len(data)
        if self._full and self._read_in - self._read_out <= QUEUE_BYTES:
            with self._room:
                self._room.notify()
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
