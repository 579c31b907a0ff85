"""A streamed answer's body relayed off the event loop, on a thread that does nothing between a chunk's arrival and
its forwarding but the syscalls; each chunk's copy and kernel stamp handed to the loop after (docs/design.md §13)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Final, Protocol

from ..timing.stamps import TIMESPEC, packet_time
from .http1 import BodyEnd, HeadError

READ_SIZE: Final[int] = 64 * 1024
"""The most one read of the upstream takes (into the thread's own buffer)."""

STAMP_SPACE: Final[int] = socket.CMSG_SPACE(TIMESPEC.size) + socket.CMSG_SPACE(3 * TIMESPEC.size)
"""Room for the kernel's receive stamp beside a read (and the ``SO_TIMESTAMPING`` copy a socket whose sends are
stamped gets too)."""

IDLE_KEPT: Final[int] = 4
"""Relay threads kept waiting for the next streamed answer (a thread's start costs the loop about 0.1 ms)."""

IDLE_S: Final[float] = 60.0
"""How long a relay thread waits for a next answer before it ends."""

HANDED_S: Final[float] = 0.005
"""How often the loop takes the copies a relay thread gathered while chunks flow: the thread wakes it for the first
after a quiet spell and for the body's end, never per chunk (each wake-up is a thread more for the cores to run)."""

SWITCH_S: Final[float] = 10e-6
"""The interpreter's thread switch interval while the proxy runs (Python's default is 5 ms): a relay thread woken
by a chunk while the loop's thread runs Python (the measuring, the live screen) gets the interpreter within this."""

_POLL_IN: Final[int] = select.POLLIN
_POLL_OUT: Final[int] = select.POLLOUT


class Receiver(Protocol):
    """The loop's side of one relayed answer (the exchange): what the thread read, in order, after it went on."""

    last_byte: float
    """When the upstream last sent a byte: the relay thread sets it after each read (the read timeout counts from
    it)."""

    def relayed(self, t: float, pieces: list[bytes]) -> None: ...
    def relay_ended(self, ending: Ending) -> None: ...


@dataclass(frozen=True, slots=True)
class Ending:
    """How a relayed answer's body ended on its thread."""

    t: float
    outcome: str
    """``done`` (the body's end was read and forwarded), ``closed`` (the upstream closed its connection),
    ``upstream`` (it failed: ``detail`` says how), ``client`` (the client went away) or ``stopped`` (the loop
    asked)."""
    detail: str = ""
    past_end: bool = False
    """Bytes after the body's end came in its last read (and went on): the client's connection ends with it."""


class Stream:
    """One answer's body, from the upstream's socket to the client's, on a relay thread: a blocking ``recvmsg_into``
    the thread's buffer (with the kernel's stamp), ``send`` it all, and only then find the body's framing and hand a
    copy on. The thread works on duplicates of both sockets' descriptors, so the loop closing its transports never
    leaves the thread on a descriptor reused by another connection."""

    def __init__(self, upstream: int, client: int, end: BodyEnd, receiver: Receiver) -> None:
        self._loop = asyncio.get_running_loop()
        self._up = socket.socket(fileno=os.dup(upstream))
        try:
            self._client = socket.socket(fileno=os.dup(client))
            try:
                self._wake = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            except OSError:
                self._client.close()
                raise
        except OSError:
            self._up.close()
            raise
        self._up.setblocking(False)
        self._client.setblocking(False)
        self._end = end
        self._receiver = receiver
        self._lock = threading.Lock()
        self._pending: list[tuple[float, list[bytes]] | Ending] = []
        self._scheduled = False
        self._stopping = False
        self.over: asyncio.Future[Ending] = self._loop.create_future()
        """The body's end, once the loop has been handed everything before it."""

    # -- the loop's side -----------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the thread to stop at once (the client left, the upstream was silent too long, the proxy closes)."""
        if self.over.done() or self._stopping:
            return
        self._stopping = True
        with contextlib.suppress(OSError):  # ends the thread's read at once, and sends the upstream a FIN now
            self._up.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):  # (and its wait for room on the client's socket)
            os.eventfd_write(self._wake, 1)

    def _deliver(self) -> None:
        with self._lock:
            items, self._pending = self._pending, []
            if not items:  # a quiet spell: the next copy wakes the loop
                self._scheduled = False
                return
        for item in items:
            if isinstance(item, Ending):
                os.close(self._wake)
                self._receiver.relay_ended(item)
                if not self.over.done():
                    self.over.set_result(item)
            else:
                self._receiver.relayed(*item)
        if not self.over.done():
            self._loop.call_later(HANDED_S, self._deliver)

    # -- the thread's side ---------------------------------------------------------------------------------------

    def run(self) -> None:
        """Relay the body to its end (or until stopped); never raises."""
        try:
            ending = self._relay()
        except Exception as exc:  # the relay must end in an outcome the loop reads, whatever happened
            ending = Ending(time.perf_counter(), "upstream", f"the relay failed ({type(exc).__name__}: {exc})")
        finally:
            self._up.close()
            self._client.close()
        if not self._post(ending, now=True):
            os.close(self._wake)  # (the loop is gone: nobody else will)

    def _relay(self) -> Ending:
        up, end, receiver = self._up, self._end, self._receiver
        buffer = bytearray(READ_SIZE)
        view = memoryview(buffer)
        length = not end.chunked and not end.until_close  # never read past a length's end: the next answer's
        # A blocking read: one syscall (and one take of the interpreter's lock) per chunk fewer than poll, then read.
        # The socket is the loop's too (a duplicate shares its blocking mode), but the loop neither reads (its
        # transport is paused) nor writes it until the body's end, when it is non-blocking again.
        up.setblocking(True)
        try:
            return self._relay_blocking(up, end, receiver, view, length)
        finally:
            with contextlib.suppress(OSError):
                up.setblocking(False)

    def _relay_blocking(self, up: socket.socket, end: BodyEnd, receiver: Receiver, view: memoryview,
                        length: bool) -> Ending:
        while True:
            if self._stopping:
                return Ending(time.perf_counter(), "stopped")
            try:
                size, ancillary, _, _ = up.recvmsg_into([view[:min(end.wants, READ_SIZE)] if length else view],
                                                        STAMP_SPACE)
            except InterruptedError:
                continue
            except OSError as exc:
                return Ending(time.perf_counter(), "upstream",
                              f"the upstream connection failed ({exc.strerror or exc})")
            if not size:
                return Ending(time.perf_counter(), "stopped" if self._stopping else "closed")
            if not self._send(view[:size]):
                return Ending(time.perf_counter(), "stopped" if self._stopping else "client")
            stamp = packet_time(ancillary)
            receiver.last_byte = time.perf_counter()
            t = stamp if stamp is not None else receiver.last_byte
            try:
                used, pieces = end.feed(bytes(view[:size]))
            except HeadError as exc:
                return Ending(t, "upstream", f"the upstream sent {exc}")
            if pieces:
                self._post((t, pieces))
            if end.done:
                return Ending(t, "done", past_end=used != size)

    def _send(self, data: memoryview) -> bool:
        """Write all of ``data`` to the client (waiting for room when its socket is full); False if it went away or
        the loop asked to stop."""
        waiting: select.poll | None = None
        while data:
            try:
                data = data[self._client.send(data):]
            except (BlockingIOError, InterruptedError):
                if waiting is None:
                    waiting = select.poll()
                    waiting.register(self._client, _POLL_OUT)
                    waiting.register(self._wake, _POLL_IN)
                waiting.poll()
                if self._stopping:
                    return False
            except OSError:
                return False
        return True

    def _post(self, item: tuple[float, list[bytes]] | Ending, now: bool = False) -> bool:
        """Hand ``item`` to the loop: taken with what gathers until the loop's next look (every :data:`HANDED_S`
        while chunks flow), or ``now``."""
        with self._lock:
            self._pending.append(item)
            if self._scheduled and not now:
                return True
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop closed
            return False
        return True


class RelayThreads:
    """The threads streamed answers are relayed on: one per answer being relayed, up to :data:`IDLE_KEPT` kept
    waiting for the next (each on a queue of its own)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Stream | None]] = []
        self._threads: set[threading.Thread] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def alive(self) -> int:
        """Relay threads running (relaying or waiting for a next answer)."""
        with self._lock:
            return len(self._threads)

    def run(self, stream: Stream) -> None:
        """Relay ``stream`` on a waiting thread, or a new one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the relay's threads were closed")
            if self._idle:
                self._idle.pop().put(stream)
                return
            jobs: queue.SimpleQueue[Stream | None] = queue.SimpleQueue()
            jobs.put(stream)
            thread = threading.Thread(target=self._work, args=(jobs,), name="tokrace proxy relay", daemon=True)
            self._threads.add(thread)
        thread.start()

    def _work(self, jobs: queue.SimpleQueue[Stream | None]) -> None:
        me = threading.current_thread()
        timeout: float | None = None  # the first job is there already
        while True:
            try:
                job = jobs.get(timeout=timeout)
            except queue.Empty:
                with self._lock:
                    if jobs in self._idle:  # (else it was just handed a job: take it)
                        self._idle.remove(jobs)
                        self._threads.discard(me)
                        return
                timeout = None
                continue
            if job is not None:
                job.run()
            with self._lock:
                if job is None or self._closed or len(self._idle) >= IDLE_KEPT:
                    self._threads.discard(me)
                    return
                self._idle.append(jobs)
            timeout = IDLE_S

    def close(self, timeout: float = 1.0) -> None:
        """End the waiting threads (answers still being relayed are stopped by their exchanges first)."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            for jobs in self._idle:
                jobs.put(None)
            self._idle.clear()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))


class SwitchInterval:
    """Sets the interpreter's thread switch interval to :data:`SWITCH_S` while on, and back after."""

    def __init__(self) -> None:
        self._was: float | None = None

    def start(self) -> None:
        if self._was is None:
            self._was = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_S)

    def stop(self) -> None:
        if self._was is not None:
            sys.setswitchinterval(self._was)
            self._was = None
